#!/bin/bash
# service_overhead.sh: what the GPU service costs a large statement, on a GPU
# machine.  bench/custom_scan_bench.py (the statement SELECT count(*) FROM
# gpu_dbscan('SELECT id, f FROM t', 0.05, 5, device) on 2-D blobs, next to
# PostgreSQL's parallel read of the same table) twice on the same table: with
# the server as pg-up starts it (each session computes in a CUDA context of
# its own) and restarted with gpuclust in shared_preload_libraries (the GPU
# service computes every call).  Prints both tables; the statement / read
# ratios of the two runs are the figures to compare.
#
# Run from the project root as root, with the throwaway server of
# .device/pg-up (../shared/device/README.md):
#
#   source .device/pg-up && make -j16 && make install && bench/service_overhead.sh [rows] [device]
#
# rows: the table's rows (default 10000000); device: gpuclust's device for the
# statement (default gpu).  Both modes use the same parallel settings
# (max_worker_processes 24, max_parallel_workers 16,
# max_parallel_workers_per_gather 8), so that the service's background worker
# takes no parallel worker from the read.  At the end the server is restarted as
# pg-up left it and the table dropped.
# Environment: PGDATA_DIR (default /tmp/pgdata), PG_OWNER (default pgrun),
# PG_LOG (default /tmp/pg.log), SERVICE_OPTS (more server options for the
# service mode, e.g. "-c gpuclust.service_backend=cpu" for the CPU stand-in:
# a check of the script on a machine without a GPU, not a measurement).
set -euo pipefail
ROWS=${1:-10000000}
DEVICE=${2:-gpu}
PGDATA_DIR=${PGDATA_DIR:-/tmp/pgdata}
PG_OWNER=${PG_OWNER:-pgrun}
PG_LOG=${PG_LOG:-/tmp/pg.log}
DB=${PGDATABASE:-postgres}
BIN=$(dirname "${PG_CONFIG:?source .device/pg-up first}")
PORT=${PGPORT:-5432}
# pg-up's options
BASE_OPTS="-k ${PGHOST:-/tmp} -p $PORT -c shared_buffers=4GB -c work_mem=256MB -c max_wal_size=8GB"
PAR_OPTS="-c max_worker_processes=24 -c max_parallel_workers=16 -c max_parallel_workers_per_gather=8"

restart() {
	# restart MODE: the server in mode "session" or "service"
	local opts="$BASE_OPTS $PAR_OPTS"
	[ "$1" = service ] && opts="$opts -c shared_preload_libraries=gpuclust ${SERVICE_OPTS:-}"
	su "$PG_OWNER" -c "$BIN/pg_ctl -D $PGDATA_DIR -l $PG_LOG -m fast -w -t 120 -o '$opts' restart" >/dev/null
	if [ "$1" = service ]; then
		# the service is ready when it shows its devices
		for _ in $(seq 300); do
			n=$(psql -X -At -d "$DB" -c "CREATE EXTENSION IF NOT EXISTS gpuclust; SELECT count(*) FROM gpuclust_service()" 2>/dev/null | tail -1 || true)
			[ "${n:-0}" -gt 0 ] && return 0
			sleep 0.1
		done
		echo "service_overhead: the GPU service did not start; the server log:" >&2
		tail -20 "$PG_LOG" >&2
		exit 1
	fi
}
# shellcheck disable=SC2317
restore() {
	psql -X -q -d "$DB" -c "DROP TABLE IF EXISTS rowpath_bench_2d_$ROWS" >/dev/null 2>&1 || true
	su "$PG_OWNER" -c "$BIN/pg_ctl -D $PGDATA_DIR -l $PG_LOG -m fast -w -t 120 -o '$BASE_OPTS' restart" >/dev/null || true
}
trap restore EXIT

bench() {
	python3 bench/custom_scan_bench.py --device "$DEVICE" --parallel-gather on --rows "$ROWS" --keep \
		${OUT:+--json "$OUT/service_overhead_$1.json"}
}

restart session
psql -X -q -d "$DB" -c "CREATE EXTENSION IF NOT EXISTS gpuclust" >/dev/null
echo "== a CUDA context per session (gpuclust not preloaded)"
bench session
restart service
echo "== through the GPU service (gpuclust in shared_preload_libraries)"
psql -X -At -d "$DB" -c "SELECT 'service: ' || string_agg(name || ' (' || backend || ')', ', ') FROM gpuclust_service()"
bench service
