#!/bin/sh
# Builds bench/dpeaks_bench.c against the CPU core and runs it from the
# project root (the GPU back end, ./gpuclust_cuda.so, comes from `make`).
#   bench/dpeaks_bench.sh check | bench [cpu] | cpu [limit_s]
set -e
cd "$(dirname "$0")/.."
BIN=${DPEAKS_BENCH_BIN:-/tmp/dpeaks_bench}
${CC:-cc} -std=gnu11 -O2 -Wall -Wextra -Wno-unused-parameter -ffp-contract=off -Isrc/core -Icuda \
    -o "$BIN" bench/dpeaks_bench.c src/core/dpeaks.c src/core/util.c -ldl -lm
exec "$BIN" "$@"
