-- The parallel gather (gpuclust.parallel_gather): a query that scans one
-- table is read by gpuclust's own parallel workers, and gives the same rows,
-- in the same order, with the same errors, as the serial gather.
--
-- The tables are small, so min_parallel_table_scan_size = 0 and the table's
-- parallel_workers set the workers; the DEBUG1 line says when the parallel
-- gather is taken and with how many workers planned (how many start depends
-- on the server; the answers do not).

SET min_parallel_table_scan_size = 0;
SET gpuclust.parallel_gather = on;

-- the answers of gpu_dbscan with the parallel gather and without, with
-- their places (WITH ORDINALITY): rows, rows of one answer not in the other
-- (EXCEPT ALL, both ways), and places where the two answers differ
CREATE FUNCTION pg_same(q text, workers int, eps float8 DEFAULT 0.1, min_pts int DEFAULT 5)
RETURNS TABLE (n bigint, only_parallel bigint, only_serial bigint, out_of_order bigint)
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('max_parallel_workers_per_gather', workers::text, true);
  PERFORM set_config('gpuclust.parallel_gather', 'on', true);
  CREATE TEMP TABLE pg_p AS
    SELECT * FROM gpu_dbscan(q, eps, min_pts, device => 'cpu') WITH ORDINALITY AS r(id, cluster_id, is_core, o);
  PERFORM set_config('gpuclust.parallel_gather', 'off', true);
  CREATE TEMP TABLE pg_s AS
    SELECT * FROM gpu_dbscan(q, eps, min_pts, device => 'cpu') WITH ORDINALITY AS r(id, cluster_id, is_core, o);
  RETURN QUERY SELECT
    (SELECT count(*) FROM pg_p),
    (SELECT count(*) FROM (SELECT id, cluster_id, is_core FROM pg_p
                           EXCEPT ALL SELECT id, cluster_id, is_core FROM pg_s) a),
    (SELECT count(*) FROM (SELECT id, cluster_id, is_core FROM pg_s
                           EXCEPT ALL SELECT id, cluster_id, is_core FROM pg_p) a),
    (SELECT count(*) FROM pg_p p FULL JOIN pg_s s ON p.o = s.o
     WHERE p.id IS DISTINCT FROM s.id OR p.cluster_id IS DISTINCT FROM s.cluster_id
        OR p.is_core IS DISTINCT FROM s.is_core);
  DROP TABLE pg_p, pg_s;
END $$;

-- whether the parallel gather is taken: its DEBUG1 line, for one call
CREATE FUNCTION pg_taken(q text, workers int) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  PERFORM set_config('max_parallel_workers_per_gather', workers::text, true);
  -- once first, so that the catalog caches are warm and report no rehash at DEBUG1
  SELECT count(*) INTO n FROM gpu_dbscan(q, 0.1, 5, device => 'cpu');
  PERFORM set_config('client_min_messages', 'debug1', true);
  SELECT count(*) INTO n FROM gpu_dbscan(q, 0.1, 5, device => 'cpu');
  PERFORM set_config('client_min_messages', 'notice', true);
  RETURN n;
END $$;

-- 20000 scattered 2-D points in id order, with other columns to read and
-- dead tuples: updated rows (their old versions stay, no VACUUM) and
-- deleted ones
CREATE TABLE pgt (id bigint, f real[], x float8, y integer, n numeric, pad text)
  WITH (autovacuum_enabled = off, parallel_workers = 4);
INSERT INTO pgt
SELECT g, ARRAY[(g * 7919 % 1000) / 100.0, (g * 104729 % 1000) / 100.0]::real[],
       (g * 7919 % 1000) / 100.0, g * 104729 % 1000, (g * 7919 % 1000) / 100.0,
       repeat('x', g % 50)
FROM generate_series(1, 20000) g ORDER BY g;
UPDATE pgt SET f = ARRAY[f[2], f[1]], pad = pad || 'u' WHERE id % 7 = 0;
DELETE FROM pgt WHERE id % 11 = 0;
SELECT count(*) AS rows, pg_relation_size('pgt') / current_setting('block_size')::int > 100 AS many_blocks FROM pgt;

