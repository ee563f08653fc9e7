#!/usr/bin/python3
"""
How long a long gpuclust call takes to give up after it is asked to stop.

Runs the hostile inputs of test/cancel_cases.py (each keeps the CPU busy for
tens of seconds or more) and, for each, three ways of stopping it:

  statement_timeout     SET statement_timeout = '1s' before the call
  pg_cancel_backend     from a second session, once the call has run 1 s
  pg_terminate_backend  from a second session, once the call has run 1 s

and prints, as a markdown table, the seconds between the request (the
timeout's expiry, or the moment the function is called) and the call's
return (the error 57014, or the connection closing).  Every case runs with
device => 'cpu', and again with device => 'gpu' when gpuclust_devices() lists
a GPU and a small call with device => 'gpu' succeeds (otherwise the GPU rows
say skipped).

    python3 bench/cancel_bench.py [--json FILE] [--case NAME ...] [--max-wait S]

Connects with libpq's environment variables.  Cases:

  dbscan_one_cell   300,000 uniform 10-D points, eps 1, min_pts 5
  dbscan_no_core    20,000 x 500-D, eps 1, min_pts 2147483647
  density_peaks     50,000 x 500-D, 5 clusters
  kmeans_reseed     500,000 sorted 1-D rows, k 1000, identical initial centroids

The tables are built once (a few seconds, random features with a fixed seed)
and dropped afterwards unless --keep.  A call that does not answer within
--max-wait seconds is terminated and reported as such; the figures are
measured by the client and include a round trip.
"""

import argparse
import json
import os
import platform
import sys
import time

import psycopg2
import psycopg2.extensions

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test"))
from cancel_cases import CASES, TABLES, Hung, wait  # noqa: E402  (test/cancel_cases.py)

METHODS = ("statement_timeout", "pg_cancel_backend", "pg_terminate_backend")
AFTER_S = 1.0


def connect():
    c = psycopg2.connect("")
    c.autocommit = True
    return c


def run_async(aconn, sql, timeout=60.0):
    cur = aconn.cursor()
    cur.execute(sql)
    wait(aconn, time.monotonic() + timeout)
    return cur.fetchall() if cur.description else None


def gone(other, pid, timeout):
    """Waits until backend pid has left pg_stat_activity; whether it did."""
    deadline = time.monotonic() + timeout
    with other.cursor() as cur:
        while time.monotonic() < deadline:
            cur.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
            if cur.fetchone() == (0,):
                return True
            time.sleep(0.05)
    return False


def measure(other, sql, method, max_wait):
    """One call stopped by method.  Returns a dict: outcome and seconds after the request."""
    aconn = psycopg2.connect("", async_=1)
    wait(aconn, time.monotonic() + 60)
    pid = aconn.get_backend_pid()
    if method == "statement_timeout":
        run_async(aconn, f"SET statement_timeout = '{int(AFTER_S * 1000)}ms'")
    cur = aconn.cursor()
    t_start = time.monotonic()
    cur.execute(sql)
    t_request = None
    result = {"method": method}
    try:
        if method == "statement_timeout":
            t_request = t_start + AFTER_S
        else:
            # send the request once the statement has been active for AFTER_S
            with other.cursor() as ocur:
                while True:
                    ocur.execute("""SELECT clock_timestamp() - query_start >= %s * interval '1 s'
                                    FROM pg_stat_activity
                                    WHERE pid = %s AND state = 'active' AND query LIKE '%%gpu_%%'""",
                                 (AFTER_S, pid))
                    row = ocur.fetchone()
                    if row and row[0]:
                        break
                    if aconn.poll() == psycopg2.extensions.POLL_OK:
                        result.update(outcome="finished first", seconds=time.monotonic() - t_start)
                        aconn.close()
                        return result
                    time.sleep(0.02)
                t_request = time.monotonic()
                ocur.execute(f"SELECT {method}(%s)", (pid,))
        wait(aconn, t_request + max_wait)
        t_end = time.monotonic()
        result.update(outcome="finished first" if t_end < t_request else "finished without error",
                      seconds=t_end - t_start)
    except Hung:
        result.update(outcome=f"no answer in {max_wait:.0f} s", seconds=None)
        aconn.close()
        with other.cursor() as ocur:
            ocur.execute("SELECT pg_terminate_backend(%s)", (pid,))
        if not gone(other, pid, max_wait):
            print(f"warning: backend {pid} still runs after pg_terminate_backend", file=sys.stderr)
    except psycopg2.Error as e:
        t_end = time.monotonic()
        if isinstance(e, psycopg2.OperationalError) and aconn.closed:
            outcome = "connection closed" + (f", {e.pgcode}" if e.pgcode else "")
        else:
            outcome = e.pgcode or type(e).__name__
        result.update(outcome=outcome, seconds=t_end - t_request,
                      message=str(e).strip().splitlines()[0] if str(e).strip() else "")
        if method == "pg_terminate_backend" and not gone(other, pid, max_wait):
            result["outcome"] += ", backend still listed"
    if not aconn.closed:
        if method != "pg_terminate_backend":
            try:
                if run_async(aconn, "SELECT 1") != [(1,)]:
                    result["outcome"] += ", session broken"
            except (psycopg2.Error, Hung):
                result["outcome"] += ", session broken"
        aconn.close()
    return result


