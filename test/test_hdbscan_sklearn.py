"""
gpu_hdbscan against scikit-learn's HDBSCAN (>= 1.3) and the hdbscan library.

1. Through the tie rule: the minimum spanning tree of the mutual reachability
   graph under the order (weight, lower row, higher row), computed here by
   brute force with the same arithmetic (dist2 summed over the features in
   order, in double), fed to scikit-learn's own make_single_linkage and
   tree_to_labels: labels (up to numbering) and probabilities must be equal,
   bit for bit, on data full of ties (rounded coordinates, duplicates,
   lattices), for every selection argument.
2. On tie-free data, scikit-learn's HDBSCAN itself gives the same labels up
   to numbering, and the same probabilities.
3. GLOSH: the hdbscan library's outlier_scores_ on tie-free data.

These need scikit-learn >= 1.3 and the hdbscan library, which Debian 12 does
not have: test/run-all runs this file in a virtual environment that has them
(see README, "Tests").  Elsewhere the module is skipped with its reason.
"""

import numpy as np
import pytest

from conftest import load_matrix

sklearn = pytest.importorskip("sklearn")
if tuple(int(p) for p in sklearn.__version__.split(".")[:2]) < (1, 3):
    pytest.skip(f"scikit-learn {sklearn.__version__} has no HDBSCAN (needs 1.3)",
                allow_module_level=True)
from sklearn.cluster import HDBSCAN  # noqa: E402
from sklearn.cluster._hdbscan._linkage import MST_edge_dtype, make_single_linkage  # noqa: E402
from sklearn.cluster._hdbscan._tree import _condense_tree, tree_to_labels  # noqa: E402


def dist_matrix(X):
    """Euclidean distances as gpuclust computes them: dist2 in double, features in order."""
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    s = np.zeros((n, n))
    for k in range(d):
        t = X[:, k][:, None] - X[:, k][None, :]
        s = s + t * t
    return np.sqrt(s)


def tie_rule_mst(X, min_samples):
    """Core distances and the MST under (w, lo, hi), by Prim's algorithm on all pairs."""
    D = dist_matrix(X)
    n = len(D)
    core = np.sort(D, axis=1)[:, min_samples - 1]
    W = np.maximum(np.maximum(core[:, None], core[None, :]), D)
    idx = np.arange(n)
    bw = np.full(n, np.inf)
    blo = np.full(n, n)
    bhi = np.full(n, n)
    in_tree = np.zeros(n, bool)
    cur = 0
    edges = []
    for _ in range(n - 1):
        in_tree[cur] = True
        w, lo, hi = W[cur], np.minimum(cur, idx), np.maximum(cur, idx)
        better = (~in_tree) & ((w < bw) | ((w == bw) & ((lo < blo) | ((lo == blo) & (hi < bhi)))))
        bw[better], blo[better], bhi[better] = w[better], lo[better], hi[better]
        cand = np.flatnonzero(~in_tree)
        order = np.lexsort((bhi[cand], blo[cand], bw[cand]))
        nxt = cand[order[0]]
        edges.append((bw[nxt], int(blo[nxt]), int(bhi[nxt])))
        cur = nxt
    edges.sort()
    return edges, core


def tree_labels(edges, min_cluster_size, method="eom", allow_single=False, epsilon=0.0,
                max_size=None):
    mst = np.array([(lo, hi, w) for (w, lo, hi) in edges], dtype=MST_edge_dtype)
    labels, probs = tree_to_labels(make_single_linkage(mst), min_cluster_size, method,
                                   allow_single, epsilon, max_size)
    return np.asarray(labels), np.asarray(probs)


def reference(X, min_cluster_size, min_samples=None, **kw):
    """Labels and probabilities of scikit-learn's tree_to_labels on the tie-ruled MST."""
    edges, core = tie_rule_mst(X, min_samples or min_cluster_size)
    labels, probs = tree_labels(edges, min_cluster_size, kw.get("method", "eom"),
                                kw.get("allow_single", False), kw.get("epsilon", 0.0),
                                kw.get("max_size"))
    return labels, probs, core


