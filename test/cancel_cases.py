"""
The hostile inputs of the cancel tests (test/test_cancel.py) and of their
timing script (bench/cancel_bench.py): each keeps a back end busy for tens
of seconds or more, though its table builds in seconds.

CASES: name -> (what the data are, the call as a format string with {device}).
TABLES: table name -> the query that builds it (random features; run
SELECT setseed(0.25) first for the same rows every time).
Hung and wait(): the wait on an asynchronous connection that both use.
"""

import select
import time

import psycopg2.extensions

CASES = {
    "dbscan_one_cell": ("300k x 10-D uniform, eps 1, min_pts 5",
                        "SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM cancel_u10', 1, 5, "
                        "device => '{device}')"),
    "dbscan_no_core": ("20k x 500-D, min_pts 2147483647",
                       "SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM cancel_w500', 1, 2147483647, "
                       "device => '{device}')"),
    "density_peaks": ("50k x 500-D",
                      "SELECT count(*) FROM gpu_density_peaks('SELECT id, f FROM cancel_dp500', 5, "
                      "device => '{device}')"),
    "kmeans_reseed": ("500k sorted 1-D, k 1000 identical initial centroids",
                      "SELECT count(*) FROM gpu_kmeans('SELECT id, x FROM cancel_sorted ORDER BY id', 1000, "
                      "initial_centroids => array_fill(0::float8, ARRAY[1000, 1]), device => '{device}')"),
    "hdbscan_wide": ("20k x 500-D: the trees prune nothing, every pair is a distance",
                     "SELECT count(*) FROM gpu_hdbscan('SELECT id, f FROM cancel_w500', 5, "
                     "device => '{device}')"),
    "window_partitions": ("20 window partitions of 15k x 10-D uniform, eps 1, min_pts 5",
                          "SELECT count(c) FROM (SELECT gpu_cluster_dbscan(f, 1, 5, device => '{device}') "
                          "OVER (PARTITION BY id % 20 ORDER BY id) AS c FROM cancel_u10) s"),
}

TABLES = {
    "cancel_u10": """SELECT g::bigint AS id,
                            ARRAY(SELECT random() FROM generate_series(1, 10) WHERE g > 0)::real[] AS f
                     FROM generate_series(1, 300000) g""",
    "cancel_w500": """SELECT g::bigint AS id,
                             ARRAY(SELECT random() FROM generate_series(1, 500) WHERE g > 0)::real[] AS f
                      FROM generate_series(1, 20000) g""",
    "cancel_dp500": """SELECT g::bigint AS id,
                              ARRAY(SELECT random() FROM generate_series(1, 500) WHERE g > 0)::real[] AS f
                       FROM generate_series(1, 50000) g""",
    "cancel_sorted": """SELECT g::bigint AS id, g::float8 AS x FROM generate_series(1, 500000) g""",
}


class Hung(Exception):
    """A wait on an asynchronous connection passed its deadline."""


def wait(aconn, deadline):
    """Polls the asynchronous connection until its command is done; Hung past deadline.

    The command's error, if any, is raised from poll() as a psycopg2 exception.
    """
    while True:
        state = aconn.poll()
        if state == psycopg2.extensions.POLL_OK:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise Hung()
        if state == psycopg2.extensions.POLL_READ:
            select.select([aconn.fileno()], [], [], remaining)
        elif state == psycopg2.extensions.POLL_WRITE:
            select.select([], [aconn.fileno()], [], remaining)
        else:
            raise psycopg2.OperationalError(f"bad poll state {state}")
