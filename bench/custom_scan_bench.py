#!/usr/bin/env python3
"""
custom_scan_bench.py
    How the rows of gpu_dbscan reach the query: the GPU Cluster Scan node
    (gpuclust.custom_scan = on, rows read from the result arrays) against
    the Function Scan (off, rows through a tuplestore), next to reading the
    same table.  Runs psql against the server named by the libpq environment
    variables, where gpuclust is installed; on the GPU machine: source
    .device/pg-up first.

    bench/custom_scan_bench.py [--device gpu,cpu] [--rows 1000000,10000000]
                               [--parallel-gather off,on] [--order-by [--scattered-key]]
                               [--work-mem 4MB] [--repeat 3] [--json FILE] [--keep]

--device and --parallel-gather take lists: every combination is measured on
the same table.  --order-by also measures the query with ORDER BY id (the
table then gets a primary key, and is clustered on it: the rows of
rowpath_bench.make_2d come grouped by blob, not in id order, since its join
sorts them on i % 20; in id order the parallel gather needs no sort for
ORDER BY id, and the plain query reads the rows in the same order;
until 2026-11-27 the table was not clustered, and ORDER BY id was
sorted); --scattered-key adds a column
k = id * 48271 % 2147483647 (unique, NOT NULL, in no relation to the
table's order) and measures ORDER BY k as well, which it sorts.

For each table (the 2-D blobs of bench/rowpath_bench.py; DBSCAN eps 0.05,
min_pts 5):

    read       SELECT sum(cardinality(f)) FROM t
    on, off    SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM t', 0.05, 5, device)
               with gpuclust.custom_scan on and off
    compute    the call's gather + compute from the gpuclust.timing NOTICE
               (the same work both ways)
    rows on/off  on - compute and off - compute: what returning the rows costs
    on/read, off/read

Each figure is the median of --repeat runs in one session after a warm-up
call; on and off alternate.  Tables are unlogged, named
rowpath_bench_2d_<rows>, and dropped at the end unless --keep.
"""

import argparse
import itertools
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rowpath_bench import psql, make_2d  # noqa: E402

TIME = re.compile(r"^Time: ([0-9.]+) ms")
NOTICE = re.compile(r"gpuclust: \S+ n=(\d+) .*? gather=([0-9.]+).*? compute=([0-9.]+) ")


def timed(statements):
    """Runs the statements in one session with \\timing; their times and NOTICE lines."""
    out = psql(statements)
    times = [float(m.group(1)) for m in map(TIME.match, out.splitlines()) if m]
    notices = [m for m in map(NOTICE.search, out.splitlines()) if m]
    return times, notices


def setting(name, value):
    return f"\\timing off\nSET {name} = '{value}';\n\\timing on\n"


def one(table, rows, query, device, pgather, a):
    """read, on and off for one query, device and parallel-gather setting."""
    call = f"SELECT count(*) FROM gpu_dbscan('{query}', 0.05, 5, '{device}');\n"
    read = f"SELECT sum(cardinality(f)) FROM {table};\n"
    script = (setting("work_mem", a.work_mem) + setting("gpuclust.timing", "on") +
              setting("gpuclust.parallel_gather", pgather) + read + call)
    for _ in range(a.repeat):
        script += (read + setting("gpuclust.custom_scan", "on") + call +
                   setting("gpuclust.custom_scan", "off") + call)
    times, notices = timed(script)
    # warm-up: read, call; then per repeat: read, on, off
    t = times[2:]
    comp = [float(m.group(2)) + float(m.group(3)) for m in notices[1:]]
    read_ms = statistics.median(t[0::3])
    on = statistics.median(t[1::3])
    off = statistics.median(t[2::3])
    c_on = statistics.median(comp[0::2])
    c_off = statistics.median(comp[1::2])
    return dict(rows=rows, device=device, parallel_gather=pgather,
                order_by="ORDER BY" in query,
                order_key=query.split("ORDER BY ")[1] if "ORDER BY" in query else None,
                work_mem=a.work_mem, read_ms=read_ms,
                on_ms=on, off_ms=off, compute_on_ms=c_on, compute_off_ms=c_off,
                rows_on_ms=on - c_on, rows_off_ms=off - c_off)


HEADER = (f"{'rows':>10} {'device':>6} {'pgather':>7} {'order':>5} {'read ms':>9} {'on ms':>9} "
          f"{'off ms':>9} {'compute':>9} {'rows on':>8} {'rows off':>8} {'on/read':>8} {'off/read':>8}")


def line(r):
    return (f"{r['rows']:>10} {r['device']:>6} {r['parallel_gather']:>7} "
            f"{r['order_key'] or '-':>5} {r['read_ms']:>9.1f} {r['on_ms']:>9.1f} "
            f"{r['off_ms']:>9.1f} {r['compute_on_ms']:>9.1f} {r['rows_on_ms']:>8.1f} "
            f"{r['rows_off_ms']:>8.1f} {r['on_ms'] / r['read_ms']:>8.2f} "
            f"{r['off_ms'] / r['read_ms']:>8.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="gpu")
    ap.add_argument("--parallel-gather", default="off")
    ap.add_argument("--order-by", action="store_true")
    ap.add_argument("--scattered-key", action="store_true")
    ap.add_argument("--rows", default="1000000,10000000")
    ap.add_argument("--work-mem", default="4MB")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()

    psql("CREATE EXTENSION IF NOT EXISTS gpuclust;")
    results = []
    print(HEADER, flush=True)
    for rows in [int(r) for r in a.rows.split(",")]:
        table = f"rowpath_bench_2d_{rows}"
        make_2d(table, rows)
        queries = [f"SELECT id, f FROM {table}"]
        if a.order_by:
            psql(f"ALTER TABLE {table} ADD PRIMARY KEY (id); CLUSTER {table} USING {table}_pkey; "
                 f"VACUUM ANALYZE {table};")
            queries.append(f"SELECT id, f FROM {table} ORDER BY id")
            if a.scattered_key:
                psql(f"ALTER TABLE {table} ADD COLUMN k bigint NOT NULL "
                     f"GENERATED ALWAYS AS (id * 48271 % 2147483647) STORED, ADD UNIQUE (k); "
                     f"VACUUM ANALYZE {table};")
                queries.append(f"SELECT id, f FROM {table} ORDER BY k")
        for query, device, pgather in itertools.product(queries, a.device.split(","),
                                                        a.parallel_gather.split(",")):
            results.append(one(table, rows, query, device, pgather, a))
            print(line(results[-1]), flush=True)
        if not a.keep:
            psql(f"DROP TABLE {table};")

    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
