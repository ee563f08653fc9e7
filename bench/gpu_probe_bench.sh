#!/bin/bash
# gpu_probe_bench.sh: what the first GPU-sized call of a new backend costs
# under gpuclust.device = auto, against a warm call in the same backend:
# milliseconds, and the backend's memory from /proc/self/status (VmRSS,
# RssAnon: private memory; VmSize: address space) before the first call,
# after it and after the warm one.  On a server without a usable GPU the
# first call must cost no more than a warm one (the GPU probe asks the
# driver alone, src/gpu.c), and with a GPU it shows the price of loading
# the back end once per backend.  A 10-row call (on the CPU) comes first,
# so that the catalog lookups of a new session are not counted; WARM=cpu
# runs the measured query once on the CPU first instead, leaving the GPU
# probe as the only difference between the first call and a warm one.
#
#   PGHOST=... PGPORT=... PGUSER=postgres [WARM=cpu] bench/gpu_probe_bench.sh [runs] [rows]
#
# Needs a superuser (pg_read_file of /proc/self/status) and the server on
# this machine.  Each run is a new connection; prints one table row per run
# and the medians.
set -euo pipefail
RUNS=${1:-7}
ROWS=${2:-20000}
DB=${PGDATABASE:-postgres}

psql -X -q -d "$DB" -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS gpuclust" >/dev/null
psql -X -q -d "$DB" -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE OR REPLACE FUNCTION gc_bench_mem(what text) RETURNS bigint LANGUAGE sql AS $$
  SELECT (regexp_match(pg_read_file('/proc/self/status'), what || ':\s+(\d+) kB'))[1]::bigint
$$;
CREATE OR REPLACE FUNCTION gc_bench_ms(q text) RETURNS double precision LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
  EXECUTE q;
  RETURN extract(epoch FROM clock_timestamp() - t0) * 1000;
END $$;
SQL

Q="SELECT count(*) FROM gpu_dbscan('SELECT g, ARRAY[g % 200, g / 200]::float8[] FROM generate_series(1, $ROWS) g', 1.5, 4)"
# the warm-up before the first measured call: 10 rows (default), or with
# WARM=cpu the measured call itself on the CPU (device => 'cpu'), so that
# the first measured call differs from a warm one by the GPU probe alone
if [ "${WARM:-}" = cpu ]; then
	WARMQ="SELECT count(*) FROM gpu_dbscan('SELECT g, ARRAY[g % 200, g / 200]::float8[] FROM generate_series(1, $ROWS) g', 1.5, 4, device => 'cpu')"
else
	WARMQ="SELECT count(*) FROM gpu_dbscan('SELECT g, ARRAY[g]::float8[] FROM generate_series(1, 10) g', 1.5, 4)"
fi
MEM="format('%s %s %s', gc_bench_mem('VmRSS') / 1024, gc_bench_mem('RssAnon') / 1024, gc_bench_mem('VmSize') / 1024)"
echo "| run | first ms | warm ms | RSS MB before / first / warm | private MB before / first / warm | address space MB before / first / warm |"
echo "| ---: | ---: | ---: | --- | --- | --- |"
firsts=()
warms=()
for r in $(seq "$RUNS"); do
	out=$(psql -X -q -At -d "$DB" -v ON_ERROR_STOP=1 <<SQL
SET gpuclust.device = auto;
SET gpuclust.timing = off;
SELECT gc_bench_ms(\$q\$$WARMQ\$q\$) IS NOT NULL;
SELECT $MEM;
SELECT gc_bench_ms(\$q\$$Q\$q\$);
SELECT $MEM;
SELECT gc_bench_ms(\$q\$$Q\$q\$);
SELECT $MEM;
SQL
)
	mapfile -t l <<<"$out"
	read -r r0 p0 v0 <<<"${l[1]}"
	read -r r1 p1 v1 <<<"${l[3]}"
	read -r r2 p2 v2 <<<"${l[5]}"
	printf '| %d | %.1f | %.1f | %s / %s / %s | %s / %s / %s | %s / %s / %s |\n' "$r" "${l[2]}" "${l[4]}" \
		"$r0" "$r1" "$r2" "$p0" "$p1" "$p2" "$v0" "$v1" "$v2"
	firsts+=("${l[2]}")
	warms+=("${l[4]}")
done
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo
echo "median first call: $(med "${firsts[@]}") ms, warm call: $(med "${warms[@]}") ms ($ROWS rows, $RUNS new backends)"
psql -X -q -d "$DB" -c "DROP FUNCTION gc_bench_mem(text), gc_bench_ms(text)" >/dev/null