-- taken with 1 and 4 workers; 0 workers is the serial gather
SELECT pg_taken('SELECT id, f FROM pgt', 4);
SELECT pg_taken('SELECT id, f FROM pgt', 1);
SELECT pg_taken('SELECT id, f FROM pgt', 0);
-- the same answers, with 0, 1 and 4 workers
SELECT * FROM pg_same('SELECT id, f FROM pgt', 0);
SELECT * FROM pg_same('SELECT id, f FROM pgt', 1);
SELECT * FROM pg_same('SELECT id, f FROM pgt', 4);
-- a table this small is read by whoever starts first; a filter that takes
-- time on each row (and is always true) shares the blocks among the
-- participants, whose parts then merge
SELECT * FROM pg_same('SELECT id, f FROM pgt WHERE length(repeat(pad || ''x'', 100)) > 0', 1);
SELECT * FROM pg_same('SELECT id, f FROM pgt WHERE length(repeat(pad || ''x'', 100)) > 0', 4);
SET parallel_leader_participation = off;
SELECT * FROM pg_same('SELECT id, f FROM pgt WHERE length(repeat(pad || ''x'', 100)) > 0', 4);
SELECT * FROM pg_same('SELECT id, x, n FROM pgt WHERE length(repeat(pad || ''x'', 100)) > 0', 4);
RESET parallel_leader_participation;
-- a filter, evaluated by the workers
SELECT pg_taken('SELECT id, f FROM pgt WHERE y % 3 <> 0 AND pad LIKE ''%u''', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgt WHERE y % 3 <> 0', 1);
SELECT * FROM pg_same('SELECT id, f FROM pgt WHERE y % 3 <> 0', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgt WHERE pad LIKE ''%u''', 4, 0.5, 3);
-- scalar columns and casts: numeric, integer, a cast to real, an array cast
SELECT pg_taken('SELECT y, x::real, n FROM pgt', 4);
SELECT * FROM pg_same('SELECT id, x, n FROM pgt', 4);
SELECT * FROM pg_same('SELECT id::int, x::real, (y::float8 / 100)::real FROM pgt', 4);
SELECT * FROM pg_same('SELECT id, f::float8[] FROM pgt', 4);
-- an expression, an ORDER BY of a column that is not unique (pgt has no
-- unique key), a LIMIT or a join keeps the serial gather
SELECT pg_taken('SELECT id, ARRAY[x, y] FROM pgt', 4);
SELECT pg_taken('SELECT id::int, x::real, y / 100.0 FROM pgt', 4);
SELECT pg_taken('SELECT id, f FROM pgt ORDER BY id', 4);
SELECT pg_taken('SELECT id, f FROM pgt LIMIT 20000', 4);
SELECT pg_taken('SELECT a.id, a.f FROM pgt a JOIN pgt b USING (id)', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgt ORDER BY id', 4);
-- so does gpuclust.parallel_gather = off
SET gpuclust.parallel_gather = off;
SELECT pg_taken('SELECT id, f FROM pgt', 4);
SET gpuclust.parallel_gather = on;
-- a view on the table and a materialized view
CREATE VIEW pgv AS SELECT id, f FROM pgt WHERE y < 800;
SELECT pg_taken('SELECT id, f FROM pgv', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgv', 4);
CREATE MATERIALIZED VIEW pgm WITH (parallel_workers = 4) AS SELECT id, f FROM pgt;
SELECT pg_taken('SELECT id, f FROM pgm', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgm', 4);
-- a table too small for min_parallel_table_scan_size keeps the serial gather
SET min_parallel_table_scan_size = '8MB';
ALTER TABLE pgt RESET (parallel_workers);
SELECT pg_taken('SELECT id, f FROM pgt', 4);
ALTER TABLE pgt SET (parallel_workers = 4);
RESET min_parallel_table_scan_size;
SET min_parallel_table_scan_size = 0;

-- TOAST: wide arrays, compressed and stored out of line, and out of line uncompressed
CREATE TABLE pgw (id bigint, f real[]) WITH (autovacuum_enabled = off, parallel_workers = 4);
INSERT INTO pgw
SELECT g, ARRAY(SELECT ((g % 5) * 3 + (j % 3))::real FROM generate_series(1, 3000) j)
FROM generate_series(1, 300) g ORDER BY g;
ALTER TABLE pgw ALTER COLUMN f SET STORAGE EXTERNAL;
INSERT INTO pgw
SELECT g, ARRAY(SELECT ((g % 5) * 3 + ((g * j) % 7) * 0.01)::real FROM generate_series(1, 3000) j)
FROM generate_series(301, 500) g ORDER BY g;
DELETE FROM pgw WHERE id % 13 = 0;
SELECT count(*) AS rows, pg_relation_size(reltoastrelid) > 0 AS toasted
FROM pgw, pg_class WHERE pg_class.oid = 'pgw'::regclass GROUP BY 2;
SELECT pg_taken('SELECT id, f FROM pgw', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgw', 1, 1.0, 3);
SELECT * FROM pg_same('SELECT id, f FROM pgw', 4, 1.0, 3);

-- bad rows in several parts of a table: a feature array with NaN (id 3,
-- early; id 15000, late), a NULL array (id 10000), an array of 3 elements
-- (id 19990), a NULL row id (after id 12000), a first row of 3 elements
-- (id 1).  Whichever worker meets a bad row first, the error names the
-- first one in the scan's order, as the serial gather does.  A filter that
-- takes time on each row shares the blocks among the participants.
CREATE TABLE pgbad (id bigint, f real[], kind int, x float8)
  WITH (autovacuum_enabled = off, parallel_workers = 4);
INSERT INTO pgbad
SELECT CASE WHEN g = 12001 THEN NULL ELSE g END,
       CASE WHEN g IN (3, 15000) THEN ARRAY[1, 'NaN']::real[]
            WHEN g = 10000 THEN NULL
            WHEN g IN (1, 19990) THEN ARRAY[1, 2, 3]::real[]
            ELSE ARRAY[g % 100, g / 100]::real[] END,
       CASE g WHEN 3 THEN 1 WHEN 10000 THEN 2 WHEN 15000 THEN 4 WHEN 19990 THEN 3
              WHEN 12001 THEN 6 WHEN 1 THEN 5 ELSE 0 END,
       CASE WHEN g = 17000 THEN 'Infinity'::float8 ELSE g END
FROM generate_series(1, 20000) g;
SELECT pg_taken('SELECT id, f FROM pgbad WHERE kind = 0', 4);
\set VERBOSITY default
SET max_parallel_workers_per_gather = 4;
-- (taken, then the error is the serial gather's)
SET client_min_messages = debug1;
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 3, 4)', 0.1, 5);
RESET client_min_messages;
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 1, 2, 3, 4)', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 2, 3, 4)', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 3, 4)', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 3)', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 5)', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 6)', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, x FROM pgbad WHERE kind = 0', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad', 0.1, 5);
SET max_parallel_workers_per_gather = 1;
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 3, 4)', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 6)', 0.1, 5);
-- the same errors from the serial gather
SET gpuclust.parallel_gather = off;
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 1, 2, 3, 4)', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 2, 3, 4)', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 3, 4)', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 3)', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 5)', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 6)', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, x FROM pgbad WHERE kind = 0', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad', 0.1, 5);
SET gpuclust.parallel_gather = on;
-- an error of the filter or of a cast: the serial gather's too
SET max_parallel_workers_per_gather = 4;
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind = 0 AND 1 / (id - 5000) < 1', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, x::int FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind = 0', 0.1, 5);
SET gpuclust.parallel_gather = off;
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind = 0 AND 1 / (id - 5000) < 1', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, x::int FROM pgbad WHERE length(repeat(x::text, 200)) > 0 AND kind = 0', 0.1, 5);
SET gpuclust.parallel_gather = on;
RESET max_parallel_workers_per_gather;
-- the good rows of the same table: the same answers
SELECT * FROM pg_same('SELECT id, f FROM pgbad WHERE kind = 0', 4);

-- ORDER BY a unique key: read in parallel, then sorted on the key.  Ids
-- scattered over the blocks (negative and positive), a primary key, a
-- two-column unique key (b, a) of a smallint and an integer, a nullable
-- column c, a timestamptz and a date; dead tuples (updated and deleted rows)
CREATE TABLE pgo (id bigint PRIMARY KEY, f real[], a int NOT NULL, b smallint NOT NULL,
                  c int, t timestamptz NOT NULL, dt date NOT NULL, pad text, UNIQUE (b, a))
  WITH (autovacuum_enabled = off, parallel_workers = 4);
INSERT INTO pgo
SELECT g * 7919 % 20011 - 10000, ARRAY[(g * 7919 % 1000) / 100.0, (g * 104729 % 1000) / 100.0]::real[],
       g % 100, g / 100, nullif(g % 5, 0), '2026-01-01'::timestamptz + (g * 7919 % 20011) * interval '1 min',
       '2000-01-01'::date + (g * 104729 % 20011), repeat('x', g % 50)
FROM generate_series(1, 20000) g ORDER BY g;
UPDATE pgo SET f = ARRAY[f[2], f[1]], pad = pad || 'u' WHERE id % 7 = 0;
DELETE FROM pgo WHERE id % 11 = 0;
ALTER TABLE pgo ADD UNIQUE (t), ADD UNIQUE (dt);
-- taken, sorted on the key columns
SELECT pg_taken('SELECT id, f FROM pgo ORDER BY id', 4);
SELECT pg_taken('SELECT id, f FROM pgo ORDER BY b, a', 4);
SELECT pg_taken('SELECT id, f FROM pgo ORDER BY id', 0);
-- the same answers and order, with 0, 1 and 4 workers
SELECT * FROM pg_same('SELECT id, f FROM pgo ORDER BY id', 0);
SELECT * FROM pg_same('SELECT id, f FROM pgo ORDER BY id', 1);
SELECT * FROM pg_same('SELECT id, f FROM pgo ORDER BY id', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgo ORDER BY id DESC', 1);
SELECT * FROM pg_same('SELECT id, f FROM pgo ORDER BY id DESC', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgo ORDER BY b, a', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgo ORDER BY b DESC, a', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgo ORDER BY a DESC, b DESC', 4);
-- a nullable column before the key, NULLs first and last; a column not returned
SELECT pg_taken('SELECT id, f FROM pgo ORDER BY c NULLS FIRST, id DESC', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgo ORDER BY c NULLS FIRST, id DESC', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgo ORDER BY c DESC NULLS LAST, b, a', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgo ORDER BY c, id', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgo ORDER BY t DESC', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgo ORDER BY dt', 4);
-- a filter, and a filter that takes time on each row (the blocks shared
-- among the participants), with and without the backend reading
SELECT * FROM pg_same('SELECT id, f FROM pgo WHERE pad LIKE ''%u'' ORDER BY id', 4, 0.5, 3);
SELECT * FROM pg_same('SELECT id, f FROM pgo WHERE length(repeat(pad || ''x'', 100)) > 0 ORDER BY id DESC', 4);
SET parallel_leader_participation = off;
SELECT * FROM pg_same('SELECT id, f FROM pgo WHERE length(repeat(pad || ''x'', 100)) > 0 ORDER BY b DESC, a', 4);
RESET parallel_leader_participation;
-- scalar columns and casts, ordered
SELECT * FROM pg_same('SELECT id::int, a::real, c::float8 FROM pgo WHERE c IS NOT NULL ORDER BY id', 4);
-- a table in key order: each participant checks as it reads that its keys
-- never decrease, and no sort runs (DEBUG2 says "already in it"); an ORDER
-- BY of the row id itself (integer, bigint or smallint, not a cast) takes
-- each row's key from its id.  Then descending, another key, a cast, and
-- the same table with rows updated (their new versions at the end) and
-- with a row put back in the middle, where the sort must run again
CREATE TABLE pgkey (id int PRIMARY KEY, k bigint NOT NULL UNIQUE, s smallint NOT NULL UNIQUE, f real[])
  WITH (autovacuum_enabled = off, parallel_workers = 4);
INSERT INTO pgkey
SELECT g, 1000000 - g, g - 16000, ARRAY[(g * 7919 % 1000) / 100.0, (g::bigint * 104729 % 1000) / 100.0]::real[]
FROM generate_series(1, 30000) g ORDER BY g;
SELECT pg_taken('SELECT id, f FROM pgkey ORDER BY id', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgkey ORDER BY id', 1);
SELECT * FROM pg_same('SELECT id, f FROM pgkey ORDER BY id', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgkey ORDER BY id DESC', 4);
SELECT * FROM pg_same('SELECT k, f FROM pgkey ORDER BY k', 4);
SELECT * FROM pg_same('SELECT s, f FROM pgkey ORDER BY s DESC', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgkey ORDER BY k', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgkey ORDER BY s', 4);
SELECT * FROM pg_same('SELECT id::bigint, f FROM pgkey ORDER BY id', 4);
-- the rows shared among the participants (a filter that takes time)
SELECT * FROM pg_same('SELECT id, f FROM pgkey WHERE length(repeat(id::text, 100)) > 0 ORDER BY id', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgkey WHERE length(repeat(id::text, 100)) > 0 ORDER BY s', 4);
SET parallel_leader_participation = off;
SELECT * FROM pg_same('SELECT id, f FROM pgkey WHERE length(repeat(id::text, 100)) > 0 ORDER BY id', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgkey WHERE length(repeat(id::text, 100)) > 0 ORDER BY id DESC', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgkey WHERE length(repeat(id::text, 100)) > 0 ORDER BY k', 4);
RESET parallel_leader_participation;
UPDATE pgkey SET f = ARRAY[f[2], f[1]] WHERE id % 1000 = 0;
SELECT * FROM pg_same('SELECT id, f FROM pgkey ORDER BY id', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgkey ORDER BY s DESC', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgkey WHERE length(repeat(id::text, 100)) > 0 ORDER BY id', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgkey WHERE length(repeat(id::text, 100)) > 0 ORDER BY s', 4);
DELETE FROM pgkey WHERE id = 15000;
INSERT INTO pgkey VALUES (15000, 985000, -1000, '{1, 2}');
SELECT * FROM pg_same('SELECT id, f FROM pgkey WHERE id % 1000 <> 0 ORDER BY id', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgkey WHERE id % 1000 <> 0 AND length(repeat(id::text, 100)) > 0 ORDER BY id', 4);
-- five blocks, each in key order and each after the next: a filter that
-- takes long on each row gives most participants one block, whose rows are
-- in order; the order from one part to the next is then what needs the sort
CREATE TABLE pgrev (id int PRIMARY KEY, f real[], pad text)
  WITH (autovacuum_enabled = off, parallel_workers = 4);
INSERT INTO pgrev
SELECT (4 - g / 19) * 1000 + g % 19, ARRAY[g % 7, g % 5]::real[], repeat('x', 350)
FROM generate_series(0, 94) g ORDER BY g;
SELECT count(DISTINCT (ctid::text::point)[0]) AS blocks FROM pgrev;
SELECT * FROM pg_same('SELECT id, f FROM pgrev WHERE length(repeat(pad, 20000)) > 0 ORDER BY id', 4, 1.5, 3);
SELECT * FROM pg_same('SELECT id, f FROM pgrev WHERE length(repeat(pad, 20000)) > 0 ORDER BY id DESC', 4, 1.5, 3);
-- a key of one word whose values span at most four times as many as the
-- rows, scattered in the table, is put in order by ranks (a bitmap of the
-- keys present: each row straight to its place); a wider one (k) by the
-- sort: the same rows in the same order either way
CREATE TABLE pgrank (id int PRIMARY KEY, k bigint NOT NULL UNIQUE, f real[])
  WITH (autovacuum_enabled = off, parallel_workers = 4);
INSERT INTO pgrank
SELECT g * 7919 % 30011, (g * 7919 % 30011)::bigint * 1000003,
       ARRAY[(g * 7919 % 1000) / 100.0, (g::bigint * 104729 % 1000) / 100.0]::real[]
FROM generate_series(1, 30000) g ORDER BY g;
SELECT * FROM pg_same('SELECT id, f FROM pgrank ORDER BY id', 1);
SELECT * FROM pg_same('SELECT id, f FROM pgrank ORDER BY id', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgrank ORDER BY id DESC', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgrank WHERE id % 5 <> 0 ORDER BY id', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgrank ORDER BY k', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgrank ORDER BY k DESC', 4);
DROP TABLE pgrank;
-- the serial gather: an ORDER BY that is not unique (a column, or two
-- that hold no unique key), of an expression, of a type without a key here
-- (text), with a LIMIT; a unique key that is deferrable or partial
SELECT pg_taken('SELECT id, f FROM pgo ORDER BY a', 4);
SELECT pg_taken('SELECT id, f FROM pgo ORDER BY a, c', 4);
SELECT pg_taken('SELECT id, f FROM pgo ORDER BY id + 0', 4);
SELECT pg_taken('SELECT id, f FROM pgo ORDER BY pad, id', 4);
SELECT pg_taken('SELECT id, f FROM pgo ORDER BY id LIMIT 100000', 4);
-- a join, a view
SELECT pg_taken('SELECT a.id, a.f FROM pgo a JOIN pgo b USING (id) ORDER BY a.id', 4);
CREATE VIEW pgov AS SELECT id, f FROM pgo;
SELECT pg_taken('SELECT id, f FROM pgov ORDER BY id', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgov ORDER BY id', 4);
DROP VIEW pgov;
SELECT * FROM pg_same('SELECT id, f FROM pgo ORDER BY a', 4);
ALTER TABLE pgo DROP CONSTRAINT pgo_pkey;
ALTER TABLE pgo ADD PRIMARY KEY (id) DEFERRABLE;
SELECT pg_taken('SELECT id, f FROM pgo ORDER BY id', 4);
ALTER TABLE pgo DROP CONSTRAINT pgo_pkey;
CREATE UNIQUE INDEX pgo_partial ON pgo (id) WHERE id > 0;
SELECT pg_taken('SELECT id, f FROM pgo ORDER BY id', 4);
DROP INDEX pgo_partial;
CREATE UNIQUE INDEX pgo_id ON pgo (id);
SELECT pg_taken('SELECT id, f FROM pgo ORDER BY id', 4);

-- bad rows with ORDER BY: the table of bad rows with a key k that runs
-- against the physical order (k = 20001 - g).  The error names the first
-- offending row in the ORDER BY's order, as the serial gather does, with
-- 4 and 1 workers, ascending and descending
CREATE TABLE pgobad WITH (autovacuum_enabled = off, parallel_workers = 4) AS
  SELECT 20001 - coalesce(id, 12001) AS k, * FROM pgbad;
ALTER TABLE pgobad ADD PRIMARY KEY (k);
SELECT pg_taken('SELECT id, f FROM pgobad WHERE kind = 0 ORDER BY k', 4);
SET max_parallel_workers_per_gather = 4;
-- (taken, then the error is the serial gather's)
SET client_min_messages = debug1;
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgobad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 1, 2, 3, 4) ORDER BY k', 0.1, 5);
RESET client_min_messages;
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgobad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 1, 2, 4) ORDER BY k', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgobad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 1, 2) ORDER BY k', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgobad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 1) ORDER BY k', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgobad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 5) ORDER BY k', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgobad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 6) ORDER BY k', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgobad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 1, 2, 3, 4) ORDER BY k DESC', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgobad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 2, 4) ORDER BY k DESC', 0.1, 5);
SET max_parallel_workers_per_gather = 1;
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgobad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 1, 2, 4) ORDER BY k', 0.1, 5);
-- the same errors from the serial gather
SET gpuclust.parallel_gather = off;
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgobad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 1, 2, 3, 4) ORDER BY k', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgobad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 1, 2, 4) ORDER BY k', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgobad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 1, 2) ORDER BY k', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgobad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 1) ORDER BY k', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgobad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 5) ORDER BY k', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgobad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 6) ORDER BY k', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgobad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 1, 2, 3, 4) ORDER BY k DESC', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgobad WHERE length(repeat(x::text, 200)) > 0 AND kind IN (0, 2, 4) ORDER BY k DESC', 0.1, 5);
SET gpuclust.parallel_gather = on;
RESET max_parallel_workers_per_gather;
SELECT * FROM pg_same('SELECT id, f FROM pgobad WHERE kind = 0 ORDER BY k DESC', 4);

-- cancel reaches the workers: statement_timeout stops a call whose workers
-- sleep on every row, and no worker of this session is left after it
SET max_parallel_workers_per_gather = 4;
SET client_min_messages = debug1;
SET statement_timeout = '300ms';
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgt WHERE pg_sleep(0.001) IS NOT NULL', 0.1, 5);
RESET statement_timeout;
RESET client_min_messages;
SELECT count(*) AS workers_left FROM pg_stat_activity WHERE leader_pid = pg_backend_pid();
RESET max_parallel_workers_per_gather;

-- privileges and row-level security are the caller's
DROP ROLE IF EXISTS regress_gc_pg_reader;
CREATE ROLE regress_gc_pg_reader;
GRANT SELECT (id, f) ON pgt TO regress_gc_pg_reader;
GRANT EXECUTE ON FUNCTION pg_same(text, int, float8, int), pg_taken(text, int) TO regress_gc_pg_reader;
SET ROLE regress_gc_pg_reader;
-- the columns granted: taken; a column not granted or no grant: the executor's error, both ways
SELECT pg_taken('SELECT id, f FROM pgt', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgt', 4);
SET max_parallel_workers_per_gather = 4;
SELECT count(*) FROM gpu_dbscan('SELECT id, x FROM pgt', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgw', 0.1, 5);
SET gpuclust.parallel_gather = off;
SELECT count(*) FROM gpu_dbscan('SELECT id, x FROM pgt', 0.1, 5);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM pgw', 0.1, 5);
SET gpuclust.parallel_gather = on;
RESET max_parallel_workers_per_gather;
RESET ROLE;
-- row-level security for the caller: the serial gather, which applies the policy
ALTER TABLE pgt ENABLE ROW LEVEL SECURITY;
CREATE POLICY pgt_even ON pgt FOR SELECT USING (id % 2 = 0);
SET ROLE regress_gc_pg_reader;
SELECT pg_taken('SELECT id, f FROM pgt', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgt', 4);
RESET ROLE;
-- a role that bypasses the policies (here a superuser): taken, every row
SELECT pg_taken('SELECT id, f FROM pgt', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgt', 4);
-- the table's owner: not subject to them (taken), unless FORCE ROW LEVEL SECURITY
ALTER TABLE pgt OWNER TO regress_gc_pg_reader;
SET ROLE regress_gc_pg_reader;
SELECT pg_taken('SELECT id, f FROM pgt', 4);
ALTER TABLE pgt FORCE ROW LEVEL SECURITY;
SELECT pg_taken('SELECT id, f FROM pgt', 4);
SELECT * FROM pg_same('SELECT id, f FROM pgt', 4);
RESET ROLE;
ALTER TABLE pgt OWNER TO CURRENT_USER;
ALTER TABLE pgt NO FORCE ROW LEVEL SECURITY;
ALTER TABLE pgt DISABLE ROW LEVEL SECURITY;
DROP POLICY pgt_even ON pgt;

-- the other functions read through the same gather: k-means, whose answer
-- depends on the order of the rows through its seeding
SET max_parallel_workers_per_gather = 4;
CREATE TEMP TABLE pgk_p AS
  SELECT * FROM gpu_kmeans('SELECT id, f FROM pgt', 5, seed => 7, device => 'cpu') WITH ORDINALITY;
SET gpuclust.parallel_gather = off;
CREATE TEMP TABLE pgk_s AS
  SELECT * FROM gpu_kmeans('SELECT id, f FROM pgt', 5, seed => 7, device => 'cpu') WITH ORDINALITY;
SET gpuclust.parallel_gather = on;
SELECT (SELECT count(*) FROM pgk_p) AS n,
       (SELECT count(*) FROM (TABLE pgk_p EXCEPT ALL TABLE pgk_s) a) AS only_parallel,
       (SELECT count(*) FROM (TABLE pgk_s EXCEPT ALL TABLE pgk_p) a) AS only_serial;
DROP TABLE pgk_p, pgk_s;
RESET max_parallel_workers_per_gather;

DROP OWNED BY regress_gc_pg_reader;
DROP ROLE regress_gc_pg_reader;
DROP MATERIALIZED VIEW pgm;
-- rows wider than 512 bytes (the planner's estimate) stay serial: 200 features
CREATE TABLE pgwide (id bigint, f real[]) WITH (autovacuum_enabled = off, parallel_workers = 4);
INSERT INTO pgwide SELECT g, array_fill((g % 7)::real, ARRAY[200]) FROM generate_series(1, 2000) g;
ANALYZE pgwide;
SELECT pg_taken('SELECT id, f FROM pgwide', 4);
DROP TABLE pgwide;

DROP VIEW pgv;
DROP TABLE pgt, pgw, pgbad, pgo, pgobad, pgkey, pgrev;
DROP FUNCTION pg_same(text, int, float8, int), pg_taken(text, int);
RESET min_parallel_table_scan_size;
RESET gpuclust.parallel_gather;
