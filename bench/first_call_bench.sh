#!/bin/bash
# first_call_bench.sh: the first GPU call of a new backend against the same
# call warm, for gpu_dbscan, gpu_kmeans, gpu_density_peaks and gpu_hdbscan
# at 1,000 2-D rows (device => 'gpu'), with the GPU's start-up as the
# gpuclust.timing NOTICE of the first call reports it (and gpu_kmeans of 64
# dimensions, whose products are cuBLAS GEMMs: the only one of them that
# loads cuBLAS): gpu_init and its
# parts (init_driver: the driver's cuInit; init_load: dlopen of the back end
# with the CUDA runtime and cuBLAS; init_context: the device's primary
# context; init_cublas: the cuBLAS handle, k-means products only;
# init_alloc: the first device allocation).
#
#   PGHOST=... PGPORT=... PGUSER=postgres bench/first_call_bench.sh [runs] [rows]
#
# DEVICE=cpu runs the same statements on the CPU (a check of the script on
# a machine without a GPU; no start-up is reported there).
#
# Each run of each function is a new connection (one psql): a small call on
# the CPU first (40 rows: the session's catalog lookups are not counted), then the
# measured call twice, first and warm.  first and warm are the statement's
# milliseconds (clock_timestamp around it, in the server); extra = first -
# warm.  Prints one table row per function: the medians over the runs.
set -euo pipefail
RUNS=${1:-5}
ROWS=${2:-1000}
DB=${PGDATABASE:-postgres}
DEVICE=${DEVICE:-gpu}

psql -X -q -d "$DB" -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS gpuclust" >/dev/null
psql -X -q -d "$DB" -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE OR REPLACE FUNCTION gc_bench_ms(q text) RETURNS double precision LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
  EXECUTE q;
  RETURN extract(epoch FROM clock_timestamp() - t0) * 1000;
END $$;
SQL

# 1,000 rows on a 37-wide lattice of step 0.1 (every function finds structure there)
DATA="SELECT g, ARRAY[(g % 37) * 0.1 + (g % 3) * 0.01, (g / 37) * 0.1]::float8[] FROM generate_series(1, $ROWS) g"
DATA64="SELECT g, ARRAY(SELECT ((g * 7 + j * (g % 5)) % 37) * 0.1 FROM generate_series(1, 64) j)::float8[] FROM generate_series(1, $ROWS) g"
TINY="SELECT g, ARRAY[g % 7, g]::float8[] FROM generate_series(1, 40) g"
call() {
	# call FUNCTION QUERY DEVICE: the statement for one function
	case $1 in
	dbscan) echo "SELECT count(*) FROM gpu_dbscan('$2', 0.15, 4, device => '$3')" ;;
	kmeans) echo "SELECT count(*) FROM gpu_kmeans('$2', 8, device => '$3')" ;;
	kmeans_64d) echo "SELECT count(*) FROM gpu_kmeans('$2', 8, device => '$3')" ;;
	density_peaks) echo "SELECT count(*) FROM gpu_density_peaks('$2', 5, device => '$3')" ;;
	hdbscan) echo "SELECT count(*) FROM gpu_hdbscan('$2', 10, device => '$3')" ;;
	esac
}
median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
field() { { grep -o " $1=[0-9.]*" || true; } | head -1 | cut -d= -f2; }

echo "$RUNS new backends per function, $ROWS rows, device => '$DEVICE'; medians; ms"
echo
echo "| function | first | warm | extra | gpu_init | driver | load | context | cublas | alloc | first compute | warm compute |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for f in dbscan kmeans kmeans_64d density_peaks hdbscan; do
	tmp=$(mktemp -d)
	for r in $(seq "$RUNS"); do
		data=$DATA
		[ $f = kmeans_64d ] && data=$DATA64
		q=$(call $f "$data" "$DEVICE")
		out=$(psql -X -q -At -d "$DB" -v ON_ERROR_STOP=1 2>&1 <<SQL
SET gpuclust.timing = off;
SELECT gc_bench_ms(\$q\$$(call $f "$TINY" cpu)\$q\$) IS NOT NULL;
SET gpuclust.timing = on;
SET client_min_messages = notice;
SELECT 'first', gc_bench_ms(\$q\$$q\$q\$);
SELECT 'warm', gc_bench_ms(\$q\$$q\$q\$);
SQL
) || {
			echo "first_call_bench: $f failed:" >&2
			echo "$out" >&2
			exit 1
		}
		notes=$(echo "$out" | grep "gpuclust: .* device=" || true)
		first_note=$(echo "$notes" | sed -n 1p)
		warm_note=$(echo "$notes" | sed -n 2p)
		if ! echo "$first_note" | grep -q "device=$DEVICE"; then
			echo "first_call_bench: $f did not run on the device $DEVICE:" >&2
			echo "$out" >&2
			exit 1
		fi
		echo "$out" | grep '^first|' | cut -d'|' -f2 >>"$tmp/first"
		echo "$out" | grep '^warm|' | cut -d'|' -f2 >>"$tmp/warm"
		echo "$first_note" | field compute >>"$tmp/first_compute"
		echo "$warm_note" | field compute >>"$tmp/warm_compute"
		for p in gpu_init init_driver init_load init_context init_cublas init_alloc; do
			v=$(echo "$first_note" | field $p)
			echo "${v:-0}" >>"$tmp/$p"
		done
		if echo "$warm_note" | grep -q " gpu_init="; then
			echo "first_call_bench: the warm $f call reported a start-up: $warm_note" >&2
		fi
	done
	first=$(median <"$tmp/first")
	warm=$(median <"$tmp/warm")
	extra=$(paste -d' ' "$tmp/first" "$tmp/warm" | awk '{print $1 - $2}' | median)
	row="| $f | $(printf %.1f "$first") | $(printf %.1f "$warm") | $(printf %.1f "$extra")"
	for p in gpu_init init_driver init_load init_context init_cublas init_alloc first_compute warm_compute; do
		row="$row | $(printf %.1f "$(median <"$tmp/$p")")"
	done
	echo "$row |"
	rm -rf "$tmp"
done
