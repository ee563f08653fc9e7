#!/bin/sh
# bench/dpeaks_bench.sh bench [cpu] | cpu [limit_s] | skew [gpu]
#                       | precision [n] [gaussian|cutoff] [cosine] [cpu]
#                       | metric [n] [gaussian|cutoff] [f64] [cpu]
#    Builds the density-peaks timing harness (bench/dpeaks_bench.c, through
#    bench/Makefile and the flags of common/flags.mk) and runs it from the
#    project root with ./gpuclust_cuda.so (from `make`).  See the top of
#    dpeaks_bench.c.
#
#    bench/dpeaks_bench.sh check   still works: it runs the density-peaks
#    checks of the GPU against the CPU, which moved to test/gpu (gpu_vs_cpu
#    dpeaks).
set -e
cd "$(dirname "$0")/.."
if [ "${1:-}" = check ]; then
	echo "dpeaks_bench.sh check: running test/gpu/gpu_vs_cpu dpeaks (the check moved to test/gpu)" >&2
	make -s -C test/gpu
	exec test/gpu/gpu_vs_cpu dpeaks
fi
make -s -C bench dpeaks_bench
exec .bench/dpeaks_bench "$@"
