#!/bin/bash
# precision_bench.sh
#    Double against single precision and cosine against Euclidean, on the GPU
#    machine, from the project root, after `make` (gpuclust_cuda.so):
#
#    bench/precision_bench.sh [OUTDIR]
#
#    DBSCAN     10M 2-D blobs (eps 0.05, min_pts 5) as float and as double;
#               1M 3-D blobs as unit rows, Euclidean eps 0.02 against cosine
#               eps 0.0002 (= 0.02^2 / 2: the same neighbours), best of REPS
#               runs of the compute phase (.bench/dbscan_bench)
#    density    1M 2-D D31-like rows, gaussian kernel: float against double,
#    peaks      and Euclidean against cosine (.bench/dpeaks_bench precision /
#               metric)
#    k-means    10M x 2 k = 100 and 1M x 256 k = 1000, per iteration, in f32,
#               f64, f32 cosine and f64 cosine (.bench/kmeans_bench precision)
#
# Prints a table per algorithm with the ratios (goals of the precision
# work: double at most 2x single for DBSCAN and density peaks, cosine within
# 1.2x of Euclidean); everything also goes to OUTDIR/precision_bench.log.
set -uo pipefail
OUT_DIR=${1:-${OUT:-/tmp/precision_bench}}
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/precision_bench.log"
REPS=${REPS:-5}
: >"$LOG"

make -s -C bench dbscan_bench dpeaks_bench kmeans_bench || exit 1
[ -f gpuclust_cuda.so ] || { echo "build gpuclust_cuda.so first (make)"; exit 1; }

log() { echo "$*" | tee -a "$LOG"; }

log "== device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1)"

# the best compute time of one dbscan_bench run, in ms
dbscan_ms() {
	local line
	line=$(./.bench/dbscan_bench "$@" --reps "$REPS" --no-cpu 2>>"$LOG" | tee -a "$LOG" | grep '^RESULT')
	echo "$line" | sed -n 's/.* gpu_compute_ms=\([0-9.]*\).*/\1/p'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

log ""
log "== DBSCAN (GPU compute, best of $REPS)"
f32=$(dbscan_ms blobs 10000000 2 0.05 5)
f64=$(dbscan_ms blobs 10000000 2 0.05 5 --f64)
euc=$(dbscan_ms blobs 1000000 3 0.02 5 --shift -50 --unit)
cos=$(dbscan_ms blobs 1000000 3 0.0002 5 --shift -50 --metric cosine)
log "| case | single / Euclidean ms | double / cosine ms | ratio |"
log "| --- | ---: | ---: | ---: |"
log "| 10M 2-D blobs, double vs single | $f32 | $f64 | $(ratio "$f64" "$f32") |"
log "| 1M 3-D unit rows, cosine vs Euclidean | $euc | $cos | $(ratio "$cos" "$euc") |"

log ""
log "== density peaks (GPU)"
./.bench/dpeaks_bench precision 1000000 gaussian 2>&1 | tee -a "$LOG"
./.bench/dpeaks_bench metric 1000000 gaussian 2>&1 | tee -a "$LOG"

log ""
log "== k-means (GPU, per iteration)"
./.bench/kmeans_bench precision 2>&1 | tee -a "$LOG"
