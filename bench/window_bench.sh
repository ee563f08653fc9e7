#!/bin/bash
# window_bench.sh
#    Per-group clustering and the native input types, through SQL, on the
#    server that the libpq environment names (PGHOST, PGPORT, ...; gpuclust,
#    PostGIS and pgvector installed there):
#
#    1. NGROUPS groups of GROUP_ROWS 2-D points each (1,000 x 1,000 by default):
#       one gpu_dbscan / gpu_kmeans call over all rows against the window
#       forms OVER (PARTITION BY g ORDER BY id) on the same rows, and
#       PostGIS's ST_ClusterDBSCAN / ST_ClusterKMeans over the same window;
#    2. the gather of VEC_ROWS x VEC_DIM features (1,000,000 x 256 by
#       default) from a pgvector vector column, from its cast to real[], and
#       from a real[] column: the gather time of the timing NOTICE and the
#       feature bytes per second.
#
#    The DBSCAN window's timing NOTICEs (one per partition, gpuclust.timing)
#    are summed over one run: what the partitions themselves cost (reading
#    their rows, clustering them) next to the window's own cost (row_number).
#
#    bench/window_bench.sh [DEVICE]      DEVICE: cpu (default), gpu or auto
#
# Environment: NGROUPS, GROUP_ROWS, VEC_ROWS, VEC_DIM, REPS (best of, default 3),
# SKIP_POSTGIS=1 (the PostGIS window functions are slow on large groups).
# Prints markdown tables; timing only, no assertion.
set -uo pipefail

DEVICE=${1:-cpu}
NGROUPS=${NGROUPS:-1000}
GROUP_ROWS=${GROUP_ROWS:-1000}
VEC_ROWS=${VEC_ROWS:-1000000}
VEC_DIM=${VEC_DIM:-256}
REPS=${REPS:-3}
PSQL=(psql -X -q -v ON_ERROR_STOP=1)

have() { [ "$("${PSQL[@]}" -At -c "SELECT count(*) FROM pg_available_extensions WHERE name = '$1'")" = 1 ]; }
HAVE_POSTGIS=0; have postgis && HAVE_POSTGIS=1
HAVE_VECTOR=0; have vector && HAVE_VECTOR=1
[ "$HAVE_POSTGIS" = 1 ] || { echo "PostGIS is not installed: the geometry and PostGIS rows are left out"; SKIP_POSTGIS=1; }
if [ "$HAVE_POSTGIS" = 1 ]; then GEOM="ST_MakePoint(x, y)"; else GEOM="NULL::int"; fi

"${PSQL[@]}" <<SQL || exit 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
$([ "$HAVE_POSTGIS" = 1 ] && echo "CREATE EXTENSION IF NOT EXISTS postgis;")
$([ "$HAVE_VECTOR" = 1 ] && echo "CREATE EXTENSION IF NOT EXISTS vector;")
DROP TABLE IF EXISTS bench_win;
SELECT setseed(0.5);
-- every group: three blobs of spread 0.3 with two decimals, 10 % noise
CREATE TABLE bench_win AS
  SELECT i AS id, i / $GROUP_ROWS AS g, ARRAY[x, y]::real[] AS f, $GEOM AS geom
  FROM (SELECT i,
               round((CASE WHEN i % 10 = 0 THEN random() * 30 ELSE (i % 3) * 10 + random() * 3 END)::numeric, 2)::float8 AS x,
               round((CASE WHEN i % 10 = 0 THEN random() * 30 ELSE (i % 3) * 10 + random() * 3 END)::numeric, 2)::float8 AS y
          FROM generate_series(0, $NGROUPS * $GROUP_ROWS - 1) i) s;
CREATE INDEX ON bench_win (g, id);
VACUUM ANALYZE bench_win;
CREATE OR REPLACE FUNCTION public.gpuclust_bench_best_ms(q text, reps int) RETURNS float8 LANGUAGE plpgsql AS \$\$
DECLARE t0 timestamptz; best float8 := 'Infinity'; ms float8;
BEGIN
  FOR r IN 1 .. reps LOOP
    t0 := clock_timestamp();
    EXECUTE q;
    ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
    best := least(best, ms);
  END LOOP;
  RETURN round(best::numeric, 1);
END \$\$;
SQL

# a / b with two decimals, empty when either is not a number
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b }'
}

best() {
	"${PSQL[@]}" -At -c "SET gpuclust.device = '$DEVICE'; SELECT public.gpuclust_bench_best_ms(\$q\$$1\$q\$, $REPS)" 2>&1 | tail -1
}

n=$((NGROUPS * GROUP_ROWS))
echo "device: $DEVICE ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)), $NGROUPS groups x $GROUP_ROWS rows, best of $REPS"
echo
echo "| what | rows | ms | vs one call |"
echo "|---|---:|---:|---:|"
one_db=$(best "SELECT count(cluster_id) FROM gpu_dbscan('SELECT id, f FROM bench_win ORDER BY g, id', 0.155, 5)")
echo "| gpu_dbscan, one call over all rows | $n | $one_db | 1.00 |"
win_db=$(best "SELECT count(c) FROM (SELECT gpu_cluster_dbscan(f, 0.155, 5) OVER (PARTITION BY g ORDER BY id) c FROM bench_win) s")
echo "| gpu_cluster_dbscan(f real[]) OVER (PARTITION BY g ORDER BY id) | $n | $win_db | $(ratio "$win_db" "$one_db") |"
if [ "$HAVE_POSTGIS" = 1 ]; then
	win_geom=$(best "SELECT count(c) FROM (SELECT gpu_cluster_dbscan(geom, 0.155, 5) OVER (PARTITION BY g ORDER BY id) c FROM bench_win) s")
	echo "| gpu_cluster_dbscan(geom) OVER (PARTITION BY g ORDER BY id) | $n | $win_geom | $(ratio "$win_geom" "$one_db") |"
