"""
k-means on Citus distributed tables: a coordinator and two workers started by
../shared/citus/citus-up (a test fixture beside the project, not part of it),
gpuclust created on the coordinator and propagated to the workers.

  * gpu_kmeans_step is split into worker_partial_agg on every shard and
    coord_combine_agg on the coordinator (EXPLAIN VERBOSE, every task; on one
    shard Citus sends the whole aggregate there), and
    its result is the same bit for bit on 1, 2, 4 and 7 shards as on a plain
    table of the coordinator;
  * a shard's partial state does not grow with its rows;
  * gpu_kmeans_fit_distributed on the distributed tables (1, 2, 4, 7 and 8
    shards) gives the plain table's model bit for bit (single-node
    brute-force Lloyd with exact sums, from the same start), from given
    centroids and from k-means||, with the workers' row cache on and off,
    through one gpu_kmeans_shard_call per shard and pass (the timing NOTICE
    counts them), also with empty shards; with the cache on, every shard is
    read once per fit and every later pass finds its rows in the same worker
    backend (cache_fills and cache_hits), over the cap it is not kept;
  * the cache's life on the workers: kept inside the coordinator's
    transaction, gone after the fit, at commit, after a rolled-back
    savepoint and after an error;
  * NULL and non-finite features, a role without SELECT (the plain query's
    error), statement_timeout and cancel on the coordinator (the workers'
    calls gone within a second), a worker stopped mid-fit (a clear error,
    nothing left running or prepared on any node, the next fit works);
  * gpu_kmeans_predict is pushed down in SELECT, UPDATE and CREATE TABLE AS
    and gives gpu_kmeans_assign's labels;
  * gpuclust.device on the coordinator decides where the workers search:
    'cpu', and 'auto' where it keeps the CPU, give the CPU's model with no
    search on the GPU; 'gpu' without a GPU is gpu_kmeans_assign's error, with
    the shard that raised it (with a GPU, every shard's search runs there:
    the same sizes, the centroids up to ties, see the README).

The identities are the CPU's (the cursor's session has gpuclust.device =
'cpu'): the GPU's assignment agrees with the CPU's only up to ties for rows
in single precision of at most 32 features.

Skipped, with the reason, when there is no citus-up (a clone without
../shared) or when not run as root (citus-up installs files and runs the
servers as the postgres user).

Environment (to run against another PostgreSQL 15 than Debian's):
    GPUCLUST_CITUS_UP     a citus-up-like script (default ../shared/citus/citus-up)
    GPUCLUST_CITUS_DOWN   its citus-down (default: beside it)
    GPUCLUST_CITUS_PORT   the coordinator port, workers on the next two (default 9700)
"""

import io
import os
import re
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import psycopg2
import pytest

ROOT = Path(__file__).resolve().parent.parent
CITUS_UP = Path(os.environ.get("GPUCLUST_CITUS_UP") or ROOT.parent / "shared" / "citus" / "citus-up")
CITUS_DOWN = Path(os.environ.get("GPUCLUST_CITUS_DOWN") or CITUS_UP.with_name("citus-down"))
PORT = int(os.environ.get("GPUCLUST_CITUS_PORT", "9700"))
SHARDS = (1, 2, 4, 7, 8)
K = 5
D = 8

if not CITUS_UP.exists():
    pytest.skip(f"Citus is not available: {CITUS_UP} not found (the test fixture beside the project)",
                allow_module_level=True)
if os.geteuid() != 0:
    pytest.skip("Citus tests need root: citus-up installs files and starts the servers as postgres",
                allow_module_level=True)


@pytest.fixture(scope="module")
def citus():
    """A coordinator and 2 workers with gpuclust; the connection settings of the coordinator."""
    up = subprocess.run([str(CITUS_UP), "--port", str(PORT), "--workers", "2", "--extension", "gpuclust"],
                        capture_output=True, text=True, timeout=300)
    if up.returncode != 0:
        pytest.fail(f"citus-up failed:\n{up.stderr[-3000:]}")
    env = dict(re.findall(r"^export (\w+)=(\S+)$", up.stdout, re.M))
    try:
        yield {"host": env["PGHOST"], "port": int(env["PGPORT"]), "user": env["PGUSER"],
               "dbname": env["PGDATABASE"], "dir": env["CITUS_DIR"]}
    finally:
        subprocess.run([str(CITUS_DOWN), env["CITUS_DIR"]], capture_output=True, text=True, timeout=120)


def dsn(citus, port=None, user=None):
    """Connection settings of the coordinator, or of the node on port, as user."""
    d = {k: v for k, v in citus.items() if k != "dir"}
    if port:
        d["port"] = port
    if user:
        d["user"] = user
    return d


class Cursor(psycopg2.extensions.cursor):
    """A cursor that also carries the centres the test data were drawn around."""
    centres = None


@pytest.fixture(scope="module")
def cur(citus):
    """A cursor on the coordinator with a plain table kl and distributed copies kd<N> on N shards."""
    conn = psycopg2.connect(**dsn(citus))
    conn.autocommit = True
    c = conn.cursor(cursor_factory=Cursor)
    rng = np.random.default_rng(11)
    centres = rng.normal(0, 10, size=(K, D))
    X = (centres[rng.integers(0, K, 20000)] + rng.normal(0, 1.5, size=(20000, D))).astype(np.float32)
    c.execute("CREATE TABLE kl (id bigint PRIMARY KEY, f real[], label integer)")
    rows = "\n".join(f"{i}\t{{{','.join(map(str, x))}}}\t\\N" for i, x in enumerate(X))
    c.copy_expert("COPY kl FROM STDIN", io.StringIO(rows + "\n"))
    for n in SHARDS:
        c.execute(f"SET citus.shard_count = {n}")
        c.execute(f"CREATE TABLE kd{n} (LIKE kl)")
        c.execute(f"SELECT create_distributed_table('kd{n}', 'id')")
        c.execute(f"INSERT INTO kd{n} SELECT * FROM kl")
    c.execute("RESET citus.shard_count")
    # an aggregate Citus cannot push down is an error instead of a silent gather
    c.execute("SET citus.coordinator_aggregation_strategy = 'disabled'")
    # the identities are the CPU's (test_device covers the others)
    c.execute("SET gpuclust.device = 'cpu'")
    c.centres = centres
    yield c
    conn.close()


