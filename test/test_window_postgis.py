"""
Differential tests of the window functions against PostGIS.

gpu_cluster_dbscan(geom, eps, min_pts) OVER (PARTITION BY g ORDER BY id) must
give, in every group, the clusters of ST_ClusterDBSCAN over the same window:
the same noise and the same partition of the rows, border points included
(up to the numbering of the clusters, which for gpuclust is the order of
first appearance, checked against test/dbscan_reference.py).  NULL geometries
get a NULL cluster in both.

The groups are of every size (one row, a few rows, hundreds), of touching
blobs with duplicated points and uniform noise, on coordinates with two
decimals.  Geometry coordinates are computed in double precision, as PostGIS
computes them (test/test_precision_cosine.py holds the two to the same
answer where many pairs lie at exactly eps); here eps lies between two
possible distances of the two-decimal grid, so that the answer does not
depend on the rounding of a pair at eps, and every group is checked to hold
no pair within TIE_BAND of eps.

gpu_cluster_kmeans is compared with ST_ClusterKMeans on groups of far apart
blobs, where both find the blobs: the same partition of every group.
"""

import io

import numpy as np
import pytest

from dbscan_reference import Reference, same_partition

EPS = 0.155          # squared distances on the 0.01 grid are multiples of 1e-4; 0.155^2 is not
MIN_PTS = 4


def make_groups(seed, n_groups):
    """Rows (id, g, x, y) with x, y NaN for NULL geometries, in id order."""
    rng = np.random.default_rng(seed)
    rows = []
    next_id = 1
    for g in range(n_groups):
        size = int(rng.choice([1, 2, 3, 7, 40, 150, 600]))
        n_blobs = int(rng.integers(1, 5))
        centers = rng.uniform(-2, 2, size=(n_blobs, 2))
        which = rng.integers(0, n_blobs, size=size)
        X = centers[which] + rng.normal(scale=0.2, size=(size, 2))
        noise = rng.random(size) < 0.1
        X[noise] = rng.uniform(-3, 3, size=(int(noise.sum()), 2))
        # duplicates: a tenth of the rows repeat an earlier row
        dup = np.flatnonzero(rng.random(size) < 0.1)
        for i in dup:
            if i > 0:
                X[i] = X[rng.integers(0, i)]
        X = np.round(X, 2)
        null = rng.random(size) < 0.05
        if g % 17 == 5:
            null[:] = True              # a group of NULL geometries only
        X[null] = np.nan
        for i in range(size):
            rows.append((next_id, g, X[i, 0], X[i, 1]))
            next_id += 1
    return rows


def load_points(conn, table, rows):
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {table}")
        cur.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, g int, geom geometry)")
        buf = io.StringIO()
        for i, g, x, y in rows:
            geom = r"\N" if np.isnan(x) else f"POINT({x:.2f} {y:.2f})"
            buf.write(f"{i}\t{g}\t{geom}\n")
        buf.seek(0)
        cur.copy_expert(f"COPY {table} (id, g, geom) FROM STDIN", buf)
        cur.execute(f"ANALYZE {table}")


