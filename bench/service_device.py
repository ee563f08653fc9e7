#!/usr/bin/env python3
"""
service_device.py: the GPU service's proof on the GPU machine (issue 43), in
one run of a few minutes.  Prints four tables and writes them as JSON to
$OUT/service_device.json when OUT is set (rewritten after each part, so a
run cut short keeps what it measured):

  a. first call: the first GPU call of a new session against the same call
     warm, per function (bench/first_call_bench.sh), a CUDA context per
     session against the GPU service;
  b. idle sessions: the device memory (nvidia-smi) with N sessions that each
     made one small GPU call and sit idle, in both modes, and how many
     processes hold a CUDA context;
  c. load: L concurrent sessions, half 2-D DBSCAN of R rows and half k-means
     of K x D rows (4 parameter variants of each), with the service's
     device-memory budget below their combined estimate: every answer (an
     md5 of its labels) against the serial answer of its variant, errors
     and out-of-memory, the wall time against a context per session, and
     the queue waits (p50, p99, max) as the service measured them (its
     DEBUG1 line per request);
  d. fault: gpuclust.service_test_fault makes a request break the service's
     CUDA context (a kernel writes to an illegal address) while other
     sessions compute in a loop (device gpu and auto): the time until the
     service answers again, the other sessions' outcomes, the postmaster's
     start time, a session that lived through it, and the server log.

Each part has its own time limit (--limits) and runs after a failure of the
one before (the error is printed and the part marked failed in the JSON);
the whole run keeps within --deadline seconds, skipping what no longer fits.

On the GPU machine, from the project root, as root:

    source .device/pg-up && make -j16 CUDA_ARCH=sm_90 && make install && \\
        python3 bench/service_device.py

It restarts pg-up's server (data /tmp/pgdata, owner pgrun, log /tmp/pg.log)
in each mode with pg-up's options, plus max_connections and, for the
service, shared_preload_libraries = gpuclust, and leaves it as pg-up
started it.  Standard library only; psql does the talking.

--cpu-standin: the same run on a machine without a GPU, on a throwaway
server of its own whose service runs the CPU stand-in
(gpuclust.service_backend = 'cpu'); "a context per session" is then
device => 'cpu' in each session, and sizes are scaled down (a check of the
script, not a measurement); with --pgup as well, on pg-up's server as on
the GPU machine.
"""

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = {"parts": {}}


def log(*a):
    print(*a, flush=True)


def save():
    out = os.environ.get("OUT")
    if out:
        try:
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, "service_device.json"), "w") as f:
                json.dump(RESULTS, f, indent=1, default=str)
        except OSError as e:
            log(f"service_device: could not write the JSON: {e}")


class Timeout(Exception):
    pass


# ----------------------------------------------------------------- the server

class Server:
    """pg-up's server (device) or a throwaway one (stand-in); restarts it in a mode."""

    def __init__(self, args):
        self.args = args
        self.standin = args.cpu_standin
        self.own = args.cpu_standin and not args.pgup
        self.max_conn = max(args.sessions, args.load_sessions, args.fault_sessions) + 40
        if self.own:
            pg_config = os.environ.get("PG_CONFIG") or shutil.which("pg_config")
            self.bin = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                                      check=True).stdout.strip()
            self.owner = "postgres" if os.geteuid() == 0 else None
            self.top = tempfile.mkdtemp(prefix="gpuclust-service-device-")
            if self.owner:
                shutil.chown(self.top, self.owner)
            self.data = os.path.join(self.top, "data")
            self.log = os.path.join(self.top, "log")
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            r = self.as_owner([os.path.join(self.bin, "initdb"), "-D", self.data, "-A", "trust", "-U", "postgres"])
            if r.returncode != 0:
                raise RuntimeError("initdb failed: " + r.stdout + r.stderr)
            self.base = f"-k {self.top} -p {self.port} -c listen_addresses=''"
            os.environ.update(PGHOST=self.top, PGPORT=str(self.port), PGUSER="postgres", PGDATABASE="postgres")
        else:
            pg_config = os.environ.get("PG_CONFIG")
            if not pg_config:
                raise RuntimeError("PG_CONFIG is not set: source .device/pg-up first")
            self.bin = os.path.dirname(pg_config)
            self.owner = os.environ.get("PG_OWNER", "pgrun")
            self.data = os.environ.get("PGDATA_DIR", "/tmp/pgdata")
            self.log = os.environ.get("PG_LOG", "/tmp/pg.log")
            self.port = int(os.environ.get("PGPORT", "5432"))
            # pg-up's options
            self.base = (f"-k {os.environ.get('PGHOST', '/tmp')} -p {self.port} -c shared_buffers=4GB "
                         "-c work_mem=256MB -c max_wal_size=8GB")
            self.pgup_base = self.base
        self.mode = None

    def as_owner(self, cmd, timeout=180):
        if self.owner:
            cmd = ["su", self.owner, "-c", " ".join(shlex_quote(c) for c in cmd)]
        return subprocess.run(cmd, cwd="/", capture_output=True, text=True, timeout=timeout)

    def pg_ctl(self, action, opts):
        return self.as_owner([os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-l", self.log,
                              "-m", "fast", "-w", "-t", "120", "-o", opts, action])

    def restart(self, mode, threads=None):
        """The server in mode "session" (gpuclust not preloaded) or "service"."""
        opts = f"{self.base} -c max_connections={self.max_conn}"
        if mode == "service":
            opts += " -c shared_preload_libraries=gpuclust"
            if self.standin:
                opts += " -c gpuclust.service_backend=cpu"
            if threads:
                opts += f" -c gpuclust.service_threads={threads}"
        self.mode = None
        r = self.pg_ctl("restart", opts)
        if r.returncode != 0:
            raise RuntimeError(f"pg_ctl restart ({mode}) failed: {r.stdout}{r.stderr}\n{self.log_tail()}")
        psql("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS gpuclust", timeout=60)
        if mode == "service":
            t0 = time.monotonic()
            while int(psql("SELECT count(*) FROM gpuclust_service()", timeout=20) or 0) == 0:
                if time.monotonic() - t0 > 60:
                    raise RuntimeError("the GPU service did not start:\n" + self.log_tail())
                time.sleep(0.1)
        self.mode = mode

    def restore(self):
        if self.own:
            self.as_owner([os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "immediate", "-w", "stop"])
            shutil.rmtree(self.top, ignore_errors=True)
        else:
            self.pg_ctl("restart", self.pgup_base)

    def log_size(self):
        try:
            return os.path.getsize(self.log)
        except OSError:
            return 0

    def log_since(self, offset):
        try:
            with open(self.log, errors="replace") as f:
                f.seek(offset)
                return f.read()
        except OSError as e:
            return f"(the log could not be read: {e})"

    def log_tail(self, n=3000):
        size = self.log_size()
        return self.log_since(max(0, size - n))


