#!/usr/bin/env python3
"""Compares a GPU DBSCAN answer dumped by .bench/dbscan_bench ... --dump
with scikit-learn's DBSCAN on the same points, and times scikit-learn.

    dbscan_gpu_sklearn.py BASE D EPS MIN_PTS [N_JOBS]

BASE.f32 holds the points, BASE.labels.i32 and BASE.core.u8 the GPU answer.
scikit-learn assigns a border point to whichever cluster reaches it first,
so the comparison is on what both define the same way: the core points,
the noise points, and the partition of the core points into clusters.
"""
import sys
import time

import numpy as np
from sklearn.cluster import DBSCAN


def main():
    base, d, eps, min_pts = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    n_jobs = int(sys.argv[5]) if len(sys.argv) > 5 else 16
    x = np.fromfile(base + ".f32", dtype=np.float32).reshape(-1, d)
    labels = np.fromfile(base + ".labels.i32", dtype=np.int32)
    core = np.fromfile(base + ".core.u8", dtype=np.uint8).astype(bool)
    n = x.shape[0]

    t0 = time.perf_counter()
    db = DBSCAN(eps=eps, min_samples=min_pts, n_jobs=n_jobs).fit(x.astype(np.float64))
    seconds = time.perf_counter() - t0

    sk_core = np.zeros(n, dtype=bool)
    sk_core[db.core_sample_indices_] = True
    core_diff = int(np.count_nonzero(sk_core != core))
    noise_diff = int(np.count_nonzero((db.labels_ < 0) != (labels < 0)))

    # Same partition of the core points: the pairs (ours, theirs) form a bijection.
    both = core & sk_core
    pairs = np.unique(np.stack([labels[both], db.labels_[both]], axis=1), axis=0)
    partition_ok = (len(pairs) == len(np.unique(pairs[:, 0])) == len(np.unique(pairs[:, 1])))

    print(f"SKLEARN n={n} d={d} eps={eps} min_pts={min_pts} n_jobs={n_jobs} "
          f"seconds={seconds:.2f} clusters={db.labels_.max() + 1} "
          f"core_differences={core_diff} noise_differences={noise_diff} "
          f"core_partition_identical={'yes' if partition_ok else 'NO'}")


if __name__ == "__main__":
    main()
