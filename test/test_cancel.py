"""
Cancel of long CPU runs on hostile inputs: statement_timeout, pg_cancel_backend
and pg_terminate_backend while gpu_dbscan, gpu_density_peaks or gpu_kmeans is
deep in a phase whose work grows faster than the number of rows.

Each case is an input that keeps the CPU busy for tens of seconds (minutes
without cancel) though its table builds in seconds:

  dbscan_one_cell   300,000 uniform 10-D points, eps 1, min_pts 5: every
                    point in one grid cell (not all within eps of each
                    other), the union phase quadratic
  dbscan_no_core    20,000 x 500-D, min_pts 2147483647: no point is core, so
                    every neighbourhood is counted in full
  density_peaks     50,000 x 500-D: quadratic rho and delta
  kmeans_reseed     500,000 sorted 1-D rows and 1000 identical initial
                    centroids: 999 clusters re-seeded at once
  window_partitions the rows of dbscan_one_cell in 20 window partitions of
                    gpu_cluster_dbscan: the cancel lands in one partition's
                    computation, with partitions still to come

The tables are built before the calls, so the gather takes a fraction of the
second that passes before the cancel: the cancel lands in the computation.

Every case runs with gpuclust.cpu_threads 1 and 4 (on a machine of fewer
cores, four threads keep every core busy): only the backend's own thread
asks for cancel, the others stop at their next step.

For every case: a statement_timeout of 1 s ends the call with 57014 and the
session answers SELECT 1 and a small threaded call; pg_cancel_backend from a second session after 1 s
does the same; pg_terminate_backend after 1 s ends the session and the server
answers a new connection.  No assertion is made on how fast (timings are for
bench/cancel_bench.py); a client-side bound of SAFETY_S per wait only keeps
a call that ignores the request from hanging the suite: the test fails and the
backend is terminated.  The session under test is an asynchronous psycopg2
connection polled with select(), so the test never blocks in libpq.
"""

import time

import psycopg2
import psycopg2.errors
import psycopg2.extensions
import pytest

from cancel_cases import CASES as CANCEL_CASES, TABLES, Hung, wait
from conftest import connect

# Client-side bound on any one wait; far beyond a prompt cancel, it only fails
# a test that would otherwise hang.  Not a timing assertion.
SAFETY_S = 120.0

# How long the call runs before the cancel or terminate is sent.
RUN_BEFORE_S = 1.0

# The calls of the cases, on the CPU.
CASES = {name: call.format(device="cpu") for name, (_, call) in CANCEL_CASES.items()}

# gpuclust.cpu_threads of the session under test.
THREADS = [1, 4]

# After a cancel the session still computes, on several threads.
# (a 1000 x 7 lattice of step 1 cut every 50 columns by a gap of 4: 20 clusters)
AFTER = ("SELECT count(*), max(cluster_id) FROM gpu_dbscan('SELECT g::bigint, "
         "ARRAY[g % 1000 + (g % 1000) / 50 * 3, g % 7]::real[] FROM generate_series(1, 50000) g', "
         "1.5, 3, device => 'cpu')")


@pytest.fixture(scope="module")
def cancel_tables():
    c = connect()
    with c.cursor() as cur:
        # never wait on a lock longer than the tests wait for an answer
        cur.execute("SET lock_timeout = %s", (f"{SAFETY_S:.0f}s",))
        cur.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
        cur.execute("SELECT setseed(0.25)")
        for name, query in TABLES.items():
            cur.execute(f"DROP TABLE IF EXISTS {name}")
            cur.execute(f"CREATE TABLE {name} AS {query}")
            cur.execute(f"ANALYZE {name}")
    yield list(TABLES)
    with c.cursor() as cur:
        cur.execute("SET lock_timeout = '5s'")
        try:
            for name in TABLES:
                cur.execute(f"DROP TABLE IF EXISTS {name}")
        except psycopg2.errors.LockNotAvailable:
            pass                # locked by a backend a failed test had to terminate
    c.close()


def run(aconn, sql, deadline):
    """Runs sql on the asynchronous connection and returns its rows."""
    cur = aconn.cursor()
    cur.execute(sql)
    wait(aconn, deadline)
    return cur.fetchall() if cur.description else None