def literal(C):
    """A float8[][] literal of C, every value exactly (repr of a float is its shortest round trip)."""
    return "{" + ",".join("{" + ",".join(repr(float(v)) for v in row) + "}" for row in C) + "}"


def one(cur, sql, args=()):
    cur.execute(sql, args)
    return cur.fetchone()[0]


def test_step_is_split_per_shard(cur):
    C = literal(cur.centres)
    cur.execute("SET citus.explain_all_tasks = on")
    try:
        for n in SHARDS:
            cur.execute(f"EXPLAIN (VERBOSE, COSTS OFF) SELECT gpu_kmeans_step(f, %s::float8[]) FROM kd{n}", [C])
            plan = "\n".join(r[0] for r in cur.fetchall())
            queries = [line for line in plan.splitlines() if "Query:" in line]
            assert len(queries) == n, plan
            if n == 1:
                # one shard: Citus sends the whole aggregate there (router query)
                assert "gpu_kmeans_step(" in queries[0] and "worker_partial_agg" not in plan, plan
                continue
            assert all("worker_partial_agg" in q and "gpu_kmeans_step" in q for q in queries), plan
            assert "coord_combine_agg" in plan, plan
    finally:
        cur.execute("RESET citus.explain_all_tasks")


def test_step_same_bits_on_any_number_of_shards(cur):
    C = literal(cur.centres)
    for metric in ("euclidean", "cosine"):
        single = one(cur, "SELECT gpu_kmeans_step(f, %s::float8[], %s)::text FROM kl", [C, metric])
        state = one(cur, "SELECT gpu_kmeans_step_state(f, %s::float8[], %s, 1)::text FROM kl", [C, metric])
        for n in SHARDS:
            assert one(cur, f"SELECT gpu_kmeans_step(f, %s::float8[], %s)::text FROM kd{n}", [C, metric]) == single
            assert one(cur, f"SELECT gpu_kmeans_step_state(f, %s::float8[], %s, 1)::text FROM kd{n}",
                       [C, metric]) == state


def test_partial_state_does_not_grow_with_rows(cur):
    """The text a shard ships for 10 times the rows is about as long (only the sums' digits grow)."""
    C = literal(cur.centres)
    cur.execute("SET citus.shard_count = 2")
    cur.execute("CREATE TABLE kbig (LIKE kl)")
    cur.execute("SELECT create_distributed_table('kbig', 'id')")
    cur.execute("RESET citus.shard_count")
    for r in range(10):
        cur.execute("INSERT INTO kbig SELECT id + %s * 100000, f, label FROM kl", [r])
    sql = ("SELECT max(length(result)) FROM run_command_on_shards(%s, "
           "$$SELECT gpu_kmeans_step_state(f, '" + C + "'::float8[], 'euclidean', 1)::text FROM %%s$$)")
    small = one(cur, sql, ["kd2"])
    big = one(cur, sql, ["kbig"])
    rows_big = one(cur, "SELECT count(*) FROM kbig")
    assert rows_big == 200000
    assert small > 0 and big <= 1.3 * small, (small, big)
    cur.execute("DROP TABLE kbig")


def model(cur, table, **kw):
    args = "".join(f", {name} => %s" for name in kw)
    cur.execute(f"SELECT cluster_id, centroid::text, size, inertia::text FROM "
                f"gpu_kmeans_fit_distributed('SELECT id, f FROM {table}', {K}{args}) ORDER BY cluster_id",
                list(kw.values()))
    return cur.fetchall()


def timing(cur):
    """The numbers of the last timing NOTICE of gpu_kmeans_fit_distributed."""
    notes = [n for n in cur.connection.notices if "kmeans_distributed" in n]
    cur.connection.notices.clear()
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", notes[-1])}


def test_fit_same_bits_as_single_node(cur):
    init = literal(cur.centres + 3.0)
    cur.execute("SET gpuclust.timing = on")
    try:
        for kw in ({"initial_centroids": init}, {"seed": 3}, {"seed": 4, "n_init": 2, "metric": "cosine"}):
            single = model(cur, "kl", **kw)
            assert timing(cur)["shard_calls"] == 0
            assert sum(r[2] for r in single) == 20000
            for n in SHARDS:
                for cache in (1024, 0):
                    cur.execute(f"SET gpuclust.kmeans_shard_cache = {cache}")
                    assert model(cur, f"kd{n}", **kw) == single, (n, kw, cache)
                    t = timing(cur)
                    # one call per shard and pass: n calls for each pass
                    assert t["shards"] == n and t["shard_calls"] == n * t["queries"], (n, t)
                    assert t["rescans"] == 0, t
                    if cache:
                        # each shard read once, then found by the same backend in every later pass
                        # (the steps and k-means||'s picks alike)
                        assert t["cache_fills"] == n and t["cache_hits"] == n * (t["queries"] - 1), (n, t)
                        # Hamerly's bounds spared full searches (every pass after the first has rows)
                        assert t["full_searches"] < 20000 * (t["queries"] - 1), (n, t)
                    else:
                        assert t["cache_fills"] == t["cache_hits"] == t["full_searches"] == 0, (n, t)
    finally:
        cur.execute("RESET gpuclust.timing")
        cur.execute("RESET gpuclust.kmeans_shard_cache")


