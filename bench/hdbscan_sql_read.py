#!/usr/bin/env python3
"""
hdbscan_sql_read.py
    gpu_hdbscan through SQL against its own compute and a read of the table:
    the HDBSCAN issue's goal that the statement take at most 1.3 times the
    compute plus a read (1M rows of 5 features, the shape of UMAP output).
    Runs psql against the server named by the libpq environment variables,
    where gpuclust is installed; on the GPU machine: source .device/pg-up
    first.

    bench/hdbscan_sql_read.py [--rows 1000000] [--dims 5] [--device gpu]
                              [--repeat 3] [--json FILE] [--keep]

The table: --rows rows of --dims features (real[]), 30 Gaussian blobs of
different spreads with 10 % uniform noise (as bench/hdbscan_anchors.py),
unlogged, named hdbscan_sql_read_<rows>_<dims>, dropped at the end unless
--keep.  In one session, after a warm-up of each:

    read       SELECT sum(cardinality(f)) FROM t   (PostgreSQL's parallel read)
    statement  SELECT count(cluster_id) FROM gpu_hdbscan('SELECT id, f FROM t', 10, device => D)
    compute    the call's compute from its gpuclust.timing NOTICE
               (gather, compute, output are the NOTICE's own phases)

Each figure is the median of --repeat runs; prints a table with
statement / (compute + read).
"""
import argparse
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rowpath_bench import psql  # noqa: E402

TIME = re.compile(r"^Time: ([0-9.]+) ms")
NOTICE = re.compile(r"gpuclust: hdbscan n=(\d+) .*?gather=([0-9.]+) .*?compute=([0-9.]+) output=([0-9.]+)")


def make_table(table, rows, dims):
    """30 blobs of sd 0.5 to 4 in [-100, 100]^dims, 10 % uniform noise in [-110, 110]^dims."""
    psql(f"""
DROP TABLE IF EXISTS {table};
SELECT setseed(0.41);
CREATE TEMP TABLE centres AS
  SELECT k, 0.5 + 3.5 * random() AS sd, array_agg(random() * 200 - 100 ORDER BY j) AS c
  FROM generate_series(0, 29) k, generate_series(1, {dims}) j GROUP BY k;
CREATE UNLOGGED TABLE {table} AS
  SELECT i::bigint AS id,
         CASE WHEN i % 10 = 0
              THEN (SELECT array_agg(random() * 220 - 110 + 0 * i ORDER BY j) FROM generate_series(1, {dims}) j)
              ELSE (SELECT array_agg(ce.c[j] + ce.sd * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()) + 0 * i
                                     ORDER BY j) FROM generate_series(1, {dims}) j)
         END::real[] AS f
  FROM generate_series(1, {rows}) i
  JOIN centres ce ON ce.k = i % 30;
VACUUM ANALYZE {table};
""")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1000000)
    ap.add_argument("--dims", type=int, default=5)
    ap.add_argument("--device", default="gpu")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    table = f"hdbscan_sql_read_{a.rows}_{a.dims}"
    psql("CREATE EXTENSION IF NOT EXISTS gpuclust;")
    make_table(table, a.rows, a.dims)
    read = f"SELECT sum(cardinality(f)) FROM {table};\n"
    call = (f"SELECT count(cluster_id) FROM gpu_hdbscan('SELECT id, f FROM {table}', 10, "
            f"device => '{a.device}');\n")
    script = "SET gpuclust.timing = on;\n\\timing on\n" + read + call
    for _ in range(a.repeat):
        script += read + call
    out = psql(script)
    times = [float(m.group(1)) for m in map(TIME.match, out.splitlines()) if m]
    notices = [m for m in map(NOTICE.search, out.splitlines()) if m]
    if len(times) != 2 * (a.repeat + 1) or len(notices) != a.repeat + 1:
        sys.exit("unexpected psql output:\n" + out[-3000:])
    t = times[2:]
    n = notices[1:]
    r = dict(rows=a.rows, dims=a.dims, device=a.device,
             read_ms=statistics.median(t[0::2]),
             statement_ms=statistics.median(t[1::2]),
             gather_ms=statistics.median(float(m.group(2)) for m in n),
             compute_ms=statistics.median(float(m.group(3)) for m in n),
             output_ms=statistics.median(float(m.group(4)) for m in n))
    r["ratio"] = r["statement_ms"] / (r["compute_ms"] + r["read_ms"])
    print(f"{'rows':>9} {'dims':>4} {'device':>6} {'read ms':>9} {'statement':>10} {'gather':>8} "
          f"{'compute':>8} {'output':>8} {'statement / (compute + read)':>29}")
    print(f"{r['rows']:>9} {r['dims']:>4} {r['device']:>6} {r['read_ms']:>9.1f} {r['statement_ms']:>10.1f} "
          f"{r['gather_ms']:>8.1f} {r['compute_ms']:>8.1f} {r['output_ms']:>8.1f} {r['ratio']:>29.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)
    if not a.keep:
        psql(f"DROP TABLE {table};")


if __name__ == "__main__":
    main()
