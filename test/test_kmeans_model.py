"""
k-means as a model, against scikit-learn: gpu_kmeans_assign against
KMeans.predict on the same centroids, and the quality of the default seeding
(greedy k-means++) against scikit-learn's default KMeans(n_init=1).

Runs on the CPU back end (device => 'cpu'); test/gpu/gpu_vs_cpu compares the
GPU's assignment and seeding with the CPU's on the GPU machine.
"""

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

from conftest import load_matrix
from test_kmeans_sklearn import array_literal


def centroids_of(conn, query, k, **kw):
    """The k x d centroids gpu_kmeans_centroids finds, as the array gpu_kmeans_assign takes."""
    args = "".join(f", {name} => %s" for name in kw)
    with conn.cursor() as cur:
        cur.execute(f"SELECT array_agg(centroid ORDER BY cluster_id) FROM "
                    f"gpu_kmeans_centroids(%s, %s{args}, device => 'cpu')", [query, k, *kw.values()])
        return np.array(cur.fetchone()[0], dtype=np.float64)


def assign(conn, query, C):
    """gpu_kmeans_assign of the query's rows to C: labels and distances in id order."""
    with conn.cursor() as cur:
        cur.execute("SELECT id, cluster_id, distance FROM gpu_kmeans_assign(%s, %s::float8[], device => 'cpu') "
                    "ORDER BY id", [query, array_literal(C)])
        rows = cur.fetchall()
    return np.array([r[1] for r in rows]), np.array([r[2] for r in rows])


def sklearn_model(C):
    """A fitted scikit-learn KMeans whose cluster_centers_ are exactly C: fitted on C itself
    (one row per cluster), then its centres set to C bit for bit (its own update rounds)."""
    km = KMeans(n_clusters=len(C), init=C, n_init=1, max_iter=1).fit(C)
    np.testing.assert_allclose(km.cluster_centers_, C, rtol=1e-12, atol=1e-12)
    km.cluster_centers_ = C.copy()
    return km


def total_inertia(conn, query, k, **kw):
    args = "".join(f", {name} => %s" for name in kw)
    with conn.cursor() as cur:
        cur.execute(f"SELECT sum(inertia) FROM gpu_kmeans_centroids(%s, %s{args}, device => 'cpu')",
                    [query, k, *kw.values()])
        return float(cur.fetchone()[0])


@pytest.mark.parametrize("d,k,decimals", [(2, 30, 1), (5, 12, None), (48, 20, None)])
def test_assign_matches_sklearn_predict(conn, d, k, decimals):
    """Fit on a sample, assign every row: scikit-learn's predict gives the same labels off
    near-ties, and the distance is the distance to the assigned centroid."""
    X, _ = make_blobs(n_samples=20000, n_features=d, centers=k, cluster_std=1.5, random_state=d)
    if decimals is not None:  # few decimals: duplicate rows and exact ties abound
        X = np.round(X, decimals)
    X = np.vstack([X, np.full((1, d), 1e4)])  # a far outlier
    X = X.astype(np.float32)
    load_matrix(conn, "km_model", X)
    C = centroids_of(conn, "SELECT id, f FROM km_model WHERE id % 5 = 0", k, seed=3)
    assert C.shape == (k, d)

    labels, dist = assign(conn, "SELECT id, f FROM km_model", C)
    km = sklearn_model(C)
    X64 = X.astype(np.float64)
    expect = km.predict(X64)
    D = km.transform(X64)
    best = D.min(axis=1)
    second = np.partition(D, 1, axis=1)[:, 1]
    near_tie = second - best <= 1e-9 * (1 + best)
    differ = labels != expect
    assert not np.any(differ & ~near_tie), f"{np.sum(differ & ~near_tie)} labels differ off near-ties"
    # on a near tie the label is one of the nearest
    assert np.all(D[np.arange(len(X)), labels] <= best + 1e-9 * (1 + best))
    np.testing.assert_allclose(dist, D[np.arange(len(X)), labels], rtol=1e-12, atol=1e-12)


