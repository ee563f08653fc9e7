#!/bin/bash
# hdbscan_sql_bench.sh: gpu_hdbscan against gpu_dbscan through SQL on the same
# table, the whole statement as the user waits for it (gather, compute, output),
# best of REPS (default 3) after a warm-up call, both in one session, on the
# device given (default gpu).
#
#   bench/hdbscan_sql_bench.sh [ROWS] [DEVICE]
#
# Talks to the server of the libpq environment (PGHOST, PGPORT, ...), where
# gpuclust is installed; creates and drops the table hdb_sql_bench: 2-D blobs
# of different spreads with 10 % uniform noise, double precision columns.
# gpu_dbscan runs with eps 0.5, min_pts 10 (about the density HDBSCAN's
# min_samples 10 sees in these blobs), gpu_hdbscan with min_cluster_size 10.
# Each statement counts the clusters' rows; gpu_hdbscan also once with its
# probabilities and outlier scores summed ("all columns"), which a query
# that reads only cluster_id does not have computed.
# Prints a table of the best times and their ratios.
set -euo pipefail
ROWS=${1:-1000000}
DEVICE=${2:-gpu}
REPS=${REPS:-3}
P="psql -X -q -v ON_ERROR_STOP=1 -v VERBOSITY=terse"
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"

$P -c "CREATE EXTENSION IF NOT EXISTS gpuclust" >/dev/null
$P <<SQL >/dev/null
DROP TABLE IF EXISTS hdb_sql_bench;
SELECT setseed(0.5);
CREATE TABLE hdb_sql_bench AS
SELECT g::bigint AS id,
       CASE WHEN g % 10 = 0 THEN random() * 220 - 110
            ELSE (g % 30) * 7.0 - 100 + (1 + g % 4) * sqrt(-2 * ln(random())) * cos(2 * pi() * random()) END AS x,
       CASE WHEN g % 10 = 0 THEN random() * 220 - 110
            ELSE (g % 17) * 12.0 - 100 + (1 + g % 3) * sqrt(-2 * ln(random())) * cos(2 * pi() * random()) END AS y
FROM generate_series(1, $ROWS) g;
VACUUM ANALYZE hdb_sql_bench;
SQL

# Both calls in one session (a new session pays the GPU's context once), a
# warm-up of each first, then REPS rounds alternating them; the best of each.
q="SELECT id, x, y FROM hdb_sql_bench"
db_sql="SELECT count(cluster_id) FROM gpu_dbscan('$q', 0.5, 10, device => '$DEVICE');"
hd_sql="SELECT count(cluster_id) FROM gpu_hdbscan('$q', 10, device => '$DEVICE');"
ha_sql="SELECT count(cluster_id), sum(probability), sum(outlier_score) FROM gpu_hdbscan('$q', 10, device => '$DEVICE');"
times=$( { echo "$db_sql"; echo "$hd_sql"; echo "$ha_sql"; echo '\timing on';
           for _ in $(seq "$REPS"); do echo "$db_sql"; echo "$hd_sql"; echo "$ha_sql"; done; } |
         $P | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p')
db=$(awk 'NR % 3 == 1' <<<"$times" | sort -g | head -1)
hd=$(awk 'NR % 3 == 2' <<<"$times" | sort -g | head -1)
ha=$(awk 'NR % 3 == 0' <<<"$times" | sort -g | head -1)
echo "| rows | device | gpu_dbscan ms | gpu_hdbscan ms | hdbscan / dbscan | gpu_hdbscan, all columns, ms | all columns / dbscan |"
echo "|---:|---|---:|---:|---:|---:|---:|"
awk -v n="$ROWS" -v dev="$DEVICE" -v a="$db" -v b="$hd" -v c="$ha" \
	'BEGIN { printf "| %d | %s | %.1f | %.1f | %.2f | %.1f | %.2f |\n", n, dev, a, b, b / a, c, c / a }'
$P -c "DROP TABLE hdb_sql_bench" >/dev/null
