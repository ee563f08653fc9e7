r"""Times k-means on a Citus cluster on one machine (coordinator + 2 workers), from the same initial
centroids, tol = 0, a fixed number of iterations, with gpuclust.device = --device on the coordinator
(the fit sends it to the workers with every pass):

  * gpu_kmeans_fit_distributed over the distributed table: each pass one ordinary distributed query
    with one gpu_kmeans_shard_call per shard, all shards at once; the worker backends keep the rows,
    labels and Hamerly bounds between passes (gpuclust.kmeans_shard_cache) and search the rows the
    bounds leave open on --device, and again with the cache off (every pass reads and searches every
    row, the stateless step);
  * one single-node brute-force assign-and-sum pass over the same rows in a plain table of the
    coordinator: gpu_kmeans_shard_step over the whole table in one backend (the assignment on
    --device, the exact sums on the CPU), and gpu_kmeans_assign alone with gpuclust.cpu_threads = T;
  * gpu_kmeans_centroids over the distributed table (every row pulled to the coordinator) and over
    the plain table (Hamerly's bounds, no distribution), on --device;
  * the fixed cost of a pass of 1-row calls, one per shard: Citus's run_command_on_shards (a new
    connection per shard and call) against the fit's ordinary distributed query in one transaction;
  * the bytes one iteration moves (the shards' states) against the table's size;
  * the identity: the centroids of the distributed fit on 2, 4 and 8 shards, cache on and off,
    against the plain table's (single-node brute-force Lloyd with exact sums, on the CPU), on the
    first --check-rows rows: on the CPU, and with --device gpu also on the GPU (equal there only up
    to ties for real[] of at most 32 features: the GPU compares those distances in single
    precision; the table then says in how many centroids and by how much they differ).

Prints a table; every ratio comes from this one run.

    python3 bench/kmeans_citus_bench.py [--rows N] [--dim D] [--k K] [--iters I] [--shards S]
                                        [--threads T] [--port P] [--check-rows M] [--device cpu|gpu]

Needs root, python3-numpy and python3-psycopg2, gpuclust built and installed, and a citus-up: by
default ../shared/citus/citus-up (Debian 12's postgresql-15; it installs Citus and runs the servers
as postgres), or the one GPUCLUST_CITUS_UP names; GPUCLUST_CITUS_DOWN names its stop script (by
default the one beside it whose name has "down" for "up", else the same script with --down).

On the GPU machine (Ubuntu, no PostgreSQL, no package registry) bench/citus_up_device.sh starts the
cluster on the PostgreSQL 15 bundle of .device/pg-up. Here, once, put it and what it needs into
.device/ (git-ignored; it travels to the GPU machine with carry [".device"]):

    mkdir -p .device/citus /tmp/deps && cp ../shared/citus/citus-13.2.2-pg15.tar.xz* .device/citus/
    cp bench/citus_up_device.sh .device/citus-up-device      # it stops a cluster with --down DIR
    # the libraries citus.so needs beyond glibc and libpq (libcurl, libssl, libzstd, liblz4 and theirs),
    # from this Debian 12 with Citus installed (citus-up installs it), for a machine that lacks some:
    ldd /usr/lib/postgresql/15/lib/citus.so /usr/lib/postgresql/15/lib/citus_columnar.so \
        | awk '/=> \//{print $3}' | grep -vE '/(libc|libm|libresolv|libpq|ld-linux)[.-]' | sort -u \
        | xargs -I{} cp -L {} /tmp/deps/ && tar -C /tmp/deps -cJf .device/citus/citus-deps.tar.xz .

There, from the repository root (CITUS_PRELOAD=gpuclust: the GPU service on every node, so that
the workers' backends share one CUDA context per node instead of opening one each):

    source .device/pg-up && export LD_LIBRARY_PATH=$PWD/.device/lib && make -j16 && make install && \
    CITUS_PRELOAD=gpuclust GPUCLUST_CITUS_UP=$PWD/.device/citus-up-device \
        python3 bench/kmeans_citus_bench.py --rows 1000000 --threads 16 --device gpu
"""
import argparse
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

try:
    import psycopg2
except ImportError:     # the GPU machine has no psycopg2: psql does the talking (Psql below)
    psycopg2 = None

ROOT = Path(__file__).resolve().parent.parent
CITUS_UP = Path(os.environ.get("GPUCLUST_CITUS_UP") or ROOT.parent / "shared" / "citus" / "citus-up")
if os.environ.get("GPUCLUST_CITUS_DOWN"):
    CITUS_DOWN = [os.environ["GPUCLUST_CITUS_DOWN"]]
elif CITUS_UP.with_name(CITUS_UP.name.replace("up", "down", 1)).exists():
    CITUS_DOWN = [str(CITUS_UP.with_name(CITUS_UP.name.replace("up", "down", 1)))]
else:
    CITUS_DOWN = [str(CITUS_UP), "--down"]