fi
# the partitions' own share: the timing NOTICE of every partition, summed over one run
parts=$("${PSQL[@]}" -At -c "SET gpuclust.device = '$DEVICE'; SET gpuclust.timing = on" \
	-c "SELECT count(c) FROM (SELECT gpu_cluster_dbscan(f, 0.155, 5) OVER (PARTITION BY g ORDER BY id) c FROM bench_win) s" 2>&1 \
	| awk '/NOTICE:  gpuclust: dbscan/ { for (i = 1; i <= NF; i++) { split($i, a, "="); if (a[1] == "gather") g += a[2]; if (a[1] == "compute") c += a[2]; if (a[1] == "total") t += a[2] } n++ }
		END { if (n > 0) printf "%d partitions, summed: gather %.1f ms, compute %.1f ms, total %.1f ms (%.3f ms a partition)", n, g, c, t, t / n }')
rn=$(best "SELECT count(c) FROM (SELECT row_number() OVER (PARTITION BY g ORDER BY id) c FROM bench_win) s")
echo "| row_number() over the same window (the window's own cost) | $n | $rn | $(ratio "$rn" "$one_db") |"
echo "| (the DBSCAN window's timing NOTICEs: $parts) | | | |"
if [ "${SKIP_POSTGIS:-0}" != 1 ]; then
	pg_db=$(best "SELECT count(c) FROM (SELECT ST_ClusterDBSCAN(geom, 0.155, 5) OVER (PARTITION BY g ORDER BY id) c FROM bench_win) s")
	echo "| ST_ClusterDBSCAN(geom) OVER (PARTITION BY g ORDER BY id) | $n | $pg_db | $(ratio "$pg_db" "$one_db") |"
fi
one_km=$(best "SELECT count(cluster_id) FROM gpu_kmeans('SELECT id, f FROM bench_win ORDER BY g, id', 3, seed => 1)")
echo "| gpu_kmeans k=3, one call over all rows | $n | $one_km | 1.00 |"
win_km=$(best "SELECT count(c) FROM (SELECT gpu_cluster_kmeans(f, 3, seed => 1) OVER (PARTITION BY g ORDER BY id) c FROM bench_win) s")
echo "| gpu_cluster_kmeans(f, 3) OVER (PARTITION BY g ORDER BY id) | $n | $win_km | $(ratio "$win_km" "$one_km") |"
if [ "${SKIP_POSTGIS:-0}" != 1 ]; then
	pg_km=$(best "SELECT count(c) FROM (SELECT ST_ClusterKMeans(geom, 3) OVER (PARTITION BY g ORDER BY id) c FROM bench_win) s")
	echo "| ST_ClusterKMeans(geom, 3) OVER (PARTITION BY g ORDER BY id) | $n | $pg_km | $(ratio "$pg_km" "$one_km") |"
fi

# ------------------------------------------------------------------ gather of pgvector
if [ "$HAVE_VECTOR" != 1 ]; then
	echo
	echo "pgvector is not installed: no gather measurement (../shared/vendor/README.md says how to build it)"
	exit 0
fi
"${PSQL[@]}" <<SQL || exit 1
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench_vec, bench_half, bench_arr;
-- one table per type, so that no row is wide enough to be compressed
CREATE TABLE bench_arr AS
  SELECT i AS id, (SELECT array_agg((((i * 7 + k * 13) % 1000) / 1000.0)::real)
                     FROM generate_series(1, $VEC_DIM) k) AS a
  FROM generate_series(1, $VEC_ROWS) i;
CREATE TABLE bench_vec AS SELECT id, a::vector AS v FROM bench_arr;
CREATE TABLE bench_half AS SELECT id, a::halfvec AS h FROM bench_arr;
VACUUM ANALYZE bench_arr;
VACUUM ANALYZE bench_half;
VACUUM ANALYZE bench_vec;
SQL

gather_ms() {
	local best=""
	for _ in $(seq "$REPS"); do
		ms=$("${PSQL[@]}" -c "SET gpuclust.timing = on; SET gpuclust.device = 'cpu'" \
			-c "SELECT count(*) FROM gpu_kmeans_centroids('$1', 1, max_iter => 1, init => 'random')" 2>&1 \
			| sed -n 's/.* gather=\([0-9.]*\).*/\1/p' | head -1)
		if [ -z "$best" ] || awk -v a="$ms" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$ms; fi
	done
	echo "$best"
}
bytes=$((VEC_ROWS * VEC_DIM * 4))
echo
echo "| gather of $VEC_ROWS x $VEC_DIM features | ms | GB/s of feature data |"
echo "|---|---:|---:|"
for q in "SELECT id, v FROM bench_vec|vector column" "SELECT id, v::real[] FROM bench_vec|vector cast to real[]" \
	"SELECT id, h FROM bench_half|halfvec column" "SELECT id, a FROM bench_arr|real[] column"; do
	ms=$(gather_ms "${q%%|*}")
	echo "| ${q##*|} | $ms | $(awk -v b="$bytes" -v m="$ms" 'BEGIN { printf "%.2f", b / (m * 1000000) }') |"
done