def tie_order_free(X, min_cluster_size, min_samples, method="eom"):
    """Whether scikit-learn's labels for X are the same for every order of tied edges.

    The tie-ruled MST's edges are shuffled and sorted by weight alone (a stable
    sort), six times; the labels of each order are compared.  Where tied
    weights exist the MST itself is not unique, but every tie order of Kruskal
    on the tie-ruled tree is one scikit-learn's sort could produce.
    """
    edges, _ = tie_rule_mst(X, min_samples)
    base = renumber(tree_labels(edges, min_cluster_size, method)[0])
    rng = np.random.default_rng(0)
    for _ in range(6):
        perm = [edges[i] for i in rng.permutation(len(edges))]
        perm.sort(key=lambda e: e[0])
        if not (renumber(tree_labels(perm, min_cluster_size, method)[0]) == base).all():
            return False
    return True


def renumber(labels):
    """Clusters numbered 0, 1, ... by first appearance, noise -1."""
    out = np.full(len(labels), -1)
    seen = {}
    for i, c in enumerate(labels):
        if c >= 0:
            out[i] = seen.setdefault(c, len(seen))
    return out


def run(conn, table, min_cluster_size, min_samples=None, method="eom", allow_single=False,
        epsilon=0.0, max_size=None, device="cpu"):
    with conn.cursor() as cur:
        cur.execute(
            "SELECT cluster_id, probability, outlier_score FROM gpu_hdbscan("
            "%s, min_cluster_size => %s, min_samples => %s, cluster_selection_epsilon => %s,"
            " cluster_selection_method => %s, allow_single_cluster => %s,"
            " max_cluster_size => %s, device => %s)",
            (f"SELECT id, f FROM {table} ORDER BY id", min_cluster_size, min_samples, epsilon,
             method, allow_single, max_size, device))
        rows = cur.fetchall()
    labels = np.array([-1 if r[0] is None else r[0] for r in rows])
    return labels, np.array([r[1] for r in rows]), np.array([r[2] for r in rows])


def tie_data(seed):
    """Data shaped like real coordinates: rounded to 1 decimal, duplicates, close blobs, far outliers."""
    rng = np.random.default_rng(seed)
    parts = [rng.normal(c, s, size=(m, 2)) for c, s, m in
             [((0, 0), 0.4, 150), ((3, 0), 0.3, 120), ((3.2, 0.6), 0.2, 60), ((-4, 4), 1.0, 100)]]
    X = np.vstack(parts + [rng.uniform(-8, 8, size=(40, 2)), [[1e4, -1e4]]])
    X = np.round(X, 1)
    X = np.vstack([X, X[:30]])          # exact duplicates
    return X[rng.permutation(len(X))]


def tie_data_wide(seed, d):
    """tie_data in d features (16, 64: the CPU back end's pair engine): rounded to 1 decimal,
    duplicates, a far outlier."""
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-3, 3, size=(4, d))
    parts = [rng.normal(c, s, size=(m, d)) for c, s, m in zip(centers, (0.4, 0.3, 0.6, 1.0),
                                                               (120, 100, 80, 60))]
    X = np.vstack(parts + [rng.uniform(-8, 8, size=(30, d)), np.full((1, d), 1e4)])
    X = np.round(X, 1)
    X = np.vstack([X, X[:25]])          # exact duplicates
    return X[rng.permutation(len(X))]


def data_set(name):
    if name == "lattice":
        return lattice()
    if name.startswith("wide"):
        return tie_data_wide(7, int(name[4:]))
    return tie_data(int(name[-1]))


def lattice():
    g = np.arange(0, 12) * 0.5
    X = np.array([(x, y) for x in g for y in g])
    X = np.vstack([X, X + [20, 0]])
    return X