def gpu_usable(conn):
    """Whether device => 'gpu' works here, and if not why."""
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM gpuclust_devices()")
        if cur.fetchone()[0] == 0:
            return False, "gpuclust_devices() lists no GPU"
        try:
            cur.execute("SELECT count(*) FROM gpu_dbscan('SELECT g, g::real FROM generate_series(1, 10) g', "
                        "1, 2, device => 'gpu')")
        except psycopg2.Error as e:
            return False, f"device => 'gpu' fails: {e.pgerror.strip().splitlines()[0]}"
    return True, ""


def cell(r):
    if r is None:
        return "skipped"
    if r["seconds"] is None:
        return r["outcome"]
    if r["outcome"].startswith("finished"):
        return f"{r['outcome']} ({r['seconds']:.2f} s after the start)"
    return f"{r['seconds']:.3f} s ({r['outcome']})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", choices=list(CASES),
                    help="run only this case (repeatable; default all)")
    ap.add_argument("--max-wait", type=float, default=300.0,
                    help="seconds to wait for an answer after the request before terminating")
    ap.add_argument("--no-gpu", action="store_true", help="skip the GPU variant")
    ap.add_argument("--reuse", action="store_true", help="use the tables if they are already there")
    ap.add_argument("--keep", action="store_true", help="keep the tables afterwards")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = ap.parse_args()
    cases = args.case or list(CASES)

    conn = connect()
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
    cur.execute("SELECT version()")
    pg_version = cur.fetchone()[0]
    t0 = time.perf_counter()
    cur.execute("SELECT setseed(0.25)")
    for name, query in TABLES.items():
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", (name,))
        if args.reuse and cur.fetchone()[0]:
            continue
        cur.execute(f"DROP TABLE IF EXISTS {name}")
        cur.execute(f"CREATE TABLE {name} AS {query}")
        cur.execute(f"ANALYZE {name}")
    print(f"tables ready in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    if args.no_gpu:
        gpu_ok, why = False, "--no-gpu"
    else:
        gpu_ok, why = gpu_usable(conn)
    devices = ["cpu"] + (["gpu"] if gpu_ok else [])

    runs = []
    for case in cases:
        for device in devices:
            sql = CASES[case][1].format(device=device)
            for method in METHODS:
                r = measure(conn, sql, method, args.max_wait)
                r.update(case=case, device=device)
                print(f"{case} {device} {method}: {cell(r)}", file=sys.stderr, flush=True)
                runs.append(r)

    print()
    print(f"Seconds from the request to the call's return, request after {AFTER_S:.0f} s; "
          f"{pg_version.split(',')[0]}; {platform.node()}")
    if not gpu_ok:
        print(f"GPU: skipped ({why})")
    print()
    print("| case | data | device | " + " | ".join(METHODS) + " |")
    print("| --- | --- | --- | " + " | ".join("---:" for _ in METHODS) + " |")
    for case in cases:
        for device in ["cpu", "gpu"]:
            if device == "gpu" and not gpu_ok:
                cells = ["skipped"] * len(METHODS)
            else:
                cells = [cell(next(r for r in runs if r["case"] == case and r["device"] == device
                                   and r["method"] == m)) for m in METHODS]
            print(f"| {case} | {CASES[case][0]} | {device} | " + " | ".join(cells) + " |")

    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"postgresql": pg_version, "host": platform.node(), "after_s": AFTER_S,
                       "max_wait_s": args.max_wait, "gpu": gpu_ok, "gpu_skipped_because": why or None,
                       "runs": runs}, fh, indent=2)
    if not args.keep:
        for name in TABLES:
            cur.execute(f"DROP TABLE IF EXISTS {name}")
    conn.close()


if __name__ == "__main__":
    main()
