#!/usr/bin/env python3
"""
ordered_gather_bench.py
    What ORDER BY id adds to the parallel gather: the phases of the gather
    (its DEBUG2 line: scan, merge and copy, the shared memory released, and
    the time taken to put the rows in ORDER BY order) for
    SELECT id, f FROM t and SELECT id, f FROM t ORDER BY id, id a primary
    key, on a table filled in id order (no sort needed) and on the same rows
    in another order (the 2-D blobs of rowpath_bench.make_2d, whose join
    leaves them grouped by blob: the sort runs).  Runs psql against the
    server named by the libpq environment variables, where gpuclust is
    installed; on the GPU machine: source .device/pg-up first.

    bench/ordered_gather_bench.py [--rows 1000000,10000000] [--workers 2]
                                  [--repeat 5] [--device cpu] [--keep]

Each call is SELECT count(*) FROM gpu_dbscan(query, 0.05, 5, device) with
gpuclust.timing on and client_min_messages debug2; the plain and the ordered
query alternate in one session after one warm-up call of each, and each
figure is the median (and the least) of --repeat calls.  "gather" is the
gather= figure of the gpuclust.timing NOTICE: the whole gather, planning
included; "compute" its compute=; "statement" the whole statement as
psql's \timing gives it.  A second table gives, for each table, the
statement and the gather + compute of ORDER BY id against the plain query
(issue 42's goal: at most 1.2 on the table in id order, where nothing is
sorted, and at most 2.0 on the blob order, whose rows must be put in key
order).  "sorted" says how the gather put the rows in ORDER BY order: "no"
(already in it), "ranks" (each row to its place by its key's rank) or
"yes" (the radix sort).  Tables are unlogged, named ordered_gather_bench_<rows>_{blobs,
ordered}, and dropped at the end unless --keep.
"""

import argparse
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rowpath_bench import psql, make_2d  # noqa: E402

PHASES = re.compile(r"set-up ([0-9.]+) ms, scan ([0-9.]+) ms, merge and copy ([0-9.]+) ms, "
                    r"shared memory released ([0-9.]+) ms")
ORDER = re.compile(r"rows put in ORDER BY order in ([0-9.]+) ms(?: \((already in it|by ranks)\))?")
NOTICE = re.compile(r"gpuclust: dbscan n=\d+ .*? gather=([0-9.]+) (?:to_device=[0-9.]+ from_device=[0-9.]+ (?:gpu_init=[0-9.]+(?: init_[a-z]+=[0-9.]+)* )?)?compute=([0-9.]+)")
TIME = re.compile(r"^Time: ([0-9.]+) ms")
FIELDS = ["gather", "scan", "merge", "order", "release", "compute", "statement"]


def run(table, a):
    """The figures of the plain and the ordered query on table."""
    queries = {"plain": f"SELECT id, f FROM {table}",
               "ORDER BY id": f"SELECT id, f FROM {table} ORDER BY id"}
    script = (f"SET max_parallel_workers_per_gather = {a.workers};\n"
              "SET gpuclust.timing = on;\nSET client_min_messages = debug2;\n\\timing on\n")
    order = []
    for _ in range(a.repeat + 1):
        for name, q in queries.items():
            script += f"SELECT count(*) FROM gpu_dbscan('{q}', 0.05, 5, '{a.device}');\n"
            order.append(name)
    out = psql(script)
    figures = {name: {f: [] for f in FIELDS} for name in queries}
    sorted_ = {name: set() for name in queries}
    call = 0
    cur = {}
    for line in out.splitlines():
        m = PHASES.search(line)
        if m:
            cur.update(scan=float(m[2]), merge=float(m[3]), release=float(m[4]))
        m = ORDER.search(line)
        if m:
            cur["order"] = float(m[1])
            cur["sorted"] = {"already in it": "no", "by ranks": "ranks"}.get(m[2], "yes")
        m = NOTICE.search(line)
        if m:
            cur["gather"] = float(m[1])
            cur["compute"] = float(m[2])
        m = TIME.search(line)
        if m and "gather" in cur:
            cur["statement"] = float(m[1])
            name = order[call]
            if call >= len(queries):        # the first call of each: the warm-up
                for f in FIELDS:
                    if f in cur:
                        figures[name][f].append(cur[f])
                if "sorted" in cur:
                    sorted_[name].add(cur["sorted"])
            call += 1
            cur = {}
    if call != len(order) or not figures["plain"]["scan"]:
        sys.exit("the calls did not all report their gather (is the parallel gather taken?):\n"
                 + out[-3000:])
    return figures, sorted_


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="1000000,10000000")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()

    psql("CREATE EXTENSION IF NOT EXISTS gpuclust;")
    summary = []
    print(f"{'rows':>9} {'table':>8} {'query':>12} {'sorted':>6} "
          + " ".join(f"{f + ' ms':>15}" for f in FIELDS) + "   (median / least)")
    for rows in [int(r) for r in a.rows.split(",")]:
        blobs = f"ordered_gather_bench_{rows}_blobs"
        ordered = f"ordered_gather_bench_{rows}_ordered"
        make_2d(blobs, rows)
        psql(f"DROP TABLE IF EXISTS {ordered};\n"
             f"CREATE UNLOGGED TABLE {ordered} AS SELECT * FROM {blobs} ORDER BY id;\n"
             f"ALTER TABLE {blobs} ADD PRIMARY KEY (id);\n"
             f"ALTER TABLE {ordered} ADD PRIMARY KEY (id);\n"
             f"VACUUM ANALYZE {blobs};\nVACUUM ANALYZE {ordered};\n")
        for label, table in (("id order", ordered), ("blobs", blobs)):
            figures, sorted_ = run(table, a)
            for name, fig in figures.items():
                cells = []
                for f in FIELDS:
                    v = fig[f]
                    cells.append(f"{statistics.median(v):>7.1f} / {min(v):>5.1f}" if v else f"{'-':>15}")
                print(f"{rows:>9} {label:>8} {name:>12} {','.join(sorted(sorted_[name])) or '-':>6} "
                      + " ".join(cells), flush=True)
            med = {name: {f: statistics.median(v) for f, v in fig.items() if v}
                   for name, fig in figures.items()}
            summary.append((rows, label, ",".join(sorted(sorted_["ORDER BY id"])) or "-",
                            med["plain"], med["ORDER BY id"]))
        if not a.keep:
            psql(f"DROP TABLE {blobs}, {ordered};")

    print(f"\nORDER BY id against the plain query: device {a.device}, {a.workers} workers, "
          f"medians of {a.repeat} (goal: at most 1.2 in id order, 2.0 in blob order)")
    print(f"{'rows':>9} {'table':>8} {'sorted':>6} {'plain ms':>9} {'ordered ms':>10} {'ratio':>6} "
          f"{'plain g+c ms':>12} {'ordered g+c ms':>14} {'ratio':>6}")
    for rows, label, how, p, o in summary:
        pgc = p["gather"] + p["compute"]
        ogc = o["gather"] + o["compute"]
        print(f"{rows:>9} {label:>8} {how:>6} {p['statement']:>9.1f} {o['statement']:>10.1f} "
              f"{o['statement'] / p['statement']:>6.2f} {pgc:>12.1f} {ogc:>14.1f} {ogc / pgc:>6.2f}",
              flush=True)


if __name__ == "__main__":
    main()
