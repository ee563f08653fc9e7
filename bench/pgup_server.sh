#!/bin/bash
# pgup_server.sh: sourced by the bench scripts that restart the throwaway server of
# .device/pg-up in another mode (bench/service_bench.sh, bench/service_overhead.sh).
# Sets PGDATA_DIR (default /tmp/pgdata), PG_OWNER (default pgrun), PG_LOG (default
# /tmp/pg.log), DB, BIN (the bundle's bin/), PORT and PGUP_OPTS (the options pg-up starts
# the server with; shared_buffers from PGUP_SHARED_BUFFERS, default 4GB), and defines
#   pgup_restart OPTIONS...  restarts the server as its owner with pg-up's options and
#                            OPTIONS (pg_ctl's -o replaces those of the previous start)
#   pgup_wait_service WHO    waits until the GPU service shows its devices; after 30 s
#                            prints "WHO: the GPU service did not start" and the log, and
#                            returns 1
PGDATA_DIR=${PGDATA_DIR:-/tmp/pgdata}
PG_OWNER=${PG_OWNER:-pgrun}
PG_LOG=${PG_LOG:-/tmp/pg.log}
DB=${PGDATABASE:-postgres}
BIN=$(dirname "${PG_CONFIG:?source .device/pg-up first}")
PORT=${PGPORT:-5432}
PGUP_OPTS="-k ${PGHOST:-/tmp} -p $PORT -c shared_buffers=${PGUP_SHARED_BUFFERS:-4GB} -c work_mem=256MB -c max_wal_size=8GB"

pgup_restart() {
	su "$PG_OWNER" -c "$BIN/pg_ctl -D $PGDATA_DIR -l $PG_LOG -m fast -w -t 120 -o '$PGUP_OPTS $*' restart" >/dev/null
}

pgup_wait_service() {
	local n
	for _ in $(seq 300); do
		n=$(psql -X -At -d "$DB" -c "CREATE EXTENSION IF NOT EXISTS gpuclust; SELECT count(*) FROM gpuclust_service()" 2>/dev/null | tail -1 || true)
		[ "${n:-0}" -gt 0 ] && return 0
		sleep 0.1
	done
	echo "$1: the GPU service did not start; the server log:" >&2
	tail -20 "$PG_LOG" >&2
	return 1
}