def test_assign_is_the_fit_labels(conn):
    """Assigning the rows a model was fitted on reproduces gpu_kmeans's labels and distances."""
    X, _ = make_blobs(n_samples=6000, n_features=3, centers=15, cluster_std=2.0, random_state=4)
    load_matrix(conn, "km_model2", np.round(X, 1).astype(np.float32))
    q = "SELECT id, f FROM km_model2"
    C = centroids_of(conn, q, 15, seed=2, n_init=3)
    with conn.cursor() as cur:
        cur.execute("SELECT cluster_id, distance FROM gpu_kmeans(%s, 15, seed => 2, n_init => 3, "
                    "device => 'cpu') ORDER BY id", [q])
        fit = cur.fetchall()
    labels, dist = assign(conn, q, C)
    assert np.array_equal(labels, [r[0] for r in fit])
    assert np.array_equal(dist, [r[1] for r in fit])


def test_greedy_seeding_matches_sklearn_quality(conn):
    """Mean inertia over seeds 0..9 on 40 blobs: greedy k-means++ within 2 % of
    scikit-learn's default KMeans(n_init=1) (the same rules: greedy k-means++,
    tol 1e-4, max_iter 300), and better than plain k-means++."""
    X, _ = make_blobs(n_samples=50000, n_features=2, centers=40, random_state=0)
    X = X.astype(np.float32)
    load_matrix(conn, "km_quality", X)
    q = "SELECT id, f FROM km_quality"
    seeds = range(10)
    greedy = np.mean([total_inertia(conn, q, 40, seed=s) for s in seeds])
    plain = np.mean([total_inertia(conn, q, 40, seed=s, init="plain-k-means++") for s in seeds])
    ref = np.mean([KMeans(n_clusters=40, n_init=1, random_state=s).fit(X.astype(np.float64)).inertia_
                   for s in seeds])
    assert greedy <= ref * 1.02, (greedy, ref)
    assert greedy < plain, (greedy, plain)


def test_n_init_keeps_the_best_run(conn):
    """n_init runs: never worse than the first run (which is the n_init = 1 run with the
    same seed), and on blobs where single runs get stuck no worse than their mean."""
    X, _ = make_blobs(n_samples=20000, n_features=8, centers=30, random_state=7)
    load_matrix(conn, "km_ninit", X.astype(np.float32))
    q = "SELECT id, f FROM km_ninit"
    single = [total_inertia(conn, q, 30, seed=s) for s in range(8)]
    for s in range(3):
        assert total_inertia(conn, q, 30, seed=s, n_init=8) <= single[s]
    assert total_inertia(conn, q, 30, seed=0, n_init=8) <= np.mean(single)


def test_issue_3971_grid(conn):
    """PostGIS #3971: a 45 x 45 integer grid in 81 clusters; the smallest cluster should
    hold 16 to 25 points.  The default seed passes, and greedy k-means++ passes for at
    least as many of seeds 0..19 as plain k-means++."""
    q = "SELECT x * 45 + y, x, y FROM generate_series(0, 44) x, generate_series(0, 44) y"

    def smallest(seed, init):
        with conn.cursor() as cur:
            cur.execute("SELECT min(n) FROM (SELECT count(*) AS n FROM gpu_kmeans(%s, 81, seed => %s, "
                        "init => %s, device => 'cpu') GROUP BY cluster_id) c", [q, seed, init])
            return cur.fetchone()[0]

    assert 16 <= smallest(0, "k-means++") <= 25
    greedy = sum(16 <= smallest(s, "k-means++") <= 25 for s in range(20))
    plain = sum(16 <= smallest(s, "plain-k-means++") <= 25 for s in range(20))
    assert greedy >= 15 and greedy > plain, (greedy, plain)
