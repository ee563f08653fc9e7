"""Times k-means on a Citus cluster on one machine (coordinator + 2 workers), from the same initial
centroids, tol = 0, a fixed number of iterations:

  * gpu_kmeans_fit_distributed over the distributed table: each pass one ordinary distributed query
    with one gpu_kmeans_shard_call per shard, all shards at once; the worker backends keep the rows,
    labels and Hamerly bounds between passes (gpuclust.kmeans_shard_cache), and again with the cache
    off (every pass reads and searches every row, the stateless step);
  * one single-node brute-force assign-and-sum pass over the same rows in a plain table of the
    coordinator: gpu_kmeans_shard_step over the whole table in one backend, and gpu_kmeans_assign
    alone with gpuclust.cpu_threads = T;
  * gpu_kmeans_centroids over the distributed table (every row pulled to the coordinator) and over
    the plain table (Hamerly's bounds, no distribution), on --device;
  * the fixed cost of a pass of 1-row calls, one per shard: Citus's run_command_on_shards (a new
    connection per shard and call) against the fit's ordinary distributed query in one transaction;
  * the bytes one iteration moves (the shards' states) against the table's size;
  * the identity: the centroids of the distributed fit on 2, 4 and 8 shards, cache on and off,
    against the plain table's (single-node brute-force Lloyd with exact sums), on the first
    --check-rows rows.

Prints a table; every ratio comes from this one run.

    python3 bench/kmeans_citus_bench.py [--rows N] [--dim D] [--k K] [--iters I] [--shards S]
                                        [--threads T] [--port P] [--check-rows M] [--device cpu|gpu]

Needs root (citus-up installs Citus and runs the servers as postgres), Debian 12's postgresql-15,
python3-numpy and python3-psycopg2, gpuclust built and installed, and a citus-up:
../shared/citus/citus-up, or the one GPUCLUST_CITUS_UP names.

On the 16-core GPU machine, in one command from the repository root, with a copy of
../shared/citus in the tree (an untracked folder travels with the working tree):

    cp -r ../shared/citus citus-fixture     # here, once; do not commit it
    # there:
    make -j16 && make install && GPUCLUST_CITUS_UP=$PWD/citus-fixture/citus-up \\
        python3 bench/kmeans_citus_bench.py --rows 10000000 --threads 16 --device gpu --port 9790
"""
import argparse
import io
import os
import re
import subprocess
import time
from pathlib import Path

import numpy as np
import psycopg2

ROOT = Path(__file__).resolve().parent.parent
CITUS_UP = Path(os.environ.get("GPUCLUST_CITUS_UP") or ROOT.parent / "shared" / "citus" / "citus-up")
CITUS_DOWN = Path(os.environ.get("GPUCLUST_CITUS_DOWN") or CITUS_UP.with_name("citus-down"))

p = argparse.ArgumentParser()
p.add_argument("--rows", type=int, default=1_000_000)
p.add_argument("--dim", type=int, default=32)
p.add_argument("--k", type=int, default=100)
p.add_argument("--iters", type=int, default=10)
p.add_argument("--shards", type=int, default=8)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--check-rows", type=int, default=200_000)
p.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
p.add_argument("--port", type=int, default=int(os.environ.get("GPUCLUST_CITUS_PORT", "9700")))
a = p.parse_args()

up = subprocess.run([str(CITUS_UP), "--port", str(a.port), "--extension", "gpuclust"],
                    capture_output=True, text=True, check=True)
env = dict(re.findall(r"^export (\w+)=(\S+)$", up.stdout, re.M))


