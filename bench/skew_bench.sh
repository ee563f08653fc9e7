#!/bin/bash
# skew_bench.sh
#    The cost of skew: DBSCAN on the same points with and without one far
#    row (shapes speck0 and speck of test/data/gc_testdata.h: uniform in
#    [0, 1e-3]^d, and that with one row moved to 1e6), and on data whose
#    spread lies in later features (flat), on the GPU back end (compute,
#    best of REPS after a warm-up) and the CPU back end (one run), through
#    .bench/dbscan_bench, in single and in double precision (the same values
#    as doubles: far from the origin the raw cells of double rows may be off
#    by more than the margins, see common/dbscan_grid.h).  Run on the GPU
#    machine from the project root, after make:
#
#    bench/skew_bench.sh [OUTDIR]
#
# Prints a markdown table (and appends it to OUTDIR/skew_bench.log); the
# goal is a ratio with/without the far row of at most 2 on both back ends.
set -uo pipefail

OUT_DIR=${1:-${OUT:-/tmp/skew_bench}}
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/skew_bench.log"
H=./.bench/dbscan_bench
REPS=${REPS:-3}

make -s -C bench dbscan_bench || exit 1
[ -f gpuclust_cuda.so ] || { echo "build gpuclust_cuda.so first (make)"; exit 1; }

# key=value from a RESULT line
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }

run() {
	$H "$@" --reps "$REPS" 2>>"$LOG" | grep '^RESULT' | tee -a "$LOG"
}

{
	echo "device: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
	echo
	echo "| data | rows | n | d | eps | min_pts | GPU compute ms | CPU ms | GPU ratio | CPU ratio | GPU = CPU |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
} | tee -a "$LOG"
for prec in f32 f64; do
	opt=""
	[ "$prec" = f64 ] && opt="--f64"
	for spec in "1000000 2 1e-5 5" "300000 3 2e-5 4" "1000000 1 1e-9 5"; do
		read -r n d eps mp <<<"$spec"
		base=$(run speck0 $n $d $eps $mp $opt)
		skew=$(run speck $n $d $eps $mp $opt)
		bg=$(field "$base" gpu_compute_ms); bc=$(field "$base" cpu_ms)
		sg=$(field "$skew" gpu_compute_ms); sc=$(field "$skew" cpu_ms)
		printf "| without the far row | %s | %s | %s | %s | %s | %s | %s | | | %s |\n" \
			"$prec" "$n" "$d" "$eps" "$mp" "$bg" "$bc" "$(field "$base" agree)" | tee -a "$LOG"
		printf "| with one row at 1e6 | %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f | %s |\n" \
			"$prec" "$n" "$d" "$eps" "$mp" "$sg" "$sc" "$(awk -v a="$sg" -v b="$bg" 'BEGIN{print a/b}')" "$(awk -v a="$sc" -v b="$bc" 'BEGIN{print a/b}')" \
			"$(field "$skew" agree)" | tee -a "$LOG"
	done
	flat=$(run flat 200000 8 1.2 5 $opt)
	printf "| flat (first 3 of 8 features constant) | %s | 200000 | 8 | 1.2 | 5 | %s | %s | | | %s |\n" \
		"$prec" "$(field "$flat" gpu_compute_ms)" "$(field "$flat" cpu_ms)" "$(field "$flat" agree)" | tee -a "$LOG"
done
