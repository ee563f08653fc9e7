"""
The row path around the algorithms: the planner's estimate of the result
size (EXPLAIN's "Plan Rows"), parallel workers in the user's query, the
result's tuplestore in memory or in a temporary file, and the gather reading
feature arrays value for value.
"""

import json

import numpy as np
import psycopg2
import pytest

from conftest import connect, load_matrix


def plan_rows(cur, sql, params=None):
    """EXPLAIN (FORMAT JSON)'s row estimate of the top plan node of sql."""
    cur.execute("EXPLAIN (FORMAT JSON) " + sql, params)
    plan = cur.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return plan[0]["Plan"]["Plan Rows"]


def clustered_points(n, seed=5):
    """2-D rows shaped like real data: blobs on a 0.01 grid with duplicates, far outliers."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, 100, size=(12, 2))
    X = centres[rng.integers(0, 12, size=n)] + rng.normal(0, 0.6, size=(n, 2))
    X = np.round(X, 2)
    dup = np.arange(0, n - 1, 17)
    X[dup] = X[dup + 1]
    X[-3:] = [[1e6, 1e6], [-1e6, 5.0], [3e5, -2e5]]
    return X.astype(np.float32)


@pytest.fixture
def points(conn):
    X = clustered_points(20_000)
    load_matrix(conn, "rowpath_pts", X)
    with conn.cursor() as cur:
        cur.execute("ANALYZE rowpath_pts")
    return X


def test_explain_shows_result_size(conn, points):
    n = len(points)
    with conn.cursor() as cur:
        assert plan_rows(cur, "SELECT * FROM gpu_dbscan('SELECT id, f FROM rowpath_pts', 1, 4)") == n
        assert plan_rows(cur, "SELECT * FROM gpu_kmeans('SELECT id, f FROM rowpath_pts', 5)") == n
        assert plan_rows(cur, "SELECT * FROM gpu_density_peaks('SELECT id, f FROM rowpath_pts', 3)") == n
        # a filtered query: the planner's own estimate of it
        cur.execute("EXPLAIN (FORMAT JSON) SELECT id, f FROM rowpath_pts WHERE id < 500")
        inner = cur.fetchone()[0]
        inner = (json.loads(inner) if isinstance(inner, str) else inner)[0]["Plan"]["Plan Rows"]
        assert plan_rows(cur, "SELECT * FROM gpu_dbscan('SELECT id, f FROM rowpath_pts WHERE id < 500', 1, 4)") == inner
        assert 100 <= inner <= 2000
        # k rows of centroids
        assert plan_rows(cur, "SELECT * FROM gpu_kmeans_centroids('SELECT id, f FROM rowpath_pts', 7)") == 7
        assert plan_rows(cur, "SELECT * FROM gpu_kmeans_centroids('SELECT id, f FROM rowpath_pts', k => 3, seed => 1)") == 3
        # a generic plan does not know the arguments: the declared ROWS
        cur.execute("SET plan_cache_mode = force_generic_plan")
        cur.execute("PREPARE rp_c(int) AS SELECT * FROM gpu_kmeans_centroids('SELECT id, f FROM rowpath_pts', $1)")
        assert plan_rows(cur, "EXECUTE rp_c(4)") == 10
        cur.execute("PREPARE rp_d(text) AS SELECT * FROM gpu_dbscan($1, 1, 4)")
        assert plan_rows(cur, "EXECUTE rp_d('SELECT id, f FROM rowpath_pts')") == 1000
        cur.execute("RESET plan_cache_mode")
        # a custom plan does
        assert plan_rows(cur, "EXECUTE rp_c(4)") == 4
        assert plan_rows(cur, "EXECUTE rp_d('SELECT id, f FROM rowpath_pts LIMIT 12')") == 12
        cur.execute("DEALLOCATE ALL")


def test_estimate_of_a_bad_query_is_the_default_and_the_error_comes_at_run(conn, points):
    with conn.cursor() as cur:
        assert plan_rows(cur, "SELECT * FROM gpu_dbscan('SELECT id, f FROM rowpath_no_such', 1, 4)") == 1000
        assert plan_rows(cur, "SELECT * FROM gpu_dbscan('SELEC id', 1, 4)") == 1000
        assert plan_rows(cur, "SELECT * FROM gpu_dbscan('SELECT 1/0, ARRAY[1]::real[]', 1, 4)") == 1000
        with pytest.raises(psycopg2.errors.UndefinedTable):
            cur.execute("SELECT * FROM gpu_dbscan('SELECT id, f FROM rowpath_no_such', 1, 4)")
        with pytest.raises(psycopg2.errors.DivisionByZero):
            cur.execute("SELECT * FROM gpu_dbscan('SELECT 1/0, ARRAY[1]::real[]', 1, 4)")


def test_estimate_leaves_no_lock(conn, points):
    """Planning the query for the estimate happens in a subtransaction rolled back."""
    conn.autocommit = False
    try:
        with conn.cursor() as cur:
            plan_rows(cur, "SELECT * FROM gpu_dbscan('SELECT id, f FROM rowpath_pts', 1, 4)")
            cur.execute("""SELECT count(*) FROM pg_locks
                           WHERE pid = pg_backend_pid() AND relation = 'rowpath_pts'::regclass""")
            assert cur.fetchone()[0] == 0
            # the same query run directly keeps its lock, as any query does
            cur.execute("SELECT count(*) FROM rowpath_pts")
            cur.execute("""SELECT count(*) FROM pg_locks
                           WHERE pid = pg_backend_pid() AND relation = 'rowpath_pts'::regclass""")
            assert cur.fetchone()[0] == 1
    finally:
        conn.rollback()
        conn.autocommit = True


def force_parallel(cur):
    cur.execute("SET parallel_setup_cost = 0")
    cur.execute("SET parallel_tuple_cost = 0")
    cur.execute("SET min_parallel_table_scan_size = 0")
    cur.execute("SET max_parallel_workers_per_gather = 2")


def test_user_query_runs_in_parallel_workers(conn, points):
    """With the leader out of the scan, every row comes from a worker."""
    with conn.cursor() as cur:
        cur.execute("""CREATE OR REPLACE FUNCTION rowpath_pid() RETURNS int
                       LANGUAGE plpgsql PARALLEL SAFE AS 'BEGIN RETURN pg_backend_pid(); END'""")
        cur.execute("SELECT pg_backend_pid()")
        me = cur.fetchone()[0]
        force_parallel(cur)
        cur.execute("SET parallel_leader_participation = off")
        q = ("SELECT (rowpath_pid()::bigint << 32) | id, f FROM rowpath_pts "
             "WHERE id % 3 = 0")
        cur.execute("EXPLAIN (COSTS OFF) " + q)
        assert "Gather" in "\n".join(r[0] for r in cur.fetchall())
        cur.execute("SELECT id >> 32, id & 4294967295 FROM gpu_dbscan(%s, 1, 4, device => 'cpu')", (q,))
        rows = np.array(cur.fetchall(), dtype=np.int64)
        cur.execute("RESET parallel_leader_participation")
        cur.execute("DROP FUNCTION rowpath_pid()")
    n = len(points)
    assert sorted(rows[:, 1].tolist()) == list(range(0, n, 3))
    pids = set(rows[:, 0].tolist())
    assert me not in pids
    assert 1 <= len(pids) <= 2


@pytest.mark.parametrize("fn", ["dbscan", "kmeans", "density_peaks"])
def test_parallel_query_same_answer(conn, points, fn):
    """A parallel plan of a query with ORDER BY gives exactly the serial answer."""
    q = "SELECT id, f FROM rowpath_pts WHERE id % 2 = 1 ORDER BY id"
    call = {
        "dbscan": "SELECT * FROM gpu_dbscan(%s, 0.5, 5, device => 'cpu')",
        "kmeans": "SELECT * FROM gpu_kmeans(%s, 8, seed => 11, device => 'cpu')",
        "density_peaks": "SELECT * FROM gpu_density_peaks(%s, 6, kernel => 'cutoff', device => 'cpu')",
    }[fn]
    with conn.cursor() as cur:
        cur.execute("SET max_parallel_workers_per_gather = 0")
        cur.execute(call, (q,))
        serial = cur.fetchall()
        force_parallel(cur)
        cur.execute("EXPLAIN (COSTS OFF) " + q)
        assert "Gather" in "\n".join(r[0] for r in cur.fetchall())
        cur.execute(call, (q,))
        parallel = cur.fetchall()
    assert len(serial) == len(points) // 2
    assert parallel == serial


def test_outer_statement_may_be_parallel(conn, points):
    """The labels let the rest of the statement use workers (PostgreSQL 17+)."""
    with conn.cursor() as cur:
        cur.execute("SHOW server_version_num")
        version = int(cur.fetchone()[0])
        cur.execute("SELECT proparallel FROM pg_proc WHERE proname = 'gpu_dbscan'")
        assert cur.fetchone()[0] == ("r" if version >= 170000 else "u")
        force_parallel(cur)
        q = ("SELECT count(*), count(DISTINCT d.cluster_id) FROM "
             "gpu_dbscan('SELECT id, f FROM rowpath_pts WHERE id % 4 = 0', 0.5, 5, device => 'cpu') d "
             "JOIN rowpath_pts t USING (id)")
        cur.execute("EXPLAIN (COSTS OFF) " + q)
        plan = "\n".join(r[0] for r in cur.fetchall())
        assert ("Gather" in plan) == (version >= 170000)
        cur.execute(q)
        par = cur.fetchone()
        cur.execute("SET max_parallel_workers_per_gather = 0")
        cur.execute(q)
        assert cur.fetchone() == par
    assert par[0] == len(range(0, len(points), 4))


def run_with(conn, sql, settings):
    """Rows of sql (in order) and the server's temporary-file LOG lines, under settings."""
    with conn.cursor() as cur:
        for k, v in settings.items():
            cur.execute(f"SET {k} = '{v}'")
        cur.execute("SET log_temp_files = 0")
        cur.execute("SET client_min_messages = log")
        del conn.notices[:]
        cur.execute(sql)
        rows = cur.fetchall()
        temp = [m for m in conn.notices if "temporary file" in m]
        cur.execute("RESET client_min_messages")
        cur.execute("RESET log_temp_files")
        for k in settings:
            cur.execute(f"RESET {k}")
    return rows, temp


