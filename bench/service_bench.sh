#!/bin/bash
# service_bench.sh: the GPU service against a CUDA context per session, on a
# GPU machine.  Prints two tables:
#
#  1. the first GPU call of a new session against the same call warm, for
#     each function (bench/first_call_bench.sh, run once per server mode);
#  2. the device memory (nvidia-smi --query-gpu=memory.used, summed over the
#     GPUs) with no session, and with N sessions that each made one small GPU
#     call and then sit in pg_sleep, per server mode.
#
# The two server modes: "per session" (gpuclust not preloaded: each session
# loads gpuclust_cuda.so and makes its own context) and "service" (gpuclust
# in shared_preload_libraries: one GPU service process computes every call).
#
# Run from the project root as root, with the throwaway server of
# .device/pg-up (../shared/device/README.md):
#
#   source .device/pg-up && make -j && make install && bench/service_bench.sh [runs] [sessions]
#
# runs: new sessions per function in table 1 (default 5); sessions: idle
# sessions in table 2 (default 200).
#
# Switching modes restarts that server with pg_ctl restart as its owner
# (pgrun), with the options pg-up starts it with plus max_connections (the
# sessions and a margin) and, for the service, -c shared_preload_libraries=gpuclust;
# pg_ctl's -o replaces the options of the previous start, so all of them are
# given each time.  At the end the server is restarted as pg-up left it.
# Environment: PGDATA_DIR (default /tmp/pgdata), PG_OWNER (default pgrun),
# PG_LOG (default /tmp/pg.log).
set -euo pipefail
RUNS=${1:-5}
SESSIONS=${2:-200}
# shellcheck source=bench/pgup_server.sh
. "$(dirname "$0")/pgup_server.sh"
CONN_OPTS="-c max_connections=$((SESSIONS + 20))"

command -v nvidia-smi >/dev/null || { echo "service_bench: nvidia-smi not found" >&2; exit 1; }

restart() {
	# restart MODE: the server in mode "session" or "service"
	if [ "$1" = service ]; then
		pgup_restart "$CONN_OPTS -c shared_preload_libraries=gpuclust"
		pgup_wait_service service_bench || exit 1
	else
		pgup_restart "$CONN_OPTS"
	fi
}
# shellcheck disable=SC2317
restore() {
	pgup_restart || true
}
trap restore EXIT

used_mib() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | awk '{s += $1} END {print s}'; }

IDLE_CALL="SELECT count(*) FROM gpu_dbscan('SELECT g, ARRAY[g % 37, g / 37]::float8[] FROM generate_series(1, 1000) g', 1.5, 4, device => 'gpu')"

idle_memory() {
	# idle_memory MODE: prints one table row
	local before after pids=() done_n t0
	sleep 2
	before=$(used_mib)
	for _ in $(seq "$SESSIONS"); do
		psql -X -q -At -d "$DB" -c "$IDLE_CALL" -c "SELECT pg_sleep(3600)" >/dev/null 2>&1 &
		pids+=($!)
	done
	# every session made its call and sleeps
	t0=$(date +%s)
	while :; do
		done_n=$(psql -X -At -d "$DB" -c "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(3600)' AND state = 'active'")
		[ "$done_n" -ge "$SESSIONS" ] && break
		if [ $(($(date +%s) - t0)) -gt 600 ]; then
			echo "service_bench: only $done_n of $SESSIONS sessions made their call in 10 minutes" >&2
			break
		fi
		sleep 1
	done
	sleep 2
	after=$(used_mib)
	psql -X -q -At -d "$DB" -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(3600)'" >/dev/null
	wait "${pids[@]}" 2>/dev/null || true
	echo "| $1 | $done_n | $before | $after | $(awk -v a="$after" -v b="$before" -v n="$done_n" 'BEGIN {printf "%.1f", (n > 0) ? (a - b) / n : 0}') |"
}

echo "== 1. the first GPU call of a new session against a warm one ($RUNS sessions per function, medians, ms)"
for mode in session service; do
	restart $mode
	echo
	echo "### $([ $mode = service ] && echo "through the GPU service (shared_preload_libraries = gpuclust)" || echo "a CUDA context per session (gpuclust not preloaded)")"
	echo
	bench/first_call_bench.sh "$RUNS" | tail -n +3
done

echo
echo "== 2. device memory of $SESSIONS sessions that each made one GPU call and sit idle (nvidia-smi memory.used, MiB)"
echo
echo "| mode | sessions | MiB without sessions | MiB with them | MiB per session |"
echo "| --- | ---: | ---: | ---: | ---: |"
for mode in session service; do
	restart $mode
	idle_memory "$([ $mode = service ] && echo "GPU service" || echo "context per session")"
done