def shlex_quote(s):
    import shlex
    return shlex.quote(s)


class PsqlError(Exception):
    def __init__(self, rc, out, err):
        super().__init__(f"psql exit {rc}: {err.strip()[-2000:]}")
        self.out, self.err = out, err


def psql_run(sqls, timeout=60, check=True, settings=()):
    """Runs statements (one -c each) in one new session; (rc, stdout, stderr, seconds)."""
    cmd = ["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"]
    for s in list(settings) + list(sqls):
        cmd += ["-c", s]
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise Timeout(f"psql ran past {timeout} s: {sqls[-1][:200]}") from e
    dt = time.monotonic() - t0
    if check and r.returncode != 0:
        raise PsqlError(r.returncode, r.stdout, r.stderr)
    return r.returncode, r.stdout, r.stderr, dt


def psql(sql, timeout=60):
    """The last line of a statement's output."""
    out = psql_run([sql], timeout=timeout)[1].strip().splitlines()
    return out[-1] if out else None


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    i = min(len(v) - 1, max(0, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[i]


def md_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    for r in rows:
        lines.append("| " + " | ".join("-" if c is None else str(c) for c in r) + " |")
    return "\n".join(lines)


def fmt(v, d=1):
    return None if v is None else f"{v:.{d}f}"


# ----------------------------------------------------------------- parts

def part_first_call(srv, args, limit, mode, device):
    """a: bench/first_call_bench.sh in one mode; its table rows as dicts."""
    env = dict(os.environ, DEVICE=device)
    try:
        r = subprocess.run(["bash", os.path.join(HERE, "first_call_bench.sh"), str(args.runs)],
                           capture_output=True, text=True, timeout=limit, env=env)
    except subprocess.TimeoutExpired:
        raise Timeout(f"first_call_bench.sh ran past {limit} s")
    if r.returncode != 0:
        raise RuntimeError(f"first_call_bench.sh failed ({r.returncode}):\n{r.stderr[-3000:]}")
    rows = []
    header = None
    for line in r.stdout.splitlines():
        if not line.startswith("| "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "function":
            header = cells
        elif header and not cells[0].startswith("---"):
            rows.append(dict(zip(header, cells)))
    if r.stderr.strip():
        log(r.stderr.strip()[-2000:])
    return rows


def nvidia_smi(query):
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        r = subprocess.run(["nvidia-smi", f"--query-{query}", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return None
    if r.returncode != 0:
        return None
    return [line.split(", ") for line in r.stdout.strip().splitlines() if line.strip()]


def used_mib():
    r = nvidia_smi("gpu=memory.used")
    try:
        return None if r is None else sum(int(x[0]) for x in r)
    except ValueError:
        return None


def context_processes():
    """(processes holding a CUDA context, their MiB) per nvidia-smi."""
    r = nvidia_smi("compute-apps=pid,used_memory")
    if r is None:
        return None, None
    r = [x for x in r if len(x) == 2 and x[0].strip().isdigit()]
    return len(r), sum(int(x[1]) for x in r if x[1].strip().isdigit())


def part_idle(srv, args, limit, mode, device):
    """b: N sessions make one small GPU call each and sit idle; the device memory then."""
    deadline = time.monotonic() + limit
    call = ("SELECT count(*) FROM gpu_dbscan('SELECT g, ARRAY[g % 37, g / 37]::float8[] "
            f"FROM generate_series(1, 1000) g', 1.5, 4, device => '{device}')")
    time.sleep(1)
    before = used_mib()
    procs_before = context_processes()
    procs = []
    made = 0
    try:
        for _ in range(args.sessions):
            procs.append(subprocess.Popen(["psql", "-X", "-q", "-At", "-c", call, "-c", "SELECT pg_sleep(3600)"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        while True:
            made = int(psql("SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(3600)' "
                            "AND state = 'active'", timeout=30))
            if made >= args.sessions:
                break
            failed = [p for p in procs if p.poll() is not None]
            if failed:
                raise RuntimeError(f"{len(failed)} session(s) ended early: "
                                   + (failed[0].stderr.read() or "")[-500:])
            if time.monotonic() > deadline - 10:
                log(f"idle: only {made} of {args.sessions} sessions made their call in time")
                break
            time.sleep(0.5)
        time.sleep(2)
        after = used_mib()
        procs_after = context_processes()
    finally:
        try:
            psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                 "WHERE query = 'SELECT pg_sleep(3600)'", timeout=30)
        except Exception as e:  # noqa: BLE001
            log(f"idle: terminating the sessions: {e}")
        end = time.monotonic() + 20
        for p in procs:
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
    res = {"mode": mode, "sessions": made, "mib_before": before, "mib_after": after,
           "mib_per_session": (after - before) / made if made and before is not None and after is not None else None,
           "context_processes_before": procs_before[0], "context_processes_after": procs_after[0],
           "context_mib_after": procs_after[1]}
    return res


def load_tables(args):
    """c: the load test's tables, made once (kept for the next run when of the same size)."""
    have = None
    if psql("SELECT to_regclass('svc_load_db') IS NOT NULL AND to_regclass('svc_load_km') IS NOT NULL") == "t":
        have = psql("SELECT (SELECT count(*) FROM svc_load_db) || ',' || (SELECT count(*) FROM svc_load_km) "
                    "|| ',' || (SELECT cardinality(v) FROM svc_load_km LIMIT 1)")
    if have == f"{args.db_rows},{args.km_rows},{args.km_dims}":
        return 0.0
    t0 = time.monotonic()
    # 2-D: 50 disks of radius 1 on a 10 x 5 grid of step 10, uniform in each disk
    psql_run(["DROP TABLE IF EXISTS svc_load_db",
              "SELECT setseed(0.43)",
              "CREATE TABLE svc_load_db AS SELECT g::bigint AS id, "
              "ARRAY[(g % 50) % 10 * 10 + r * cos(a), (g % 50) / 10 * 10 + r * sin(a)]::float8[] AS v "
              f"FROM (SELECT g, sqrt(random()) AS r, random() * 2 * pi() AS a FROM generate_series(1, {args.db_rows}) g) s",
              "DROP TABLE IF EXISTS svc_load_km",
              "SELECT setseed(0.17)",
              "CREATE TABLE svc_load_km AS SELECT g::bigint AS id, "
              f"ARRAY(SELECT (g % 16) * 0.5 + random() + j * 0 FROM generate_series(1, {args.km_dims}) j)::float8[] AS v "
              f"FROM generate_series(1, {args.km_rows}) g",
              "ANALYZE svc_load_db", "ANALYZE svc_load_km"], timeout=300)
    return time.monotonic() - t0


def variants(args):
    """The load's 8 requests: 4 DBSCAN eps and 4 k-means k."""
    v = []
    for i, eps in enumerate((0.02, 0.025, 0.03, 0.035)):
        eps = eps * args.eps_scale
        v.append(("dbscan", f"dbscan eps={eps:g}",
                  "SELECT md5(string_agg(coalesce(cluster_id, -1)::text, ',' ORDER BY id)) "
                  f"FROM gpu_dbscan('SELECT id, v FROM svc_load_db', {eps!r}, 8, device => '%s')"))
    for k in (8, 12, 16, 20):
        v.append(("kmeans", f"kmeans k={k}",
                  "SELECT md5(string_agg(cluster_id::text, ',' ORDER BY id)) "
                  f"FROM gpu_kmeans('SELECT id, v FROM svc_load_km', {k}, device => '%s')"))
    # alternate DBSCAN and k-means
    return [v[i // 2 + (4 if i % 2 else 0)] for i in range(8)]


QUEUE_RE = re.compile(r"the GPU service ran the (\w+) request of (\d+) rows on device (-?\d+): "
                      r"queued ([0-9.]+) ms, ran ([0-9.]+) ms")


def one_call(sql, device, timeout, service, extra=()):
    """One request in a new session: (ok, md5 or error, seconds, queue waits, ran on gpu)."""
    settings = ["SET gpuclust.timing = on", "SET gpuclust.gpu_min_rows = 0"] + list(extra)
    if service:
        settings += ["SET gpuclust.gpu_queue_timeout = 0", "SET client_min_messages = debug1"]
    try:
        rc, out, err, dt = psql_run([sql % device], timeout=timeout, check=False, settings=settings)
    except Timeout as e:
        return {"ok": False, "error": str(e), "seconds": timeout, "waits": [], "gpu": False}
    waits = [float(m.group(4)) for m in QUEUE_RE.finditer(err)]
    ran = [float(m.group(5)) for m in QUEUE_RE.finditer(err)]
    res = {"ok": rc == 0, "seconds": dt, "waits": waits, "ran": ran,
           "gpu": " device=gpu" in err, "cpu_fallback": "computes on the CPU" in err or "not enough GPU memory" in err,
           "oom": "out of memory" in err.lower() or "not enough GPU memory" in err}
    if rc == 0:
        res["md5"] = out.strip().splitlines()[-1] if out.strip() else None
    else:
        errs = [line for line in err.splitlines() if line.startswith(("ERROR:", "DETAIL:", "FATAL:", "psql:"))]
        res["error"] = " / ".join(errs)[:600] or err.strip()[-600:]
    return res


def run_concurrent(jobs, nthreads, timeout):
    """Runs jobs (callables) on nthreads threads at once; their results in order and the wall seconds."""
    results = [None] * len(jobs)
    start = threading.Barrier(min(nthreads, len(jobs)) + 1)
    lock = threading.Lock()
    todo = list(range(len(jobs)))

    def worker():
        start.wait()
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            try:
                results[i] = jobs[i]()
            except Exception as e:  # noqa: BLE001
                results[i] = {"ok": False, "error": f"{type(e).__name__}: {e}", "waits": []}

    ts = [threading.Thread(target=worker, daemon=True) for _ in range(min(nthreads, len(jobs)))]
    for t in ts:
        t.start()
    start.wait()
    t0 = time.monotonic()
    for t in ts:
        t.join(max(1.0, timeout - (time.monotonic() - t0)))
    wall = time.monotonic() - t0
    if any(t.is_alive() for t in ts):
        raise Timeout(f"the concurrent sessions ran past {timeout:.0f} s")
    return results, wall


class Monitor(threading.Thread):
    """Polls the service (peak reserved memory, running, queued; each op's estimate) and nvidia-smi."""

    def __init__(self, service):
        super().__init__(daemon=True)
        self.service = service
        self.stop = threading.Event()
        self.peak = {"reserved": 0, "running": 0, "queued": 0, "budget": None, "mib_used": None}
        self.estimate = {}
        self.errors = 0

    def run(self):
        last_smi = 0.0
        while not self.stop.is_set():
            try:
                if self.service:
                    out = psql_run(["SELECT 'd', sum(memory_reserved), sum(running), sum(queued), max(memory_budget) "
                                    "FROM gpuclust_service() UNION ALL "
                                    "SELECT algorithm, max(memory), 0, 0, 0 FROM gpuclust_service_requests() GROUP BY algorithm"],
                                   timeout=10)[1]
                    for line in out.strip().splitlines():
                        f = line.split("|")
                        if f[0] == "d" and f[1]:
                            self.peak["reserved"] = max(self.peak["reserved"], int(f[1]))
                            self.peak["running"] = max(self.peak["running"], int(f[2]))
                            self.peak["queued"] = max(self.peak["queued"], int(f[3]))
                            self.peak["budget"] = int(f[4])
                        elif f[0] != "d":
                            self.estimate[f[0]] = max(self.estimate.get(f[0], 0), int(f[1]))
                if time.monotonic() - last_smi > 0.5:
                    last_smi = time.monotonic()
                    u = used_mib()
                    if u is not None:
                        self.peak["mib_used"] = max(self.peak["mib_used"] or 0, u)
            except Exception:  # noqa: BLE001
                self.errors += 1
            self.stop.wait(0.05)


def load_run(args, mode, device, limit, refs):
    """c: args.load_sessions concurrent sessions; the summary."""
    vs = variants(args)
    service = mode == "service"
    jobs = []
    for i in range(args.load_sessions):
        kind, name, sql = vs[i % len(vs)]
        jobs.append(lambda sql=sql: one_call(sql, device, limit, service))
    mon = Monitor(service)
    mon.start()
    try:
        results, wall = run_concurrent(jobs, args.load_sessions, limit)
    finally:
        mon.stop.set()
        mon.join(5)
    waits = [w for r in results for w in r.get("waits", [])]
    ok = [r for r in results if r.get("ok")]
    same = sum(1 for i, r in enumerate(results) if r.get("ok") and refs.get(vs[i % len(vs)][1]) == r.get("md5"))
    errors = [r.get("error") for r in results if not r.get("ok")]
    res = {"mode": mode, "sessions": len(results), "ok": len(ok), "identical_to_serial": same,
           "errors": len(errors), "error_samples": sorted(set(errors))[:5],
           "oom": sum(1 for r in results if r.get("oom")),
           "cpu_fallback": sum(1 for r in results if r.get("cpu_fallback")),
           "on_gpu": sum(1 for r in results if r.get("gpu")),
           "wall_s": wall, "requests_per_s": len(ok) / wall if wall > 0 else None,
           "session_s_p50": pct([r["seconds"] for r in ok], 50), "session_s_max": max([r["seconds"] for r in ok], default=None),
           "waits_reported": len(waits), "wait_ms_p50": pct(waits, 50), "wait_ms_p99": pct(waits, 99),
           "wait_ms_max": max(waits) if waits else None,
           "ran_ms_p50": pct([x for r in results for x in r.get("ran", [])], 50),
           "peak": mon.peak, "estimate_by_op": mon.estimate, "monitor_errors": mon.errors}
    if service and mon.estimate:
        per = {"dbscan": mon.estimate.get("dbscan"), "kmeans": mon.estimate.get("kmeans")}
        kinds = [vs[i % len(vs)][0] for i in range(len(results))]
        if all(per[k] for k in set(kinds)):
            res["combined_estimate"] = sum(per[k] for k in kinds)
    return res


def part_load(srv, args, limit):
    """c: the load test in both modes; restarts the server (service mode first)."""
    deadline = time.monotonic() + limit
    res = {"sessions": args.load_sessions, "db_rows": args.db_rows, "km_rows": args.km_rows,
           "km_dims": args.km_dims, "budget_mb": args.budget_mb, "service_threads": args.load_threads}
    if srv.mode != "service":
        srv.restart("service")
    res["table_s"] = load_tables(args)
    dev = "gpu"
    # the serial answers, one session each, through the service with the default budget
    refs = {}
    serial = []
    for kind, name, sql in variants(args)[:8]:
        if name in refs:
            continue
        r = one_call(sql, dev, max(5, deadline - time.monotonic()), True)
        if not r["ok"]:
            raise RuntimeError(f"the serial {name} failed: {r.get('error')}")
        refs[name] = r["md5"]
        serial.append({"variant": name, "seconds": r["seconds"], "ran_ms": (r.get("ran") or [None])[0]})
    res["serial"] = serial
    res["serial_s_per_request"] = statistics.mean(x["seconds"] for x in serial)
    # the budget below the combined need; more threads, so that the budget is what binds
    psql_run([f"ALTER SYSTEM SET gpuclust.service_memory_budget = '{args.budget_mb}MB'", "SELECT pg_reload_conf()"])
    try:
        if args.load_threads:
            srv.restart("service", threads=args.load_threads)
        t0 = time.monotonic()
        while int(psql("SELECT max(memory_budget) FROM gpuclust_service()") or 0) != args.budget_mb << 20:
            if time.monotonic() - t0 > 10:
                raise RuntimeError("the service did not take the budget")
            time.sleep(0.1)
        res["service"] = load_run(args, "service", dev, max(5, (deadline - time.monotonic()) / 2), refs)
    finally:
        psql_run(["ALTER SYSTEM RESET gpuclust.service_memory_budget", "SELECT pg_reload_conf()"])
    srv.restart("session")
    res["per_session"] = load_run(args, "per session", "cpu" if srv.standin else "gpu",
                                  max(5, deadline - time.monotonic()), refs)
    return res


def part_fault(srv, args, limit):
    """d: the fault injection, in service mode."""
    deadline = time.monotonic() + limit
    if srv.mode != "service":
        srv.restart("service")
    res = {}
    pm_start = psql("SELECT pg_postmaster_start_time()")
    old_pid = int(psql("SELECT pid FROM gpuclust_service() LIMIT 1"))
    log_at = srv.log_size()
    n = min(args.db_rows, args.fault_rows)
    data = f"SELECT id, v FROM svc_load_db WHERE id <= {n}"
    if psql("SELECT to_regclass('svc_load_db') IS NOT NULL") != "t":
        load_tables(args)
    sql = ("SELECT md5(string_agg(coalesce(cluster_id, -1)::text, ',' ORDER BY id)) "
           f"FROM gpu_dbscan('{data}', {0.03 * args.eps_scale!r}, 8, device => '%s')")
    ref = one_call(sql, "gpu", 60, True)
    if not ref["ok"]:
        raise RuntimeError(f"the reference call failed: {ref.get('error')}")
    res["reference_s"] = ref["seconds"]
    # a session that must live through it (a cluster restart would end it)
    alive_sql = "SELECT pg_backend_pid() || ' ' || backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
    hold = max(5, int(args.fault_hold))
    survivor = subprocess.Popen(["psql", "-X", "-q", "-At", "-c", alive_sql, "-c", f"SELECT pg_sleep({hold})",
                                 "-c", alive_sql], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # sessions computing in a loop, device gpu and auto
    stop = threading.Event()
    outcomes = []
    olock = threading.Lock()

    # on the stand-in each request stays a while in the service, so that the fault meets some
    slow = ["SET gpuclust.service_test_delay = 300"] if srv.standin else []

    def loop(device):
        while not stop.is_set():
            t0 = time.monotonic()
            r = one_call(sql, device, 60, True, slow)
            r.update(device=device, t0=t0, t1=time.monotonic())
            with olock:
                outcomes.append(r)

    threads = [threading.Thread(target=loop, args=("gpu" if i % 2 == 0 else "auto",), daemon=True)
               for i in range(args.fault_sessions)]
    for t in threads:
        t.start()
    time.sleep(args.fault_lead)
    # the fault
    t_fault0 = time.monotonic()
    rc, out, err, dt = psql_run([f"SELECT count(*) FROM gpu_dbscan('{data}', 0.03, 8, device => 'gpu')"], timeout=60,
                                check=False, settings=["SET gpuclust.service_test_fault = on"])
    t_fault = time.monotonic()
    res["fault_call"] = {"rc": rc, "seconds": dt,
                         "error": " / ".join(line for line in err.splitlines() if line.startswith(("ERROR:", "DETAIL:")))}
    # until the service answers again: a new service process, and a GPU call that computes
    new_pid = None
    t_pid = t_ready = None
    last_err = None
    while time.monotonic() < deadline - 5:
        try:
            p = psql("SELECT pid FROM gpuclust_service() LIMIT 1", timeout=10)
            if p and int(p) != old_pid:
                new_pid = int(p)
                t_pid = t_pid or time.monotonic()
                r = one_call("SELECT count(*) FROM gpu_dbscan('SELECT g, ARRAY[g, g]::float8[] "
                             "FROM generate_series(1, 100) g', 1.5, 4, device => '%s')", "gpu", 10, True)
                if r["ok"]:
                    t_ready = time.monotonic()
                    break
                last_err = r.get("error")
        except Exception as e:  # noqa: BLE001
            last_err = str(e)
        time.sleep(0.05)
    res["old_service_pid"] = old_pid
    res["new_service_pid"] = new_pid
    res["new_pid_after_s"] = None if t_pid is None else t_pid - t_fault
    res["ready_after_s"] = None if t_ready is None else t_ready - t_fault
    res["ready_after_s_from_fault_request"] = None if t_ready is None else t_ready - t_fault0
    if t_ready is None:
        res["not_ready_error"] = last_err
    # the loops go on a moment on the new service, then stop
    time.sleep(min(args.fault_tail, max(0, deadline - time.monotonic() - 3)))
    stop.set()
    for t in threads:
        t.join(max(1, deadline - time.monotonic()))
    try:
        s_out, s_err = survivor.communicate(timeout=max(1, hold + 15 - (time.monotonic() - t_fault0)))
    except subprocess.TimeoutExpired:
        survivor.kill()
        s_out, s_err = survivor.communicate()
    lines = [line for line in s_out.splitlines() if line.strip()]
    res["survivor_session"] = {"rc": survivor.returncode, "same_backend": len(lines) == 2 and lines[0] == lines[1],
                               "error": s_err.strip()[-300:]}
    res["postmaster_start_before"] = pm_start
    res["postmaster_start_after"] = psql("SELECT pg_postmaster_start_time()")
    res["postmaster_start_unchanged"] = res["postmaster_start_before"] == res["postmaster_start_after"]
    text = srv.log_since(log_at)
    res["log"] = {
        "service_exit_1": bool(re.search(rf"\(PID {old_pid}\) exited with exit code 1", text)),
        "lost_context_logged": "lost its GPU context" in text,
        "cluster_restart": any(s in text for s in ("terminating any other active server processes",
                                                    "all server processes terminated; reinitializing",
                                                    "was terminated by signal")),
        "lines": [line for line in text.splitlines() if "gpuclust" in line or "exit code" in line
                  or "terminat" in line][-12:],
    }
    # the other sessions' outcomes: before the fault's answer, around it, after the service was back
    table = {}
    for o in outcomes:
        if t_ready is not None and o["t0"] >= t_ready:
            when = "after"
        elif o["t1"] < t_fault0:
            when = "before"
        else:
            when = "during"
        if o.get("ok"):
            what = ("answer (CPU, service unavailable)" if o.get("cpu_fallback") else "answer (GPU)") + \
                (" identical" if o.get("md5") == ref["md5"] else " DIFFERENT")
        else:
            what = "error: " + re.sub(r"\d+", "N", (o.get("error") or "?"))[:200]
        key = (o["device"], when, what)
        table[key] = table.get(key, 0) + 1
    res["outcomes"] = [{"device": k[0], "when": k[1], "outcome": k[2], "calls": v} for k, v in sorted(table.items())]
    return res


# ----------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu-standin", action="store_true", help="a throwaway server whose service runs on the CPU")
    ap.add_argument("--pgup", action="store_true",
                    help="with --cpu-standin: pg-up's server rather than a throwaway one (a check of the device path)")
    ap.add_argument("--parts", default="abcd", help="which parts to run (default abcd)")
    ap.add_argument("--runs", type=int, default=3, help="a: new sessions per function (default 3)")
    ap.add_argument("--sessions", type=int, default=None, help="b: idle sessions (default 200; stand-in 40)")
    ap.add_argument("--load-sessions", type=int, default=64, help="c: concurrent sessions (default 64)")
    ap.add_argument("--db-rows", type=int, default=None, help="c: DBSCAN rows (default 1000000; stand-in 20000)")
    ap.add_argument("--km-rows", type=int, default=None, help="c: k-means rows (default 200000; stand-in 4000)")
    ap.add_argument("--km-dims", type=int, default=32, help="c: k-means dimensions (default 32)")
    ap.add_argument("--budget-mb", type=int, default=512,
                    help="c: gpuclust.service_memory_budget during the load (default 512, about three requests)")
    ap.add_argument("--load-threads", type=int, default=4,
                    help="c: gpuclust.service_threads during the load (default 4; 0: the server's)")
    ap.add_argument("--fault-sessions", type=int, default=6, help="d: sessions computing through the fault")
    ap.add_argument("--fault-rows", type=int, default=None, help="d: their DBSCAN rows (default 200000; stand-in 5000)")
    ap.add_argument("--fault-lead", type=float, default=2.0, help="d: seconds the loops run before the fault")
    ap.add_argument("--fault-tail", type=float, default=3.0, help="d: seconds they run after the service is back")
    ap.add_argument("--fault-hold", type=float, default=15.0, help="d: seconds the surviving session sleeps")
    ap.add_argument("--limits", default="60,70,100,45", help="seconds for parts a,b,c,d (default 60,70,100,45)")
    ap.add_argument("--deadline", type=float, default=240, help="seconds for the whole run (default 240)")
    args = ap.parse_args()
    si = args.cpu_standin
    args.sessions = args.sessions or (40 if si else 200)
    args.db_rows = args.db_rows or (20000 if si else 1000000)
    args.km_rows = args.km_rows or (4000 if si else 200000)
    args.fault_rows = args.fault_rows or (5000 if si else 200000)
    # the stand-in's disks hold fewer rows: eps grows so that the neighbourhoods stay alike
    args.eps_scale = (1000000 / args.db_rows) ** 0.5
    limits = dict(zip("abcd", (float(x) for x in args.limits.split(","))))
    t_start = time.monotonic()
    RESULTS.update(started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), standin=si,
                   args={k: v for k, v in vars(args).items()})
    gpu = nvidia_smi("gpu=name,memory.total")
    RESULTS["gpus"] = gpu
    log(f"== gpuclust GPU service on the {'CPU stand-in (a check of the script, no GPU)' if si else 'GPU'}: "
        f"{gpu if gpu else 'no nvidia-smi'}")

    try:
        srv = Server(args)
    except Exception as e:  # noqa: BLE001
        log(f"service_device: no server: {e}")
        RESULTS["error"] = str(e)
        save()
        return 1

    def left():
        return args.deadline - (time.monotonic() - t_start)

    def run_part(key, title, fn, *a):
        lim = min(limits[key], left() - 5)
        log(f"\n== {key}. {title}")
        if lim < 10:
            log(f"skipped: {lim:.0f} s for it ({left():.0f} s of the run's {args.deadline:.0f} left)")
            RESULTS["parts"].setdefault(key, {})["skipped"] = True
            save()
            return None
        t0 = time.monotonic()
        try:
            r = fn(*a, lim)
            RESULTS["parts"].setdefault(key, {}).update(r if isinstance(r, dict) else {"rows": r})
            RESULTS["parts"][key]["seconds"] = time.monotonic() - t0
            return r
        except Exception as e:  # noqa: BLE001
            log(f"FAILED after {time.monotonic() - t0:.1f} s: {type(e).__name__}: {e}")
            log(traceback.format_exc(limit=3))
            RESULTS["parts"].setdefault(key, {})["error"] = f"{type(e).__name__}: {e}"
            return None
        finally:
            # what a part cut short left running in the server does not weigh on the next
            try:
                psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                     "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()", timeout=20)
            except Exception:  # noqa: BLE001
                pass
            save()

    sess_dev = "cpu" if si else "gpu"
    a_rows, b_rows = {}, []

    def ensure(mode):
        """The server in mode, unless it is already; whether it is."""
        if srv.mode == mode:
            return True
        try:
            srv.restart(mode)
            return True
        except Exception as e:  # noqa: BLE001
            log(f"\nservice_device: restart in mode {mode} failed: {e}")
            RESULTS.setdefault("restart_errors", []).append(f"{mode}: {e}")
            return False

    def do_a(mode):
        dev = sess_dev if mode == "session" else "gpu"
        label = "a CUDA context per session" if mode == "session" else "the GPU service"
        r = run_part("a", f"first call, {label} ({args.runs} new sessions per function, medians, ms)",
                     lambda lim: {mode: part_first_call(srv, args, lim / 2, mode, dev)})
        if r:
            a_rows.update(r)
            RESULTS["parts"]["a"] = dict(RESULTS["parts"].get("a", {}), **a_rows)
            rows = r[mode]
            if rows:
                hdr = list(rows[0].keys())
                log(md_table(hdr, [[x[h] for h in hdr] for x in rows]))

    def do_b(mode):
        dev = sess_dev if mode == "session" else "gpu"
        label = "a CUDA context per session" if mode == "session" else "the GPU service"
        r = run_part("b", f"{args.sessions} idle sessions that made one GPU call, {label}",
                     lambda lim: {mode: part_idle(srv, args, lim / 2, mode, dev)})
        if r:
            b_rows.append(r[mode])
            RESULTS["parts"]["b"] = dict(RESULTS["parts"].get("b", {}), rows=b_rows)
            log(md_table(["mode", "sessions", "MiB without", "MiB with", "MiB per session",
                          "context processes without", "with", "their MiB"],
                         [[x["mode"], x["sessions"], x["mib_before"], x["mib_after"],
                           fmt(x["mib_per_session"]), x["context_processes_before"],
                           x["context_processes_after"], x["context_mib_after"]] for x in b_rows]))

    def do_c():
        r = run_part("c", f"load: {args.load_sessions} concurrent sessions, DBSCAN {args.db_rows} x 2 and "
                          f"k-means {args.km_rows} x {args.km_dims}, budget {args.budget_mb} MB",
                     lambda lim: part_load(srv, args, lim))
        if r:
            log(f"tables made in {r['table_s']:.1f} s; serial: "
                + ", ".join(f"{x['variant']} {x['seconds']:.2f} s" for x in r["serial"]))
            rows = []
            for k in ("service", "per_session"):
                x = r.get(k)
                if x:
                    rows.append([x["mode"], x["sessions"], x["ok"], x["identical_to_serial"], x["errors"], x["oom"],
                                 x["cpu_fallback"], x["on_gpu"], fmt(x["wall_s"], 2), fmt(x["requests_per_s"], 2),
                                 fmt(x["wait_ms_p50"]), fmt(x["wait_ms_p99"]), fmt(x["wait_ms_max"]),
                                 x["peak"]["reserved"] >> 20 if x["peak"]["reserved"] else None,
                                 x["peak"]["running"], x["peak"]["queued"], x["peak"]["mib_used"]])
            log(md_table(["mode", "sessions", "ok", "identical to serial", "errors", "out of memory",
                          "on the CPU", "on the GPU", "wall s", "requests/s", "wait p50 ms", "wait p99 ms",
                          "wait max ms", "peak reserved MiB", "peak running", "peak queued",
                          "peak device MiB"], rows))
            sv = r.get("service") or {}
            if sv.get("combined_estimate"):
                log(f"combined estimate of the {sv['sessions']} requests: {sv['combined_estimate'] >> 20} MiB "
                    f"(per request {', '.join(f'{k} {v >> 20} MiB' for k, v in sv['estimate_by_op'].items())}); "
                    f"budget {args.budget_mb} MiB")
            for k in ("service", "per_session"):
                for e in (r.get(k) or {}).get("error_samples", []):
                    log(f"  {k} error: {e}")

    def do_d():
        r = run_part("d", "fault: a request breaks the service's CUDA context (gpuclust.service_test_fault)",
                     lambda lim: part_fault(srv, args, lim))
        if r:
            log(f"fault call: rc {r['fault_call']['rc']}: {r['fault_call']['error']}")
            log(md_table(["service pid before", "after", "new pid after s", "answers again after s",
                          "postmaster start unchanged", "surviving session", "service exit code 1",
                          "cluster restart in log"],
                         [[r["old_service_pid"], r["new_service_pid"], fmt(r["new_pid_after_s"], 2),
                           fmt(r["ready_after_s"], 2), r["postmaster_start_unchanged"],
                           r["survivor_session"]["same_backend"], r["log"]["service_exit_1"],
                           r["log"]["cluster_restart"]]]))
            log(md_table(["device", "when", "outcome", "calls"],
                         [[o["device"], o["when"], o["outcome"], o["calls"]] for o in r["outcomes"]]))
            for line in r["log"]["lines"]:
                log("  log: " + line)

    # in the order that restarts the server least: the service (a, b, d), the load (c: the
    # service, then a context per session), then a and b with a context per session
    try:
        if ensure("service"):
            if "a" in args.parts:
                do_a("service")
            if "b" in args.parts:
                do_b("service")
            if "d" in args.parts:
                do_d()
        if "c" in args.parts:
            do_c()
        if ("a" in args.parts or "b" in args.parts) and ensure("session"):
            if "a" in args.parts:
                do_a("session")
            if "b" in args.parts:
                do_b("session")
    finally:
        try:
            srv.restore()
        except Exception as e:  # noqa: BLE001
            log(f"service_device: restoring the server: {e}")
        RESULTS["seconds"] = time.monotonic() - t_start
        save()
        log(f"\n== done in {RESULTS['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
