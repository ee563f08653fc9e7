"""
pgvector columns as features: vector and halfvec give exactly the answers of
the same values as real[], in the set-returning functions and in the window
functions.

pgvector is not packaged for Debian 12; test/run-all builds and installs it
from ../shared/vendor when it is missing.  Where neither is possible these
tests are skipped, and run-all prints how many.
"""

import io

import numpy as np
import pytest


@pytest.fixture
def vector_conn(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")
        if cur.fetchone()[0] == 0:
            pytest.skip("pgvector is not installed (test/run-all builds it from ../shared/vendor)")
        cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return conn


def embeddings(n, d, n_blobs, seed):
    """Blobs of d-dimensional rows with three decimals, a tenth of them duplicated."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=1.0, size=(n_blobs, d))
    X = centers[rng.integers(0, n_blobs, size=n)] + rng.normal(scale=0.05, size=(n, d))
    for i in np.flatnonzero(rng.random(n) < 0.1):
        if i > 0:
            X[i] = X[rng.integers(0, i)]
    return np.round(X, 3).astype(np.float32)


def load_vectors(conn, table, X, groups=None):
    n, d = X.shape
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {table}")
        cur.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, g int, v vector({d}))")
        buf = io.StringIO()
        for i in range(n):
            g = 0 if groups is None else int(groups[i])
            buf.write(f"{i}\t{g}\t[{','.join(str(x) for x in X[i])}]\n")
        buf.seek(0)
        cur.copy_expert(f"COPY {table} (id, g, v) FROM STDIN", buf)
        cur.execute(f"ANALYZE {table}")


def rows(conn, sql, *args):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def test_vector_and_halfvec_as_real_array(vector_conn):
    conn = vector_conn
    X = embeddings(3000, 256, 8, 1)
    load_vectors(conn, "tv_embed", X)
    eps = 1.0
    q = "SELECT * FROM gpu_dbscan(%s, %s, 5)"
    v = rows(conn, q, "SELECT id, v FROM tv_embed ORDER BY id", eps)
    a = rows(conn, q, "SELECT id, v::real[] FROM tv_embed ORDER BY id", eps)
    assert v == a
    labels = [r[1] for r in v]
    assert len({c for c in labels if c is not None}) >= 4, "the set has too few clusters"

    h = rows(conn, q, "SELECT id, v::halfvec FROM tv_embed ORDER BY id", eps)
    ha = rows(conn, q, "SELECT id, v::halfvec::real[] FROM tv_embed ORDER BY id", eps)
    assert h == ha

    k = "SELECT * FROM gpu_kmeans(%s, 8, seed => 3)"
    assert rows(conn, k, "SELECT id, v FROM tv_embed ORDER BY id") == \
        rows(conn, k, "SELECT id, v::real[] FROM tv_embed ORDER BY id")
    assert rows(conn, k, "SELECT id, v::halfvec FROM tv_embed ORDER BY id") == \
        rows(conn, k, "SELECT id, v::halfvec::real[] FROM tv_embed ORDER BY id")


def test_embeddings_on_the_pair_engine(vector_conn):
    """384-dimensional vector and halfvec columns with the cosine metric go through the
    pair engine (from 16 features on): the same rows as the grid and the scans
    (gpuclust.pair_path = index), for DBSCAN and density peaks, with duplicates."""
    conn = vector_conn
    X = embeddings(1500, 384, 6, 5)
    load_vectors(conn, "tv_embed384", X)
    out = {}
    for path in ("pairs", "index"):
        with conn.cursor() as cur:
            cur.execute(f"SET gpuclust.pair_path = {path}")
        out[path] = (
            rows(conn, "SELECT * FROM gpu_dbscan(%s, 0.01, 5, metric => 'cosine')",
                 "SELECT id, v FROM tv_embed384 ORDER BY id"),
            rows(conn, "SELECT * FROM gpu_dbscan(%s, 0.01, 5, metric => 'cosine')",
                 "SELECT id, v::halfvec FROM tv_embed384 ORDER BY id"),
            rows(conn, "SELECT * FROM gpu_density_peaks(%s, n_clusters => 6, dc => 0.01, "
                       "metric => 'cosine')", "SELECT id, v FROM tv_embed384 ORDER BY id"),
        )
    with conn.cursor() as cur:
        cur.execute("RESET gpuclust.pair_path")
    assert out["pairs"] == out["index"]
    labels = [r[1] for r in out["pairs"][0]]
    assert len({c for c in labels if c is not None}) >= 4, "the set has too few clusters"


def test_vector_window_per_group(vector_conn):
    conn = vector_conn
    rng = np.random.default_rng(2)
    X = embeddings(2000, 32, 5, 2)
    groups = rng.integers(0, 12, size=X.shape[0])
    load_vectors(conn, "tv_groups", X, groups)
    with conn.cursor() as cur:
        cur.execute("UPDATE tv_groups SET v = NULL WHERE id % 50 = 7")
    win = dict(rows(conn, """
        SELECT id, gpu_cluster_dbscan(v, 0.5, 4) OVER (PARTITION BY g ORDER BY id)
        FROM tv_groups"""))
    win_h = dict(rows(conn, """
        SELECT id, gpu_cluster_dbscan(v::halfvec, 0.5, 4) OVER (PARTITION BY g ORDER BY id)
        FROM tv_groups"""))
    nulls = {r[0] for r in rows(conn, "SELECT id FROM tv_groups WHERE v IS NULL")}
    assert nulls and all(win[i] is None and win_h[i] is None for i in nulls)
    for g in sorted(set(groups.tolist())):
        one = rows(conn, "SELECT id, cluster_id FROM gpu_dbscan(%s, 0.5, 4)",
                   f"SELECT id, v FROM tv_groups WHERE g = {g} AND v IS NOT NULL ORDER BY id")
        one_h = rows(conn, "SELECT id, cluster_id FROM gpu_dbscan(%s, 0.5, 4)",
                     f"SELECT id, v::halfvec::real[] FROM tv_groups WHERE g = {g} AND v IS NOT NULL ORDER BY id")
        assert one and all(win[i] == c for i, c in one), f"group {g}"
        assert all(win_h[i] == c for i, c in one_h), f"group {g} (halfvec)"


def test_type_lookup_follows_the_extension(vector_conn):
    """The cached type OIDs follow DROP and CREATE EXTENSION (new OIDs, another
    schema) and come back after the rollback."""
    conn = vector_conn
    X = embeddings(300, 8, 3, 4)
    load_vectors(conn, "tv_moved", X)
    q = "SELECT cluster_id FROM gpu_kmeans('SELECT id, v FROM tv_moved ORDER BY id', 3, seed => 2)"
    before = rows(conn, q)
    assert len(before) == 300
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        try:
            cur.execute("DROP EXTENSION vector CASCADE")
            cur.execute("CREATE SCHEMA tv_elsewhere")
            cur.execute("CREATE EXTENSION vector SCHEMA tv_elsewhere")
            cur.execute("CREATE TABLE tv_moved_new (id bigint PRIMARY KEY, v tv_elsewhere.vector(8))")
            cur.execute("INSERT INTO tv_moved_new SELECT i, ('[' || i || ',0,0,0,0,0,0,0]')::tv_elsewhere.vector"
                        " FROM generate_series(1, 6) i")
            cur.execute("SELECT count(*) FROM gpu_kmeans('SELECT id, v FROM tv_moved_new', 2, seed => 1)")
            assert cur.fetchone()[0] == 6
        finally:
            cur.execute("ROLLBACK")
    assert rows(conn, q) == before


def assert_rows_read_exactly(conn, X, column):
    """Each of the n rows of X as its own cluster (k = n, one pass): the centroids are
    the rows as gpuclust read them from pgv_edge through column, to the bit."""
    n, d = X.shape
    load_vectors(conn, "pgv_edge", X)
    got = rows(conn, f"""SELECT centroid FROM gpu_kmeans_centroids('SELECT id, {column} FROM pgv_edge',
                         %s, max_iter => 1, device => 'cpu')""", n)
    got = np.array([r[0] for r in got], dtype=np.float64)
    got = got[np.argsort(got[:, 0])]
    want = X.astype(np.float64)
    assert np.array_equal(got, want[np.argsort(want[:, 0])]), d


def test_vector_read_exactly_at_every_length(vector_conn):
    """Each row its own centroid, for lengths around the steps of the copy (8 and 32
    values): the vectors, value for value, as from the same values in real[]."""
    conn = vector_conn
    n = 5
    for d in list(range(1, 41)) + [63, 64, 65, 95, 96, 97, 257]:
        rng = np.random.default_rng(d)
        X = rng.normal(0, 10, size=(n, d)).round(3).astype(np.float32)
        X[:, 0] = np.arange(n) * 2.5
        X[1, d // 2] = np.float32(1.4e-45)
        X[2, d - 1] = np.float32(-3e15)
        assert_rows_read_exactly(conn, X, "v")


def test_halfvec_read_exactly_at_every_length(vector_conn):
    """The same for halfvec, with values that halves hold exactly: subnormal halves,
    the largest half, zeros and decimals rounded to halves."""
    conn = vector_conn
    n = 5
    for d in list(range(1, 41)) + [63, 64, 65, 257]:
        rng = np.random.default_rng(1000 + d)
        X = rng.normal(0, 10, size=(n, d)).astype(np.float16).astype(np.float32)
        X[:, 0] = np.arange(n) * 2.5
        special = np.array([2.0 ** -24, -(2.0 ** -20), 65504.0, 0.0, 6.103515625e-05], dtype=np.float32)
        for i in range(n):
            for j in range(1, d):
                if (i + 2 * j) % 3 == 0:
                    X[i, j] = special[(i + j) % len(special)]
        assert_rows_read_exactly(conn, X, "v::halfvec")
