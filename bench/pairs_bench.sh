#!/bin/bash
# pairs_bench.sh: the embeddings issue's table on the GPU machine, from the
# project root after `make` (gpuclust_cuda.so) and `make -C bench pairs_bench`:
# DBSCAN and density peaks on the pair engine beside cuBLAS's all-pairs
# anchor, GPU best of 3 and the CPU back end on every core of the machine.
#   bench/pairs_bench.sh [--json FILE] [--quick]
# Rows: 100k x 64 and 50k x 384 cosine (the anchors' sizes), 200k x 16,
# 1M x 8 on both paths, and float / double pairs of the same shape.
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
run() { echo "== pairs_bench $*"; "$B" "$@" "${json[@]}" || echo "FAILED: pairs_bench $*"; }
run 20000 64
run 20000 64 --f64
run 20000 384 --cosine --f64
run 100000 64
run 50000 384 --cosine
[ "$quick" = 1 ] && exit 0
run 200000 16 --no-cpu
run 1000000 8 --no-cpu --path pairs
run 1000000 8 --no-cpu --path index
