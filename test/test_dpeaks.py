"""
gpu_density_peaks against a plain O(n^2) NumPy reference written here from
the definitions (Rodriguez & Laio 2014), on R15-like and D31-like sets
(15 and 31 Gaussian clusters).

Expected: the same dc (the exact k-th smallest pair distance), identical
centres and labels, rho within 1e-6 relative for the gaussian kernel and
exactly equal for the cutoff kernel, delta within 1e-9 relative.

The tests run on the device gpuclust.device chooses (the CPU in CI); on a GPU
machine set PGOPTIONS='-c gpuclust.device=gpu' to hold the GPU to the same
reference.
"""

import math
import re

import numpy as np
import pytest

from conftest import load_matrix


# ------------------------------------------------------------------ data
def r15_like(seed=15):
    """600 points: 15 clusters of 40, eight on an outer ring, seven inside (like R15)."""
    rng = np.random.default_rng(seed)
    centres = [(10 + 6 * math.cos(a), 10 + 6 * math.sin(a))
               for a in np.linspace(0, 2 * math.pi, 8, endpoint=False)]
    centres += [(10 + 2.5 * math.cos(a), 10 + 2.5 * math.sin(a))
                for a in np.linspace(0, 2 * math.pi, 6, endpoint=False)]
    centres += [(10, 10)]
    X = np.concatenate([rng.normal(c, 0.35, size=(40, 2)) for c in centres])
    return X.astype(np.float32)


def d31_like(seed=31):
    """3100 points: 31 Gaussian clusters of 100 on a 30 x 30 square (like D31)."""
    rng = np.random.default_rng(seed)
    centres = []
    while len(centres) < 31:
        c = rng.uniform(2, 28, size=2)
        if all(np.hypot(*(c - o)) > 3.5 for o in centres):
            centres.append(c)
    X = np.concatenate([rng.normal(c, 0.6, size=(100, 2)) for c in centres])
    return rng.permutation(X).astype(np.float32)


# ------------------------------------------------------------------ reference
def pair_dist(X):
    """d_ij in double from the float inputs, dimensions summed in order."""
    X = X.astype(np.float64)
    d2 = np.zeros((len(X), len(X)))
    for k in range(X.shape[1]):
        t = X[:, k][:, None] - X[:, k][None, :]
        d2 = d2 + t * t
    return np.sqrt(d2)


def reference(X, kernel, n_clusters=None, dc=None, rate=0.02, rho_min=None, delta_min=None,
              D=None):
    """The expected answer; D: the distance matrix (default: Euclidean of X)."""
    n = len(X)
    if D is None:
        D = pair_dist(X)
    off = ~np.eye(n, dtype=bool)
    if dc is None:
        k = math.ceil(rate * n * (n - 1))
        dc = np.sort(D[off])[k - 1]
    if kernel == "gaussian":
        # math.fsum: correctly rounded, so the order of the terms cannot
        # matter (duplicate rows get exactly equal rho)
        terms = np.where(off, np.exp(-(D / dc) ** 2), 0.0)
        rho = np.array([math.fsum(row) for row in terms])
    else:
        rho = ((D < dc) & off).sum(axis=1).astype(np.float64)
    order = np.lexsort((np.arange(n), -rho))       # denser first, then query order
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    delta = np.empty(n)
    nbr = np.full(n, -1)
    delta[order[0]] = D[order[0]].max()
    for r in range(1, n):
        i = order[r]
        denser = order[:r]
        dd = D[i, denser]
        best = dd.min()
        # equal distances: the denser one, i.e. the first in density order
        nbr[i] = denser[np.flatnonzero(dd == best)[0]]
        delta[i] = best
    center = np.zeros(n, dtype=bool)
    center[order[0]] = True
    if n_clusters is not None:
        gamma = rho * delta
        others = order[1:]
        pick = others[np.lexsort((rank[others], -gamma[others]))][: n_clusters - 1]
        center[pick] = True
    else:
        center |= (rho >= rho_min) & (delta >= delta_min)
    label = np.full(n, -1)
    nxt = 0
    for i in order:
        if center[i]:
            label[i] = nxt
            nxt += 1
        else:
            label[i] = label[nbr[i]]
    return dict(dc=dc, rho=rho, delta=delta, center=center, label=label)


