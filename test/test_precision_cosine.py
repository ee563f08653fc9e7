"""
Precision that follows the data, and the cosine metric, against references.

* Double precision: on places with five-decimal coordinates and round eps
  values, where many pairs lie at exactly eps in decimal, gpu_dbscan over
  double precision columns (and over a geometry column) equals PostGIS
  ST_ClusterDBSCAN(ST_MakePoint(lon, lat), eps, min_pts) OVER (ORDER BY id)
  row for row up to the cluster numbers; the same rows computed in single
  precision (gpuclust.precision = single) do not, which shows that the sets
  test what they are meant to.
* Cosine: gpu_dbscan against scikit-learn's DBSCAN(metric='cosine') and an
  exact NumPy reference; spherical k-means and density peaks against NumPy
  references written from the definitions (rows scaled to unit length in
  double precision, distance 1 - cos computed as half the squared distance
  of the unit rows).

The tests run on the device gpuclust.device chooses (the CPU in CI); on a GPU
machine set PGOPTIONS='-c gpuclust.device=gpu' to hold the GPU to the same
references.
"""

import re

import numpy as np
import pytest
from sklearn.cluster import DBSCAN

from conftest import dbscan, load_matrix, load_xy
from dbscan_reference import first_differences, renumber, same_partition
from test_dpeaks import reference as dpeaks_reference


