#!/bin/bash
# kmeans_step_bench.sh
#    Where one Lloyd iteration of k-means as an aggregate (gpu_kmeans_step)
#    stands against gpu_kmeans_centroids on the same rows, CPU back end, on
#    one PostgreSQL server: the milliseconds of one step with 0 and T
#    parallel workers, of gpu_kmeans_centroids with max_iter 1 (reading the
#    rows, one iteration and the final assignment) and per iteration of I
#    iterations, of gpu_kmeans_fit_distributed per iteration on the same
#    plain table, and of reading the features alone.  Then, where the Citus
#    fixture is beside the project (../shared/citus, or GPUCLUST_CITUS_UP),
#    the distributed fit on a coordinator and two workers against the
#    single-node gpu_kmeans_centroids (bench/kmeans_citus_bench.py).  Prints
#    tables; every time is the best of R runs.
#
#   PGHOST=... PGPORT=... PGUSER=... bench/kmeans_step_bench.sh
#       [--rows N] [--dim D] [--k K] [--iters I] [--threads T] [--reps R]
#       [--citus-port P] [--shards S] [--no-citus]
#
#   defaults: 1000000 rows x 32 (real[]), k = 100 blobs of sd 2 around
#   centres in [-10, 10]^32 (generated in SQL from a fixed seed, kept in
#   the table kstep_bench_N_D_K for the next run; the initial centroids k
#   rows spread over the table, some blobs twice and some not), I = 20
#   (tol = 0: fewer when no row changes cluster), T = 2 (the
#   parallel workers of the step, gpuclust.cpu_threads of
#   gpu_kmeans_centroids), R = 3.  --citus-port: the coordinator port of the
#   Citus cluster (workers on the next two), default 9700; pick a free range
#   on a shared machine.  Needs gpuclust installed in the server (and, for
#   Citus, in the PostgreSQL 15 that citus-up starts, root, and a $PYTHON
#   (default python3) with numpy and psycopg2).
set -euo pipefail

ROWS=1000000
DIM=32
K=100
ITERS=20
THREADS=2
REPS=3
CITUS_PORT=${GPUCLUST_CITUS_PORT:-9700}
SHARDS=8
CITUS=1
while [ $# -gt 0 ]; do
	case "$1" in
		--rows) ROWS=$2; shift 2 ;;
		--dim) DIM=$2; shift 2 ;;
		--k) K=$2; shift 2 ;;
		--iters) ITERS=$2; shift 2 ;;
		--threads) THREADS=$2; shift 2 ;;
		--reps) REPS=$2; shift 2 ;;
		--citus-port) CITUS_PORT=$2; shift 2 ;;
		--shards) SHARDS=$2; shift 2 ;;
		--no-citus) CITUS=0; shift ;;
		*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
T=kstep_bench_${ROWS}_${DIM}_${K}
PSQL=(psql -X -q -v ON_ERROR_STOP=1)

# the table and its initial centroids (the first k rows), once
if [ "$("${PSQL[@]}" -Atc "SELECT to_regclass('$T') IS NULL")" = t ]; then
	echo "generating $T ..." >&2
	"${PSQL[@]}" >/dev/null <<SQL
DROP TABLE IF EXISTS ${T}_c, ${T}_init;
SELECT setseed(0.11);
CREATE TABLE ${T}_c AS
    SELECT j, ARRAY(SELECT random() * 20 - 10 FROM generate_series(1, $DIM) t WHERE j >= 0) AS v
    FROM generate_series(0, $K - 1) j;
CREATE TABLE $T AS
    SELECT i::bigint AS id,
           ARRAY(SELECT (c.v[t] + 2 * (random() + random() + random() - 1.5))::real
                 FROM generate_series(1, $DIM) t) AS f
    FROM generate_series(0, $ROWS - 1) i JOIN ${T}_c c ON c.j = (i::bigint * 7919) % $K;
CREATE TABLE ${T}_init AS
    SELECT array_agg(f::float8[] ORDER BY id) AS c FROM $T
    WHERE id IN (SELECT (j * 104729 + 13) % $ROWS FROM generate_series(0, $K - 1) j);
VACUUM ANALYZE $T;
SQL
fi

