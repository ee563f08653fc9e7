"""
Reference answers and comparisons for gpu_dbscan, built on scikit-learn.

gpuclust keeps real features as float32 and double precision ones as
float64, and compares distances in double precision, so a reference is
computed on the values gpuclust keeps (as_float32 for real input) widened to
float64.  The answer that gpu_dbscan must give is fully determined:

* a point is core when at least min_pts points (itself included) lie within
  distance <= eps;
* core points within eps of each other share a cluster (the transitive closure
  is scikit-learn's partition of the core points);
* a non-core point within eps of a core point is a border point and takes the
  cluster of the first such core point in query order; any other point is
  noise (label -1 here, NULL in SQL);
* clusters are numbered 0, 1, 2, ... in order of their first member.
"""

import numpy as np
from sklearn.cluster import DBSCAN
from sklearn.neighbors import BallTree, KDTree

# Distances within this relative distance of eps are "ties": whether such a pair
# counts as neighbours depends on the last bit of the arithmetic, so the
# generated sets are checked to hold none.
TIE_BAND = 1e-12


def as_float32(X):
    """The values gpuclust computes with: X rounded to float32, widened to float64."""
    return np.asarray(X, dtype=np.float32).astype(np.float64)


class _Brute:
    """Exact radius queries for small, very high-dimensional sets, from the full
    distance matrix (trees are slower than brute force there)."""

    def __init__(self, X):
        self.X = X
        sq = np.einsum("ij,ij->i", X, X)
        d2 = sq[:, None] + sq[None, :] - 2.0 * (X @ X.T)
        # The Gram-matrix form loses a few ulps of |x|^2, far below TIE_BAND.
        self.D = np.sqrt(np.maximum(d2, 0.0))
        np.fill_diagonal(self.D, 0.0)

    def _rows(self, Q):
        # Queries are always rows of X itself (duplicates share a row of D).
        if not hasattr(self, "_index"):
            self._index = {}
            for i in range(self.X.shape[0] - 1, -1, -1):
                self._index[self.X[i].tobytes()] = i
        idx = np.array([self._index[q.tobytes()] for q in np.asarray(Q, dtype=np.float64)],
                       dtype=np.int64)
        return self.D[idx]

    def query_radius(self, Q, r, count_only=False):
        rows = self._rows(Q)
        if count_only:
            return np.count_nonzero(rows <= r, axis=1)
        return [np.flatnonzero(row <= r) for row in rows]


def _tree(X):
    if X.shape[1] <= 16:
        return KDTree(X)
    if X.shape[1] <= 128:
        return BallTree(X)
    return _Brute(X)


class Reference:
    """The expected gpu_dbscan answer for rows X (in query order), eps, min_pts."""

    def __init__(self, X, eps, min_pts):
        X = np.asarray(X, dtype=np.float64)
        self.X, self.eps, self.min_pts = X, float(eps), int(min_pts)
        n = X.shape[0]
        tree = _tree(X)
        self.tree = tree
        counts = tree.query_radius(X, eps, count_only=True)
        lo = tree.query_radius(X, eps * (1 - TIE_BAND), count_only=True)
        hi = tree.query_radius(X, eps * (1 + TIE_BAND), count_only=True)
        self.ties = int(np.count_nonzero(lo != hi))
        self.core = counts >= min_pts

        if isinstance(tree, _Brute):
            sk = DBSCAN(eps=eps, min_samples=min_pts, metric="precomputed").fit(tree.D)
        else:
            algorithm = "kd_tree" if X.shape[1] <= 16 else "ball_tree"
            sk = DBSCAN(eps=eps, min_samples=min_pts, algorithm=algorithm).fit(X)
        self.sk_labels = sk.labels_.astype(np.int64)
        self.sk_core = np.zeros(n, dtype=bool)
        self.sk_core[sk.core_sample_indices_] = True

        # Border rule: the first core point (lowest index) within eps.
        labels = np.where(self.core, self.sk_labels, -1)
        noncore = np.flatnonzero(~self.core)
        self.border_core = np.full(n, -1, dtype=np.int64)   # index of that core point
        if noncore.size:
            neigh = tree.query_radius(X[noncore], eps)
            core = self.core
            for i, nb in zip(noncore, neigh):
                nb = nb[core[nb]]
                if nb.size:
                    first = nb.min()
                    self.border_core[i] = first
                    labels[i] = self.sk_labels[first]
        self.labels = renumber(labels)
        self.border = (~self.core) & (self.labels >= 0)

        # Border points within eps of core points of two or more clusters: the
        # cases where the border rule decides the answer.
        self.contested = 0
        border_idx = np.flatnonzero(self.border)
        if border_idx.size:
            neigh = tree.query_radius(X[border_idx], eps)
            for nb in neigh:
                nb = nb[self.core[nb]]
                if np.unique(self.labels[nb]).size > 1:
                    self.contested += 1

    @property
    def n_clusters(self):
        return int(self.labels.max()) + 1 if self.labels.size else 0


def renumber(labels):
    """Relabel clusters 0, 1, ... in order of first appearance; -1 stays -1."""
    labels = np.asarray(labels, dtype=np.int64)
    out = np.full(labels.shape, -1, dtype=np.int64)
    mask = labels >= 0
    if not mask.any():
        return out
    uniq, first = np.unique(labels[mask], return_index=True)
    order = np.argsort(first, kind="stable")
    new_of = np.empty(uniq.size, dtype=np.int64)
    new_of[order] = np.arange(uniq.size)
    out[mask] = new_of[np.searchsorted(uniq, labels[mask])]
    return out


def same_partition(a, b):
    """True when label arrays a and b group the same points together (any numbering)."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.size == 0:
        return True
    pairs = np.unique(np.stack([a, b], axis=1), axis=0)
    return pairs.shape[0] == np.unique(a).size == np.unique(b).size


def first_differences(ids, got, want, limit=8):
    """Text listing the first rows where got and want differ, for failure messages."""
    bad = np.flatnonzero(np.asarray(got) != np.asarray(want))
    rows = ", ".join(f"id {ids[i]}: got {got[i]}, want {want[i]}" for i in bad[:limit])
    return f"{bad.size} rows differ ({rows}{', ...' if bad.size > limit else ''})"