def test_fit_runs_each_shard_on_a_backend_of_its_own(cur):
    """A worker serves each of its shards on a backend of its own throughout the fit, so that it runs
    them at once (the fit sets citus.force_max_query_parallelization for its own passes); the setting
    is as the caller left it afterwards, inside a transaction and outside."""
    cur.execute("BEGIN")
    try:
        assert len(model(cur, "kd8", seed=1)) == K
        # the placements keep their connections for the rest of the transaction
        cur.execute("SELECT pg_backend_pid() FROM kd8 WHERE ctid = '(0,1)'")
        pids = [r[0] for r in cur.fetchall()]
        assert len(pids) == 8 and len(set(pids)) == 8, pids
        assert one(cur, "SHOW citus.force_max_query_parallelization") == "off"
    finally:
        cur.execute("COMMIT")
    cur.execute("SET citus.force_max_query_parallelization = on")
    try:
        assert len(model(cur, "kd4", seed=1)) == K
        assert one(cur, "SHOW citus.force_max_query_parallelization") == "on"
    finally:
        cur.execute("RESET citus.force_max_query_parallelization")
    assert one(cur, "SHOW citus.force_max_query_parallelization") == "off"


def test_fit_of_many_shards_first_in_a_session(citus, cur):
    """A fit over a table of 96 shards as the first statement of new sessions: the same model as the
    plain table's (the check of the query once read the table and its columns from the query's plan
    after freeing it, and with this many shards the backend crashed)."""
    cur.execute("SET citus.shard_count = 96")
    cur.execute("CREATE TABLE kd96 (LIKE kl)")
    cur.execute("SELECT create_distributed_table('kd96', 'id')")
    cur.execute("RESET citus.shard_count")
    cur.execute("INSERT INTO kd96 SELECT * FROM kl")
    try:
        single = model(cur, "kl", seed=5)
        for _ in range(3):
            conn = psycopg2.connect(**dsn(citus))
            try:
                c = conn.cursor()
                c.execute("SET gpuclust.device = 'cpu'")
                assert model(c, "kd96", seed=5) == single
            finally:
                conn.close()
    finally:
        cur.execute("DROP TABLE kd96")


def test_shards_on_the_coordinator_keep_their_rows(cur):
    """Shards that the coordinator holds are called in the fit's own backend (Citus's local
    execution): they keep their rows between passes as the workers' shards do, with the same model."""
    cur.execute("SELECT citus_set_node_property(nodename, nodeport, 'shouldhaveshards', true) "
                "FROM pg_dist_node WHERE groupid = 0")
    try:
        cur.execute("SET citus.shard_count = 6")
        cur.execute("CREATE TABLE kco (LIKE kl)")
        cur.execute("SELECT create_distributed_table('kco', 'id')")
    finally:
        cur.execute("RESET citus.shard_count")
        cur.execute("SELECT citus_set_node_property(nodename, nodeport, 'shouldhaveshards', false) "
                    "FROM pg_dist_node WHERE groupid = 0")
    cur.execute("INSERT INTO kco SELECT * FROM kl")
    cur.execute("SELECT count(*) FROM pg_dist_shard_placement p JOIN pg_dist_shard s USING (shardid) "
                "JOIN pg_dist_node n ON n.nodename = p.nodename AND n.nodeport = p.nodeport "
                "WHERE s.logicalrelid = 'kco'::regclass AND n.groupid = 0")
    assert cur.fetchone()[0] > 0
    init = literal(cur.centres + 3.0)
    cur.execute("SET gpuclust.timing = on")
    try:
        got = model(cur, "kco", initial_centroids=init)
        t = timing(cur)
        assert t["shards"] == 6 and t["cache_fills"] == 6 and t["cache_hits"] == 6 * (t["queries"] - 1), t
        assert got == model(cur, "kl", initial_centroids=init)
    finally:
        cur.execute("RESET gpuclust.timing")
        cur.execute("DROP TABLE kco")


def set_on_workers(citus, setting):
    """ALTER SYSTEM SET setting (or RESET it when it has no '=') on both workers, and reload them."""
    for port in (citus["port"] + 1, citus["port"] + 2):
        conn = psycopg2.connect(**dsn(citus, port=port))
        conn.autocommit = True
        c = conn.cursor()
        c.execute("LOAD 'gpuclust'")       # its settings are known to ALTER SYSTEM once it is loaded
        c.execute(f"ALTER SYSTEM {'SET' if '=' in setting else 'RESET'} {setting}")
        c.execute("SELECT pg_reload_conf()")
        conn.close()


def shown_on_workers(citus, name):
    """The values of setting name in new sessions of both workers."""
    values = set()
    for port in (citus["port"] + 1, citus["port"] + 2):
        conn = psycopg2.connect(**dsn(citus, port=port))
        c = conn.cursor()
        c.execute("LOAD 'gpuclust'")
        c.execute(f"SHOW {name}")
        values.add(c.fetchone()[0])
        conn.close()
    return values


