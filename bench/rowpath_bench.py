#!/usr/bin/env python3
"""
rowpath_bench.py
    The SQL row path around the algorithms: the whole statement against the
    time of reading the same table, with the phases of the call, at two
    settings of work_mem.  Runs psql (no Python driver needed) against the
    server named by the libpq environment variables, where gpuclust is
    installed; on the GPU machine: source .device/pg-up first.

    bench/rowpath_bench.py [--device gpu|cpu|auto] [--rows 1000000,10000000]
                           [--wide-rows 1000000] [--dim 256]
                           [--wide-types real,vector]
                           [--work-mem 4MB,256MB] [--output-mem SIZE]
                           [--repeat 3] [--json FILE] [--keep]

For each 2-D table (blobs with 5 % noise, the generator of
bench/dbscan_gpu_bench.sh; DBSCAN eps 0.05, min_pts 5) and each work_mem:

    read       SELECT sum(cardinality(f)) FROM t                  (the floor)
    statement  SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM t', ...)
    ratio      statement / read
    total, gather, compute, output   from the gpuclust.timing NOTICE
    temp file  whether the statement wrote a temporary file (log_temp_files)
    SRF floor  SELECT count(*) FROM generate_series(1, rows): a set-returning
               function's rows go through a tuplestore that the query reads
               back, whatever the function; (read + SRF floor) / read is what
               the ratio cannot go below as long as the gather is no faster
               than the read

For the wide tables (--wide-rows rows of --dim features, one table per type
of --wide-types: real for real[], float8 for double precision[], vector for
pgvector's vector, skipped where pgvector is not installed): the gather of
gpu_kmeans_centroids(k 8, one iteration) in GB/s of feature data (4 bytes a
feature, whatever the type) and in ns per row, next to the read of the table,
in parallel as the planner chooses and serial (max_parallel_workers_per_gather
0), and the gather against the serial read, the floor of a gather in one
process.  Each figure is the median of --repeat runs in one session,
after one warm-up call (which loads the GPU back end).  Tables are unlogged,
named rowpath_bench_*, and dropped at the end unless --keep.
"""

import argparse
import json
import re
import statistics
import subprocess
import sys

TIME = re.compile(r"^Time: ([0-9.]+) ms")
NOTICE = re.compile(r"gpuclust: \S+ n=(\d+) d=(\d+) device=(\S+)(?: threads=\d+)? gather=([0-9.]+)"
                    r"(?: to_device=[0-9.]+ from_device=[0-9.]+(?: gpu_init=[0-9.]+(?: init_[a-z]+=[0-9.]+)*)?)?"
                    r" compute=([0-9.]+) "
                    r"output=([0-9.]+) total=([0-9.]+)")


def psql(script):
    """Runs script in one psql session; stdout and stderr together, in order."""
    p = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1"], input=script,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit("psql failed:\n" + p.stdout[-4000:])
    return p.stdout


def make_2d(table, rows):
    """The 2-D blobs of bench/dbscan_gpu_bench.sh: 20 Gaussian blobs, 5 % uniform noise."""
    psql(f"""
DROP TABLE IF EXISTS {table};
SELECT setseed(0.42);
CREATE TEMP TABLE centres AS SELECT k, 5 + 90 * random() AS cx, 5 + 90 * random() AS cy
  FROM generate_series(0, 19) k;
CREATE UNLOGGED TABLE {table} AS
  SELECT i::bigint AS id,
         CASE WHEN i % 20 = 7 THEN ARRAY[100 * random(), 100 * random()]::real[]
              ELSE ARRAY[c.cx + r * cos(a), c.cy + r * sin(a)]::real[] END AS f
  FROM generate_series(1, {rows}) i
  JOIN centres c ON c.k = i % 20,
  LATERAL (SELECT sqrt(-2 * ln(1 - random())) + 0 * i AS r, 2 * pi() * random() + 0 * i AS a) g;
VACUUM ANALYZE {table};
""")


WIDE_TYPES = {"real": "real[]", "float8": "double precision[]", "vector": "vector"}


