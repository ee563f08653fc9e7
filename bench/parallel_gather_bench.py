#!/usr/bin/env python3
"""
parallel_gather_bench.py
    The gather of a query that scans one table, serial (gpuclust.parallel_gather
    off) against gpuclust's parallel gather with 1, 2, 4 ... workers, next to
    the read of the same table by PostgreSQL.  Runs psql (no Python driver
    needed) against the server named by the libpq environment variables,
    where gpuclust is installed; on the GPU machine: source .device/pg-up
    first.

    bench/parallel_gather_bench.py [--rows 1000000,10000000] [--dims 2,256]
                                   [--types real,float8,vector] [--workers 1,2,4]
                                   [--repeat 3] [--device cpu] [--keep]

For each table (each of --rows rows of each of --dims features of each of --types, the
1000 repeated rows of rowpath_bench.make_wide, unlogged, named
parallel_gather_bench_<rows>x<dim>_<type>, dropped at the end unless --keep):

    read serial     SELECT sum(cardinality(f)) FROM t (vector_dims for vector),
                    max_parallel_workers_per_gather 0
    read W          the same with max_parallel_workers_per_gather W (as the planner chooses)
    gather serial   the gather= figure of the gpuclust.timing NOTICE of
                    gpu_kmeans_centroids('SELECT id, f FROM t', 8, max_iter => 1),
                    gpuclust.parallel_gather off
    gather W        the same, gpuclust.parallel_gather on, max_parallel_workers_per_gather W
                    (and the table's parallel_workers W, so that W workers are planned)

with the gather against the serial gather and against the read, and the
feature data gathered in GB/s (4 bytes a feature, 8 for float8).  Each figure is the median
of --repeat runs in one session, after one warm-up call.  How many workers
start depends on max_worker_processes and max_parallel_workers; the leader
reads too (parallel_leader_participation).
"""

import argparse
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rowpath_bench import psql, make_wide, have_pgvector, WIDE_TYPES  # noqa: E402

TIME = re.compile(r"^Time: ([0-9.]+) ms")
GATHER = re.compile(r"gpuclust: \S+ n=(\d+) d=(\d+) .*? gather=([0-9.]+)")


def timed(setup, stmt, repeat, notice=False):
    """Median ms of stmt (or of the gather= of its NOTICE) over repeat runs after one warm-up."""
    script = setup + ["SET gpuclust.timing = on;", "\\timing on", stmt, "\\echo @start"]
    script += [stmt] * repeat
    out = psql("\n".join(script) + "\n").split("@start", 1)[1]
    if notice:
        vals = [float(m.group(3)) for m in GATHER.finditer(out)]
    else:
        vals = [float(m.group(1)) for line in out.splitlines() if (m := TIME.match(line))]
    if len(vals) != repeat:
        sys.exit(f"expected {repeat} figures, got {len(vals)}:\n{out[-2000:]}")
    return statistics.median(vals)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="1000000")
    ap.add_argument("--dims", default="2")
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--types", default="real",
                    help="feature types, of " + ",".join(WIDE_TYPES) + " (vector: pgvector)")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    workers = [int(w) for w in a.workers.split(",")]
    psql("CREATE EXTENSION IF NOT EXISTS gpuclust;")
    cpus = psql("\\pset tuples_only on\n\\pset format unaligned\n"
                "SELECT current_setting('max_worker_processes') || ' ' || "
                "current_setting('max_parallel_workers') || ' ' || current_setting('server_version');").split()
    print(f"# PostgreSQL {cpus[2]}, max_worker_processes {cpus[0]}, max_parallel_workers {cpus[1]}, "
          f"{os.cpu_count()} CPUs here")
    types = a.types.split(",")
    if "vector" in types and not have_pgvector():
        print("# pgvector is not installed here: the vector tables are left out")
        types.remove("vector")
    print("| table | setting | read ms | gather ms | gather / serial gather | gather / read | GB/s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for rows, dim, typ in [(int(r), int(d), t) for r in a.rows.split(",") for d in a.dims.split(",")
                           for t in types]:
        t = f"parallel_gather_bench_{rows}x{dim}_{typ}"
        make_wide(t, rows, dim, typ)
        gb = rows * dim * (8 if typ == "float8" else 4) / 1e9
        call = (f"SELECT count(*) FROM gpu_kmeans_centroids('SELECT id, f FROM {t}', 8, "
                f"max_iter => 1, device => '{a.device}');")
        dims = "vector_dims(f)" if typ == "vector" else "cardinality(f)"
        read = f"SELECT sum({dims}) FROM {t};"
        base = ["SET max_parallel_workers_per_gather = 0;"]
        read0 = timed(base, read, a.repeat)
        serial = timed(base + ["SET gpuclust.parallel_gather = off;"], call, a.repeat, notice=True)
        name = f"{rows:,} x {dim} {WIDE_TYPES[typ]}"
        print(f"| {name} | serial | {read0:.1f} | {serial:.1f} | 1.00 | {serial / read0:.2f} | "
              f"{gb / (serial / 1e3):.2f} |")
        for w in workers:
            psql(f"ALTER TABLE {t} SET (parallel_workers = {w});")
            setup = [f"SET max_parallel_workers_per_gather = {w};"]
            readw = timed(setup, read, a.repeat)
            par = timed(setup + ["SET gpuclust.parallel_gather = on;"], call, a.repeat, notice=True)
            print(f"| {name} | {w} workers | {readw:.1f} | {par:.1f} | {par / serial:.2f} | "
                  f"{par / readw:.2f} | {gb / (par / 1e3):.2f} |")
        if not a.keep:
            psql(f"DROP TABLE {t};")


if __name__ == "__main__":
    main()
