"""
Behaviour of the SQL surface that pg_regress cannot show: the timing NOTICE's
exact format, cancellation of a running call (statement_timeout and
pg_cancel_backend from another session) and the backend's state afterwards,
read-only execution of the user's query, and the caller's privileges.
"""

import re
import threading
import time

import numpy as np
import psycopg2
import psycopg2.errors
import pytest

from conftest import connect, dbscan, load_matrix

TIMING_RE = re.compile(
    r"gpuclust: dbscan n=(\d+) d=(\d+) device=(cpu|gpu)(?: threads=\d+)? gather=[0-9.]+ "
    r"(to_device=[0-9.]+ from_device=[0-9.]+ (?:gpu_init=[0-9.]+(?: init_[a-z]+=[0-9.]+){5} )?)?"
    r"compute=[0-9.]+ output=[0-9.]+ total=[0-9.]+ "
    r"(index_ms=[0-9.]+ core_ms=[0-9.]+ union_ms=[0-9.]+ border_ms=[0-9.]+ )?"
    r"(path=(?:index|pairs screen=(?:fp32|tf32|fp64) exact_pairs=\d+) )?"
    r"precision=(single|double)(?: metric=cosine)?")

def gpuclust_notices(conn):
    """The gpuclust NOTICE texts received on conn, without the 'NOTICE:  ' prefix."""
    out = []
    for line in conn.notices:
        line = line.strip()
        if line.startswith("NOTICE:"):
            line = line[len("NOTICE:"):].strip()
        if line.startswith("gpuclust:"):
            out.append(line)
    return out


@pytest.fixture
def small(conn):
    rng = np.random.default_rng(31)
    X = np.vstack([rng.normal(0.0, 0.1, size=(400, 3)), rng.normal(5.0, 0.1, size=(400, 3)),
                   rng.uniform(-10, 10, size=(200, 3))])
    load_matrix(conn, "beh_small", X)
    return "beh_small"


# --------------------------------------------------------------- timing NOTICE

def test_timing_notice_format(conn, small):
    cur = conn.cursor()
    cur.execute("SET gpuclust.timing = on")
    for device in (None, "cpu"):
        del conn.notices[:]
        ids, labels, core = dbscan(conn, f"SELECT id, f FROM {small}", 0.5, 5, device=device)
        assert len(ids) == 1000
        notes = gpuclust_notices(conn)
        assert len(notes) == 1, f"expected one gpuclust NOTICE, got {notes!r}"
        m = TIMING_RE.fullmatch(notes[0])
        assert m, f"NOTICE does not have the documented form: {notes[0]!r}"
        assert m.group(1) == "1000" and m.group(2) == "3", notes[0]
        # the named phases of DBSCAN, filled by whichever back end ran
        assert m.group(5) is not None, notes[0]
        # threads=<n> is reported exactly when the CPU computed.
        assert (" threads=" in notes[0]) == (m.group(3) == "cpu"), notes[0]
        if device == "cpu":
            assert m.group(3) == "cpu" and m.group(4) is None, notes[0]
        else:
            # to_device/from_device are reported exactly when the GPU computed.
            assert (m.group(4) is not None) == (m.group(3) == "gpu"), notes[0]


def test_timing_notice_path(conn, small):
    """The NOTICE says which path ran: the grid below 16 features, the pair engine
    from 16 on (common/pairs.h), and either where gpuclust.pair_path forces it;
    the answers are the same."""
    rng = np.random.default_rng(5)
    X = np.vstack([rng.normal(0.0, 1.0, size=(300, 16)), rng.normal(6.0, 1.0, size=(300, 16))])
    load_matrix(conn, "beh_wide", X)
    cur = conn.cursor()
    cur.execute("SET gpuclust.timing = on")
    answers = {}
    for table, d, force, want in ((small, 3, "auto", "index"), ("beh_wide", 16, "auto", "pairs"),
                                  ("beh_wide", 16, "index", "index"), (small, 3, "pairs", "pairs")):
        cur.execute(f"SET gpuclust.pair_path = {force}")
        del conn.notices[:]
        ids, labels, core = dbscan(conn, f"SELECT id, f FROM {table}", 4.0 if d == 16 else 0.5, 5,
                                   device="cpu")
        notes = gpuclust_notices(conn)
        m = TIMING_RE.fullmatch(notes[0])
        assert m and m.group(2) == str(d), notes
        assert f" path={want}" in notes[0], notes[0]
        if want == "pairs":
            assert re.search(r" screen=fp(32|64) exact_pairs=\d+ ", notes[0]), notes[0]
        answers.setdefault(table, []).append((list(ids), list(labels), list(core)))
    cur.execute("RESET gpuclust.pair_path")
    for table, runs in answers.items():
        assert runs[0] == runs[1], f"{table}: the grid and the pair engine differ"