def test_fit_same_bits_on_any_number_of_worker_threads(citus, cur):
    """A shard's pass searches and tests Hamerly's bounds on the worker's gpuclust.cpu_threads threads
    (in blocks of 2,048 rows; here every part of a pass, gpuclust.kmeans_shard_thread_work = 0): the
    model is the same bit for bit with 1, 2 and 5 of them."""
    init = literal(cur.centres + 3.0)
    single = model(cur, "kl", initial_centroids=init)
    try:
        set_on_workers(citus, "gpuclust.kmeans_shard_thread_work = 0")
        for threads in (1, 5, 2):
            set_on_workers(citus, f"gpuclust.cpu_threads = {threads}")
            time.sleep(0.3)
            assert shown_on_workers(citus, "gpuclust.cpu_threads") == {str(threads)}
            assert shown_on_workers(citus, "gpuclust.kmeans_shard_thread_work") == {"0"}
            for n in (1, 2):
                assert model(cur, f"kd{n}", initial_centroids=init) == single, (threads, n)
    finally:
        set_on_workers(citus, "gpuclust.cpu_threads")
        set_on_workers(citus, "gpuclust.kmeans_shard_thread_work")


def test_shard_pass_threads_same_state(cur):
    """One shard call's passes (the first, which searches every row, then Hamerly's) on 1 and on 5
    threads of the backend that runs them: the same states, bit for bit, and the DEBUG1 line says
    how many threads a part ran on."""
    C1 = literal(cur.centres)
    # centroid 0 moved beside centroid 1: the rows of those two clusters are searched again (and
    # many change cluster), the others are settled by Hamerly's test
    moved = cur.centres.copy()
    moved[0] = cur.centres[1] + 0.3
    C2 = literal(moved)
    got = {}
    try:
        cur.execute("SET gpuclust.kmeans_shard_thread_work = 0")
        cur.execute("SET client_min_messages = debug1")
        for threads in (1, 5):
            cur.execute(f"SET gpuclust.cpu_threads = {threads}")
            cur.connection.notices.clear()
            cur.execute("BEGIN")
            try:
                states = []
                for p, C in ((1, C1), (2, C2)):
                    states.append(one(cur, "SELECT gpu_kmeans_shard_call('kl'::regclass, '(0,1)', 91, %s, "
                                           "'step:cpu', 'id', 'f', %s::float8[], 'euclidean', 1, 0, 0, 0, 0, 1024)",
                                      [p, C]))
            finally:
                cur.execute("COMMIT")
            debug = [n for n in cur.connection.notices if "kmeans_shard_step" in n]
            assert len(debug) == 2 and "cache=filled" in debug[0] and "cache=hit" in debug[1], debug
            assert all(f"threads={threads}" in d for d in debug), debug
            searched = int(re.search(r"searched=(\d+)", debug[1]).group(1))
            assert 0 < searched < 20000, debug      # Hamerly's test settled some rows, not all
            got[threads] = [st.split(":", 5)[5] for st in states]
        assert got[1] == got[5]
    finally:
        cur.execute("RESET client_min_messages")
        cur.execute("RESET gpuclust.cpu_threads")
        cur.execute("RESET gpuclust.kmeans_shard_thread_work")


def worker_caches(cur, table):
    """Per worker backend that serves table's shards now: {(fit, shard): rows} its cache holds
    (the tables are filled by INSERT, so every shard has a row at TID (0,1))."""
    cur.execute(f"SELECT pg_backend_pid() FROM {table} WHERE ctid = '(0,1)'")
    held = {pid: {} for (pid,) in cur.fetchall()}
    cur.execute(f"SELECT pg_backend_pid(), (gpu_kmeans_shard_cache()).* FROM {table} WHERE ctid = '(0,1)'")
    for pid, fit, shard, rows, k, nbytes in cur.fetchall():
        held.setdefault(pid, {})[(fit, shard)] = rows
    return held


def rows_held(held):
    return sum(r for v in held.values() for r in v.values())


def shard_call(cur, table, fit, passes, centroids, cache=1024):
    """gpu_kmeans_shard_call's step on every shard of table, as the fit calls it; the answers."""
    cur.execute(f"SELECT gpu_kmeans_shard_call(tableoid, ctid, %s, %s, 'step', 'id', 'f', %s::float8[], "
                f"'euclidean', 1, 0, 0, 0, 0, %s) FROM {table} WHERE gpu_kmeans_shard_once(tableoid, %s, %s)",
                [fit, next(passes), centroids, cache, fit, next(passes) - 1])
    return [r[0] for r in cur.fetchall()]


