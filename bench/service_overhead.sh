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
# Environment: ROUNDS (default 2: the alternations of the two modes; the medians
# over them end the output), PGDATA_DIR (default /tmp/pgdata), PG_OWNER (default pgrun),
# PG_LOG (default /tmp/pg.log), SERVICE_OPTS (more server options for the
# service mode, e.g. "-c gpuclust.service_backend=cpu" for the CPU stand-in:
# a check of the script on a machine without a GPU, not a measurement).
set -euo pipefail
ROWS=${1:-10000000}
DEVICE=${2:-gpu}
# shellcheck source=bench/pgup_server.sh
. "$(dirname "$0")/pgup_server.sh"
PAR_OPTS="-c max_worker_processes=24 -c max_parallel_workers=16 -c max_parallel_workers_per_gather=8"

restart() {
	# restart MODE: the server in mode "session" or "service"
	if [ "$1" = service ]; then
		pgup_restart "$PAR_OPTS -c shared_preload_libraries=gpuclust ${SERVICE_OPTS:-}"
		pgup_wait_service service_overhead || exit 1
	else
		pgup_restart "$PAR_OPTS"
	fi
}
# shellcheck disable=SC2317
restore() {
	psql -X -q -d "$DB" -c "DROP TABLE IF EXISTS rowpath_bench_2d_$ROWS" >/dev/null 2>&1 || true
	pgup_restart || true
}
trap restore EXIT

JSON_DIR=${OUT:-$(mktemp -d)}
bench() {
	python3 bench/custom_scan_bench.py --device "$DEVICE" --parallel-gather on --rows "$ROWS" --keep \
		--json "$JSON_DIR/service_overhead_$1.json"
}

# ROUNDS (default 2) alternations of the two modes, so that a drift of the
# machine (the page cache, the clocks) does not fall on one mode only
for r in $(seq "${ROUNDS:-2}"); do
	restart session
	psql -X -q -d "$DB" -c "SET client_min_messages = warning" -c "CREATE EXTENSION IF NOT EXISTS gpuclust" >/dev/null
	echo "== round $r: a CUDA context per session (gpuclust not preloaded)"
	bench "session_$r"
	restart service
	echo "== round $r: through the GPU service (gpuclust in shared_preload_libraries)"
	psql -X -At -d "$DB" -c "SELECT 'service: ' || string_agg(name || ' (' || backend || ')', ', ') FROM gpuclust_service()"
	bench "service_$r"
done
python3 - "$JSON_DIR" "${ROUNDS:-2}" <<'PY'
import json, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
print("\n== medians over the rounds (ms)")
print(f"{'mode':>8} {'read':>8} {'statement':>10} {'compute':>8} {'statement/read':>15}")
for mode in ("session", "service"):
    rows = [json.load(open(f"{d}/service_overhead_{mode}_{r}.json"))[0] for r in range(1, rounds + 1)]
    med = lambda k: statistics.median(x[k] for x in rows)
    ratio = statistics.median(x["on_ms"] / x["read_ms"] for x in rows)
    print(f"{mode:>8} {med('read_ms'):>8.1f} {med('on_ms'):>10.1f} {med('compute_on_ms'):>8.1f} {ratio:>15.2f}")
PY
