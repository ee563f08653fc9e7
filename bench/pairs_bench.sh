#!/bin/bash
# pairs_bench.sh: the embeddings issue's table on the GPU machine, from the
# project root after `make` (gpuclust_cuda.so) and `make -C bench pairs_bench`:
# DBSCAN and density peaks on the pair engine beside cuBLAS's all-pairs
# anchor, GPU best of 3 and the CPU back end on every core of the machine.
#   bench/pairs_bench.sh [--json FILE] [--quick]      (SKLEARN=0: without scikit-learn)
# Rows: 100k x 64 and 50k x 384 cosine (the anchors' sizes, density peaks
# too, and scikit-learn's DBSCAN with n_jobs=16 on the same rows through
# bench/pairs_sklearn.py), 200k x 16, 1M x 8 on both paths, and float /
# double pairs of the same shape.
set -uo pipefail
json=()
quick=0
while [ $# -gt 0 ]; do
	case $1 in
		--json) json=(--json "$2"); shift 2 ;;
		--quick) quick=1; shift ;;
		*) echo "usage: $0 [--json FILE] [--quick]" >&2; exit 2 ;;
	esac
done
B=./.bench/pairs_bench
run() {
	echo "== pairs_bench $*"
	"$B" "$@" "${json[@]}" | tee /tmp/pairs_bench.last
	[ "${PIPESTATUS[0]}" = 0 ] || echo "FAILED: pairs_bench $*"
}
run 20000 64
run 20000 64 --f64
run 20000 384 --cosine --f64
run 100000 64 --algo both --dump /tmp/pairs_100k64.f32
eps=$(grep -o 'eps=[0-9.e-]*' /tmp/pairs_bench.last | head -1 | cut -d= -f2)
[ "${SKLEARN:-1}" = 0 ] || python3 bench/pairs_sklearn.py /tmp/pairs_100k64.f32 100000 64 "$eps" 10 || echo "FAILED: pairs_sklearn"
run 50000 384 --cosine --dump /tmp/pairs_50k384.f32
eps=$(grep -o 'eps=[0-9.e-]*' /tmp/pairs_bench.last | head -1 | cut -d= -f2)
[ "${SKLEARN:-1}" = 0 ] || python3 bench/pairs_sklearn.py /tmp/pairs_50k384.f32 50000 384 "$eps" 10 --cosine || echo "FAILED: pairs_sklearn"
[ "$quick" = 1 ] && exit 0
run 200000 16 --no-cpu
run 1000000 8 --no-cpu --path index
run 1000000 8 --no-cpu --path pairs --reps 1
