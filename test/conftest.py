"""
Shared fixtures and loaders for gpuclust's Python tests.

The tests talk to a running PostgreSQL through libpq's environment variables
(PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD), which test/run-all sets by
starting a throwaway server with pg_virtualenv.  gpuclust must be installed
into that server (make install).

Fixtures
    conn          psycopg2 connection, autocommit, gpuclust created
    postgis_conn  the same connection with PostGIS created as well

Loaders (plain functions: ``from conftest import load_matrix``)
    load_matrix(conn, table, X, ids=None, sqltype="real")
        (re)creates table(id bigint primary key, f real[]) and COPYs X into it
    load_xy(conn, table, X, ids=None, names=None, sqltype="double precision")
        (re)creates table(id bigint primary key, x ..., y ...) with one scalar
        column per feature
    dbscan(conn, query, eps, min_pts, device=None)
        runs gpu_dbscan and returns (ids, labels, is_core) as numpy arrays,
        in output order, noise labelled -1
"""

import io

import numpy as np
import psycopg2
import psycopg2.extensions
import pytest

# Rows per COPY statement: keeps the text buffer small for million-row loads.
_COPY_CHUNK = 200_000


def connect():
    """A new autocommit connection to the server named by the libpq env vars."""
    c = psycopg2.connect("")
    c.autocommit = True
    return c


@pytest.fixture
def conn():
    """A connection with the gpuclust extension created; closed after the test."""
    c = connect()
    with c.cursor() as cur:
        cur.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
    yield c
    c.close()


@pytest.fixture
def postgis_conn(conn):
    """The conn fixture with PostGIS created too.

    test/run-all installs PostGIS, so a missing PostGIS is a failure of the
    test environment, not a reason to skip.
    """
    with conn.cursor() as cur:
        cur.execute("CREATE EXTENSION IF NOT EXISTS postgis")
    return conn


def _floats_as_text(X, sqltype):
    """Shortest round-trip text of every element of X, as the column type stores it."""
    if sqltype in ("real", "float4"):
        X = np.asarray(X, dtype=np.float32)
    else:
        X = np.asarray(X, dtype=np.float64)
    # numpy's str() of a float32/float64 is the shortest string that reads back
    # to the same value, and PostgreSQL's float4in/float8in parse it exactly.
    return X.astype(str)


def _ids(n, ids):
    if ids is None:
        return np.arange(n, dtype=np.int64)
    ids = np.asarray(ids, dtype=np.int64)
    if ids.shape != (n,):
        raise ValueError(f"ids has shape {ids.shape}, expected ({n},)")
    return ids


def _copy_lines(conn, table, columns, lines):
    with conn.cursor() as cur:
        for start in range(0, len(lines), _COPY_CHUNK):
            buf = io.StringIO("\n".join(lines[start:start + _COPY_CHUNK]) + "\n")
            cur.copy_expert(f"COPY {table} ({columns}) FROM STDIN", buf)


def load_matrix(conn, table, X, ids=None, sqltype="real"):
    """(Re)create table(id bigint primary key, f <sqltype>[]) holding the rows of X.

    X is an (n, d) array; row i gets id ids[i] (default i).  With the default
    sqltype 'real' the values are rounded to float32 first, exactly as
    PostgreSQL would store them.  Returns the table name.
    """
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be two-dimensional, got shape {X.shape}")
    n, d = X.shape
    ids = _ids(n, ids)
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {table}")
        cur.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, f {sqltype}[])")
    if n == 0:
        return table
    S = _floats_as_text(X, sqltype)
    if d == 0:
        body = np.full(n, "{}", dtype=object)
    else:
        body = S[:, 0].astype(object)
        for j in range(1, d):
            body = body + "," + S[:, j].astype(object)
        body = "{" + body + "}"
    lines = (ids.astype(str).astype(object) + "\t" + body).tolist()
    _copy_lines(conn, table, "id, f", lines)
    with conn.cursor() as cur:
        cur.execute(f"ANALYZE {table}")
    return table


def default_names(d):
    """Column names used by load_xy: x, y, z for up to three features, else x1..xd."""
    return ["x", "y", "z"][:d] if d <= 3 else [f"x{j + 1}" for j in range(d)]


def load_xy(conn, table, X, ids=None, names=None, sqltype="double precision"):
    """(Re)create table(id bigint primary key, x <sqltype>, y <sqltype>, ...) from X.

    One scalar column per feature, named by names (default: default_names(d)).
    Returns the table name.
    """
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be two-dimensional, got shape {X.shape}")
    n, d = X.shape
    ids = _ids(n, ids)
    names = list(names) if names is not None else default_names(d)
    if len(names) != d:
        raise ValueError(f"{len(names)} names for {d} features")
    cols = ", ".join(f"{c} {sqltype}" for c in names)
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {table}")
        cur.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, {cols})")
    if n == 0:
        return table
    S = _floats_as_text(X, sqltype)
    body = ids.astype(str).astype(object)
    for j in range(d):
        body = body + "\t" + S[:, j].astype(object)
    _copy_lines(conn, table, "id, " + ", ".join(names), body.tolist())
    with conn.cursor() as cur:
        cur.execute(f"ANALYZE {table}")
    return table


def dbscan(conn, query, eps, min_pts, device=None):
    """Run gpu_dbscan(query, eps, min_pts, device).

    Returns (ids int64, labels int64 with -1 for noise, is_core bool), each in
    the order gpu_dbscan returned the rows.
    """
    with conn.cursor() as cur:
        cur.execute("SELECT id, cluster_id, is_core FROM gpu_dbscan(%s, %s, %s, %s)",
                    (query, float(eps), int(min_pts), device))
        rows = cur.fetchall()
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    labels = np.fromiter((-1 if r[1] is None else r[1] for r in rows),
                         dtype=np.int64, count=len(rows))
    core = np.fromiter((bool(r[2]) for r in rows), dtype=bool, count=len(rows))
    return ids, labels, core
