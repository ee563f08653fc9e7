#!/usr/bin/env python3
"""scikit-learn's DBSCAN on the rows pairs_bench dumped, the CPU anchor of the
embeddings issue: python3 bench/pairs_sklearn.py FILE N D EPS MIN_PTS [--cosine]
[--jobs J].  Prints the time of fit (best of 2) and the clusters."""
import argparse
import time

import numpy as np
from sklearn.cluster import DBSCAN

ap = argparse.ArgumentParser()
ap.add_argument("file")
ap.add_argument("n", type=int)
ap.add_argument("d", type=int)
ap.add_argument("eps", type=float)
ap.add_argument("min_pts", type=int)
ap.add_argument("--cosine", action="store_true")
ap.add_argument("--jobs", type=int, default=16)
a = ap.parse_args()
X = np.fromfile(a.file, dtype=np.float32).reshape(a.n, a.d).astype(np.float64)
best = None
for _ in range(2):
    t0 = time.perf_counter()
    lab = DBSCAN(eps=a.eps, min_samples=a.min_pts, metric="cosine" if a.cosine else "euclidean",
                 n_jobs=a.jobs).fit(X).labels_
    t = (time.perf_counter() - t0) * 1e3
    best = t if best is None else min(best, t)
print(f"sklearn DBSCAN n={a.n} d={a.d} {'cosine' if a.cosine else 'euclidean'} eps={a.eps:.6g} "
      f"n_jobs={a.jobs}: {best:.1f} ms, clusters={lab.max() + 1}")
