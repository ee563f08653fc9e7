"""
Differential test of gpu_dbscan against PostGIS ST_ClusterDBSCAN.

PostGIS visits the rows in window order and gives a border point to the
cluster of the first core point that reaches it (union_dbscan_general in
liblwgeom/lwgeom_geos_cluster.c), the rule gpu_dbscan documents.  With
OVER (ORDER BY id) and the same ORDER BY in gpu_dbscan's query, the two must
agree on every row, border points included, up to the numbering of clusters.

The sets are 2-D Gaussian blobs that touch, plus uniform noise, so that many
border points are within eps of core points of two clusters.
"""

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from conftest import dbscan, load_matrix
from dbscan_reference import Reference, as_float32, first_differences, same_partition


def touching_blobs(n, centers, std, box, noise_frac, seed):
    rng = np.random.default_rng(seed)
    n_noise = int(n * noise_frac)
    X, _ = make_blobs(n_samples=n - n_noise, n_features=2, centers=centers,
                      cluster_std=std, center_box=(-box, box), random_state=seed)
    noise = rng.uniform(-box - 2 * std, box + 2 * std, size=(n_noise, 2))
    X = np.vstack([X, noise])
    return as_float32(X[rng.permutation(n)])


# name -> (points, eps, min_pts)
SETS = {
    "blobs_3k": (lambda: touching_blobs(3_000, 10, 0.5, 4.0, 0.15, 21), 0.3, 6),
    "blobs_20k": (lambda: touching_blobs(20_000, 30, 0.6, 10.0, 0.10, 22), 0.15, 8),
    "blobs_50k": (lambda: touching_blobs(50_000, 40, 0.5, 12.0, 0.10, 23), 0.1, 10),
    "blobs_20k_minpts2": (lambda: touching_blobs(20_000, 30, 0.6, 10.0, 0.30, 24), 0.05, 2),
    "blobs_10k_minpts1": (lambda: touching_blobs(10_000, 30, 0.6, 10.0, 0.30, 25), 0.04, 1),
}


def postgis_labels(conn, table, eps, min_pts):
    with conn.cursor() as cur:
        cur.execute(f"""SELECT id, ST_ClusterDBSCAN(geom, %s, %s) OVER (ORDER BY id)
                        FROM {table} ORDER BY id""", (float(eps), int(min_pts)))
        rows = cur.fetchall()
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    labels = np.array([-1 if r[1] is None else r[1] for r in rows], dtype=np.int64)
    return ids, labels


@pytest.mark.parametrize("name", sorted(SETS))
def test_against_postgis(postgis_conn, name):
    conn = postgis_conn
    gen, eps, min_pts = SETS[name]
    X = gen()
    n = X.shape[0]
    ref = Reference(X, eps, min_pts)
    assert ref.ties == 0, "the generated set has distances equal to eps up to rounding"
    assert ref.n_clusters >= 2
    if min_pts > 2:
        # Border points reachable from two clusters: where the border rule matters.
        assert ref.contested > 0, f"{name}: no border point is contested"

    table = f"pg_{name}"
    load_matrix(conn, table, X)
    with conn.cursor() as cur:
        cur.execute(f"ALTER TABLE {table} ADD COLUMN geom geometry(Point)")
        cur.execute(f"UPDATE {table} SET geom = ST_MakePoint(f[1], f[2])")

    pg_ids, pg = postgis_labels(conn, table, eps, min_pts)
    ids, ours, core = dbscan(conn, f"SELECT id, f FROM {table} ORDER BY id", eps, min_pts)
    assert np.array_equal(pg_ids, np.arange(n))
    assert np.array_equal(ids, np.arange(n)), "rows are not returned in query order"

    assert np.array_equal(ours < 0, pg < 0), \
        "noise differs from PostGIS: " + first_differences(ids, ours < 0, pg < 0)
    assert same_partition(ours[core], pg[core]), \
        "the core points are partitioned differently from PostGIS"
    if not same_partition(ours, pg):
        # Name the border points whose cluster differs, mapping PostGIS's
        # numbering onto ours through the core points.
        mapping = dict(zip(pg[core].tolist(), ours[core].tolist()))
        pg_mapped = np.array([mapping.get(v, -2) if v >= 0 else -1 for v in pg])
        pytest.fail("border points are assigned differently from PostGIS: "
                    + first_differences(ids, ours, pg_mapped))
    # PostGIS agrees with the reference the tests in test_dbscan_sklearn.py use.
    assert same_partition(pg, ref.labels)