def make_wide(table, rows, dim, typ="real"):
    """rows of dim features: 1000 random arrays, repeated (the values do not matter to the gather)."""
    cast = {"real": "b.f", "float8": "b.f::float8[]", "vector": "b.f::vector"}[typ]
    psql(f"""
DROP TABLE IF EXISTS {table};
SELECT setseed(0.42);
CREATE TEMP TABLE base AS
  SELECT k, array_agg(random()::real) AS f
  FROM generate_series(0, 999) k, generate_series(1, {dim}) j GROUP BY k;
CREATE UNLOGGED TABLE {table} AS
  SELECT i::bigint AS id, {cast} AS f FROM generate_series(1, {rows}) i JOIN base b ON b.k = i % 1000;
VACUUM ANALYZE {table};
""")


def have_pgvector():
    """Whether pgvector's vector type can be had (CREATE EXTENSION vector where it is not yet)."""
    p = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1"],
                       input="CREATE EXTENSION IF NOT EXISTS vector;\n",
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode == 0


def measure(read_sql, call_sql, warm_sql, work_mem, repeat, output_mem=None, floor_sql=None):
    """Median read and statement times, NOTICE phases and temporary files, in one session;
    also the serial read, and floor_sql's time where given."""
    script = [f"SET work_mem = '{work_mem}';",
              f"SET gpuclust.output_mem = '{output_mem}';" if output_mem else "",
              "SET gpuclust.timing = on;",
              warm_sql + ";",
              # LOG lines about temporary files, where the role may set them
              "DO $$ BEGIN SET log_temp_files = 0; SET client_min_messages = log; "
              "EXCEPTION WHEN insufficient_privilege THEN NULL; END $$;",
              "\\timing on"]
    for _ in range(repeat):
        script += ["\\echo @read", read_sql + ";", "\\echo @call", call_sql + ";"]
    # @none: the times of SET and RESET belong to no section
    script += ["\\echo @none", "SET max_parallel_workers_per_gather = 0;"]
    for _ in range(repeat):
        script += ["\\echo @sera", read_sql + ";"]
    script += ["\\echo @none", "RESET max_parallel_workers_per_gather;"]
    if floor_sql:
        for _ in range(repeat):
            script += ["\\echo @flor", floor_sql + ";"]
    out = psql("\n".join(script) + "\n")
    times = {"read": [], "call": [], "sera": [], "flor": [], "none": []}
    notices, temp = [], False
    section = None
    for line in out.splitlines():
        if line[:1] == "@" and line[1:5] in times:
            section = line[1:5]
            continue
        m = TIME.match(line)
        if m and section:
            times[section].append(float(m.group(1)))
            continue
        m = NOTICE.search(line)
        if m and section == "call":
            notices.append(m)
        if "temporary file" in line and section == "call":
            temp = True
    med = statistics.median
    res = {"work_mem": work_mem, "read_ms": med(times["read"]), "statement_ms": med(times["call"]),
           "serial_read_ms": med(times["sera"]), "temp_file": temp}
    res["ratio"] = res["statement_ms"] / res["read_ms"]
    if times["flor"]:
        res["srf_floor_ms"] = med(times["flor"])
        res["floor_ratio"] = (res["read_ms"] + res["srf_floor_ms"]) / res["read_ms"]
    if notices:
        res.update(n=int(notices[0].group(1)), d=int(notices[0].group(2)),
                   device=notices[0].group(3),
                   gather_ms=med(float(m.group(4)) for m in notices),
                   compute_ms=med(float(m.group(5)) for m in notices),
                   output_ms=med(float(m.group(6)) for m in notices),
                   total_ms=med(float(m.group(7)) for m in notices))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="gpu", choices=["gpu", "cpu", "auto"])
    ap.add_argument("--rows", default="1000000,10000000")
    ap.add_argument("--wide-rows", type=int, default=1000000, help="0: no wide table")
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--wide-types", default="real,vector",
                    help="feature types of the wide tables: real, float8, vector (skipped without pgvector)")
    ap.add_argument("--work-mem", default="4MB,256MB")
    ap.add_argument("--output-mem", help="SET gpuclust.output_mem to this (e.g. 64kB: spill as before it)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="write the results to this file as well")
    ap.add_argument("--keep", action="store_true", help="keep the tables")
    a = ap.parse_args()

    psql("CREATE EXTENSION IF NOT EXISTS gpuclust;")
    if a.output_mem:
        psql("LOAD 'gpuclust';\n" f"SET gpuclust.output_mem = '{a.output_mem}';")
    info = psql("\\pset format unaligned\n\\pset tuples_only on\nSELECT version();\n"
                "SELECT extversion FROM pg_extension WHERE extname = 'gpuclust';\n"
                "SELECT coalesce(string_agg(name, ', '), 'no GPU') FROM gpuclust_devices();\n").split("\n")
    print(f"# {info[0]}\n# gpuclust {info[1]}; GPUs: {info[2]}; device => '{a.device}'"
          + (f"; gpuclust.output_mem = {a.output_mem}" if a.output_mem else ""))
    dev = a.device
    warm = (f"SELECT count(*) FROM gpu_dbscan('SELECT g::bigint, ARRAY[g % 100, g / 100]::real[] "
            f"FROM generate_series(1, 30000) g', 1.5, 4, '{dev}')")
    results = []
    tables = []
    for rows in [int(r) for r in a.rows.split(",") if r]:
        t = f"rowpath_bench_{rows}"
        tables.append(t)
        make_2d(t, rows)
        for wm in a.work_mem.split(","):
            r = measure(f"SELECT sum(cardinality(f)) FROM {t}",
                        f"SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM {t}', 0.05, 5, '{dev}')",
                        warm, wm, a.repeat, a.output_mem,
                        floor_sql=f"SELECT count(*) FROM generate_series(1, {rows})")
            r["case"] = f"DBSCAN {rows:,} x 2"
            results.append(r)
    wide_types = [w for w in a.wide_types.split(",") if w]
    for w in wide_types:
        if w not in WIDE_TYPES:
            sys.exit(f"unknown wide type {w}: use {', '.join(WIDE_TYPES)}")
    if "vector" in wide_types and a.wide_rows > 0 and not have_pgvector():
        print("# pgvector is not installed: no vector table")
        wide_types.remove("vector")
    for w in wide_types if a.wide_rows > 0 else []:
        t = f"rowpath_bench_wide_{w}_{a.wide_rows}x{a.dim}"
        tables.append(t)
        make_wide(t, a.wide_rows, a.dim, w)
        size = "vector_dims(f)" if w == "vector" else "cardinality(f)"
        r = measure(f"SELECT sum({size}) FROM {t}",
                    f"SELECT count(*) FROM gpu_kmeans_centroids('SELECT id, f FROM {t}', 8, "
                    f"max_iter => 1, device => '{dev}')",
                    warm, a.work_mem.split(",")[-1], a.repeat, a.output_mem)
        r["case"] = f"k-means {a.wide_rows:,} x {a.dim} {WIDE_TYPES[w]}"
        if "gather_ms" in r:
            r["gather_gb_s"] = a.wide_rows * a.dim * 4 / (r["gather_ms"] * 1e6)
            r["gather_ns_row"] = r["gather_ms"] * 1e6 / a.wide_rows
            r["gather_serial_read_ratio"] = r["gather_ms"] / r["serial_read_ms"]
        results.append(r)

    hdr = ("| case | work_mem | read ms | serial read ms | statement ms | statement / read | total | "
           "gather | compute | output | temp file | gather GB/s | gather ns/row | gather / serial read | "
           "SRF floor ms | (read + floor) / read |")
    print(hdr)
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for r in results:
        gbs = f"{r['gather_gb_s']:.2f}" if "gather_gb_s" in r else ""
        nsr = f"{r['gather_ns_row']:.0f}" if "gather_ns_row" in r else ""
        gsr = f"{r['gather_serial_read_ratio']:.2f}" if "gather_serial_read_ratio" in r else ""
        flo = f"{r['srf_floor_ms']:.0f}" if "srf_floor_ms" in r else ""
        flr = f"{r['floor_ratio']:.2f}" if "floor_ratio" in r else ""
        print(f"| {r['case']} | {r['work_mem']} | {r['read_ms']:.0f} | {r['serial_read_ms']:.0f} | "
              f"{r['statement_ms']:.0f} | {r['ratio']:.2f} | {r.get('total_ms', 0):.0f} | "
              f"{r.get('gather_ms', 0):.0f} | {r.get('compute_ms', 0):.1f} | {r.get('output_ms', 0):.0f} | "
              f"{'yes' if r['temp_file'] else 'no'} | {gbs} | {nsr} | {gsr} | {flo} | {flr} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"server": info[0], "gpuclust": info[1], "gpus": info[2],
                       "device": dev, "results": results}, f, indent=1)
    if not a.keep:
        psql("".join(f"DROP TABLE IF EXISTS {t};\n" for t in tables))


if __name__ == "__main__":
    main()
