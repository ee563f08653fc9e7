"""
Differential test of gpu_dbscan against scikit-learn's DBSCAN.

Each generated set is loaded into a table, clustered by gpu_dbscan and by
scikit-learn on the same float32 values, and compared:

* the core points are identical (scikit-learn's core_sample_indices_);
* the noise points are identical;
* the core points are partitioned identically, up to renumbering;
* clusters are numbered 0, 1, ... by first appearance in query order;
* every border point lies within eps of a core point of its cluster, and its
  cluster is that of the first core point (in query order) within eps.

scikit-learn assigns a border point to whichever cluster its expansion reaches
first, so the border rule is checked against a neighbour search instead.
"""

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_moons

from conftest import dbscan, load_matrix, load_xy
from dbscan_reference import Reference, as_float32, first_differences, renumber, same_partition


def blobs_with_noise(n, d, centers, std, box, noise_frac, seed):
    """Gaussian blobs with centres in [-box, box]^d plus uniform noise over the same box."""
    rng = np.random.default_rng(seed)
    n_noise = int(n * noise_frac)
    X, _ = make_blobs(n_samples=n - n_noise, n_features=d, centers=centers,
                      cluster_std=std, center_box=(-box, box), random_state=seed)
    noise = rng.uniform(-box - 3 * std, box + 3 * std, size=(n_noise, d))
    X = np.vstack([X, noise])
    return X[rng.permutation(n)]


def moons(n, seed):
    X, _ = make_moons(n_samples=n, noise=0.06, random_state=seed)
    return X


def uniform(n, d, seed):
    return np.random.default_rng(seed).uniform(0.0, 1.0, size=(n, d))


def duplicates(n, distinct, d, seed):
    """n points drawn with replacement from `distinct` random locations."""
    rng = np.random.default_rng(seed)
    sites = rng.uniform(0.0, 10.0, size=(distinct, d))
    return sites[rng.integers(0, distinct, size=n)]


# name -> (generator, eps, min_pts); sizes keep the whole file to a minute or so.
SETS = {
    "blobs_2d_100k": (lambda: blobs_with_noise(100_000, 2, 20, 1.0, 50.0, 0.10, 1), 0.25, 10),
    "blobs_2d_5k": (lambda: blobs_with_noise(5_000, 2, 12, 0.5, 5.0, 0.15, 2), 0.3, 6),
    "moons_20k": (lambda: moons(20_000, 3), 0.03, 8),
    "uniform_2d_30k": (lambda: uniform(30_000, 2, 4), 0.0075, 6),
    "uniform_3d_30k": (lambda: uniform(30_000, 3, 5), 0.04, 8),
    "duplicates_2d_30k": (lambda: duplicates(30_000, 3_000, 2, 6), 0.15, 12),
    "blobs_1d_20k": (lambda: blobs_with_noise(20_000, 1, 8, 0.5, 40.0, 0.10, 7), 0.01, 6),
    "blobs_8d_20k": (lambda: blobs_with_noise(20_000, 8, 10, 1.0, 20.0, 0.05, 8), 1.6, 10),
    "blobs_64d_5k": (lambda: blobs_with_noise(5_000, 64, 8, 1.0, 10.0, 0.05, 9), 10.5, 10),
    "uniform_64d_3k": (lambda: uniform(3_000, 64, 10), 2.5, 5),
    "blobs_1024d_1500": (lambda: blobs_with_noise(1_500, 1024, 5, 1.0, 3.0, 0.05, 14), 44.0, 8),
    "blobs_2d_minpts1": (lambda: blobs_with_noise(8_000, 2, 10, 0.5, 20.0, 0.2, 11), 0.05, 1),
    "blobs_2d_minpts2": (lambda: blobs_with_noise(8_000, 2, 10, 0.5, 20.0, 0.2, 12), 0.05, 2),
}