def test_cache_life(cur):
    """The workers' cache inside one coordinator transaction: kept between passes by the same backends,
    dropped at commit, by a rolled-back savepoint, and after a fit (in a transaction, and after an error)."""
    import itertools
    C = literal(cur.centres)
    passes = itertools.count(1)
    cur.execute("BEGIN")
    try:
        cur.execute("LOCK TABLE kd4 IN ACCESS SHARE MODE")
        first = shard_call(cur, "kd4", 77, passes, C)
        assert len(first) == 4 and all(a.split(":")[2] == "1" for a in first), first   # read into the cache
        again = shard_call(cur, "kd4", 77, passes, C)
        assert all(a.split(":")[2] == "2" for a in again), again                      # found there
        # the same state as the stateless step, bit for bit
        assert sorted(a.split(":", 5)[5] for a in again) == sorted(a.split(":", 5)[5] for a in first)
        held = worker_caches(cur, "kd4")
        assert rows_held(held) == 20000 and sum(len(v) for v in held.values()) == 4, held
        pids = set(held)
        # a rolled-back savepoint drops the cache of the backends that ran in it
        cur.execute("SAVEPOINT s")
        shard_call(cur, "kd4", 77, passes, C)
        cur.execute("ROLLBACK TO SAVEPOINT s")
        held = worker_caches(cur, "kd4")
        assert set(held) == pids and rows_held(held) == 0, held
        # a fit in the same transaction drops what it kept when it ends
        shard_call(cur, "kd4", 78, passes, C)
        assert rows_held(worker_caches(cur, "kd4")) == 20000
        assert len(model(cur, "kd4", seed=1)) == K
        held = worker_caches(cur, "kd4")
        assert set(held) == pids and rows_held(held) == 0, held
        shard_call(cur, "kd4", 79, passes, C)
        assert rows_held(worker_caches(cur, "kd4")) == 20000
    finally:
        cur.execute("COMMIT")
    # gone at commit: the connections Citus keeps answer, with nothing kept
    held = worker_caches(cur, "kd4")
    assert held and rows_held(held) == 0, held
    # after an error inside the transaction
    cur.execute("BEGIN")
    try:
        cur.execute("LOCK TABLE kd4 IN ACCESS SHARE MODE")
        shard_call(cur, "kd4", 80, passes, C)
        assert rows_held(worker_caches(cur, "kd4")) == 20000
        cur.execute("SAVEPOINT s")
        with pytest.raises(psycopg2.Error) as e:
            shard_call(cur, "kd4", 80, passes, "{{1,2,3}}")     # wrong dimensions: the shard's error
        assert re.match(r"k-means on shard \d+ of kd4 failed: the feature has 8 dimensions",
                        e.value.diag.message_primary), e.value.diag.message_primary
        cur.execute("ROLLBACK TO SAVEPOINT s")
        assert rows_held(worker_caches(cur, "kd4")) == 0
    finally:
        cur.execute("COMMIT")


def test_cache_over_the_cap(cur, slow):
    """A shard over its share of gpuclust.kmeans_shard_cache (the setting divided by the table's
    shards on the busiest node) is read again every pass, with the same answer."""
    init = literal(np.random.default_rng(2).normal(0, 1, size=(16, 32)))
    cur.execute("SET gpuclust.timing = on")
    try:
        got = {}
        # each shard holds 15000 rows of 32 features, 1.9 MB and 0.5 MB more for its ids, clusters
        # and bounds; 4 shards a worker: shares of 256, 4, 2 and 0.25 MB
        for cache, fills in ((1024, 8), (16, 8), (8, 0), (1, 0), (0, 0)):
            cur.execute(f"SET gpuclust.kmeans_shard_cache = {cache}")
            cur.execute("SELECT centroid::text, size FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kslow', 16, "
                        "max_iter => 4, tol => 0, initial_centroids => %s::float8[]) ORDER BY cluster_id", [init])
            got[cache] = cur.fetchall()
            t = timing(cur)
            assert t["cache_fills"] == fills, (cache, t)
        assert got[1024] == got[16] == got[8] == got[1] == got[0]
    finally:
        cur.execute("RESET gpuclust.timing")
        cur.execute("RESET gpuclust.kmeans_shard_cache")


def test_partitioned_table_takes_the_aggregate(cur):
    """A partitioned distributed table (its rows' tableoid is a partition's shard) goes through the
    aggregate queries, with the same model."""
    cur.execute("SET citus.shard_count = 4")
    cur.execute("CREATE TABLE kpart (id bigint, f real[], label integer) PARTITION BY RANGE (id)")
    cur.execute("CREATE TABLE kpart_a PARTITION OF kpart FOR VALUES FROM (0) TO (10000)")
    cur.execute("CREATE TABLE kpart_b PARTITION OF kpart FOR VALUES FROM (10000) TO (MAXVALUE)")
    cur.execute("SELECT create_distributed_table('kpart', 'id')")
    cur.execute("RESET citus.shard_count")
    cur.execute("INSERT INTO kpart SELECT * FROM kl")
    same_model_through_the_aggregate(cur, "kpart")


def same_model_through_the_aggregate(cur, table):
    """The fit over table (a copy of kl) makes no shard call and gives kl's model; drops table."""
    init = literal(cur.centres + 3.0)
    cur.execute("SET gpuclust.timing = on")
    try:
        got = model(cur, table, initial_centroids=init)
        assert timing(cur)["shard_calls"] == 0
        assert got == model(cur, "kl", initial_centroids=init)
    finally:
        cur.execute("RESET gpuclust.timing")
        cur.execute(f"DROP TABLE {table}")


def test_columnar_table_takes_the_aggregate(cur):
    """A distributed table in Citus's columnar storage (no TIDs for the passes' probes) goes through
    the aggregate queries, with the same model, where the passes' first probe failed."""
    cur.execute("CREATE EXTENSION IF NOT EXISTS citus_columnar")
    cur.execute("SET citus.shard_count = 4")
    cur.execute("CREATE TABLE kcol (id bigint, f real[], label integer) USING columnar")
    cur.execute("SELECT create_distributed_table('kcol', 'id')")
    cur.execute("RESET citus.shard_count")
    cur.execute("INSERT INTO kcol SELECT * FROM kl")
    same_model_through_the_aggregate(cur, "kcol")


def test_shard_step_is_the_step_state(cur):
    """gpu_kmeans_shard_step over a relation is gpu_kmeans_step_state over its rows, bit for bit."""
    C = literal(cur.centres)
    for metric, mode in (("euclidean", 1), ("cosine", 1), ("cosine", 2), ("euclidean", 0)):
        a = one(cur, "SELECT gpu_kmeans_shard_step('kl', 'f', %s::float8[], %s, %s)::text", [C, metric, mode])
        b = one(cur, "SELECT gpu_kmeans_step_state(f, %s::float8[], %s, %s)::text FROM kl", [C, metric, mode])
        assert a == b, (metric, mode)


