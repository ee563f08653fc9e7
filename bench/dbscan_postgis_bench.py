#!/usr/bin/python3
"""
gpu_dbscan against PostGIS ST_ClusterDBSCAN on the same table, in the same run.

Builds a 2-D blobs-with-noise table (default 1M rows) holding the features
twice, as `f real[]` for gpu_dbscan and as a PostGIS point for
ST_ClusterDBSCAN (the point is made from the float32 values, so both cluster
exactly the same coordinates), then times:

  read        SELECT sum(cardinality(f)) FROM t       (reading the rows, the floor)
  gpu_dbscan  SELECT ... FROM gpu_dbscan('SELECT id, f FROM t', eps, min_pts)
              with gpuclust.timing on, split into its phases from the NOTICE
  PostGIS     SELECT ... FROM (SELECT ST_ClusterDBSCAN(geom, eps, min_pts) OVER () ...)

and prints a table with the ratio.  Both answers are summarised by their
number of clusters and of noise points, which do not depend on the border rule
or the row order, so they must agree.

Connects with libpq's environment variables.  With no server at hand:

    pg_virtualenv -t -v 15 /usr/bin/python3 bench/dbscan_postgis_bench.py

(pg_virtualenv starts the server on $PGPORT, default 5432: set PGPORT to a free
port when 5432 is taken.)

Data (the default scale makes eps 0.01 meaningful): --blobs Gaussian blobs with
centres uniform in [0.5, 9.5]^2 and standard deviations uniform in
[0.02, 0.08], holding 90 % of the rows, plus 10 % uniform noise over
[0, 10]^2.  At eps 0.01 and the default 1M rows a point has about 330
neighbours on average (thousands at the centre of the tightest blobs) while
the noise has about 0.3, so min_pts 5 leaves the noise as noise and gives
every blob a border.
"""

import argparse
import io
import json
import platform
import re
import sys
import time

import numpy as np
import psycopg2

TIMING_RE = re.compile(
    r"gpuclust: dbscan n=(?P<n>\d+) d=(?P<d>\d+) device=(?P<device>cpu|gpu) "
    r"(?:threads=(?P<threads>\d+) )?gather=(?P<gather>[0-9.]+) (?:to_device=(?P<to_device>[0-9.]+) "
    r"from_device=(?P<from_device>[0-9.]+) (?:gpu_init=[0-9.]+(?: init_[a-z]+=[0-9.]+)* )?)?"
    r"compute=(?P<compute>[0-9.]+) "
    r"output=(?P<output>[0-9.]+) total=(?P<total>[0-9.]+)")


def make_points(rows, blobs, noise_frac, seed):
    rng = np.random.default_rng(seed)
    n_noise = int(rows * noise_frac)
    n_blob = rows - n_noise
    centres = rng.uniform(0.5, 9.5, size=(blobs, 2))
    stds = rng.uniform(0.02, 0.08, size=blobs)
    which = rng.integers(0, blobs, size=n_blob)
    pts = centres[which] + rng.normal(size=(n_blob, 2)) * stds[which, None]
    noise = rng.uniform(0.0, 10.0, size=(n_noise, 2))
    X = np.vstack([pts, noise])[rng.permutation(rows)]
    return X.astype(np.float32)


def load(conn, table, X):
    """COPY X into an unlogged staging table, then build table with the geometry."""
    cur = conn.cursor()
    cur.execute(f"DROP TABLE IF EXISTS {table}")
    cur.execute(f"DROP TABLE IF EXISTS {table}_staging")
    cur.execute(f"CREATE UNLOGGED TABLE {table}_staging (id bigint, f real[])")
    S = X.astype(str).astype(object)
    ids = np.arange(1, X.shape[0] + 1).astype(str).astype(object)
    lines = (ids + "\t{" + S[:, 0] + "," + S[:, 1] + "}").tolist()
    chunk = 200_000
    for start in range(0, len(lines), chunk):
        buf = io.StringIO("\n".join(lines[start:start + chunk]) + "\n")
        cur.copy_expert(f"COPY {table}_staging (id, f) FROM STDIN", buf)
    cur.execute(f"""CREATE TABLE {table} AS
                    SELECT id, f, ST_MakePoint(f[1], f[2])::geometry(Point) AS geom
                    FROM {table}_staging ORDER BY id""")
    cur.execute(f"DROP TABLE {table}_staging")
    cur.execute(f"ALTER TABLE {table} ADD PRIMARY KEY (id)")
    cur.execute(f"VACUUM ANALYZE {table}")


