"""
gpu_kmeans / gpu_kmeans_centroids against scikit-learn's KMeans.

With the same initial centroids, scikit-learn's Lloyd (n_init=1,
algorithm='lloyd') follows the same rules as gpuclust: nearest centroid,
means, stop when nothing changes or when the squared centroid moves sum to at
most tol times the mean feature variance.  The features are stored as real, so
scikit-learn gets the same float32 values, widened to float64 as gpuclust's CPU
back end computes.

Runs on the CPU back end (device => 'cpu'); the GPU machine compares the GPU
against the CPU with bench/kmeans_cpu_gpu.sql and test/gpu/gpu_vs_cpu kmeans.
"""

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

from conftest import load_matrix


def array_literal(C):
    """A float8[][] literal for a k x d numpy array."""
    return "{" + ",".join("{" + ",".join(repr(float(v)) for v in row) + "}" for row in C) + "}"


def gc_kmeans(conn, table, k, init=None, **kw):
    """Runs gpu_kmeans and gpu_kmeans_centroids; returns labels (by id), distances, centroids, sizes, inertia."""
    args = ["%s", "%s"]
    params = [f"SELECT id, f FROM {table}", k]
    for name, value in kw.items():
        args.append(f"{name} => %s")
        params.append(value)
    if init is not None:
        args.append("initial_centroids => %s::float8[]")
        params.append(array_literal(init))
    args.append("device => 'cpu'")
    arglist = ", ".join(args)
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, cluster_id, distance FROM gpu_kmeans({arglist}) ORDER BY id", params)
        rows = cur.fetchall()
        cur.execute(f"SELECT cluster_id, centroid, size, inertia FROM gpu_kmeans_centroids({arglist}) "
                    "ORDER BY cluster_id", params)
        crow = cur.fetchall()
    labels = np.array([r[1] for r in rows])
    dist = np.array([r[2] for r in rows])
    centroids = np.array([r[1] for r in crow])
    sizes = np.array([r[2] for r in crow])
    inertia = np.array([r[3] for r in crow])
    return labels, dist, centroids, sizes, inertia


def sklearn_kmeans(X, C0, tol=1e-4, max_iter=300):
    km = KMeans(n_clusters=len(C0), init=C0, n_init=1, algorithm="lloyd", tol=tol, max_iter=max_iter)
    km.fit(X.astype(np.float64))
    return km


@pytest.mark.parametrize("n,d,k,seed", [(3000, 2, 5, 0), (4000, 6, 8, 1), (2500, 40, 12, 2)])
def test_separated_blobs_match_sklearn(conn, n, d, k, seed):
    X, _ = make_blobs(n_samples=n, n_features=d, centers=k, cluster_std=0.6, center_box=(-40, 40),
                      random_state=seed)
    X = X.astype(np.float32)
    rng = np.random.default_rng(seed)
    C0 = X[rng.choice(n, k, replace=False)].astype(np.float64)
    load_matrix(conn, "km_blobs", X)

    labels, dist, centroids, sizes, inertia = gc_kmeans(conn, "km_blobs", k, init=C0)
    km = sklearn_kmeans(X, C0)

    assert np.array_equal(labels, km.labels_), f"{np.sum(labels != km.labels_)} labels differ"
    assert inertia.sum() == pytest.approx(km.inertia_, rel=1e-6)
    np.testing.assert_allclose(centroids, km.cluster_centers_, rtol=0, atol=1e-9 * np.abs(X).max())
    assert np.array_equal(sizes, np.bincount(km.labels_, minlength=k))
    # distance is the Euclidean distance to the assigned centroid
    expect = np.linalg.norm(X.astype(np.float64) - km.cluster_centers_[km.labels_], axis=1)
    np.testing.assert_allclose(dist, expect, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("tol", [1e-4, 0.0])
def test_unstructured_data_inertia_matches_sklearn(conn, tol):
    """No clusters in the data: the same local optimum, inertia within 1e-6."""
    rng = np.random.default_rng(7)
    X = rng.random((5000, 3), dtype=np.float32)
    C0 = X[:10].astype(np.float64)
    load_matrix(conn, "km_unif", X)

    labels, _, centroids, _, inertia = gc_kmeans(conn, "km_unif", 10, init=C0, tol=tol, max_iter=500)
    km = sklearn_kmeans(X, C0, tol=tol, max_iter=500)

    assert inertia.sum() == pytest.approx(km.inertia_, rel=1e-6)
    assert np.mean(labels != km.labels_) <= 1e-3
    np.testing.assert_allclose(centroids, km.cluster_centers_, atol=1e-6)


def test_max_iter_one_is_one_lloyd_step(conn):
    """max_iter => 1: one assignment and one mean, then labels for those means."""
    X, _ = make_blobs(n_samples=2000, n_features=3, centers=6, cluster_std=2.0, random_state=3)
    X = X.astype(np.float32)
    C0 = X[:6].astype(np.float64)
    load_matrix(conn, "km_one", X)

    labels, _, centroids, _, inertia = gc_kmeans(conn, "km_one", 6, init=C0, max_iter=1)
    km = sklearn_kmeans(X, C0, max_iter=1)

    np.testing.assert_allclose(centroids, km.cluster_centers_, atol=1e-9)
    assert np.array_equal(labels, km.labels_)
    assert inertia.sum() == pytest.approx(km.inertia_, rel=1e-9)


def test_kmeanspp_finds_separated_blobs(conn):
    """k-means++ seeding puts one centre in each of k far-apart blobs for most seeds."""
    X, truth = make_blobs(n_samples=3000, n_features=4, centers=7, cluster_std=0.5,
                          center_box=(-100, 100), random_state=11)
    X = X.astype(np.float32)
    load_matrix(conn, "km_pp", X)
    recovered = 0
    for seed in range(5):
        labels, _, _, _, inertia = gc_kmeans(conn, "km_pp", 7, seed=seed)
        # the partition equals the truth up to renumbering
        pairs = set(zip(labels.tolist(), truth.tolist()))
        recovered += len(pairs) == 7
        # the same seed gives the same answer
        again, _, _, _, inertia2 = gc_kmeans(conn, "km_pp", 7, seed=seed)
        assert np.array_equal(labels, again) and np.array_equal(inertia, inertia2)
    assert recovered >= 4


def test_inertia_of_kmeanspp_close_to_sklearn(conn):
    """On blobs, gpuclust's k-means++ start reaches the inertia of scikit-learn's best of 10
    starts (to 0.1%: both stop at tol = 1e-4, not at the exact optimum); a start with two
    centres in one blob would be tens of percent worse."""
    X, _ = make_blobs(n_samples=4000, n_features=2, centers=5, cluster_std=1.0,
                      center_box=(-30, 30), random_state=5)
    X = X.astype(np.float32)
    load_matrix(conn, "km_pp2", X)
    _, _, _, _, inertia = gc_kmeans(conn, "km_pp2", 5, seed=1)
    best = KMeans(n_clusters=5, n_init=10, random_state=0).fit(X.astype(np.float64)).inertia_
    assert inertia.sum() <= best * 1.001
