#!/bin/bash
# pairs_cpu_bench.sh: the embeddings issue's CPU figures on any machine, without a GPU,
# from the project root: DBSCAN on the CPU pair engine (.bench/pairs_cpu_bench, built here)
# beside scikit-learn's DBSCAN with as many jobs on the same rows (bench/pairs_sklearn.py),
# and, with --before COMMIT, the CPU pair engine of that commit (git archive into a
# temporary directory, built there) on the same rows, its answer checked bit for bit
# against this tree's.
#   bench/pairs_cpu_bench.sh [--threads T] [--reps R] [--before COMMIT] [--quick]
#   (SKLEARN=0: without scikit-learn)
# Rows: 100k x 64 and 50k x 384 cosine, pairs_bench's blobs and eps (--quick: 40k x 64).
set -uo pipefail
threads=$(nproc)
reps=3
before=
quick=0
while [ $# -gt 0 ]; do
	case $1 in
		--threads) threads=$2; shift 2 ;;
		--reps) reps=$2; shift 2 ;;
		--before) before=$2; shift 2 ;;
		--quick) quick=1; shift ;;
		*) echo "usage: $0 [--threads T] [--reps R] [--before COMMIT] [--quick]" >&2; exit 2 ;;
	esac
done
make -s -C bench pairs_cpu_bench >/dev/null 2>&1 || { echo "cannot build .bench/pairs_cpu_bench"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
B=./.bench/pairs_cpu_bench
if [ -n "$before" ]; then
	mkdir -p "$tmp/src"
	git archive "$before" | tar -x -C "$tmp/src" || exit 1
	# a commit before bench/pairs_cpu_bench.c: this tree's harness against that commit's back end
	cp bench/pairs_cpu_bench.c "$tmp/src/bench/"
	grep -q pairs_cpu_bench "$tmp/src/bench/Makefile" || cp bench/Makefile "$tmp/src/bench/"
	make -s -C "$tmp/src/bench" pairs_cpu_bench BUILD="$tmp/build" >/dev/null 2>&1 || { echo "cannot build $before"; exit 1; }
fi
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), threads=$threads, load $(cut -d' ' -f1-3 /proc/loadavg)"
cases=("100000 64" "50000 384 --cosine")
[ "$quick" = 1 ] && cases=("40000 64")
for c in "${cases[@]}"; do
	set -- $c
	echo "== $c"
	"$B" "$@" --threads "$threads" --reps "$reps" --dump "$tmp/x.f32" --save "$tmp/after" | tee "$tmp/last"
	eps=$(grep -o 'eps=[0-9.e-]*' "$tmp/last" | head -1 | cut -d= -f2)
	if [ -n "$before" ]; then
		echo "-- $before"
		"$tmp/build/pairs_cpu_bench" "$@" --threads "$threads" --reps "$reps" --eps "$eps" --check "$tmp/after" | tail -1
	fi
	if [ "${SKLEARN:-1}" != 0 ]; then
		cos=
		[ "${3:-}" = --cosine ] && cos=--cosine
		"${PYTHON:-python3}" bench/pairs_sklearn.py "$tmp/x.f32" "$1" "$2" "$eps" 10 $cos --jobs "$threads" || echo "FAILED: pairs_sklearn"
	fi
done
