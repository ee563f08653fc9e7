#!/bin/bash
# hdbscan_bench.sh
#    Benchmark of HDBSCAN on the GPU and on the CPU back end (all cores), run
#    on the GPU machine from the project root after `make`.
#
#    bench/hdbscan_bench.sh [OUTDIR]
#    CPU_ONLY=1 THREADS=16 bench/hdbscan_bench.sh [OUTDIR]   (the CPU's k-d tree above 3-D)
#
# .bench/hdbscan_bench (bench/hdbscan_bench.c, built by bench/Makefile) on
#   - 1M 2-D blobs with 5 % noise, min_cluster_size 10, min_samples 10;
#   - 10M 2-D blobs, the same parameters;
#   - 37M 3-D points of the Gan-Tao seed spreader (gantao), min_cluster_size
#     100, min_samples 2;
# per phase (core distances, minimum spanning tree, host part), the GPU the
# best of REPS runs (default 5) after a warm-up, the CPU the best of
# CPU_REPS (default 1) on all the CPUs, and whether both answers are
# identical.  Prints a Markdown table; with JSON=1 also writes
# OUTDIR/hdbscan_bench.json (one object per set, in an array).  Everything
# is appended to OUTDIR/hdbscan_bench.log; the GPU back end's searches and
# rounds (tuning.debug, from one more GPU run apart from the timed ones: its
# checks against the host cost time) go to OUTDIR/hdbscan_bench.debug.
#
#   NO_CPU=1     skip the CPU back end
#   CPU_ONLY=1   the CPU back end alone (no GPU, no gpuclust_cuda.so or nvidia-smi
#                needed): with SETS unset, the k-d tree's sets above three
#                dimensions, 1M x 5, 1M x 8 and 200k x 16 blobs (5 % noise),
#                min_cluster_size = min_samples = 10
#   THREADS=T    CPU threads (default: all the CPUs the process may run on)
#   GPU_THREADS=T  host threads of the GPU back end's host part (default: all)
#   CPU37=0      skip the CPU on the 37M set (default: run it)
#   SETS="..."   other sets, each "SHAPE N D MCS MS" separated by commas
set -uo pipefail

OUT_DIR=${1:-${OUT:-/tmp/hdbscan_bench}}
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/hdbscan_bench.log"
DBG="$OUT_DIR/hdbscan_bench.debug"
JSON_OUT="$OUT_DIR/hdbscan_bench.json"
H=./.bench/hdbscan_bench
REPS=${REPS:-5}
CPU_REPS=${CPU_REPS:-1}
CPU_ONLY=${CPU_ONLY:-0}
if [ "$CPU_ONLY" = 1 ]; then
	SETS=${SETS:-"blobs 1000000 5 10 10, blobs 1000000 8 10 10, blobs 200000 16 10 10"}
else
	SETS=${SETS:-"blobs 1000000 2 10 10, blobs 10000000 2 10 10, gantao 37000000 3 100 2"}
fi

make -s -C bench hdbscan_bench || exit 1
[ "$CPU_ONLY" = 1 ] || [ -f gpuclust_cuda.so ] || { echo "build gpuclust_cuda.so first (make)"; exit 1; }

log() { echo "$*" | tee -a "$LOG"; }

log "== $(date -u) device"
[ "$CPU_ONLY" = 1 ] || nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG"
log "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
log ""

status=0
first=1
rm -f "$JSON_OUT.lines"
IFS=',' read -ra set_list <<< "$SETS"
for s in "${set_list[@]}"; do
	read -r shape n d mcs ms <<< "$s"
	extra=()
	[ "${NO_CPU:-0}" = 1 ] && extra+=(--no-cpu)
	[ "$CPU_ONLY" = 1 ] && extra+=(--no-gpu)
	[ -n "${THREADS:-}" ] && extra+=(--threads "$THREADS")
	[ -n "${GPU_THREADS:-}" ] && extra+=(--gpu-threads "$GPU_THREADS")
	[ "$shape" = gantao ] && [ "$n" -ge 30000000 ] && [ "${CPU37:-1}" = 0 ] && extra+=(--no-cpu)
	hdr=()
	[ $first = 1 ] && hdr=(--header)
	first=0
	json=()
	[ "${JSON:-0}" = 1 ] && json=(--json "$JSON_OUT.lines")
	$H "$shape" "$n" "$d" "$mcs" "$ms" --reps "$REPS" --cpu-reps "$CPU_REPS" \
		"${hdr[@]}" "${extra[@]}" "${json[@]}" 2>>"$DBG" | tee -a "$LOG" || status=1
	# the searches and rounds from one more GPU run, apart: the debug checks cost time
	[ "$CPU_ONLY" = 1 ] || $H "$shape" "$n" "$d" "$mcs" "$ms" --reps 1 --no-cpu --debug >/dev/null 2>>"$DBG" || status=1
done
if [ "${JSON:-0}" = 1 ] && [ -f "$JSON_OUT.lines" ]; then
	{ echo "["; sed '$!s/$/,/' "$JSON_OUT.lines" | sed 's/^/  /'; echo "]"; } > "$JSON_OUT"
	rm -f "$JSON_OUT.lines"
	log ""
	log "JSON: $JSON_OUT"
fi
exit $status