# best of REPS runs of the SQL in $2 (after the settings in $1), in ms; the
# iterations the gpuclust.timing notice reports go to $ITERS_FILE
ITERS_FILE=$(mktemp)
trap 'rm -f "$ITERS_FILE"' EXIT
best() {
	local settings=$1 sql=$2 b="" t out
	for _ in $(seq "$REPS"); do
		out=$("${PSQL[@]}" -c "SET gpuclust.timing = on; $settings" -c '\timing on' -c "$sql" 2>&1)
		t=$(sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' <<<"$out" | tail -1)
		sed -n 's/.*iterations=\([0-9]*\).*/\1/p' <<<"$out" | tail -1 >"$ITERS_FILE"
		if [ -z "$b" ] || awk -v a="$t" -v b="$b" 'BEGIN { exit !(a < b) }'; then b=$t; fi
	done
	echo "$b"
}

C="(SELECT c FROM ${T}_init)"
SERIAL="SET max_parallel_workers_per_gather = 0"
PAR="SET max_parallel_workers_per_gather = $THREADS; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0"
CENT="SET gpuclust.cpu_threads = $THREADS; SET max_parallel_workers_per_gather = $THREADS"

read_ms=$(best "$SERIAL" "SELECT sum(array_length(f, 1)) FROM $T")
step0=$(best "$SERIAL" "SELECT (gpu_kmeans_step(f, $C)).sizes[1] FROM $T")
stepp=$(best "$PAR" "SELECT (gpu_kmeans_step(f, $C)).sizes[1] FROM $T")
step0x=$(best "$SERIAL; SET gpuclust.cpu_blas = off" "SELECT (gpu_kmeans_step(f, $C)).sizes[1] FROM $T")
steppx=$(best "$PAR; SET gpuclust.cpu_blas = off" "SELECT (gpu_kmeans_step(f, $C)).sizes[1] FROM $T")
cent1=$(best "$CENT" "SELECT sum(size) FROM gpu_kmeans_centroids('SELECT id, f FROM $T', $K, max_iter => 1, tol => 0, initial_centroids => $C, device => 'cpu')")
centi=$(best "$CENT" "SELECT sum(size) FROM gpu_kmeans_centroids('SELECT id, f FROM $T', $K, max_iter => $ITERS, tol => 0, initial_centroids => $C, device => 'cpu')")
centn=$(cat "$ITERS_FILE")
fiti=$(best "$PAR" "SELECT sum(size) FROM gpu_kmeans_fit_distributed('SELECT id, f FROM $T', $K, max_iter => $ITERS, tol => 0, initial_centroids => $C)")
fitn=$(cat "$ITERS_FILE")

echo
echo "$ROWS rows x $DIM (real[]), k = $K, CPU back end, $THREADS threads; $(nproc) cores ($(sed -n 's/^model name\t: //p' /proc/cpuinfo | head -1)); best of $REPS; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| run | ms | iterations | per iteration (ms) |"
echo "|---|---:|---:|---:|"
printf "| reading the features alone (sum(array_length(f, 1)), no workers) | %.0f | | |\n" "$read_ms"
printf "| gpu_kmeans_step, no parallel workers | %.0f | 1 | %.0f |\n" "$step0" "$step0"
printf "| gpu_kmeans_step, %d parallel workers | %.0f | 1 | %.0f |\n" "$THREADS" "$stepp" "$stepp"
printf "| gpu_kmeans_step, no parallel workers, gpuclust.cpu_blas = off | %.0f | 1 | %.0f |\n" "$step0x" "$step0x"
printf "| gpu_kmeans_step, %d parallel workers, gpuclust.cpu_blas = off | %.0f | 1 | %.0f |\n" "$THREADS" "$steppx" "$steppx"
printf "| gpu_kmeans_centroids, max_iter 1 (rows read, 1 iteration, final assignment), %d threads | %.0f | 1 | %.0f |\n" "$THREADS" "$cent1" "$cent1"
printf "| gpu_kmeans_centroids, max_iter %d, %d threads | %.0f | %s | %.0f |\n" "$ITERS" "$THREADS" "$centi" "$centn" "$(awk -v a="$centi" -v n="$centn" 'BEGIN { print a / n }')"
printf "| gpu_kmeans_fit_distributed, plain table, max_iter %d, %d parallel workers | %.0f | %s | %.0f |\n" "$ITERS" "$THREADS" "$fiti" "$fitn" "$(awk -v a="$fiti" -v n="$fitn" 'BEGIN { print a / n }')"
printf "\nratio fit_distributed / gpu_kmeans_centroids (max_iter %d, one server): %.2f\n" "$ITERS" "$(awk -v a="$fiti" -v b="$centi" 'BEGIN { print a / b }')"

CITUS_UP=${GPUCLUST_CITUS_UP:-$ROOT/../shared/citus/citus-up}
if [ "$CITUS" = 1 ] && [ -x "$CITUS_UP" ] && [ "$(id -u)" = 0 ]; then
	echo
	echo "Citus (coordinator and 2 workers on this machine, ports $CITUS_PORT..$((CITUS_PORT + 2))):"
	GPUCLUST_CITUS_UP=$CITUS_UP "${PYTHON:-python3}" "$HERE/kmeans_citus_bench.py" --rows "$ROWS" --dim "$DIM" --k "$K" \
		--iters "$ITERS" --threads "$THREADS" --shards "$SHARDS" --port "$CITUS_PORT"
elif [ "$CITUS" = 1 ]; then
	echo
	echo "Citus: skipped ($CITUS_UP not found, or not root)"
fi
