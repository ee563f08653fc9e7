"""
The README's SQL examples run as written, and print what the README shows.

Every ```sql block of README.md that is SQL to run (not a signature, not an
indented fragment) runs in README order in a database of its own, through
psql, so that the tables one block creates serve the blocks after it (the
upgrade example last, once the extension exists).  A
statement followed by lines of output in the README (psql's aligned format,
without the row count) must print exactly those lines.  Skipped, each for
its reason: the one-line teaser at the top (its table comes later), the
embeddings example (its 50,000-row table is not built here), and the Citus
walk-through (test_kmeans_citus.py runs the distributed fit).
"""

import os
import re
import subprocess

import pytest

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
DB = "gpuclust_readme"
SQL_START = re.compile(r"^(CREATE|SELECT|INSERT|SET|ALTER|UPDATE|WITH|EXPLAIN|DROP|--(?!-))", re.I)
COMMENT = re.compile(r"^--(?!-)")     # psql's rule lines begin with more dashes
SKIP = {
    "SELECT * FROM gpu_dbscan('SELECT id, f FROM points', eps => 0.3, min_pts => 5);": "the teaser's table comes later",
    "FROM gpu_dbscan('SELECT id, embedding FROM docs', eps => 0.15": "50,000 embeddings not built here",
    "create_distributed_table": "needs Citus (test_kmeans_citus.py)",
}


def blocks():
    with open(README) as f:
        text = f.read()
    for m in re.finditer(r"^```sql\n(.*?)^```", text, re.S | re.M):
        body = m.group(1)
        line = text.count("\n", 0, m.start()) + 1
        first = body.lstrip("\n").split("\n", 1)[0]
        if not SQL_START.match(first):
            continue            # a signature or an indented fragment
        why = next((w for k, w in SKIP.items() if k in body), None)
        yield line, body, why


def statements(body):
    """(statement, expected output lines or None) in order: a statement ends at a line ending
    with ';'; the lines after it up to a blank line or a comment are its output."""
    out = []
    cur = []
    lines = body.split("\n")
    i = 0
    while i < len(lines):
        ln = lines[i]
        i += 1
        if not cur and (not ln.strip() or COMMENT.match(ln)):
            continue
        cur.append(ln)
        if re.sub(r"\s*--.*$", "", ln).rstrip().endswith(";"):
            expect = []
            while i < len(lines) and lines[i].strip() and not SQL_START.match(lines[i]):
                expect.append(lines[i].rstrip())
                i += 1
            out.append(("\n".join(cur), expect or None))
            cur = []
    assert not cur, f"a statement without its ';': {cur}"
    return out


def psql(sql, db=DB):
    p = subprocess.run(["psql", "-X", "-q", "-d", db, "-v", "ON_ERROR_STOP=1", "-P", "footer=off",
                        "-c", "SET client_min_messages = warning", "-c", sql],
                       capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="module")
def readme_db():
    for sql in (f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}"):
        rc, out, err = psql(sql, db="postgres")
        assert rc == 0, err
    yield DB
    psql(f"DROP DATABASE IF EXISTS {DB}", db="postgres")


def available(extension):
    rc, out, err = psql(f"SELECT count(*) FROM pg_available_extensions WHERE name = '{extension}'",
                        db="postgres")
    return rc == 0 and out.split()[-1] == "1"


def test_readme_examples_run_and_print_what_it_shows(readme_db):
    ran = compared = 0
    skipped = []
    # pgvector is not packaged for Debian 12 (test/run-all builds it from ../shared/vendor when
    # that is there): without it the pgvector statements are left out, and only those
    vector = available("vector")
    # the upgrade example (before Getting started) runs last, once the extension exists
    order = sorted(blocks(), key=lambda b: "ALTER EXTENSION gpuclust UPDATE" in b[1])
    for line, body, why in order:
        if why:
            skipped.append((line, why))
            continue
        for sql, expect in statements(body):
            if not vector and ("vector" in sql or "items" in sql):
                continue
            rc, out, err = psql(sql)
            assert rc == 0, f"README.md line {line}: {sql}\n{err}"
            ran += 1
            if expect is not None:
                got = [ln.rstrip() for ln in out.rstrip("\n").split("\n")]
                assert got == expect, f"README.md line {line}: {sql}\nshows:\n" + "\n".join(expect) + \
                    "\nprints:\n" + "\n".join(got)
                compared += 1
    assert ran >= 40 and compared >= 10, (ran, compared)
    assert len(skipped) == len(SKIP), skipped