def check(ref, ids, query_ids, labels, core):
    """Compare gpu_dbscan's output (ids, labels, core) with the reference."""
    n = ref.X.shape[0]
    assert ref.ties == 0, (
        f"the generated set has {ref.ties} points with a neighbour at distance "
        f"eps within 1e-12 relative: choose another eps")
    # The reference agrees with itself: a neighbour count and scikit-learn.
    assert np.array_equal(ref.core, ref.sk_core)

    assert ids.shape == (n,), f"{ids.size} rows returned for {n} input rows"
    assert np.array_equal(ids, query_ids), "rows are not returned in query order"

    assert np.array_equal(core, ref.core), (
        "is_core differs from scikit-learn's core_sample_indices_: "
        + first_differences(ids, core, ref.core))

    noise = labels < 0
    sk_noise = ref.sk_labels < 0
    assert np.array_equal(noise, sk_noise), (
        "noise differs from scikit-learn: " + first_differences(ids, noise, sk_noise))

    assert same_partition(labels[ref.core], ref.sk_labels[ref.core]), \
        "the core points are partitioned differently from scikit-learn"

    # Numbering by first appearance in query order.
    assert np.array_equal(labels, renumber(labels)), \
        "clusters are not numbered 0, 1, ... by first appearance in query order"

    # Border points: within eps of a core point of their own cluster, and in the
    # cluster of the first core point within eps.
    border = np.flatnonzero((~core) & (labels >= 0))
    if border.size:
        neigh = ref.tree.query_radius(ref.X[border], ref.eps)
        for i, nb in zip(border, neigh):
            nb = nb[core[nb]]
            assert nb.size > 0, f"border point id {ids[i]} has no core point within eps"
            assert labels[i] in labels[nb], \
                f"border point id {ids[i]} has no core point of its cluster within eps"
            assert labels[i] == labels[nb.min()], (
                f"border point id {ids[i]} is in cluster {labels[i]}, but the first core "
                f"point within eps (id {ids[nb.min()]}) is in cluster {labels[nb.min()]}")

    # All of the above together: the whole answer, numbering included.
    assert np.array_equal(labels, ref.labels), \
        "cluster_id differs from the reference: " + first_differences(ids, labels, ref.labels)


@pytest.mark.parametrize("name", sorted(SETS))
def test_against_sklearn(conn, name):
    gen, eps, min_pts = SETS[name]
    X = as_float32(gen())
    n = X.shape[0]
    ref = Reference(X, eps, min_pts)
    # A set that has no clusters, or nothing but one cluster, tests little.
    assert ref.n_clusters >= 2, f"{name}: the generated set has {ref.n_clusters} clusters"
    if min_pts > 1:
        assert (~ref.core).any(), f"{name}: every point is core"

    table = f"sk_{name}"
    load_matrix(conn, table, X)
    ids, labels, core = dbscan(conn, f"SELECT id, f FROM {table} ORDER BY id", eps, min_pts)
    check(ref, ids, np.arange(n), labels, core)


def test_border_rule_is_exercised():
    """The blob sets above contain border points reachable from two clusters."""
    gen, eps, min_pts = SETS["blobs_2d_5k"]
    ref = Reference(as_float32(gen()), eps, min_pts)
    assert ref.border.sum() > 100
    assert ref.contested >= 5


def test_query_order_decides(conn):
    """The same rows in reverse query order: numbering and border rule follow the query."""
    gen, eps, min_pts = SETS["blobs_2d_5k"]
    X = as_float32(gen())
    n = X.shape[0]
    load_matrix(conn, "sk_order", X)
    order = np.arange(n)[::-1]
    ref = Reference(X[order], eps, min_pts)
    assert ref.contested > 0
    ids, labels, core = dbscan(conn, "SELECT id, f FROM sk_order ORDER BY id DESC", eps, min_pts)
    check(ref, ids, order, labels, core)