@pytest.mark.parametrize("fn", ["dbscan", "kmeans", "density_peaks", "centroids"])
def test_output_in_memory_or_spilled_is_the_same(conn, points, fn):
    call = {
        "dbscan": "SELECT * FROM gpu_dbscan('SELECT id, f FROM rowpath_pts', 0.5, 5, device => 'cpu')",
        "kmeans": "SELECT * FROM gpu_kmeans('SELECT id, f FROM rowpath_pts', 8, seed => 2, device => 'cpu')",
        "density_peaks": "SELECT * FROM gpu_density_peaks('SELECT id, f FROM rowpath_pts', 6, kernel => 'cutoff', device => 'cpu')",
        "centroids": "SELECT * FROM gpu_kmeans_centroids('SELECT id, f FROM rowpath_pts', 400, max_iter => 2, seed => 2, device => 'cpu')",
    }[fn]
    # the tuplestore of the Function Scan (the GPU Cluster Scan has none)
    small = {"work_mem": "64kB", "gpuclust.custom_scan": "off"}
    spilled, temp_spilled = run_with(conn, call, {**small, "gpuclust.output_mem": "64kB"})
    in_memory, temp_memory = run_with(conn, call, small)
    large, _ = run_with(conn, call, {"work_mem": "256MB", "gpuclust.custom_scan": "off"})
    node, temp_node = run_with(conn, call, {"work_mem": "64kB", "gpuclust.output_mem": "64kB"})
    assert len(spilled) == (400 if fn == "centroids" else len(points))
    assert in_memory == spilled
    assert large == spilled
    assert node == spilled
    # the result of 20,000 rows is larger than 64kB: a file unless output_mem holds it
    if fn != "centroids":
        assert temp_spilled, "expected a temporary file at output_mem = 64kB"
        # the node returns the rows from the result arrays: no file
        assert not temp_node, temp_node
    assert not temp_memory, temp_memory