class Psql:
    """One psql session through pipes, standing in for psycopg2's connection and cursor where psycopg2
    is missing (or GPUCLUST_BENCH_PSQL=1): the calls this script makes, values as text, the server's
    messages in .notices, an ERROR raised as RuntimeError."""
    END = "__kmeans_citus_bench_end__"

    def __init__(self, host, port, user, dbname):
        psql = shutil.which("psql") or "/tmp/pg15/bin/psql"
        self.p = subprocess.Popen([psql, "-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=0",
                                   "-h", host, "-p", str(port), "-U", user, "-d", dbname],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, bufsize=1)
        self.notices, self.rows, self.autocommit = [], [], True
        self.err = queue.Queue()
        threading.Thread(target=lambda: [self.err.put(line) for line in self.p.stderr], daemon=True).start()

    def cursor(self):
        return self

    def _run(self, text):
        self.p.stdin.write(f"{text}\n\\echo {self.END}\n\\warn {self.END}\n")
        self.p.stdin.flush()
        out = []
        for line in self.p.stdout:
            if line.rstrip("\n") == self.END:
                break
            out.append(line.rstrip("\n"))
        else:
            raise RuntimeError("psql ended")
        err = []
        while (line := self.err.get(timeout=600).rstrip("\n")) != self.END:
            err.append(line)
        self.notices += [m for m in err if "NOTICE:" in m]
        if any(k in m for m in err for k in ("ERROR:", "FATAL:")):
            raise RuntimeError("\n".join(err))
        self.rows = [tuple(line.split("\t")) for line in out if line]

    @staticmethod
    def _literal(v):
        if isinstance(v, (int, float, np.integer, np.floating)):
            return repr(v.item() if hasattr(v, "item") else v)
        return "'" + str(v).replace("'", "''") + "'"

    def execute(self, sql, args=()):
        if args:
            sql = sql % tuple(self._literal(v) for v in args)
        self._run(sql.rstrip().rstrip(";") + ";")

    def fetchall(self):
        return self.rows

    def fetchone(self):
        return self.rows[0] if self.rows else None

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


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
                    capture_output=True, text=True)
if up.returncode != 0:
    raise SystemExit(f"{CITUS_UP} failed (exit {up.returncode}):\n{up.stderr[-4000:]}")
env = dict(re.findall(r"^export (\w+)=(\S+)$", up.stdout, re.M))


T0 = time.perf_counter()


def log(what):
    """A progress line on stderr, so that a run cut short still says how far it came."""
    print(f"[{time.perf_counter() - T0:7.1f} s] {what}", file=sys.stderr, flush=True)