def fetch(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_dbscan_window_against_postgis(postgis_conn, seed):
    conn = postgis_conn
    rows = make_groups(seed, 60)
    table = f"win_pg_{seed}"
    load_points(conn, table, rows)
    got = fetch(conn, f"""
        SELECT id, g,
               gpu_cluster_dbscan(geom, {EPS}, {MIN_PTS}) OVER w,
               ST_ClusterDBSCAN(geom, {EPS}, {MIN_PTS}) OVER w,
               geom IS NULL
        FROM {table} WINDOW w AS (PARTITION BY g ORDER BY id) ORDER BY id""")
    assert [r[0] for r in got] == [r[0] for r in rows]

    by_group = {}
    for (i, g, x, y), (gid, gg, ours, pg, isnull) in zip(rows, got):
        assert gid == i and gg == g
        by_group.setdefault(g, []).append((x, y, ours, pg, isnull))

    checked_clusters = 0
    checked_border = 0
    for g, members in by_group.items():
        isnull = np.array([m[4] for m in members])
        ours = np.array([-1 if m[2] is None else m[2] for m in members])
        pg = np.array([-1 if m[3] is None else m[3] for m in members])
        assert np.all(ours[isnull] == -1) and np.all(pg[isnull] == -1), \
            f"group {g}: a NULL geometry got a cluster"
        X = np.array([[m[0], m[1]] for m, n in zip(members, isnull) if not n], dtype=np.float64)
        o, p = ours[~isnull], pg[~isnull]
        if X.shape[0] == 0:
            continue
        ref = Reference(X, EPS, MIN_PTS)
        assert ref.ties == 0, f"group {g} has a pair at eps up to rounding"
        assert np.array_equal(o < 0, p < 0), f"group {g}: noise differs from PostGIS"
        assert same_partition(o, p), f"group {g}: clusters differ from PostGIS"
        assert np.array_equal(o, ref.labels), \
            f"group {g}: not the reference answer numbered by first appearance"
        checked_clusters += ref.n_clusters
        checked_border += int(ref.border.sum())
    # the data exercise what they should
    assert checked_clusters >= 30
    assert checked_border >= 20
    assert any(len(m) == 1 for m in by_group.values())
    assert any(all(x[4] for x in m) for m in by_group.values())


def test_dbscan_window_same_as_one_call_per_group(postgis_conn):
    """The window form gives each group the answer of gpu_dbscan on its rows."""
    conn = postgis_conn
    rows = make_groups(11, 25)
    table = "win_pg_calls"
    load_points(conn, table, rows)
    win = dict(fetch(conn, f"""
        SELECT id, gpu_cluster_dbscan(geom, {EPS}, {MIN_PTS}) OVER (PARTITION BY g ORDER BY id)
        FROM {table}"""))
    groups = sorted({r[1] for r in rows})
    for g in groups:
        calls = fetch(conn, f"""
            SELECT id, cluster_id FROM gpu_dbscan(
                'SELECT id, geom FROM {table} WHERE g = {g} AND geom IS NOT NULL ORDER BY id',
                {EPS}, {MIN_PTS})""")
        for i, c in calls:
            assert win[i] == c, f"group {g}, id {i}: window {win[i]}, gpu_dbscan {c}"


def test_kmeans_window_against_postgis(postgis_conn):
    conn = postgis_conn
    rng = np.random.default_rng(5)
    rows = []
    truth = {}
    next_id = 1
    for g in range(40):
        k = int(rng.integers(2, 5))
        centers = rng.choice(np.arange(10) * 100.0, size=(k, 2), replace=False)
        size = int(rng.integers(k * 3, 200))
        which = np.concatenate([np.arange(k), rng.integers(0, k, size=size - k)])
        X = np.round(centers[which] + rng.normal(scale=1.0, size=(size, 2)), 2)
        for i in range(size):
            rows.append((next_id, g, X[i, 0], X[i, 1]))
            truth[next_id] = (g, k, int(which[i]))
            next_id += 1
    table = "win_pg_kmeans"
    load_points(conn, table, rows)
    # k per group from a join: the same k for every row of a partition
    with conn.cursor() as cur:
        cur.execute(f"CREATE TEMP TABLE win_pg_k (g int PRIMARY KEY, k int)")
        cur.executemany("INSERT INTO win_pg_k VALUES (%s, %s)",
                        sorted({(v[0], v[1]) for v in truth.values()}))
    got = fetch(conn, f"""
        SELECT id, gpu_cluster_kmeans(geom, k) OVER w, ST_ClusterKMeans(geom, k) OVER w
        FROM {table} JOIN win_pg_k USING (g)
        WINDOW w AS (PARTITION BY g ORDER BY id) ORDER BY id""")
    for g in range(40):
        ids = [i for i, v in truth.items() if v[0] == g]
        sel = [r for r in got if r[0] in set(ids)]
        ours = np.array([r[1] for r in sel])
        pg = np.array([r[2] for r in sel])
        true = np.array([truth[r[0]][2] for r in sel])
        assert ours.min() == 0 and ours.max() == truth[ids[0]][1] - 1
        assert same_partition(ours, true), f"group {g}: gpuclust did not find the blobs"
        assert same_partition(ours, pg), f"group {g}: differs from ST_ClusterKMeans"