class Session:
    """An asynchronous connection under test, with gpuclust created and its backend pid.

    On exit it terminates its backend if the backend still runs (a call that
    ignored the request), so that a failing test does not leave it working,
    and closes the connection without waiting on it.
    """

    def __init__(self, threads=None):
        self.threads = threads

    def __enter__(self):
        self.conn = psycopg2.connect("", async_=1)
        deadline = time.monotonic() + SAFETY_S
        wait(self.conn, deadline)
        run(self.conn, "CREATE EXTENSION IF NOT EXISTS gpuclust", deadline)
        if self.threads is not None:
            run(self.conn, f"SET gpuclust.cpu_threads = {int(self.threads)}", deadline)
        self.pid = self.conn.get_backend_pid()
        return self

    def __exit__(self, *exc):
        if exc[0] is not None:
            other = connect()
            with other.cursor() as cur:
                cur.execute("SELECT pg_terminate_backend(%s)", (self.pid,))
            other.close()
        self.conn.close()


def start(session, sql):
    """Sends sql on the session without waiting for it.

    The session keeps the cursor: psycopg2 holds only a weak reference to the
    cursor of an asynchronous command.
    """
    session.cur = session.conn.cursor()
    session.cur.execute(sql)


def wait_until_running(other, session, deadline):
    """Waits until the session's statement has been active for RUN_BEFORE_S.

    Keeps polling the session meanwhile, so that a call that ended on its own
    (too fast, or with another error) is reported as such.
    """
    with other.cursor() as cur:
        while True:
            cur.execute("""SELECT clock_timestamp() - query_start >= %s * interval '1 s'
                           FROM pg_stat_activity
                           WHERE pid = %s AND state = 'active' AND query LIKE '%%gpu_%%'""",
                        (RUN_BEFORE_S, session.pid))
            row = cur.fetchone()
            if row and row[0]:
                return
            if session.conn.poll() == psycopg2.extensions.POLL_OK:
                pytest.fail("the call ended before the cancel was sent")
            if time.monotonic() > deadline:
                raise Hung("the call never showed up as active in pg_stat_activity")
            time.sleep(0.05)


def still_answers(session, deadline):
    """The same session answers SELECT 1, and a gpuclust call, after its call was canceled."""
    assert run(session.conn, "SELECT 1", deadline) == [(1,)]
    assert run(session.conn, AFTER, deadline) == [(50000, 19)]


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("case", list(CASES))
def test_statement_timeout(cancel_tables, case, threads):
    with Session(threads) as s:
        deadline = time.monotonic() + SAFETY_S
        run(s.conn, "SET statement_timeout = '1s'", deadline)
        start(s, CASES[case])
        try:
            with pytest.raises(psycopg2.errors.QueryCanceled) as err:
                wait(s.conn, deadline)
        except Hung:
            pytest.fail(f"{case}: no answer to statement_timeout within {SAFETY_S:.0f} s")
        assert err.value.pgcode == "57014"
        assert "statement timeout" in str(err.value)
        run(s.conn, "RESET statement_timeout", time.monotonic() + SAFETY_S)
        still_answers(s, time.monotonic() + SAFETY_S)


def stop_from_other(other, session, case, function, error):
    """Starts the case on the session, calls function(pid) from other once it
    has run RUN_BEFORE_S, and returns the exception of type error the call
    ended with."""
    deadline = time.monotonic() + SAFETY_S
    start(session, CASES[case])
    wait_until_running(other, session, deadline)
    with other.cursor() as cur:
        cur.execute(f"SELECT {function}(%s)", (session.pid,))
        assert cur.fetchone() == (True,)
    try:
        with pytest.raises(error) as err:
            wait(session.conn, time.monotonic() + SAFETY_S)
    except Hung:
        pytest.fail(f"{case}: no answer to {function} within {SAFETY_S:.0f} s")
    return err.value


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("case", list(CASES))
def test_pg_cancel_backend(cancel_tables, case, threads):
    other = connect()
    try:
        with Session(threads) as s:
            err = stop_from_other(other, s, case, "pg_cancel_backend", psycopg2.errors.QueryCanceled)
            assert err.pgcode == "57014"
            assert "user request" in str(err)
            still_answers(s, time.monotonic() + SAFETY_S)
    finally:
        other.close()


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("case", list(CASES))
def test_pg_terminate_backend(cancel_tables, case, threads):
    other = connect()
    try:
        with Session(threads) as s:
            stop_from_other(other, s, case, "pg_terminate_backend", psycopg2.OperationalError)
            assert s.conn.closed, "the connection survived pg_terminate_backend"
            # the backend is gone ...
            deadline = time.monotonic() + SAFETY_S
            with other.cursor() as cur:
                while True:
                    cur.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (s.pid,))
                    if cur.fetchone() == (0,):
                        break
                    assert time.monotonic() < deadline, "the terminated backend is still listed"
                    time.sleep(0.05)
        # ... and the server answers a new connection
        fresh = connect()
        with fresh.cursor() as cur:
            cur.execute("SELECT 1")
            assert cur.fetchone() == (1,)
        fresh.close()
    finally:
        other.close()