# ------------------------------------------------------------------ double precision vs PostGIS
def places(n, eps, seed):
    """Towns around a few hundred centres, lon/lat with five decimals; a fifth
    of them have a neighbour at exactly eps east or north (in decimal), and a
    few are exact duplicates."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform([-10.0, 35.0], [30.0, 60.0], size=(300, 2))
    k = rng.integers(0, len(centres), size=n)
    X = centres[k] + rng.normal(0.0, 1.5 * eps, size=(n, 2))
    X = np.round(X, 5)
    m = n // 5
    src = rng.integers(0, n, size=m)
    step = np.where(rng.random((m, 1)) < 0.5, [[eps, 0.0]], [[0.0, eps]])
    X[rng.integers(0, n, size=m)] = np.round(X[src] + step, 5)
    dup = rng.integers(0, n, size=n // 50)
    X[rng.integers(0, n, size=n // 50)] = X[dup]
    return X


def postgis_labels(conn, table, eps, min_pts):
    with conn.cursor() as cur:
        cur.execute(f"""SELECT id, ST_ClusterDBSCAN(ST_MakePoint(lon, lat), %s, %s) OVER (ORDER BY id)
                        FROM {table} ORDER BY id""", (float(eps), int(min_pts)))
        rows = cur.fetchall()
    return np.array([-1 if r[1] is None else r[1] for r in rows], dtype=np.int64)


def differences_from(ours, core, pg):
    """Rows whose noise, core partition or border cluster differ from PostGIS."""
    if not np.array_equal(ours < 0, pg < 0):
        return np.flatnonzero((ours < 0) != (pg < 0))
    if not same_partition(ours[core], pg[core]):
        return np.flatnonzero(core)
    mapping = dict(zip(pg[core].tolist(), ours[core].tolist()))
    pg_mapped = np.array([mapping.get(v, -2) if v >= 0 else -1 for v in pg])
    return np.flatnonzero(ours != pg_mapped)


def exact_eps_pairs(X, eps):
    """Pairs whose coordinates differ by exactly eps in decimal along one axis."""
    key = {tuple(r): i for i, r in enumerate(np.round(X * 1e5).astype(np.int64).tolist())}
    s = int(round(eps * 1e5))
    count = 0
    for (x, y) in key:
        count += ((x + s, y) in key) + ((x, y + s) in key)
    return count


@pytest.mark.parametrize("n,eps,min_pts,seed", [
    (60_000, 0.05, 5, 1),
    (60_000, 0.1, 5, 2),
    (40_000, 0.2, 10, 3),
])
def test_double_precision_equals_postgis(postgis_conn, n, eps, min_pts, seed):
    conn = postgis_conn
    X = places(n, eps, seed)
    assert exact_eps_pairs(X, eps) > n // 20
    table = load_xy(conn, "places", X, names=["lon", "lat"])
    with conn.cursor() as cur:
        cur.execute(f"ALTER TABLE {table} ADD COLUMN geom geometry(Point)")
        cur.execute(f"UPDATE {table} SET geom = ST_MakePoint(lon, lat)")
    pg = postgis_labels(conn, table, eps, min_pts)
    assert pg.max() >= 10

    for query in (f"SELECT id, lon, lat FROM {table} ORDER BY id",
                  f"SELECT id, geom FROM {table} ORDER BY id",
                  f"SELECT id, ARRAY[lon, lat] FROM {table} ORDER BY id"):
        ids, ours, core = dbscan(conn, query, eps, min_pts)
        assert np.array_equal(ids, np.arange(n))
        bad = differences_from(ours, core, pg)
        assert bad.size == 0, f"{query}: " + first_differences(ids, ours, pg)

    # In single precision the same rows give another answer: the set tests
    # pairs that rounding to real decides the other way.
    with conn.cursor() as cur:
        cur.execute("SET gpuclust.precision = single")
    try:
        ids, ours, core = dbscan(conn, f"SELECT id, lon, lat FROM {table} ORDER BY id", eps, min_pts)
    finally:
        with conn.cursor() as cur:
            cur.execute("RESET gpuclust.precision")
    assert differences_from(ours, core, pg).size > 0


def timing_notice(conn, sql):
    conn.notices.clear()
    with conn.cursor() as cur:
        cur.execute("SET gpuclust.timing = on")
        cur.execute(sql)
        cur.fetchall()
        cur.execute("RESET gpuclust.timing")
    return [s for s in conn.notices if "gpuclust:" in s][-1]


@pytest.mark.parametrize("columns,precision", [
    ("x, y", "double"), ("x::real, y::real", "single"), ("x::numeric, y::int", "double"),
    ("ARRAY[x, y]", "double"), ("ARRAY[x, y]::real[]", "single"), ("x, y::real", "double"),
])
def test_notice_names_the_precision(conn, columns, precision):
    load_xy(conn, "pp", np.array([[0.5, 1.0], [0.25, 2.0], [3.0, 4.0]]))
    for fn in ("gpu_dbscan('SELECT id, {c} FROM pp', 1, 2)",
               "gpu_kmeans('SELECT id, {c} FROM pp', 2)",
               "gpu_density_peaks('SELECT id, {c} FROM pp', 2)"):
        note = timing_notice(conn, "SELECT * FROM " + fn.format(c=columns))
        assert re.search(rf" precision={precision}(\s|$)", note), note
        assert "metric=" not in note
    note = timing_notice(conn, f"SELECT * FROM gpu_dbscan('SELECT id, {columns} FROM pp', 1, 2, metric => 'cosine')")
    assert note.rstrip().endswith(f"precision={precision} metric=cosine"), note


# ------------------------------------------------------------------ cosine
def unit_rows(X, single):
    """The rows gpuclust computes with: scaled to unit length in double
    precision, rounded to single precision for real input."""
    X = np.asarray(X, dtype=np.float32 if single else np.float64).astype(np.float64)
    s = np.zeros(len(X))
    for j in range(X.shape[1]):
        s = s + X[:, j] * X[:, j]
    U = X / np.sqrt(s)[:, None]
    return U.astype(np.float32).astype(np.float64) if single else U


def cosine_dist(U):
    """Half the squared distance of unit rows, summed over features in order."""
    d2 = np.zeros((len(U), len(U)))
    for j in range(U.shape[1]):
        t = U[:, j][:, None] - U[:, j][None, :]
        d2 = d2 + t * t
    return d2 * 0.5


def embeddings(n_clusters, per, d, seed, spread=0.08, noise=0.1):
    """Directions with some spread, each row of a random length; uniform
    random directions as noise; a few duplicates and scaled copies."""
    rng = np.random.default_rng(seed)
    dirs = rng.normal(size=(n_clusters, d))
    X = np.concatenate([dirs[c] + spread * rng.normal(size=(per, d)) * np.linalg.norm(dirs[c])
                        for c in range(n_clusters)])
    X = np.concatenate([X, rng.normal(size=(int(noise * len(X)), d))])
    X *= rng.lognormal(0.0, 1.0, size=(len(X), 1))
    X = X[rng.permutation(len(X))]
    X[: len(X) // 100] = X[len(X) // 100: 2 * (len(X) // 100)]
    X[2 * (len(X) // 100): 3 * (len(X) // 100)] *= 7.0
    return X


def dbscan_exact(D, eps, min_pts):
    """The documented DBSCAN answer for a distance matrix (rows in query order)."""
    nb = D <= eps
    core = nb.sum(axis=1) >= min_pts
    sk = DBSCAN(eps=eps, min_samples=min_pts, metric="precomputed").fit(D)
    labels = np.where(core, sk.labels_, -1)
    for i in np.flatnonzero(~core):
        c = np.flatnonzero(nb[i] & core)
        if c.size:
            labels[i] = sk.labels_[c.min()]
    return renumber(labels), core


@pytest.mark.parametrize("sqltype", ["real", "double precision"])
@pytest.mark.parametrize("eps,min_pts", [(0.03, 4), (0.05, 10), (0.08, 5), (0.04, 2)])
def test_dbscan_cosine(conn, sqltype, eps, min_pts):
    X = embeddings(12, 150, 16, seed=7)
    single = sqltype == "real"
    U = unit_rows(X, single)
    D = cosine_dist(U)
    near = np.abs(D - eps) < 1e-9 * eps
    assert not near.any(), "the set has cosine distances equal to eps up to rounding"
    want, want_core = dbscan_exact(D, eps, min_pts)
    assert want.max() >= 3

    load_matrix(conn, "emb", X, sqltype=sqltype)
    ids, got, core = _dbscan_cosine(conn, "SELECT id, f FROM emb ORDER BY id", eps, min_pts)
    assert np.array_equal(core, want_core)
    assert np.array_equal(got, want), first_differences(ids, got, want)

    # scikit-learn's cosine DBSCAN on the same values: the same core points,
    # noise and partition of the core points
    Xs = np.asarray(X, dtype=np.float32).astype(np.float64) if single else X
    sk = DBSCAN(eps=eps, min_samples=min_pts, metric="cosine", algorithm="brute").fit(Xs)
    sk_core = np.zeros(len(X), dtype=bool)
    sk_core[sk.core_sample_indices_] = True
    assert np.array_equal(core, sk_core)
    assert np.array_equal(got < 0, sk.labels_ < 0)
    assert same_partition(got[core], sk.labels_[core])


def _dbscan_cosine(conn, query, eps, min_pts):
    with conn.cursor() as cur:
        cur.execute("SELECT id, cluster_id, is_core FROM gpu_dbscan(%s, %s, %s, metric => 'cosine')",
                    (query, float(eps), int(min_pts)))
        rows = cur.fetchall()
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    labels = np.array([-1 if r[1] is None else r[1] for r in rows], dtype=np.int64)
    core = np.array([bool(r[2]) for r in rows])
    return ids, labels, core


def spherical_kmeans(U, C0, max_iter=300):
    """Lloyd on unit rows, centroids scaled to unit length after each update,
    run until no row changes cluster (tol = 0)."""
    C = C0.copy()
    labels = None
    for it in range(max_iter):
        d2 = np.zeros((len(U), len(C)))
        for j in range(U.shape[1]):
            t = U[:, j][:, None] - C[:, j][None, :]
            d2 = d2 + t * t
        new = d2.argmin(axis=1)
        if labels is not None and np.array_equal(new, labels):
            break
        labels = new
        for c in range(len(C)):
            m = U[labels == c].mean(axis=0)
            C[c] = m / np.sqrt(np.sum(m * m))
    dist = d2[np.arange(len(U)), labels] * 0.5
    return labels, C, dist


@pytest.mark.parametrize("sqltype", ["real", "double precision"])
def test_spherical_kmeans(conn, sqltype):
    X = embeddings(6, 400, 8, seed=11, spread=0.3, noise=0.0)
    single = sqltype == "real"
    U = unit_rows(X, single)
    rng = np.random.default_rng(5)
    C0 = U[rng.choice(len(U), size=6, replace=False)]
    labels, C, dist = spherical_kmeans(U, C0)

    load_matrix(conn, "sph", X, sqltype=sqltype)
    init = "ARRAY[" + ",".join("[" + ",".join(repr(float(v)) for v in row) + "]" for row in C0) + "]"
    with conn.cursor() as cur:
        cur.execute(f"""SELECT id, cluster_id, distance FROM gpu_kmeans('SELECT id, f FROM sph ORDER BY id', 6,
                        tol => 0, max_iter => 300, metric => 'cosine', initial_centroids => {init})""")
        rows = cur.fetchall()
        cur.execute(f"""SELECT cluster_id, centroid, size, inertia FROM gpu_kmeans_centroids(
                        'SELECT id, f FROM sph ORDER BY id', 6, tol => 0, max_iter => 300,
                        metric => 'cosine', initial_centroids => {init}) ORDER BY cluster_id""")
        cents = cur.fetchall()
    got = np.array([r[1] for r in rows])
    np.testing.assert_array_equal(got, labels)
    np.testing.assert_allclose([r[2] for r in rows], dist, rtol=1e-7, atol=1e-12)
    # the cosine distance is 1 - cos(row, centroid)
    np.testing.assert_allclose(dist, 1.0 - np.sum(U * C[labels], axis=1), atol=1e-7)
    Cg = np.array([r[1] for r in cents])
    np.testing.assert_allclose(Cg, C, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(Cg, axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal([r[2] for r in cents], np.bincount(labels, minlength=6))
    np.testing.assert_allclose([r[3] for r in cents],
                               np.bincount(labels, weights=dist, minlength=6), rtol=1e-7, atol=1e-12)

    # assigning the rows to the fitted centroids gives the same clusters
    arr = "ARRAY[" + ",".join("[" + ",".join(repr(float(v)) for v in row) + "]" for row in Cg) + "]"
    with conn.cursor() as cur:
        cur.execute(f"""SELECT cluster_id, distance FROM gpu_kmeans_assign('SELECT id, f FROM sph ORDER BY id',
                        {arr}, metric => 'cosine')""")
        assigned = cur.fetchall()
    np.testing.assert_array_equal([r[0] for r in assigned], labels)


@pytest.mark.parametrize("sqltype", ["real", "double precision"])
@pytest.mark.parametrize("kernel,dc", [("gaussian", 0.1), ("cutoff", 0.03), ("gaussian", None)])
def test_density_peaks_cosine(conn, sqltype, kernel, dc):
    X = embeddings(5, 200, 8, seed=13, spread=0.15, noise=0.0)
    single = sqltype == "real"
    D = cosine_dist(unit_rows(X, single))
    if dc is not None and kernel == "cutoff":
        assert not (np.abs(D - dc) < 1e-9 * dc).any()
    ref = dpeaks_reference(X, kernel, n_clusters=5, dc=dc, D=D)
    if kernel == "gaussian":
        # every rho far above the fixed-point resolution, so that the density
        # order is the reference's
        assert ref["rho"].min() > 1e-6

    load_matrix(conn, "dpc", X, sqltype=sqltype)
    with conn.cursor() as cur:
        cur.execute("""SELECT id, cluster_id, rho, delta, is_center FROM gpu_density_peaks(
                       'SELECT id, f FROM dpc ORDER BY id', n_clusters => 5, dc => %s,
                       kernel => %s, metric => 'cosine') ORDER BY id""", (dc, kernel))
        rows = cur.fetchall()
    rho = np.array([r[2] for r in rows])
    if kernel == "gaussian":
        # the documented error: terms to 2e-7 relative, a sum in fixed point
        # with 56 fraction bits (an isolated row's rho may be 0)
        np.testing.assert_allclose(rho, ref["rho"], rtol=1e-6, atol=len(X) * 2.0 ** -56)
    else:
        np.testing.assert_array_equal(rho, ref["rho"])
    np.testing.assert_allclose([r[3] for r in rows], ref["delta"], rtol=1e-9)
    np.testing.assert_array_equal([r[4] for r in rows], ref["center"])
    np.testing.assert_array_equal([r[1] for r in rows], ref["label"])