def test_scalar_columns_and_int_ids(conn):
    """Features as three scalar double columns and an integer id: same answer."""
    gen, eps, min_pts = SETS["uniform_3d_30k"]
    X = as_float32(gen())
    n = X.shape[0]
    load_xy(conn, "sk_xyz", X)
    ref = Reference(X, eps, min_pts)
    ids, labels, core = dbscan(conn, "SELECT id::integer, x, y, z FROM sk_xyz ORDER BY id",
                               eps, min_pts)
    check(ref, ids, np.arange(n), labels, core)


def test_double_array_keeps_double_precision(conn):
    """A double precision[] column is clustered on its double values; with
    gpuclust.precision = single, on its values rounded to float32."""
    gen, eps, min_pts = SETS["blobs_2d_5k"]
    X = gen()                       # float64 values that float32 cannot hold exactly
    n = X.shape[0]
    load_matrix(conn, "sk_double", X, sqltype="double precision")
    ref = Reference(X, eps, min_pts)
    assert ref.ties == 0
    ids, labels, core = dbscan(conn, "SELECT id, f FROM sk_double ORDER BY id", eps, min_pts)
    check(ref, ids, np.arange(n), labels, core)
    with conn.cursor() as cur:
        cur.execute("SET gpuclust.precision = single")
    try:
        ids, labels, core = dbscan(conn, "SELECT id, f FROM sk_double ORDER BY id", eps, min_pts)
    finally:
        with conn.cursor() as cur:
            cur.execute("RESET gpuclust.precision")
    check(Reference(as_float32(X), eps, min_pts), ids, np.arange(n), labels, core)


def test_sparse_ids(conn):
    """Large, sparse bigint ids come back unchanged and in query order."""
    gen, eps, min_pts = SETS["moons_20k"]
    X = as_float32(gen())
    n = X.shape[0]
    rng = np.random.default_rng(13)
    ids_in = np.unique(rng.integers(-2**62, 2**62, size=2 * n, dtype=np.int64))
    ids_in = np.sort(rng.permutation(ids_in)[:n])
    load_matrix(conn, "sk_ids", X, ids=ids_in)
    ref = Reference(X, eps, min_pts)
    ids, labels, core = dbscan(conn, "SELECT id, f FROM sk_ids ORDER BY id", eps, min_pts)
    check(ref, ids, ids_in, labels, core)


def test_check_rejects_wrong_answers():
    """The comparison above fails on answers that break each rule."""
    gen, eps, min_pts = SETS["blobs_2d_5k"]
    ref = Reference(as_float32(gen()), eps, min_pts)
    n = ref.X.shape[0]
    ids = np.arange(n)
    check(ref, ids, ids, ref.labels.copy(), ref.core.copy())      # the right answer passes

    def rejected(labels=None, core=None, out_ids=None):
        labels = ref.labels.copy() if labels is None else labels
        core = ref.core.copy() if core is None else core
        with pytest.raises(AssertionError):
            check(ref, ids if out_ids is None else out_ids, ids, labels, core)

    # A contested border point given to the other cluster it touches.
    border = np.flatnonzero(ref.border)
    neigh = ref.tree.query_radius(ref.X[border], eps)
    for i, nb in zip(border, neigh):
        others = set(ref.labels[nb[ref.core[nb]]].tolist()) - {ref.labels[i]}
        if others:
            wrong = ref.labels.copy()
            wrong[i] = others.pop()
            rejected(labels=wrong)
            break
    else:
        pytest.fail("no contested border point to test with")
    # Clusters numbered in another order.
    wrong = ref.labels.copy()
    wrong[ref.labels == 0], wrong[ref.labels == 1] = 1, 0
    rejected(labels=wrong)
    # A core point reported as border, a border point as noise, rows out of order.
    wrong_core = ref.core.copy()
    wrong_core[np.flatnonzero(ref.core)[0]] = False
    rejected(core=wrong_core)
    wrong = ref.labels.copy()
    wrong[border[0]] = -1
    rejected(labels=wrong)
    rejected(out_ids=ids[::-1].copy())