def test_empty_shards(cur):
    """8 shards, three of them emptied: the same model as the plain table of the same rows."""
    cur.execute("SET citus.shard_count = 8")
    cur.execute("CREATE TABLE kempty (LIKE kl)")
    cur.execute("SELECT create_distributed_table('kempty', 'id')")
    cur.execute("RESET citus.shard_count")
    cur.execute("INSERT INTO kempty SELECT * FROM kl")
    cur.execute("SELECT shardid FROM pg_dist_shard WHERE logicalrelid = 'kempty'::regclass ORDER BY shardid LIMIT 3")
    shards = [r[0] for r in cur.fetchall()]
    cur.execute("SELECT array_agg(id) FROM kl WHERE get_shard_id_for_distribution_column('kempty', id) = ANY(%s)",
                [shards])
    cur.execute("DELETE FROM kempty WHERE id = ANY(%s)", [cur.fetchone()[0]])
    cur.execute("SELECT count(*) FROM run_command_on_shards('kempty', $$SELECT count(*) FROM %s$$) WHERE result = '0'")
    assert cur.fetchone()[0] == 3
    cur.execute("CREATE TABLE klempty AS SELECT * FROM kempty")
    init = literal(cur.centres + 3.0)
    for kw in ({"initial_centroids": init}, {"seed": 5}):
        assert model(cur, "kempty", **kw) == model(cur, "klempty", **kw), kw
    cur.execute("DROP TABLE kempty, klempty")


def test_null_and_non_finite_features(cur):
    cur.execute("SET citus.shard_count = 4")
    cur.execute("CREATE TABLE kbad (LIKE kl)")
    cur.execute("SELECT create_distributed_table('kbad', 'id')")
    cur.execute("RESET citus.shard_count")
    cur.execute("INSERT INTO kbad SELECT * FROM kl WHERE id < 2000")
    cur.execute("CREATE TABLE klbad AS SELECT * FROM kbad")
    for table in ("kbad", "klbad"):
        cur.execute(f"INSERT INTO {table} (id, f) VALUES (100000, NULL)")
    errors = {}
    for table in ("kbad", "klbad"):
        with pytest.raises(psycopg2.Error) as e:
            model(cur, table, seed=1)
        errors[table] = (e.value.pgcode, e.value.diag.message_primary)
    assert errors["kbad"] == errors["klbad"] == ("22004", "the feature is NULL in 1 row of the query"), errors
    for bad in ("NaN", "Infinity", "-Infinity"):
        for table in ("kbad", "klbad"):
            cur.execute(f"UPDATE {table} SET f = %s WHERE id = 100000", ["{" + ",".join([bad] * D) + "}"])
        with pytest.raises(psycopg2.Error) as plain:
            model(cur, "klbad", seed=1)
        for cache in (1024, 0):
            cur.execute(f"SET gpuclust.kmeans_shard_cache = {cache}")
            with pytest.raises(psycopg2.Error) as e:
                model(cur, "kbad", seed=1)
            cur.execute("RESET gpuclust.kmeans_shard_cache")
            msg = e.value.diag.message_primary
            # the plain table's error, with the shard that raised it
            assert re.match(r"k-means on shard \d+ of kbad failed: a feature of this row is -?" + bad.lstrip("-"),
                            msg), msg
            assert msg.endswith(plain.value.diag.message_primary), (msg, plain.value.diag.message_primary)
            assert e.value.pgcode == plain.value.pgcode, (e.value.pgcode, plain.value.pgcode)
    cur.execute("DELETE FROM kbad WHERE id = 100000")
    cur.execute("DELETE FROM klbad WHERE id = 100000")
    assert model(cur, "kbad", seed=1) == model(cur, "klbad", seed=1)
    cur.execute("DROP TABLE kbad, klbad")


def test_role_without_select(cur, citus):
    cur.execute("CREATE ROLE kmeans_nopriv LOGIN")
    try:
        conn = psycopg2.connect(**dsn(citus, user="kmeans_nopriv"))
        conn.autocommit = True
        c = conn.cursor()
        with pytest.raises(psycopg2.Error) as plain:
            c.execute("SELECT id, f FROM kd4")
        with pytest.raises(psycopg2.Error) as fit:
            c.execute(f"SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kd4', {K}, seed => 1)")
        assert plain.value.pgcode == fit.value.pgcode == "42501"
        assert plain.value.diag.message_primary == fit.value.diag.message_primary == "permission denied for table kd4"
        # the shard function itself runs as the caller (SECURITY INVOKER)
        with pytest.raises(psycopg2.Error) as shard:
            c.execute("SELECT gpu_kmeans_shard_step('kl', 'f', %s::float8[])", [literal(cur.centres)])
        assert shard.value.pgcode == "42501" and shard.value.diag.message_primary == "permission denied for table kl"
        conn.close()
    finally:
        cur.execute("DROP ROLE kmeans_nopriv")


@pytest.fixture(scope="module")
def slow(cur):
    """A distributed table whose iterations take a while: 8 shards of 32 features, k = 64."""
    rng = np.random.default_rng(5)
    X = rng.normal(0, 1, size=(120000, 32)).astype(np.float32)
    cur.execute("SET citus.shard_count = 8")
    cur.execute("CREATE TABLE kslow (id bigint PRIMARY KEY, f real[])")
    cur.execute("SELECT create_distributed_table('kslow', 'id')")
    cur.execute("RESET citus.shard_count")
    cur.copy_expert("COPY kslow FROM STDIN", io.StringIO(
        "".join(f"{i}\t{{{','.join(map(str, x))}}}\n" for i, x in enumerate(X))))
    yield "SELECT count(*) FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kslow', 64, seed => 1, " \
          "max_iter => 100000, tol => 0)"
    cur.execute("DROP TABLE kslow")