CASES = [
    dict(min_cluster_size=10),
    dict(min_cluster_size=10, min_samples=3),
    dict(min_cluster_size=5, min_samples=1),
    dict(min_cluster_size=15, method="leaf"),
    dict(min_cluster_size=10, epsilon=0.5),
    dict(min_cluster_size=10, epsilon=0.5, method="leaf"),
    dict(min_cluster_size=8, allow_single=True),
    dict(min_cluster_size=8, allow_single=True, epsilon=2.0),
    dict(min_cluster_size=5, max_size=80),
]


def set_path(conn, data):
    """A data set named "...-pairs" runs with gpuclust.pair_path forced to the pair engine."""
    with conn.cursor() as cur:
        cur.execute("SET gpuclust.pair_path = %s", ("pairs" if data.endswith("-pairs") else "auto",))
    return data_set(data[:-len("-pairs")] if data.endswith("-pairs") else data)


# wide64 runs on the CPU back end's pair engine (from 32 features on), wide16-pairs on the
# engine by gpuclust.pair_path, the others on its k-d tree
@pytest.mark.parametrize("data", ["ties0", "ties1", "lattice", "wide16", "wide16-pairs", "wide64"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_tie_rule_equals_sklearn_tree(conn, data, case):
    X = set_path(conn, data)
    kw = CASES[case]
    load_matrix(conn, "hdb_ties", X, sqltype="double precision")
    labels, probs, _ = run(conn, "hdb_ties", **kw)
    ref_labels, ref_probs, _ = reference(
        X, kw["min_cluster_size"], kw.get("min_samples"), method=kw.get("method", "eom"),
        allow_single=kw.get("allow_single", False), epsilon=kw.get("epsilon", 0.0),
        max_size=kw.get("max_size"))
    assert (renumber(ref_labels) == labels).all(), \
        f"{(renumber(ref_labels) != labels).sum()} labels differ"
    assert np.array_equal(probs, ref_probs), f"max diff {np.abs(probs - ref_probs).max()}"


@pytest.mark.parametrize("data", ["ties0", "ties1", "lattice", "wide16", "wide16-pairs", "wide64"])
@pytest.mark.parametrize("mcs,ms", [(5, None), (10, 3), (15, None), (2, 1)])
def test_tree_rows_equal_sklearn_condensed_tree(conn, data, mcs, ms):
    """gpu_hdbscan_tree's rows after the root: scikit-learn's _condense_tree, row for row."""
    X = set_path(conn, data)
    n = len(X)
    load_matrix(conn, "hdb_tree", X, sqltype="double precision")
    edges, _ = tie_rule_mst(X, ms or mcs)
    mst = np.array([(lo, hi, w) for (w, lo, hi) in edges], dtype=MST_edge_dtype)
    ref = _condense_tree(make_single_linkage(mst), mcs)
    with conn.cursor() as cur:
        cur.execute("SELECT parent, child, child_id, lambda_val, child_size FROM gpu_hdbscan_tree("
                    "'SELECT id, f FROM hdb_tree ORDER BY id', %s, %s, device => 'cpu')", (mcs, ms))
        rows = cur.fetchall()
    assert rows[0][0] is None and rows[0][1] == 0 and rows[0][4] == n
    rows = rows[1:]
    assert len(rows) == len(ref), f"{len(rows)} rows, scikit-learn has {len(ref)}"
    want = [(int(r["parent"]) - n,
             int(r["child"]) - n if r["child"] >= n else None,
             int(r["child"]) if r["child"] < n else None,
             float(r["value"]), int(r["cluster_size"])) for r in ref]
    got = [tuple(r) for r in rows]
    bad = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
    assert not bad, f"{len(bad)} rows differ, first at {bad[0]}: {got[bad[0]]} != {want[bad[0]]}"
    # a tree that splits, so that the order of its clusters is tested
    assert sum(1 for w in want if w[1] is not None) >= 2


def tie_free(seed, n=600, d=2):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-10, 10, size=(5, d))
    X = np.vstack([rng.normal(c, rng.uniform(0.3, 1.2), size=(n // 6, d)) for c in centers]
                  + [rng.uniform(-14, 14, size=(n - 5 * (n // 6), d))])
    return X


# Fixed data sets; those whose scikit-learn answer does not depend on the
# order of tied edges are compared, and there must be many of them.
FREE_CASES = [(seed, d, mcs, ms, method)
              for seed in range(1, 7) for d in (2, 3, 5, 8, 16, 64)
              for (mcs, ms, method) in [(15, 15, "eom"), (10, 4, "eom"), (20, 20, "leaf"),
                                        (10, 1, "eom")]]


def test_sklearn_hdbscan_where_tie_order_does_not_matter(conn):
    compared = 0
    for seed, d, mcs, ms, method in FREE_CASES:
        X = tie_free(seed, n=400, d=d)
        if not tie_order_free(X, mcs, ms, method):
            continue
        compared += 1
        load_matrix(conn, "hdb_free", X, sqltype="double precision")
        labels, probs, _ = run(conn, "hdb_free", mcs, ms, method=method)
        sk = HDBSCAN(min_cluster_size=mcs, min_samples=ms, cluster_selection_method=method,
                     copy=True).fit(X)
        assert (renumber(sk.labels_) == labels).all(), (seed, d, mcs, ms, method)
        np.testing.assert_allclose(probs, sk.probabilities_, rtol=1e-12, atol=1e-12,
                                   err_msg=str((seed, d, mcs, ms, method)))
    assert compared >= 30, f"only {compared} of {len(FREE_CASES)} data sets were comparable"


def test_sklearn_hdbscan_float32(conn):
    compared = 0
    for seed in range(1, 5):
        X = tie_free(seed, n=400, d=8).astype(np.float32)
        if not tie_order_free(X.astype(np.float64), 12, 12):
            continue
        compared += 1
        load_matrix(conn, "hdb_f32", X, sqltype="real")
        labels, _, _ = run(conn, "hdb_f32", 12)
        sk = HDBSCAN(min_cluster_size=12, copy=True).fit(X.astype(np.float64))
        assert (renumber(sk.labels_) == labels).all(), seed
    assert compared >= 2


def test_glosh_against_hdbscan_library(conn):
    hdbscan = pytest.importorskip("hdbscan")
    compared = 0
    for seed in range(1, 7):
        X = tie_free(seed, n=400, d=8)
        if not tie_order_free(X, 15, 5):
            continue
        compared += 1
        load_matrix(conn, "hdb_glosh", X, sqltype="double precision")
        labels, _, scores = run(conn, "hdb_glosh", 15, 5)
        # the library's min_samples does not count the row itself
        lib = hdbscan.HDBSCAN(min_cluster_size=15, min_samples=4, approx_min_span_tree=False,
                              algorithm="prims_kdtree").fit(X)
        assert (renumber(lib.labels_) == labels).all(), seed
        np.testing.assert_allclose(scores, lib.outlier_scores_, rtol=1e-9, atol=1e-12,
                                   err_msg=str(seed))
    assert compared >= 2


def test_gpu_hdbscan_window_equals_call(conn):
    """gpu_cluster_hdbscan per partition equals gpu_hdbscan of each partition."""
    X = tie_data(7)
    load_matrix(conn, "hdb_win", X, sqltype="double precision")
    with conn.cursor() as cur:
        cur.execute("SELECT id, gpu_cluster_hdbscan(f, 8) OVER (PARTITION BY id % 2 ORDER BY id)"
                    " FROM hdb_win ORDER BY id")
        win = {r[0]: r[1] for r in cur.fetchall()}
        for part in (0, 1):
            cur.execute("SELECT id, cluster_id FROM gpu_hdbscan("
                        "'SELECT id, f FROM hdb_win WHERE id % 2 = " + str(part) + " ORDER BY id', 8)")
            for i, c in cur.fetchall():
                assert win[i] == c
