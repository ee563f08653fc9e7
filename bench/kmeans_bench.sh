#!/bin/sh
# bench/kmeans_bench.sh check | bench [json]
#    Builds the standalone k-means harness (bench/kmeans_bench.cu) against the
#    CPU core and runs it with ./gpuclust_cuda.so (build that first:
#    make CUDA_ARCH=sm_90).  See the top of kmeans_bench.cu.
set -e
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-/tmp/gpuclust-kmeans-bench}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
mkdir -p "$B"
for f in kmeans util; do
	gcc -std=gnu11 -O2 -ffp-contract=off -Isrc/core -Icuda -c src/core/$f.c -o "$B/$f.o"
done
"$NVCC" -O2 -std=c++17 -Isrc/core -Icuda bench/kmeans_bench.cu "$B/kmeans.o" "$B/util.o" \
	-lcublas -ldl -o "$B/kmeans_bench"
exec "$B/kmeans_bench" "$@"