def shard_calls_running(citus):
    """The gpuclust shard calls running on the workers."""
    running = 0
    for port in (citus["port"] + 1, citus["port"] + 2):
        try:
            conn = psycopg2.connect(**dsn(citus, port=port))
        except psycopg2.OperationalError:
            continue
        conn.autocommit = True
        c = conn.cursor()
        # a running shard call, or a worker transaction left open (it would hold the fit's cache)
        c.execute("SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND "
                  "((state = 'active' AND query LIKE '%gpu_kmeans_shard_%') OR state LIKE 'idle in transaction%')")
        running += c.fetchone()[0]
        conn.close()
    return running


def wait_gone(citus, limit=1.0):
    """Seconds until no shard call runs on any worker (None when still running after limit)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 <= limit:
        if shard_calls_running(citus) == 0:
            return time.monotonic() - t0
        time.sleep(0.02)
    return None


def run_fit_in_thread(citus, sql, setup=()):
    """Starts sql on a new connection in a thread; returns (thread, connection, outcome dict)."""
    conn = psycopg2.connect(**dsn(citus))
    conn.autocommit = True
    out = {}

    def go():
        c = conn.cursor()
        try:
            for s in setup:
                c.execute(s)
            c.execute(sql)
            out["result"] = c.fetchall()
        except psycopg2.Error as e:
            out["error"] = e
        out["t"] = time.monotonic()

    th = threading.Thread(target=go)
    th.start()
    return th, conn, out


def wait_running(citus, out, limit=30):
    """Waits until shard calls run on the workers (the fit is in its passes)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit and "t" not in out:
        if shard_calls_running(citus) > 0:
            return
        time.sleep(0.05)
    pytest.fail(f"the fit never ran shard calls: {out}")


def test_statement_timeout_stops_workers(citus, slow):
    th, conn, out = run_fit_in_thread(citus, slow, ["SET statement_timeout = '3s'"])
    th.join(60)
    assert isinstance(out.get("error"), psycopg2.errors.QueryCanceled), out
    gone = wait_gone(citus)
    assert gone is not None, "shard calls still running a second after statement_timeout"
    conn.close()


def test_cancel_stops_workers(citus, slow):
    th, conn, out = run_fit_in_thread(citus, slow)
    wait_running(citus, out)
    time.sleep(1.0)
    t0 = time.monotonic()
    conn.cancel()
    th.join(60)
    assert isinstance(out.get("error"), psycopg2.errors.QueryCanceled), out
    assert out["t"] - t0 < 1.0, out["t"] - t0
    assert wait_gone(citus) is not None, "shard calls still running a second after cancel"
    conn.close()


def as_postgres(*cmd):
    return subprocess.run(["runuser", "-u", "postgres", "--", *cmd], cwd="/", capture_output=True, text=True,
                          timeout=120)


def test_worker_stopped_mid_fit(cur, citus, slow):
    d = Path(citus["dir"]) / "worker2"
    th, conn, out = run_fit_in_thread(citus, slow)
    wait_running(citus, out)
    time.sleep(0.5)
    stop = as_postgres("/usr/lib/postgresql/15/bin/pg_ctl", "-D", str(d), "-m", "immediate", "-w", "stop")
    assert stop.returncode == 0, stop.stderr
    try:
        th.join(60)
        e = out.get("error")
        assert isinstance(e, psycopg2.Error), out
        assert e.pgcode == "08006", (e.pgcode, str(e))
        assert re.match(r"k-means on the shards of kslow failed: ", e.diag.message_primary), e.diag.message_primary
        assert "worker node went away" in e.diag.message_hint
    finally:
        start = as_postgres("/usr/lib/postgresql/15/bin/pg_ctl", "-D", str(d), "-l", f"{d}.log", "-w", "-t", "60",
                            "start")
        assert start.returncode == 0, start.stderr
    conn.close()
    # nothing left behind: no call running, no prepared transaction, on any node
    assert wait_gone(citus, 5.0) is not None
    for port in (citus["port"], citus["port"] + 1, citus["port"] + 2):
        c = psycopg2.connect(**dsn(citus, port=port))
        k = c.cursor()
        k.execute("SELECT count(*) FROM pg_prepared_xacts")
        assert k.fetchone()[0] == 0, port
        c.close()
    # and the cluster fits again
    for attempt in range(20):
        try:
            assert len(model(cur, "kd2", seed=1)) == K
            break
        except psycopg2.Error:
            if attempt == 19:
                raise
            time.sleep(0.5)


def test_fit_close_to_gpu_kmeans(cur):
    """From the same centroids, gpu_kmeans_centroids on the gathered rows: the same sizes, centroids
    equal up to the rounding of the sums."""
    init = literal(cur.centres + 3.0)
    dist = model(cur, "kd4", initial_centroids=init)
    cur.execute(f"SELECT cluster_id, centroid, size FROM gpu_kmeans_centroids('SELECT id, f FROM kl', {K}, "
                f"initial_centroids => %s::float8[], device => 'cpu') ORDER BY cluster_id", [init])
    ref = cur.fetchall()
    assert [r[2] for r in dist] == [r[2] for r in ref]
    for (_, c, _, _), (_, rc, _) in zip(dist, ref):
        c = np.array([float(v) for v in c.strip("{}").split(",")])
        assert np.allclose(c, rc, rtol=1e-12, atol=1e-12)