def test_output_that_does_not_fit_goes_to_file(conn, points):
    """Past output_mem the result is written to a file from work_mem on, and is complete."""
    call = "SELECT count(*), sum(id) FROM gpu_dbscan('SELECT id, f FROM rowpath_pts', 0.5, 5, device => 'cpu')"
    settings = {"work_mem": "64kB", "gpuclust.output_mem": "256kB"}
    rows, temp = run_with(conn, call, {**settings, "gpuclust.custom_scan": "off"})
    with conn.cursor() as cur:
        cur.execute("SELECT count(*), sum(id) FROM rowpath_pts")
        assert rows == cur.fetchall()
    assert temp
    # the GPU Cluster Scan returns the same rows without a tuplestore, so without a file
    node, temp_node = run_with(conn, call, settings)
    assert node == rows
    assert not temp_node, temp_node


@pytest.mark.parametrize("sqltype", ["real", "double precision"])
def test_gather_reads_values_exactly(conn, sqltype):
    """Each row its own centroid: the centroids are the rows, value for value.

    257 features (an odd count): large, subnormal and tiny values and plain
    decimals (not near the largest real: k-means squares distances).
    """
    rng = np.random.default_rng(17)
    n, d = 40, 257
    X = rng.normal(0, 10, size=(n, d)).round(3)
    X[:, 0] = np.arange(n)          # every row distinct
    X[1, 1:6] = [1e15, -3e10, 1.4e-45, -2.5e-40, 1e-30]
    X[2, 1:4] = [4e12, -7e-20, 123456.789]
    X32 = X.astype(np.float32)
    load_matrix(conn, "rowpath_exact", X32 if sqltype == "real" else X, sqltype=sqltype)
    with conn.cursor() as cur:
        cur.execute("""SELECT centroid FROM gpu_kmeans_centroids('SELECT id, f FROM rowpath_exact',
                                                                  %s, max_iter => 1, device => 'cpu')""", (n,))
        got = np.array([r[0] for r in cur.fetchall()], dtype=np.float64)
    got = got[np.argsort(got[:, 0])]
    want = X32.astype(np.float64) if sqltype == "real" else X
    assert np.array_equal(got, want)


