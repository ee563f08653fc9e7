"""Times scikit-learn's KMeans (Lloyd, n_init=1, random rows as the initial
centroids, tol=0) on the k-means benchmark shapes, for bench/results/kmeans.md.

    python3 bench/kmeans_sklearn.py [rows_scale]

Where a shape would take too long, it runs on a fraction of the rows (printed)
and the per-iteration time scales linearly in n.
"""
import json
import sys
import time

import numpy as np
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_info

SHAPES = [  # n, d, k, rows actually used, iterations
    (10_000_000, 2, 100, 10_000_000, 3),
    (10_000_000, 32, 1000, 1_000_000, 3),
    (1_000_000, 256, 20000, 50_000, 2),
    (1_000_000, 768, 1024, 200_000, 2),
]

out = []
rng = np.random.default_rng(11)
for n, d, k, rows, iters in SHAPES:
    X = rng.random((rows, d), dtype=np.float32)
    init = X[rng.choice(rows, k, replace=False)]
    km = KMeans(n_clusters=k, init=init, n_init=1, max_iter=iters, tol=0.0, algorithm="lloyd")
    t0 = time.perf_counter()
    km.fit(X)
    ms = (time.perf_counter() - t0) * 1000
    per = ms / km.n_iter_
    scaled = per * n / rows
    print(f"sklearn {n} x {d} k={k}: ran {rows} rows, {km.n_iter_} iterations, {ms:.0f} ms, "
          f"{per:.1f} ms/iteration, scaled to n: {scaled:.1f} ms/iteration", flush=True)
    out.append(dict(n=n, d=d, k=k, rows=rows, iterations=int(km.n_iter_), ms=ms,
                    per_iteration_ms=per, per_iteration_scaled_ms=scaled))
threads = sum(i.get("num_threads", 0) for i in threadpool_info() if i.get("user_api") == "openmp")
print("openmp threads:", threads)
if len(sys.argv) > 1:
    json.dump(dict(runs=out, openmp_threads=threads), open(sys.argv[1], "w"), indent=1)