def test_timing_notice_scalar_columns_and_empty_input(conn, small):
    cur = conn.cursor()
    cur.execute("SET gpuclust.timing = on")
    del conn.notices[:]
    dbscan(conn, f"SELECT id, f[1], f[2] FROM {small}", 0.5, 5)
    notes = gpuclust_notices(conn)
    assert len(notes) == 1 and TIMING_RE.fullmatch(notes[0]), notes
    assert TIMING_RE.fullmatch(notes[0]).group(2) == "2", notes[0]

    del conn.notices[:]
    ids, _, _ = dbscan(conn, f"SELECT id, f FROM {small} WHERE false", 0.5, 5)
    assert len(ids) == 0
    notes = gpuclust_notices(conn)
    assert len(notes) == 1 and TIMING_RE.fullmatch(notes[0]), notes
    assert TIMING_RE.fullmatch(notes[0]).group(1) == "0", notes[0]


def test_timing_notice_per_window_partition(conn, small):
    """Each window partition is one call: one NOTICE each, n its non-NULL rows."""
    cur = conn.cursor()
    cur.execute("SET gpuclust.timing = on")
    del conn.notices[:]
    cur.execute(f"""
        SELECT id, gpu_cluster_dbscan(CASE WHEN id % 7 = 0 THEN NULL ELSE f END, 0.5, 5)
                   OVER (PARTITION BY id % 3 ORDER BY id)
        FROM {small}""")
    assert len(cur.fetchall()) == 1000
    notes = gpuclust_notices(conn)
    assert len(notes) == 3, f"expected one gpuclust NOTICE per partition, got {notes!r}"
    matches = [TIMING_RE.fullmatch(n) for n in notes]
    assert all(matches), notes
    cur.execute(f"SELECT count(*) FROM {small} WHERE id % 7 <> 0 GROUP BY id % 3")
    expected = sorted(r[0] for r in cur.fetchall())
    assert sorted(int(m.group(1)) for m in matches) == expected, notes
    assert all(m.group(2) == "3" for m in matches), notes


def test_no_notice_when_timing_off(conn, small):
    conn.cursor().execute("SET gpuclust.timing = off")
    del conn.notices[:]
    dbscan(conn, f"SELECT id, f FROM {small}", 0.5, 5)
    assert gpuclust_notices(conn) == []


# --------------------------------------------------------------- cancellation

# 1M uniform points in the unit square, eps 0.05: about 7,800 neighbours per
# point, and with min_pts above that count no point is core, so every
# neighbourhood is counted in full (and no cell of the grid is dense): tens of
# seconds of CPU work, far more than the time the tests wait before cancelling.
BIG_ROWS = 1_000_000
BIG_QUERY = "SELECT id, f FROM beh_big"
BIG_EPS = 0.05
BIG_MIN_PTS = 20_000
LONG_CALL = (f"SELECT count(*) FROM gpu_dbscan('{BIG_QUERY}', {BIG_EPS}, {BIG_MIN_PTS}, 'cpu')")


@pytest.fixture(scope="module")
def big_table():
    c = connect()
    with c.cursor() as cur:
        cur.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
        cur.execute("DROP TABLE IF EXISTS beh_big")
        cur.execute("SELECT setseed(0.5)")
        cur.execute(f"""CREATE TABLE beh_big AS
                        SELECT g::bigint AS id, ARRAY[random(), random()]::real[] AS f
                        FROM generate_series(1, {BIG_ROWS}) AS g""")
        cur.execute("ANALYZE beh_big")
    c.close()
    return "beh_big"


def still_usable(conn, small):
    """The backend answers an ordinary gpu_dbscan call correctly after a cancel."""
    ids, labels, core = dbscan(conn, f"SELECT id, f FROM {small} ORDER BY id", 0.5, 5)
    assert np.array_equal(ids, np.arange(1000))
    assert labels.max() == 1 and labels[0] == 0 and labels[400] == 1
    with conn.cursor() as cur:
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)


class Watchdog:
    """Terminates a backend that a failed cancel left running, so the suite goes on."""

    def __init__(self, pid, after_s):
        self.timer = threading.Timer(after_s, self._kill, args=(pid,))
        self.fired = False

    def _kill(self, pid):
        self.fired = True
        c = connect()
        c.cursor().execute("SELECT pg_terminate_backend(%s)", (pid,))
        c.close()

    def __enter__(self):
        self.timer.start()
        return self

    def __exit__(self, *exc):
        self.timer.cancel()


def test_statement_timeout_stops_the_call(conn, small, big_table):
    cur = conn.cursor()
    cur.execute("SET statement_timeout = '300ms'")
    with Watchdog(conn.get_backend_pid(), 60) as dog:
        with pytest.raises(psycopg2.errors.QueryCanceled) as err:
            cur.execute(LONG_CALL)
    assert not dog.fired, "the call ignored statement_timeout and had to be terminated"
    assert "statement timeout" in str(err.value)
    cur.execute("RESET statement_timeout")
    still_usable(conn, small)