# ------------------------------------------------------------------ the function
def density_peaks(conn, table, **args):
    """Runs gpu_density_peaks over table(id, f) ordered by id; returns arrays and dc."""
    names = ", ".join(f"{k} => %({k})s" for k in args)
    conn.notices.clear()
    with conn.cursor() as cur:
        cur.execute("SET gpuclust.timing = on")
        cur.execute(
            "SELECT id, cluster_id, rho, delta, is_center FROM gpu_density_peaks("
            f"'SELECT id, f FROM {table} ORDER BY id'" + (", " + names if names else "") + ")",
            args)
        rows = cur.fetchall()
        cur.execute("RESET gpuclust.timing")
    rows.sort()
    ids = np.array([r[0] for r in rows])
    dcs = [float(m.group(1)) for m in (re.search(r" dc=(\S+)", s) for s in conn.notices) if m]
    return dict(ids=ids,
                label=np.array([r[1] for r in rows]),
                rho=np.array([r[2] for r in rows]),
                delta=np.array([r[3] for r in rows]),
                center=np.array([r[4] for r in rows]),
                dc=dcs[-1] if dcs else None)


def assert_matches(got, ref, kernel):
    assert got["dc"] is not None
    assert got["dc"] == pytest.approx(ref["dc"], rel=1e-8)
    if kernel == "gaussian":
        np.testing.assert_allclose(got["rho"], ref["rho"], rtol=1e-6)
    else:
        np.testing.assert_array_equal(got["rho"], ref["rho"])
    np.testing.assert_allclose(got["delta"], ref["delta"], rtol=1e-9)
    np.testing.assert_array_equal(got["center"], ref["center"])
    np.testing.assert_array_equal(got["label"], ref["label"])


SETS = {"r15": (r15_like, 15), "d31": (d31_like, 31)}


@pytest.mark.parametrize("name", ["r15", "d31"])
@pytest.mark.parametrize("kernel", ["gaussian", "cutoff"])
def test_n_clusters_against_reference(conn, name, kernel):
    make, k = SETS[name]
    X = make()
    load_matrix(conn, "dp_ref", X)
    got = density_peaks(conn, "dp_ref", n_clusters=k, kernel=kernel)
    ref = reference(X, kernel, n_clusters=k)
    assert_matches(got, ref, kernel)
    # the clusters are the generating blobs: every centre sits in a different one
    assert got["center"].sum() == k


@pytest.mark.parametrize("kernel", ["gaussian", "cutoff"])
def test_thresholds_against_reference(conn, kernel):
    X = d31_like()
    load_matrix(conn, "dp_ref", X)
    ref0 = reference(X, kernel, n_clusters=31)
    # thresholds read off the reference's decision graph: just below the 31st centre
    rho_min = float(np.min(ref0["rho"][ref0["center"]])) * 0.5
    delta_min = float(np.sort(ref0["delta"])[-31]) * 0.9
    got = density_peaks(conn, "dp_ref", kernel=kernel, rho_min=rho_min, delta_min=delta_min)
    ref = reference(X, kernel, rho_min=rho_min, delta_min=delta_min)
    assert_matches(got, ref, kernel)


@pytest.mark.parametrize("kernel", ["gaussian", "cutoff"])
def test_dc_given_and_rate(conn, kernel):
    X = r15_like(seed=3)
    load_matrix(conn, "dp_ref", X)
    got = density_peaks(conn, "dp_ref", n_clusters=15, dc=0.5, kernel=kernel)
    assert_matches(got, reference(X, kernel, n_clusters=15, dc=0.5), kernel)
    got = density_peaks(conn, "dp_ref", n_clusters=15, neighbor_rate=0.011, kernel=kernel)
    assert_matches(got, reference(X, kernel, n_clusters=15, rate=0.011), kernel)


def test_duplicates_and_query_order(conn):
    """Duplicate rows have equal rho: the one first in the query is denser."""
    X = r15_like(seed=5)
    X = np.concatenate([X, X[:100]])
    load_matrix(conn, "dp_ref", X)
    for kernel in ("gaussian", "cutoff"):
        got = density_peaks(conn, "dp_ref", n_clusters=15, kernel=kernel)
        assert_matches(got, reference(X, kernel, n_clusters=15), kernel)
        # a copy is never denser than its original, which comes first
        dup = np.arange(600, 700)
        assert np.all(got["rho"][dup] == got["rho"][dup - 600])
        assert np.all(got["delta"][dup] == 0.0)
        assert np.all(got["label"][dup] == got["label"][dup - 600])


def test_higher_dimension_matches_reference(conn):
    """Five dimensions: no grid index, every pair scanned."""
    rng = np.random.default_rng(9)
    centres = rng.uniform(0, 20, size=(6, 5))
    X = np.concatenate([rng.normal(c, 0.8, size=(120, 5)) for c in centres]).astype(np.float32)
    load_matrix(conn, "dp_ref", X)
    for kernel in ("gaussian", "cutoff"):
        got = density_peaks(conn, "dp_ref", n_clusters=6, kernel=kernel)
        assert_matches(got, reference(X, kernel, n_clusters=6), kernel)