def test_device(cur):
    """gpuclust.device on the coordinator goes with every pass: 'cpu' and 'auto' (4 shards of 5000 rows,
    fewer than gpuclust.gpu_min_rows, or no GPU) search on the workers' CPUs and give the CPU's model;
    'gpu' without a GPU is the error gpu_kmeans_assign gives, naming the shard, before any model; with a
    GPU every shard's search runs there."""
    init = literal(cur.centres + 3.0)
    gpus = one(cur, "SELECT count(*) FROM gpuclust_devices()")
    cur.execute("SET gpuclust.timing = on")
    try:
        ref = model(cur, "kl", initial_centroids=init)
        for device in ("cpu", "auto", "gpu"):
            cur.execute(f"SET gpuclust.device = '{device}'")
            for cache in (1024, 0):
                cur.execute(f"SET gpuclust.kmeans_shard_cache = {cache}")
                if device == "gpu" and not gpus:
                    with pytest.raises(psycopg2.Error) as e:
                        model(cur, "kd4", initial_centroids=init)
                    with pytest.raises(psycopg2.Error) as plain:
                        cur.execute("SELECT count(*) FROM gpu_kmeans_assign('SELECT id, f FROM kl', %s::float8[])",
                                    [init])
                    assert plain.value.pgcode == e.value.pgcode == "55000", (plain.value.pgcode, e.value.pgcode)
                    assert plain.value.diag.message_primary == "no usable GPU for gpuclust"
                    assert re.fullmatch(r"k-means on shard \d+ of kd4 failed: no usable GPU for gpuclust",
                                        e.value.diag.message_primary), e.value.diag.message_primary
                    assert e.value.diag.message_detail == plain.value.diag.message_detail
                    assert e.value.diag.message_hint == plain.value.diag.message_hint
                    # the stateless step over a relation, as gpu_kmeans_assign
                    with pytest.raises(psycopg2.Error) as step:
                        cur.execute("SELECT gpu_kmeans_shard_step('kl', 'f', %s::float8[]) IS NULL", [init])
                    assert (step.value.pgcode, step.value.diag.message_primary) == ("55000", "no usable GPU for gpuclust")
                    continue
                got = model(cur, "kd4", initial_centroids=init)
                t = timing(cur)
                if device == "gpu":
                    assert t["gpu_steps"] > 0 and t["gpu_searches"] >= 20000, t
                    assert [r[2] for r in got] == [r[2] for r in ref]
                    for (_, c, _, _), (_, rc, _, _) in zip(got, ref):
                        assert np.allclose(np.array(c.strip("{}").split(","), dtype=float),
                                           np.array(rc.strip("{}").split(","), dtype=float), rtol=1e-9)
                else:
                    assert got == ref, (device, cache)
                    assert t["gpu_steps"] == t["gpu_searches"] == 0, (device, cache, t)
        # a shard call says where it searched: in its answer and at DEBUG1
        cur.execute("SET gpuclust.device = 'cpu'")
        cur.execute("SET client_min_messages = debug1")
        cur.connection.notices.clear()
        answer = one(cur, "SELECT gpu_kmeans_shard_call('kl'::regclass, '(0,1)', 1, 1, 'step:auto', 'id', 'f', "
                          "%s::float8[], 'euclidean', 1, 0, 0, 0, 0, 0)", [init])
        cur.execute("RESET client_min_messages")
        assert answer.split(":")[4] == ("20000" if gpus else "0"), answer[:40]
        debug = [n for n in cur.connection.notices if "kmeans_shard_step" in n]
        assert debug and f"device={'gpu' if gpus else 'cpu'}" in debug[-1] and "rows=20000" in debug[-1], debug
    finally:
        cur.execute("RESET client_min_messages")
        cur.execute("RESET gpuclust.timing")
        cur.execute("RESET gpuclust.kmeans_shard_cache")
        cur.execute("SET gpuclust.device = 'cpu'")


def test_predict_pushed_down_and_labels(cur):
    cur.execute("SELECT array_agg(centroid ORDER BY cluster_id) FROM "
                f"gpu_kmeans_fit_distributed('SELECT id, f FROM kd4', {K}, seed => 1)")
    M = cur.fetchone()[0]
    for sql in ("SELECT id, gpu_kmeans_predict(f, %s::float8[]) FROM kd4",
                "UPDATE kd4 SET label = gpu_kmeans_predict(f, %s::float8[])",
                "CREATE TABLE labels AS SELECT id, gpu_kmeans_predict(f, %s::float8[]) AS label FROM kd4"):
        cur.execute("EXPLAIN (VERBOSE, COSTS OFF) " + sql, [literal(M)])
        plan = "\n".join(r[0] for r in cur.fetchall())
        queries = [line for line in plan.splitlines() if "Query:" in line]
        assert queries and all("gpu_kmeans_predict" in q for q in queries), plan
    cur.execute("UPDATE kd4 SET label = gpu_kmeans_predict(f, %s::float8[])", [literal(M)])
    cur.execute("CREATE TABLE labels AS SELECT id, gpu_kmeans_predict(f, %s::float8[]) AS label FROM kd4",
                [literal(M)])
    cur.execute("SELECT a.id, a.cluster_id, d.label, l.label FROM "
                "gpu_kmeans_assign('SELECT id, f FROM kl', %s::float8[], device => 'cpu') a "
                "JOIN kd4 d USING (id) JOIN labels l USING (id)", [literal(M)])
    rows = cur.fetchall()
    assert len(rows) == 20000
    assert all(r[1] == r[2] == r[3] for r in rows)
    cur.execute("DROP TABLE labels")
