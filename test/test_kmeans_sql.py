"""
gpu_kmeans / gpu_kmeans_centroids behaviour seen from SQL that pg_regress
cannot show without depending on the machine: the timing notice and its
iteration count, cancellation of a long run, and the order of the output rows.
"""

import re

import psycopg2
import pytest

NOTICE = re.compile(r"gpuclust: kmeans n=(\d+) d=(\d+) device=(cpu|gpu) .*iterations=(\d+)")


def notices_for(conn, sql, params=None):
    del conn.notices[:]
    with conn.cursor() as cur:
        cur.execute("SET gpuclust.timing = on")
        cur.execute(sql, params)
        cur.fetchall()
        cur.execute("RESET gpuclust.timing")
    return [m for m in (NOTICE.search(n) for n in conn.notices) if m]


@pytest.fixture
def km_table(conn):
    with conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS km_sql")
        cur.execute("CREATE TABLE km_sql AS SELECT i::bigint AS id, (i % 3) * 10 + sin(i) AS x, "
                    "(i % 3) * 5 + cos(i) AS y FROM generate_series(1, 3000) i")
    return "km_sql"


def test_timing_notice_reports_iterations(conn, km_table):
    found = notices_for(conn, "SELECT * FROM gpu_kmeans('SELECT id, x, y FROM km_sql', 3, device => 'cpu')")
    assert len(found) == 1
    n, d, device, iterations = found[0].groups()
    assert (n, d, device) == ("3000", "2", "cpu")
    assert 1 <= int(iterations) <= 300

    found = notices_for(conn, "SELECT * FROM gpu_kmeans_centroids('SELECT id, x, y FROM km_sql', 3, "
                              "max_iter => 1, device => 'cpu')")
    assert found[0].group(4) == "1"


def test_output_follows_query_order(conn, km_table):
    with conn.cursor() as cur:
        cur.execute("SELECT id FROM gpu_kmeans('SELECT id, x, y FROM km_sql ORDER BY id DESC', 3, "
                    "device => 'cpu')")
        ids = [r[0] for r in cur.fetchall()]
    assert ids == list(range(3000, 0, -1))


def test_long_run_can_be_cancelled(conn):
    with conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS km_big")
        cur.execute("SELECT setseed(0.1)")
        cur.execute("CREATE TABLE km_big AS SELECT i::bigint AS id, random() AS x, random() AS y, "
                    "random() AS z FROM generate_series(1, 400000) i")
        cur.execute("SET statement_timeout = '300ms'")
        with pytest.raises(psycopg2.errors.QueryCanceled):
            cur.execute("SELECT count(*) FROM gpu_kmeans('SELECT id, x, y, z FROM km_big', 500, "
                        "max_iter => 10000, tol => 0, device => 'cpu')")
        cur.execute("RESET statement_timeout")
        # the backend is usable afterwards
        cur.execute("SELECT count(*) FROM gpu_kmeans('SELECT id, x, y, z FROM km_big LIMIT 100', 2, "
                    "device => 'cpu')")
        assert cur.fetchone()[0] == 100
