"""scikit-learn's KMeans on the k-means cases of bench/threads_bench.c: the same
rows, the same initial centroids, the same iterations (Lloyd, n_init=1,
max_iter=10, tol=0), on every core scikit-learn's OpenMP and BLAS see.

    .bench/threads_bench --cases kmeans2,kmeans128 --dump DIR [--json gpuclust.json]
    python3 bench/threads_sklearn.py DIR [--reps 3] [--json FILE]

Prints per case the best wall time of --reps fits (after a warm-up fit), the
iterations scikit-learn ran, and how its answer compares with gpuclust's
(the labels and per-cluster inertia threads_bench dumped): the share of
rows with the same label and the relative difference of the total inertia.
scikit-learn computes in float32 for float32 input, gpuclust in double, so
a few rows near a tie may differ.
"""
import argparse
import json
import os
import time

import numpy as np
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_info

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--json")
args = ap.parse_args()

meta = json.load(open(os.path.join(args.dir, "kmeans.json")))
out = []
for name in ("kmeans2", "kmeans128"):
    path = os.path.join(args.dir, f"{name}.x.f32")
    if not os.path.exists(path):
        continue
    m = meta[name]
    n, d, k, iters = m["n"], m["d"], m["k"], m["max_iter"]
    X = np.fromfile(path, dtype=np.float32).reshape(n, d)
    init = np.fromfile(os.path.join(args.dir, f"{name}.init.f64"), dtype=np.float64).reshape(k, d)
    ours = np.fromfile(os.path.join(args.dir, f"{name}.labels.i32"), dtype=np.int32)
    our_inertia = np.fromfile(os.path.join(args.dir, f"{name}.inertia.f64"), dtype=np.float64).sum()
    best = None
    km = None
    for r in range(args.reps + 1):
        km = KMeans(n_clusters=k, init=init.astype(np.float32), n_init=1, max_iter=iters, tol=0.0,
                    algorithm="lloyd")
        t0 = time.perf_counter()
        km.fit(X)
        ms = (time.perf_counter() - t0) * 1000
        if r > 0 and (best is None or ms < best):
            best = ms
    same = float(np.mean(km.labels_ == ours))
    rel = abs(km.inertia_ - our_inertia) / our_inertia
    print(f"sklearn {name}: {n} x {d}, k = {k}: best {best:.1f} ms of {args.reps}, "
          f"{km.n_iter_} iterations; same label as gpuclust: {same:.6f} of the rows; "
          f"inertia relative difference {rel:.2e}", flush=True)
    out.append(dict(case=name, n=n, d=d, k=k, ms=best, iterations=int(km.n_iter_),
                    same_label_share=same, inertia_rel_diff=rel))
threads = {i.get("user_api"): i.get("num_threads") for i in threadpool_info()}
print("threads:", threads)
if args.json:
    json.dump(dict(runs=out, threads=threads), open(args.json, "w"), indent=1)
