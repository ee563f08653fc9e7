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
  * gpu_kmeans_fit_distributed on the distributed tables gives the plain
    table's model bit for bit, from given centroids and from k-means||, with
    every step query pushed down (citus.coordinator_aggregation_strategy =
    'disabled' turns a gathered aggregate into an error);
  * gpu_kmeans_predict is pushed down in SELECT, UPDATE and CREATE TABLE AS
    and gives gpu_kmeans_assign's labels.

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
from pathlib import Path

import numpy as np
import psycopg2
import pytest

ROOT = Path(__file__).resolve().parent.parent
CITUS_UP = Path(os.environ.get("GPUCLUST_CITUS_UP") or ROOT.parent / "shared" / "citus" / "citus-up")
CITUS_DOWN = Path(os.environ.get("GPUCLUST_CITUS_DOWN") or CITUS_UP.with_name("citus-down"))
PORT = int(os.environ.get("GPUCLUST_CITUS_PORT", "9700"))
SHARDS = (1, 2, 4, 7)
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
               "dbname": env["PGDATABASE"]}
    finally:
        subprocess.run([str(CITUS_DOWN), env["CITUS_DIR"]], capture_output=True, text=True, timeout=120)


class Cursor(psycopg2.extensions.cursor):
    """A cursor that also carries the centres the test data were drawn around."""
    centres = None


@pytest.fixture(scope="module")
def cur(citus):
    """A cursor on the coordinator with a plain table kl and distributed copies kd<N> on N shards."""
    conn = psycopg2.connect(**citus)
    conn.autocommit = True
    c = conn.cursor(cursor_factory=Cursor)
    rng = np.random.default_rng(11)
    centres = rng.normal(0, 10, size=(K, D))
    X = (centres[rng.integers(0, K, 20000)] + rng.normal(0, 1.5, size=(20000, D))).astype(np.float32)
    c.execute("CREATE TABLE kl (id bigint PRIMARY KEY, f real[], label integer)")
    rows = "\n".join(f"{i}\t{{{','.join(map(str, x))}}}\t\\N" for i, x in enumerate(X))
    import io
    c.copy_expert("COPY kl FROM STDIN", io.StringIO(rows + "\n"))
    for n in SHARDS:
        c.execute(f"SET citus.shard_count = {n}")
        c.execute(f"CREATE TABLE kd{n} (LIKE kl)")
        c.execute(f"SELECT create_distributed_table('kd{n}', 'id')")
        c.execute(f"INSERT INTO kd{n} SELECT * FROM kl")
    c.execute("RESET citus.shard_count")
    # an aggregate Citus cannot push down is an error instead of a silent gather
    c.execute("SET citus.coordinator_aggregation_strategy = 'disabled'")
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


def test_fit_same_bits_as_single_node(cur):
    init = literal(cur.centres + 3.0)
    for kw in ({"initial_centroids": init}, {"seed": 3}, {"seed": 4, "n_init": 2, "metric": "cosine"}):
        single = model(cur, "kl", **kw)
        assert sum(r[2] for r in single) == 20000
        for n in SHARDS:
            assert model(cur, f"kd{n}", **kw) == single, (n, kw)


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
