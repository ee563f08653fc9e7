"""Times k-means on a Citus cluster on one machine: gpu_kmeans_fit_distributed over a
distributed table (coordinator + workers, CPU back end) against gpu_kmeans_centroids over
the same rows in a plain table of the coordinator, from the same initial centroids, tol = 0,
at most a fixed number of iterations (the gpuclust.timing notice tells how many ran); one
gpu_kmeans_step over the distributed table; and the bytes one iteration's partial states
take on the network. Prints a table.

    python3 bench/kmeans_citus_bench.py [--rows N] [--dim D] [--k K] [--iters I]
                                        [--shards S] [--threads T] [--port P]

Needs root and a citus-up (../shared/citus/citus-up, or GPUCLUST_CITUS_UP for another
PostgreSQL 15) and gpuclust installed. The single-node run uses gpuclust.cpu_threads = T;
the distributed run uses every worker's backends (citus.max_adaptive_executor_pool_size
= T per worker), so both use T threads per machine's worth of cores.
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
p.add_argument("--iters", type=int, default=20)
p.add_argument("--shards", type=int, default=8)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--port", type=int, default=int(os.environ.get("GPUCLUST_CITUS_PORT", "9700")))
a = p.parse_args()

up = subprocess.run([str(CITUS_UP), "--port", str(a.port), "--extension", "gpuclust"],
                    capture_output=True, text=True, check=True)
env = dict(re.findall(r"^export (\w+)=(\S+)$", up.stdout, re.M))
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
    cur.execute(f"SET citus.max_adaptive_executor_pool_size = {a.threads}")
    cur.execute("SET citus.coordinator_aggregation_strategy = 'disabled'")
    t0 = time.perf_counter()
    cur.execute("SELECT sum(size) FROM gpu_kmeans_centroids('SELECT id, f FROM bd', %s, max_iter => %s, "
                "tol => 0, initial_centroids => %s::float8[], device => 'cpu')", [a.k, a.iters, C])
    gathered = time.perf_counter() - t0
    cur.execute("SET gpuclust.timing = on")

    queries = [None]

    def iterations():
        found = [int(m) for n in conn.notices for m in re.findall(r"iterations=(\d+)", n)]
        queries[0] = ([int(m) for n in conn.notices for m in re.findall(r"queries=(\d+)", n)] or [None])[-1]
        conn.notices.clear()
        return found[-1] if found else a.iters

    conn.notices.clear()
    t0 = time.perf_counter()
    cur.execute("SELECT sum(size) FROM gpu_kmeans_centroids('SELECT id, f FROM bl', %s, max_iter => %s, "
                "tol => 0, initial_centroids => %s::float8[], device => 'cpu')", [a.k, a.iters, C])
    single = time.perf_counter() - t0
    single_it = iterations()
    t0 = time.perf_counter()
    cur.execute("SELECT sum(size) FROM gpu_kmeans_fit_distributed('SELECT id, f FROM bd', %s, max_iter => %s, "
                "tol => 0, initial_centroids => %s::float8[])", [a.k, a.iters, C])
    dist = time.perf_counter() - t0
    dist_it = iterations()
    dist_queries = queries[0]
    steps = []
    for _ in range(3):
        t0 = time.perf_counter()
        cur.execute("SELECT (gpu_kmeans_step(f, %s::float8[])).sizes[1] FROM bd", [C])
        steps.append(time.perf_counter() - t0)
    step = min(steps)
    cur.execute("SELECT sum(length(result)), max(length(result)) FROM run_command_on_shards('bd', "
                "$$SELECT gpu_kmeans_step_state(f, '" + C + "'::float8[], 'euclidean', 1)::text FROM %s$$)")
    total_bytes, shard_bytes = cur.fetchone()
    cur.execute("SELECT pg_total_relation_size('bl')")
    table_bytes = cur.fetchone()[0]

    print(f"\n{a.rows} rows x {a.dim} (real[]), k = {a.k}, max_iter {a.iters} (tol = 0), "
          f"{a.shards} shards on 2 workers, {a.threads} threads, CPU back end\n")
    print("| run | seconds | iterations | per iteration (ms) |")
    print("|---|---:|---:|---:|")
    print(f"| gpu_kmeans_centroids, plain table on the coordinator | {single:.2f} | {single_it} | {1000 * single / single_it:.0f} |")
    print(f"| gpu_kmeans_centroids, distributed table (rows gathered) | {gathered:.2f} | | |")
    print(f"| gpu_kmeans_fit_distributed, distributed table | {dist:.2f} | {dist_it} | {1000 * dist / dist_it:.0f} |")
    print(f"| one gpu_kmeans_step over the distributed table (best of 3) | {step:.2f} | 1 | {1000 * step:.0f} |")
    print(f"\nratio distributed / plain: {dist / single:.2f}; the distributed fit ran {dist_queries} aggregate "
          f"queries (a step per iteration, the final sizes, and one per re-seeding of empty clusters)")
    print(f"partial states of one iteration: {total_bytes} bytes in all, {shard_bytes} per shard at most "
          f"(the plain table: {table_bytes} bytes)")
finally:
    subprocess.run([str(CITUS_DOWN), env.get("CITUS_DIR", "")], capture_output=True)