def best(cur, sql, args=(), n=3):
    """Best wall time of n runs of sql, in seconds."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        cur.execute(sql, args)
        cur.fetchall()
        times.append(time.perf_counter() - t0)
    return min(times)


try:
    conn = psycopg2.connect(host=env["PGHOST"], port=int(env["PGPORT"]), user=env["PGUSER"],
                            dbname=env["PGDATABASE"])
    conn.autocommit = True
    cur = conn.cursor()
    rng = np.random.default_rng(11)
    centres = rng.normal(0, 10, size=(a.k, a.dim))
    X = (centres[rng.integers(0, a.k, a.rows)] + rng.normal(0, 2, size=(a.rows, a.dim))).astype(np.float32)
    cur.execute("CREATE TABLE bl (id bigint PRIMARY KEY, f real[])")
    for s in range(0, a.rows, 100_000):
        buf = io.StringIO("".join(f"{s + i}\t{{{','.join(map(str, x))}}}\n" for i, x in enumerate(X[s:s + 100_000])))
        cur.copy_expert("COPY bl FROM STDIN", buf)
    cur.execute(f"SET citus.shard_count = {a.shards}")
    cur.execute("CREATE TABLE bd (LIKE bl)")
    cur.execute("SELECT create_distributed_table('bd', 'id')")
    cur.execute("INSERT INTO bd SELECT * FROM bl")
    cur.execute("VACUUM ANALYZE bl")
    cur.execute("VACUUM ANALYZE bd")
    C = "{" + ",".join("{" + ",".join(repr(float(v)) for v in row) + "}" for row in X[:a.k]) + "}"
    cur.execute(f"SET gpuclust.cpu_threads = {a.threads}")
    cur.execute("SET gpuclust.timing = on")

    def notice():
        found = [n for n in conn.notices if "kmeans_distributed" in n]
        conn.notices.clear()
        return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", found[-1])} if found else {}

    def fit(table, iters=a.iters, init=C, cache=None):
        if cache is not None:
            cur.execute(f"SET gpuclust.kmeans_shard_cache = {cache}")
        conn.notices.clear()
        t0 = time.perf_counter()
        cur.execute("SELECT cluster_id, centroid::text, size FROM gpu_kmeans_fit_distributed("
                    f"'SELECT id, f FROM {table}', %s, max_iter => %s, tol => 0, "
                    "initial_centroids => %s::float8[]) ORDER BY cluster_id", [a.k, iters, init])
        rows = cur.fetchall()
        t = time.perf_counter() - t0
        if cache is not None:
            cur.execute("RESET gpuclust.kmeans_shard_cache")
        return t, notice(), rows

    def centroids(table):
        conn.notices.clear()
        t0 = time.perf_counter()
        cur.execute(f"SELECT sum(size) FROM gpu_kmeans_centroids('SELECT id, f FROM {table}', %s, max_iter => %s, "
                    "tol => 0, initial_centroids => %s::float8[], device => %s)", [a.k, a.iters, C, a.device])
        cur.fetchall()
        t = time.perf_counter() - t0
        its = [int(m) for n in conn.notices for m in re.findall(r"iterations=(\d+)", n)]
        conn.notices.clear()
        return t, (its[-1] if its else a.iters)

    dist, dist_n, dist_rows = fit("bd")
    dist_it = dist_n["iterations"]
    nocache, nocache_n, nocache_rows = fit("bd", cache=0)
    cur.execute("SET gpuclust.timing = off")
    step_single = best(cur, "SELECT gpu_kmeans_shard_step('bl', 'f', %s::float8[]) IS NOT NULL", [C])
    assign_single = best(cur, "SELECT count(*) FROM gpu_kmeans_assign('SELECT id, f FROM bl', %s::float8[], "
                              "device => %s)", [C, a.device])
    cur.execute("SET gpuclust.timing = on")
    gathered, gathered_it = centroids("bd")
    single, single_it = centroids("bl")
    cur.execute("SELECT sum(length(result)), max(length(result)) FROM run_command_on_shards('bd', "
                "$$SELECT gpu_kmeans_shard_step(%L::regclass, 'f', '" + C + "'::float8[])::text$$)")
    total_bytes, shard_bytes = cur.fetchone()
    cur.execute("SELECT pg_total_relation_size('bl')")
    table_bytes = cur.fetchone()[0]

    # the fixed cost of a pass of trivial calls, one per shard
    rounds = 10
    old_pass = best(cur, "SELECT * FROM run_command_on_shards('bd', $$SELECT gpu_kmeans_row_hash(1, 1, 0)$$)")
    cur.execute("BEGIN")
    cur.execute("LOCK TABLE bd IN ACCESS SHARE MODE")
    cur.execute("SELECT gpu_kmeans_row_hash(1, 1, 0) FROM bd WHERE ctid = '(0,1)'")
    t0 = time.perf_counter()
    for _ in range(rounds):
        cur.execute("SELECT gpu_kmeans_row_hash(1, 1, 0), pg_backend_pid() FROM bd WHERE ctid = '(0,1)'")
        cur.fetchall()
    new_pass = (time.perf_counter() - t0) / rounds
    cur.execute("SELECT count(DISTINCT p) FROM (SELECT pg_backend_pid() p FROM bd WHERE ctid = '(0,1)') q")
    backends = cur.fetchone()[0]
    cur.execute("COMMIT")

    # identity on 2, 4 and 8 shards (the first --check-rows rows), 5 iterations, cache on and off
    m = min(a.check_rows, a.rows)
    cur.execute(f"CREATE TABLE cl AS SELECT * FROM bl WHERE id < {m}")
    _, _, ref = fit("cl", 5)
    same = {}
    for n in (2, 4, 8):
        cur.execute(f"SET citus.shard_count = {n}")
        cur.execute(f"CREATE TABLE c{n} (LIKE bl)")
        cur.execute(f"SELECT create_distributed_table('c{n}', 'id')")
        cur.execute(f"INSERT INTO c{n} SELECT * FROM cl")
        _, t, got = fit(f"c{n}", 5)
        _, _, got_off = fit(f"c{n}", 5, cache=0)
        same[n] = (got == ref and got_off == ref, t.get("shard_calls"), t.get("cache_hits"))

    per_it = 1000 * dist / dist_it
    print(f"\n{a.rows} rows x {a.dim} (real[]), k = {a.k}, {a.iters} iterations (tol = 0), "
          f"{a.shards} shards on 2 workers, gpuclust.cpu_threads = {a.threads}, gpu_kmeans_centroids and "
          f"gpu_kmeans_assign on {a.device}, {os.cpu_count()} cores\n")
    print("| run | seconds | iterations | per iteration (ms) |")
    print("|---|---:|---:|---:|")
    print(f"| gpu_kmeans_fit_distributed, distributed table, rows kept on the workers ({dist_n['queries']} passes of "
          f"{a.shards} shard calls) | {dist:.2f} | {dist_it} | {per_it:.0f} |")
    print(f"| the same, gpuclust.kmeans_shard_cache = 0 (every pass reads and searches every row) | {nocache:.2f} | "
          f"{nocache_n['iterations']} | {1000 * nocache / nocache_n['iterations']:.0f} |")
    print(f"| one assign-and-sum pass, plain table, one backend (gpu_kmeans_shard_step, best of 3) "
          f"| {step_single:.2f} | 1 | {1000 * step_single:.0f} |")
    print(f"| one assignment, plain table (gpu_kmeans_assign, {a.threads} threads, best of 3) "
          f"| {assign_single:.2f} | 1 | {1000 * assign_single:.0f} |")
    print(f"| gpu_kmeans_centroids, distributed table (rows gathered) | {gathered:.2f} | {gathered_it} | "
          f"{1000 * gathered / gathered_it:.0f} |")
    print(f"| gpu_kmeans_centroids, plain table (Hamerly's bounds) | {single:.2f} | {single_it} | "
          f"{1000 * single / single_it:.0f} |")
    print(f"\ndistributed fit per iteration / one single-node assign-and-sum pass: {per_it / (1000 * step_single):.2f}")
    print(f"distributed fit / gpu_kmeans_centroids over the gathered rows: {dist / gathered:.2f}")
    print(f"distributed fit, cache off / gpu_kmeans_centroids over the gathered rows: {nocache / gathered:.2f}")
    print(f"the fit's shard calls: {dist_n['shard_calls']}, of which {dist_n['cache_fills']} read the rows into "
          f"the cache and {dist_n['cache_hits']} found them there; {dist_n['full_searches']} row searches over all "
          f"centroids (a full pass is {a.rows}); {dist_n['rescans']} passes asked again without the probes")
    print(f"centroids of the two fits identical: {dist_rows == nocache_rows}")
    print(f"fixed cost of a pass of {a.shards} trivial calls: run_command_on_shards {1000 * old_pass:.1f} ms "
          f"(best of 3), the fit's distributed query in one transaction {1000 * new_pass:.1f} ms "
          f"(mean of {rounds}, {backends} worker backends)")
    print(f"one iteration moves {total_bytes} bytes of partial states ({shard_bytes} per shard at most); "
          f"the table is {table_bytes} bytes")
    print(f"centroids after 5 iterations on {m} rows, distributed (cache on and off) against the plain table: " +
          ", ".join(f"{n} shards {'identical' if ok else 'DIFFERENT'} ({calls} shard calls, {hits} cache hits)"
                    for n, (ok, calls, hits) in same.items()))
finally:
    subprocess.run([str(CITUS_DOWN), env.get("CITUS_DIR", "")], capture_output=True)