def test_cancel_from_another_session(conn, small, big_table):
    pid = conn.get_backend_pid()
    result = {}

    def run():
        try:
            with conn.cursor() as cur:
                cur.execute(LONG_CALL)
            result["error"] = None
        except psycopg2.Error as e:       # the cancel, we hope
            result["error"] = e
        result["end"] = time.monotonic()

    other = connect()
    ocur = other.cursor()
    with Watchdog(pid, 60) as dog:
        worker = threading.Thread(target=run)
        worker.start()
        # Wait until the call has run for 1.5 s: past the gather, into the computation.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ocur.execute("""SELECT now() - query_start > interval '1.5 s'
                            FROM pg_stat_activity
                            WHERE pid = %s AND state = 'active' AND query LIKE '%%gpu_dbscan%%'""",
                         (pid,))
            row = ocur.fetchone()
            if row and row[0]:
                break
            assert worker.is_alive(), f"the call ended before it could be cancelled: {result}"
            time.sleep(0.05)
        else:
            pytest.fail("the call never showed up in pg_stat_activity")
        ocur.execute("SELECT pg_cancel_backend(%s)", (pid,))
        assert ocur.fetchone() == (True,)
        worker.join(60)
    other.close()
    assert not dog.fired, "the call ignored pg_cancel_backend and had to be terminated"
    assert isinstance(result.get("error"), psycopg2.errors.QueryCanceled), result
    assert "user request" in str(result["error"])
    still_usable(conn, small)


# --------------------------------------------------------------- read-only query

@pytest.mark.parametrize("query", [
    "DELETE FROM beh_small RETURNING id, f",
    "WITH d AS (DELETE FROM beh_small RETURNING id, f) SELECT id, f FROM d",
    "UPDATE beh_small SET f = f RETURNING id, f",
    "INSERT INTO beh_small SELECT id + 100000, f FROM beh_small RETURNING id, f",
])
def test_writing_query_is_refused(conn, small, query):
    with conn.cursor() as cur:
        cur.execute(f"SELECT count(*), sum(id), sum(f[1]) FROM {small}")
        before = cur.fetchone()
        with pytest.raises(psycopg2.Error) as err:
            dbscan(conn, query, 0.5, 5)
        assert err.value.pgcode is not None and not err.value.pgcode.startswith("XX"), \
            f"refused with an internal error: {err.value.pgcode} {err.value}"
        cur.execute(f"SELECT count(*), sum(id), sum(f[1]) FROM {small}")
        assert cur.fetchone() == before, "the query's write took effect"


def test_write_through_a_function_is_refused(conn, small):
    """A write hidden in a volatile function the query calls is refused too."""
    with conn.cursor() as cur:
        cur.execute("""CREATE OR REPLACE FUNCTION beh_delete_one(bigint) RETURNS boolean
                       LANGUAGE plpgsql VOLATILE AS
                       $$ BEGIN DELETE FROM beh_small WHERE id = $1; RETURN true; END $$""")
        with pytest.raises(psycopg2.Error) as err:
            dbscan(conn, f"SELECT id, f FROM {small} WHERE beh_delete_one(id)", 0.5, 5)
        assert not (err.value.pgcode or "XX").startswith("XX"), err.value
        cur.execute(f"SELECT count(*) FROM {small}")
        assert cur.fetchone() == (1000,)


# --------------------------------------------------------------- privileges

def test_query_runs_with_the_callers_privileges(conn, small):
    with conn.cursor() as cur:
        cur.execute("""DO $$ BEGIN CREATE ROLE gpuclust_test_reader NOLOGIN;
                       EXCEPTION WHEN duplicate_object THEN NULL; END $$""")
        cur.execute(f"REVOKE ALL ON {small} FROM PUBLIC, gpuclust_test_reader")
        cur.execute("SELECT prosecdef FROM pg_proc WHERE proname = 'gpu_dbscan'")
        assert cur.fetchall() == [(False,)], "gpu_dbscan must be SECURITY INVOKER"
        try:
            cur.execute("SET ROLE gpuclust_test_reader")
            with pytest.raises(psycopg2.errors.InsufficientPrivilege):
                dbscan(conn, f"SELECT id, f FROM {small}", 0.5, 5)
            cur.execute("RESET ROLE")
            cur.execute(f"GRANT SELECT ON {small} TO gpuclust_test_reader")
            cur.execute("SET ROLE gpuclust_test_reader")
            ids, _, _ = dbscan(conn, f"SELECT id, f FROM {small}", 0.5, 5)
            assert len(ids) == 1000
        finally:
            cur.execute("RESET ROLE")
            cur.execute(f"REVOKE ALL ON {small} FROM gpuclust_test_reader")
