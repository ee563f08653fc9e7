#!/bin/bash
# dbscan_gpu_bench.sh
#    Benchmark of the GPU DBSCAN, run on the GPU machine from the project root.
#
#    bench/dbscan_gpu_bench.sh [OUTDIR]
#
# 1. Compute-only figures from the standalone harness (.bench/dbscan_bench,
#    built from bench/dbscan_bench.c by bench/Makefile; formerly
#    test/gpu/gpu_vs_cpu --bench): per phase (to_device, compute = index +
#    core + union + border and numbers, from_device), best of 5 runs after a
#    warm-up, with the back end's own choices (tuning.debug) on stderr, the
#    CPU back end on the same points in the same run and whether both agree,
#    for
#      - 1M and 10M 2-D blobs with 5% noise, eps 0.05, min_pts 5;
#      - 37M 3-D points from a Gan-Tao style seed spreader with 0.01% noise,
#        eps 25, min_pts 2 (CPU only with CPU37=1: it takes minutes).
# 2. scikit-learn's DBSCAN (n_jobs=16) on the 1M set, timed and compared
#    (core points, noise, partition of the core points).
# 3. With a running PostgreSQL where gpuclust is installed (source
#    .device/pg-up first): the whole SQL call per phase from the
#    gpuclust.timing NOTICE (gather, to_device, compute, from_device, output)
#    on the GPU and on the CPU, next to the time of reading the table
#    (SELECT sum(cardinality(f)) FROM t), for 1M and 10M rows (SQL_ROWS),
#    on DEVICE (default gpu) and on the CPU, and whether both agree row by row.
#
# Everything is printed and appended to OUTDIR/dbscan_gpu_bench.log.
set -uo pipefail

OUT_DIR=${1:-${OUT:-/tmp/dbscan_gpu_bench}}
mkdir -p "$OUT_DIR/data"
LOG="$OUT_DIR/dbscan_gpu_bench.log"
H=./.bench/dbscan_bench
REPS=${REPS:-5}

make -s -C bench dbscan_bench || exit 1
[ -f gpuclust_cuda.so ] || { echo "build gpuclust_cuda.so first (make)"; exit 1; }

log() { echo "$*" | tee -a "$LOG"; }

log "== device"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG"
log "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"

bench() {
	log "== dbscan_bench $*"
	$H "$@" --debug 2>&1 | grep -v '^gpu run' | tee -a "$LOG"
}

if [ "${SKIP_HARNESS:-0}" != 1 ]; then
	bench blobs 1000000 2 0.05 5 --reps "$REPS" --dump "$OUT_DIR/data"
	bench blobs 10000000 2 0.05 5 --reps "$REPS"
	if [ "${CPU37:-0}" = 1 ]; then
		bench gantao 37000000 3 25 2 --reps "$REPS"
	else
		bench gantao 37000000 3 25 2 --reps "$REPS" --no-cpu
	fi
fi

if [ "${SKIP_SKLEARN:-0}" != 1 ] && [ -f "$OUT_DIR/data/blobs.f32" ]; then
	log "== scikit-learn DBSCAN on the 1M 2-D set"
	timeout "${SKLEARN_TIMEOUT:-120}" python3 bench/dbscan_gpu_sklearn.py "$OUT_DIR/data/blobs" 2 0.05 5 16 \
		2>&1 | tee -a "$LOG" || log "scikit-learn did not finish in ${SKLEARN_TIMEOUT:-120} s"
fi
rm -f "$OUT_DIR"/data/*

DEVICE=${DEVICE:-gpu}
if command -v psql >/dev/null && psql -XAtqc "SELECT 1 FROM pg_available_extensions WHERE name = 'gpuclust'" 2>/dev/null | grep -q 1; then
	for rows in ${SQL_ROWS:-1000000 10000000}; do
		log "== SQL, $rows rows of 2-D blobs with 5% noise (eps 0.05, min_pts 5)"
		psql -Xq -v ON_ERROR_STOP=1 <<SQL 2>&1 | tee -a "$LOG"
CREATE EXTENSION IF NOT EXISTS gpuclust;
DROP TABLE IF EXISTS dbscan_bench;
SELECT setseed(0.42);
CREATE TEMP TABLE centres AS SELECT k, 5 + 90 * random() AS cx, 5 + 90 * random() AS cy
  FROM generate_series(0, 19) k;
CREATE UNLOGGED TABLE dbscan_bench AS
  SELECT i AS id,
         CASE WHEN i % 20 = 7 THEN ARRAY[100 * random(), 100 * random()]::real[]
              ELSE ARRAY[c.cx + r * cos(a), c.cy + r * sin(a)]::real[] END AS f
  FROM generate_series(1, $rows) i
  JOIN centres c ON c.k = i % 20,
  LATERAL (SELECT sqrt(-2 * ln(1 - random())) + 0 * i AS r, 2 * pi() * random() + 0 * i AS a) g;
VACUUM ANALYZE dbscan_bench;
\timing on
SELECT sum(cardinality(f)) AS read_table FROM dbscan_bench;
SELECT sum(cardinality(f)) AS read_table FROM dbscan_bench;
SET gpuclust.timing = on;
SELECT count(*) AS rows, count(DISTINCT cluster_id) AS clusters, count(*) FILTER (WHERE is_core) AS core
  FROM gpu_dbscan('SELECT id, f FROM dbscan_bench', 0.05, 5, '$DEVICE');
SELECT count(*) AS rows, count(DISTINCT cluster_id) AS clusters, count(*) FILTER (WHERE is_core) AS core
  FROM gpu_dbscan('SELECT id, f FROM dbscan_bench', 0.05, 5, '$DEVICE');
SELECT count(*) AS rows, count(DISTINCT cluster_id) AS clusters, count(*) FILTER (WHERE is_core) AS core
  FROM gpu_dbscan('SELECT id, f FROM dbscan_bench', 0.05, 5, 'cpu');
-- both back ends, row by row
SELECT count(*) AS rows_that_differ FROM
  (SELECT row_number() OVER () AS k, * FROM gpu_dbscan('SELECT id, f FROM dbscan_bench', 0.05, 5, '$DEVICE')) g
  FULL JOIN
  (SELECT row_number() OVER () AS k, * FROM gpu_dbscan('SELECT id, f FROM dbscan_bench', 0.05, 5, 'cpu')) c
  USING (k)
  WHERE g.id IS DISTINCT FROM c.id OR g.cluster_id IS DISTINCT FROM c.cluster_id
     OR g.is_core IS DISTINCT FROM c.is_core;
DROP TABLE dbscan_bench;
SQL
	done
else
	log "== SQL part skipped: no PostgreSQL with gpuclust installed (source .device/pg-up, make install)"
fi