def timed(cur, sql, args=None):
    t0 = time.perf_counter()
    cur.execute(sql, args)
    row = cur.fetchone()
    return time.perf_counter() - t0, row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--blobs", type=int, default=40)
    ap.add_argument("--noise", type=float, default=0.10, help="fraction of uniform noise")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--eps", type=float, default=0.01)
    ap.add_argument("--min-pts", type=int, default=5)
    ap.add_argument("--device", default=None, help="gpu_dbscan's device argument (default: gpuclust.device)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of the read and of gpu_dbscan (best is reported)")
    ap.add_argument("--postgis-repeat", type=int, default=1)
    ap.add_argument("--no-postgis", action="store_true", help="skip ST_ClusterDBSCAN")
    ap.add_argument("--sklearn", action="store_true",
                    help="also time scikit-learn's DBSCAN (in this process) on the same points")
    ap.add_argument("--table", default="bench_dbscan")
    ap.add_argument("--reuse", action="store_true", help="use the table if it is already there")
    ap.add_argument("--keep", action="store_true", help="keep the table afterwards")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = ap.parse_args()

    conn = psycopg2.connect("")
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
    cur.execute("CREATE EXTENSION IF NOT EXISTS postgis")
    cur.execute("SET max_parallel_workers_per_gather = 0")   # same for every query
    cur.execute("SELECT version(), postgis_lib_version()")
    pg_version, postgis_version = cur.fetchone()

    t = args.table
    cur.execute("SELECT to_regclass(%s) IS NOT NULL", (t,))
    if not (args.reuse and cur.fetchone()[0]):
        t0 = time.perf_counter()
        X = make_points(args.rows, args.blobs, args.noise, args.seed)
        load(conn, t, X)
        print(f"built {t}: {args.rows:,} rows in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    cur.execute(f"SELECT count(*), pg_total_relation_size('{t}') FROM {t}")
    rows, size = cur.fetchone()

    # Read time: warm the cache once, then the best of --repeat.
    timed(cur, f"SELECT sum(cardinality(f)) FROM {t}")
    read_s = [timed(cur, f"SELECT sum(cardinality(f)) FROM {t}")[0] for _ in range(args.repeat)]

    cur.execute("SET gpuclust.timing = on")
    gc_runs = []
    gc_summary = None
    for _ in range(args.repeat):
        del conn.notices[:]
        wall, gc_summary = timed(cur, """
            SELECT count(DISTINCT cluster_id), count(*) FILTER (WHERE cluster_id IS NULL),
                   count(*) FILTER (WHERE is_core)
            FROM gpu_dbscan(%s, %s, %s, %s)""",
            (f"SELECT id, f FROM {t}", args.eps, args.min_pts, args.device))
        notes = [m for m in (TIMING_RE.search(x) for x in conn.notices) if m]
        if len(notes) != 1:
            sys.exit(f"expected one gpuclust timing NOTICE, got: {conn.notices!r}")
        phases = {k: (v if k == "device" else int(v) if k in ("n", "d") else float(v))
                  for k, v in notes[0].groupdict().items() if v is not None}
        phases["wall_ms"] = wall * 1000.0
        gc_runs.append(phases)
    cur.execute("RESET gpuclust.timing")
    best = min(gc_runs, key=lambda r: r["wall_ms"])

    pg_runs = []
    pg_summary = None
    if not args.no_postgis:
        for _ in range(args.postgis_repeat):
            wall, pg_summary = timed(cur, f"""
                SELECT count(DISTINCT cid), count(*) FILTER (WHERE cid IS NULL)
                FROM (SELECT ST_ClusterDBSCAN(geom, %s, %s) OVER () AS cid FROM {t}) s""",
                (args.eps, args.min_pts))
            pg_runs.append(wall * 1000.0)

    sk_ms = sk_rss = sk_summary = None
    if args.sklearn:
        import resource
        from sklearn.cluster import DBSCAN
        cur.execute(f"SELECT f[1], f[2] FROM {t} ORDER BY id")
        X = np.array(cur.fetchall(), dtype=np.float64)
        t0 = time.perf_counter()
        labels = DBSCAN(eps=args.eps, min_samples=args.min_pts).fit(X).labels_
        sk_ms = (time.perf_counter() - t0) * 1000.0
        sk_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20   # GiB
        sk_summary = (len(set(labels.tolist()) - {-1}), int((labels < 0).sum()))
        del X, labels

    # ------------------------------------------------------------ report
    read_ms = min(read_s) * 1000.0
    print()
    print(f"DBSCAN on {rows:,} 2-D points ({args.blobs} blobs + {args.noise:.0%} noise, "
          f"seed {args.seed}), eps {args.eps}, min_pts {args.min_pts}")
    print(f"table {t}: {size / 2**20:.0f} MiB; {pg_version.split(',')[0]}; PostGIS {postgis_version}; "
          f"{platform.node()}")
    print()
    print(f"{'':56s}{'ms':>12s}")
    print(f"{'read: SELECT sum(cardinality(f)) FROM t':56s}{read_ms:12.1f}")
    print(f"{'gpu_dbscan, device=' + best['device'] + ' (wall)':56s}{best['wall_ms']:12.1f}")
    for k in ("gather", "to_device", "compute", "from_device", "output", "total"):
        if k in best:
            print(f"{'    ' + k:56s}{best[k]:12.1f}")
    if pg_runs:
        pg_ms = min(pg_runs)
        print(f"{'PostGIS ST_ClusterDBSCAN(geom, eps, min_pts) OVER ()':56s}{pg_ms:12.1f}")
        print()
        print(f"PostGIS / gpu_dbscan: {pg_ms / best['wall_ms']:.1f}x")
    if sk_ms is not None:
        print(f"{'scikit-learn DBSCAN (float64, this process)':56s}{sk_ms:12.1f}"
              f"   (peak RSS {sk_rss:.1f} GiB)")
    print(f"gather / read: {best['gather'] / read_ms:.2f}x")
    print(f"gpu_dbscan: {gc_summary[0]} clusters, {gc_summary[1]} noise, {gc_summary[2]} core")
    if pg_summary is not None:
        agree = pg_summary[0] == gc_summary[0] and pg_summary[1] == gc_summary[1]
        print(f"PostGIS:    {pg_summary[0]} clusters, {pg_summary[1]} noise"
              f"  ({'agrees' if agree else 'DISAGREES'})")

    if sk_summary is not None:
        print(f"scikit-learn: {sk_summary[0]} clusters, {sk_summary[1]} noise")
    result = {
        "rows": rows, "dims": 2, "eps": args.eps, "min_pts": args.min_pts,
        "blobs": args.blobs, "noise": args.noise, "seed": args.seed,
        "postgresql": pg_version, "postgis": postgis_version, "host": platform.node(),
        "read_ms": [x * 1000.0 for x in read_s],
        "gpu_dbscan": gc_runs,
        "gpu_dbscan_clusters": gc_summary[0], "gpu_dbscan_noise": gc_summary[1],
        "postgis_ms": pg_runs,
        "postgis_clusters": pg_summary[0] if pg_summary else None,
        "postgis_noise": pg_summary[1] if pg_summary else None,
        "sklearn_ms": sk_ms, "sklearn_peak_rss_gib": sk_rss,
    }
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    if not args.keep:
        cur.execute(f"DROP TABLE {t}")
    if pg_summary is not None and not (pg_summary[0] == gc_summary[0] and pg_summary[1] == gc_summary[1]):
        sys.exit("gpu_dbscan and PostGIS disagree on the number of clusters or of noise points")


if __name__ == "__main__":
    main()
