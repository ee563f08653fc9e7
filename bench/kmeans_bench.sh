#!/bin/sh
# bench/kmeans_bench.sh bench [json] | gemm [json] | hard [json] | assign [json] | precision [json]
#                       | one n d k iterations [kmeans++] [f64] [cosine]
#    Builds the k-means timing harness (bench/kmeans_bench.cu, through
#    bench/Makefile and the flags of common/flags.mk) and runs it from the
#    project root with ./gpuclust_cuda.so (build that first: make
#    CUDA_ARCH=sm_90).  See the top of kmeans_bench.cu.
#
#    bench/kmeans_bench.sh check   still works: it runs the k-means checks
#    of the GPU against the CPU, which moved to test/gpu (gpu_vs_cpu kmeans).
set -e
cd "$(dirname "$0")/.."
if [ "${1:-}" = check ]; then
	echo "kmeans_bench.sh check: running test/gpu/gpu_vs_cpu kmeans (the check moved to test/gpu)" >&2
	make -s -C test/gpu
	exec test/gpu/gpu_vs_cpu kmeans
fi
make -s -C bench kmeans_bench
exec .bench/kmeans_bench "$@"