def write_copy_binary(X):
    """Writes rows (id, f real[]) of X, ids from 0, in COPY's binary format to a file that the
    servers (same machine, another user) can read; returns its path. numpy builds each row's bytes, so
    10M rows take seconds where the text format takes minutes."""
    n, d = X.shape
    row = np.dtype([("fields", ">i2"), ("id_len", ">i4"), ("id", ">i8"), ("arr_len", ">i4"), ("ndim", ">i4"),
                    ("has_null", ">i4"), ("elem", ">u4"), ("dim", ">i4"), ("lbound", ">i4"),
                    ("f", [("len", ">i4"), ("v", ">f4")], (d,))])
    fd, path = tempfile.mkstemp(prefix="kmeans_citus_", suffix=".copy", dir="/tmp")
    os.fchmod(fd, 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") + (0).to_bytes(4, "big"))
        for s in range(0, n, 1_000_000):
            part = X[s:s + 1_000_000]
            r = np.zeros(len(part), dtype=row)
            r["fields"], r["id_len"], r["id"] = 2, 8, np.arange(s, s + len(part))
            r["arr_len"] = row.itemsize - 18
            r["ndim"], r["elem"], r["dim"], r["lbound"] = 1, 700, d, 1      # 700: real
            r["f"]["len"], r["f"]["v"] = 4, part
            out.write(r.tobytes())
        out.write((-1).to_bytes(2, "big", signed=True))
    return path


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
    conn = (Psql if psycopg2 is None or os.environ.get("GPUCLUST_BENCH_PSQL") else psycopg2.connect)(
        host=env["PGHOST"], port=int(env["PGPORT"]), user=env["PGUSER"], dbname=env["PGDATABASE"])
    conn.autocommit = True
    cur = conn.cursor()
    rng = np.random.default_rng(11)
    centres = rng.normal(0, 10, size=(a.k, a.dim))
    X = (centres[rng.integers(0, a.k, a.rows)] + rng.normal(0, 2, size=(a.rows, a.dim))).astype(np.float32)
    cur.execute("CREATE TABLE bl (id bigint PRIMARY KEY, f real[])")
    rows_file = write_copy_binary(X)
    try:
        cur.execute(f"COPY bl FROM '{rows_file}' (FORMAT binary)")
        log(f"{a.rows} rows in the plain table")
        cur.execute(f"SET citus.shard_count = {a.shards}")
        cur.execute("CREATE TABLE bd (LIKE bl)")
        cur.execute("SELECT create_distributed_table('bd', 'id')")
        cur.execute(f"COPY bd FROM '{rows_file}' (FORMAT binary)")
        log("and in the distributed table")
    finally:
        os.unlink(rows_file)
    cur.execute("VACUUM ANALYZE bl")
    cur.execute("VACUUM ANALYZE bd")
    C = "{" + ",".join("{" + ",".join(repr(float(v)) for v in row) + "}" for row in X[:a.k]) + "}"
    cur.execute(f"SET gpuclust.cpu_threads = {a.threads}")
    cur.execute(f"SET gpuclust.device = '{a.device}'")
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
    log("the distributed fit")
    dist_it = dist_n["iterations"]
    nocache, nocache_n, nocache_rows = fit("bd", cache=0)
    log("the fit without the cache")
    cur.execute("SET gpuclust.timing = off")
    step_single = best(cur, "SELECT gpu_kmeans_shard_step('bl', 'f', %s::float8[]) IS NOT NULL", [C])
    assign_single = best(cur, "SELECT count(*) FROM gpu_kmeans_assign('SELECT id, f FROM bl', %s::float8[], "
                              "device => %s)", [C, a.device])
    cur.execute("SET gpuclust.timing = on")
    gathered, gathered_it = centroids("bd")
    log("gpu_kmeans_centroids over the gathered rows")
    single, single_it = centroids("bl")
    log("gpu_kmeans_centroids over the plain table")
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

    # identity on 2, 4 and 8 shards (the first --check-rows rows), 5 iterations, cache on and off,
    # against the plain table's fit (the aggregate queries: the CPU), on the CPU and on --device
    m = min(a.check_rows, a.rows)
    cur.execute(f"CREATE TABLE cl AS SELECT * FROM bl WHERE id < {m}")
    _, _, ref = fit("cl", 5)

    def differ(got):
        """How many centroids differ from ref's, and the largest relative difference of a coordinate."""
        n, worst = 0, 0.0
        for (_, c, _), (_, rc, _) in zip(got, ref):
            if c != rc:
                c, rc = (np.array(v.strip("{}").split(","), dtype=float) for v in (c, rc))
                n += 1
                worst = max(worst, float(np.max(np.abs(c - rc) / np.maximum(np.abs(rc), 1e-300))))
        return n, worst

    same = {}
    devices = ["cpu"] + (["gpu"] if a.device == "gpu" else [])
    for n in (2, 4, 8):
        cur.execute(f"SET citus.shard_count = {n}")
        cur.execute(f"CREATE TABLE c{n} (LIKE bl)")
        cur.execute(f"SELECT create_distributed_table('c{n}', 'id')")
        cur.execute(f"INSERT INTO c{n} SELECT * FROM cl")
        for dev in devices:
            cur.execute(f"SET gpuclust.device = '{dev}'")
            _, t, got = fit(f"c{n}", 5)
            _, t_off, got_off = fit(f"c{n}", 5, cache=0)
            same[n, dev] = (differ(got), differ(got_off), t.get("shard_calls"), t.get("cache_hits"),
                            t.get("gpu_steps", 0) + t_off.get("gpu_steps", 0))
    cur.execute(f"SET gpuclust.device = '{a.device}'")

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
          f"centroids (a full pass is {a.rows}), {dist_n.get('gpu_searches', 0)} of them on the GPU in "
          f"{dist_n.get('gpu_steps', 0)} shard calls (cache off: {nocache_n.get('gpu_searches', 0)} rows in "
          f"{nocache_n.get('gpu_steps', 0)} calls); {dist_n['rescans']} passes asked again without the probes")
    print(f"centroids of the two fits identical: {dist_rows == nocache_rows}")
    print(f"fixed cost of a pass of {a.shards} trivial calls: run_command_on_shards {1000 * old_pass:.1f} ms "
          f"(best of 3), the fit's distributed query in one transaction {1000 * new_pass:.1f} ms "
          f"(mean of {rounds}, {backends} worker backends)")
    print(f"one iteration moves {total_bytes} bytes of partial states ({shard_bytes} per shard at most); "
          f"the table is {table_bytes} bytes")
    def verdict(dif):
        n, worst = dif
        return "identical" if n == 0 else f"{n} of {a.k} centroids differ (largest relative difference {worst:.1e})"

    print(f"centroids after 5 iterations on {m} rows, distributed against the plain table's (single-node "
          f"brute-force Lloyd, CPU):")
    for (n, dev), (on, off, calls, hits, gsteps) in same.items():
        print(f"  {n} shards, search on the {dev.upper()}: cache on {verdict(on)}, cache off {verdict(off)} "
              f"({calls} shard calls, {hits} cache hits, {gsteps} shard calls searched on the GPU)")
finally:
    subprocess.run(CITUS_DOWN + [env.get("CITUS_DIR", "")], capture_output=True)