# lengths around the steps of the copy of real[] and vector values (8 and 32 values)
EDGE_LENGTHS = list(range(1, 41)) + [63, 64, 65, 95, 96, 97, 257]


def edge_rows(n, d, seed):
    """n distinct rows of d reals: decimals, subnormals, zeros, large values."""
    rng = np.random.default_rng(seed)
    X = rng.normal(0, 10, size=(n, d)).round(3).astype(np.float32)
    X[:, 0] = np.arange(n) * 1.5
    special = np.array([1.4e-45, -2.5e-40, -0.0, 3e15, -7e-20, 1e-30], dtype=np.float32)
    for i in range(n):
        for j in range(1, d):
            if (i + j) % 5 == 0:
                X[i, j] = special[(i * 7 + j) % len(special)]
    return X


def exact_centroids(conn, table, n):
    with conn.cursor() as cur:
        cur.execute(f"""SELECT centroid FROM gpu_kmeans_centroids('SELECT id, f FROM {table}',
                                                                   %s, max_iter => 1, device => 'cpu')""", (n,))
        got = np.array([r[0] for r in cur.fetchall()], dtype=np.float64)
    return got[np.argsort(got[:, 0])]


def test_gather_reads_real_arrays_exactly_at_every_length(conn):
    """Each row its own centroid, for lengths around the copy's steps: the rows, value for value."""
    n = 6
    for d in EDGE_LENGTHS:
        X = edge_rows(n, d, d)
        load_matrix(conn, "rowpath_edge", X, sqltype="real")
        got = exact_centroids(conn, "rowpath_edge", n)
        assert got.shape == (n, d)
        want = X.astype(np.float64)
        assert np.array_equal(got, want[np.argsort(want[:, 0])]), d


def test_non_finite_element_found_at_every_position(conn):
    """NaN and infinities anywhere in a row: the same error, naming the first bad value."""
    names = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity"}
    with conn.cursor() as cur:
        for d in [1, 2, 7, 8, 9, 31, 32, 33, 40, 64, 257]:
            for pos in sorted({0, d // 2, d - 1, max(0, d - 9)}):
                for bad, name in names.items():
                    f = ["1.5"] * d
                    f[pos] = f"'{bad}'"
                    if pos + 1 < d:
                        # a later bad value of another kind: the first is named
                        f[d - 1] = "'NaN'" if bad != "NaN" else "'Infinity'"
                    arr = f"ARRAY[{','.join(f)}]::real[]"
                    good = f"ARRAY[{','.join(['2'] * d)}]::real[]"
                    q = (f"SELECT id, f FROM (VALUES (1, {good}), (2, {good}), (3, {arr}), (4, {good})) v(id, f)"
                         .replace("'", "''"))
                    with pytest.raises(psycopg2.errors.DataException) as e:
                        cur.execute(f"SELECT * FROM gpu_kmeans_centroids('{q}', 1, device => 'cpu')")
                    assert e.value.pgerror.splitlines()[0] == (
                        f"ERROR:  an element of the feature array of the row with id 3 is {name}"), (d, pos, bad)
    # a bad row after thousands of good ones (past the first size of the buffers)
    with conn.cursor() as cur:
        with pytest.raises(psycopg2.errors.DataException) as e:
            cur.execute("""SELECT * FROM gpu_kmeans_centroids(
                'SELECT g, CASE WHEN g = 5000 THEN array_fill(''1''::real, ARRAY[70]) || ''-Infinity''::real
                                ELSE array_fill(g::real, ARRAY[71]) END FROM generate_series(1, 6000) g',
                1, device => 'cpu')""")
        assert e.value.pgerror.splitlines()[0] == (
            "ERROR:  an element of the feature array of the row with id 5000 is -Infinity")
