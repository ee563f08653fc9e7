-- The GPU Cluster Scan node: a clustering function that is a whole FROM item
-- returns its rows from the result arrays, without a tuplestore.
-- gpuclust.custom_scan = off keeps the Function Scan; both give the same rows.

CREATE TABLE cs_pts (id bigint PRIMARY KEY, f real[]);
INSERT INTO cs_pts
SELECT g, ARRAY[(g % 3) * 10 + (g % 7) * 0.01, (g % 3) * 10 + (g % 5) * 0.01]::real[]
FROM generate_series(1, 60) g;

SET gpuclust.device = cpu;

-- EXPLAIN ANALYZE without times, in the same form on every PostgreSQL version
CREATE FUNCTION cs_explain(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF, BUFFERS OFF) ' || q LOOP
    RETURN NEXT regexp_replace(line, 'rows=(\d+)\.00', 'rows=\1', 'g');
  END LOOP;
END $$;

-- the node, with the function; VERBOSE shows the call
EXPLAIN (COSTS OFF)
SELECT * FROM gpu_dbscan('SELECT id, f FROM cs_pts ORDER BY id', 0.5, 3);
SHOW gpuclust.custom_scan;
EXPLAIN (COSTS OFF, VERBOSE)
SELECT id, cluster_id FROM gpu_dbscan('SELECT id, f FROM cs_pts ORDER BY id', 0.5, 3) d
WHERE cluster_id = 1;
-- ANALYZE (no timing): device and input
SELECT cs_explain($q$
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM cs_pts', 0.5, 3)$q$);

-- shapes it does not take keep the Function Scan
EXPLAIN (COSTS OFF)
SELECT * FROM gpu_dbscan('SELECT id, f FROM cs_pts', 0.5, 3) WITH ORDINALITY;
EXPLAIN (COSTS OFF)
SELECT * FROM ROWS FROM (gpu_dbscan('SELECT id, f FROM cs_pts', 0.5, 3),
                         generate_series(1, 2));
EXPLAIN (COSTS OFF)
SELECT d FROM gpu_dbscan('SELECT id, f FROM cs_pts', 0.5, 3) d;
EXPLAIN (COSTS OFF)
SELECT * FROM (VALUES (0.5), (0.001)) v(e), LATERAL gpu_dbscan('SELECT id, f FROM cs_pts', v.e, 3);
EXPLAIN (COSTS OFF)
SELECT * FROM gpu_kmeans_centroids('SELECT id, f FROM cs_pts', 3, seed => 1);
-- UPDATE ... FROM and FOR UPDATE carry the function's whole row (for rechecks)
EXPLAIN (COSTS OFF)
UPDATE cs_pts SET f = f FROM gpu_dbscan('SELECT id, f FROM cs_pts', 0.5, 3) d
WHERE cs_pts.id = d.id AND d.cluster_id IS NULL;
EXPLAIN (COSTS OFF)
SELECT cs_pts.id FROM cs_pts JOIN gpu_dbscan('SELECT id, f FROM cs_pts', 0.5, 3) d USING (id)
FOR UPDATE OF cs_pts;
SET gpuclust.custom_scan = off;
EXPLAIN (COSTS OFF)
SELECT * FROM gpu_dbscan('SELECT id, f FROM cs_pts ORDER BY id', 0.5, 3);
RESET gpuclust.custom_scan;

-- each of the five functions: the rows, in the same order, on and off
CREATE FUNCTION cs_same(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  a text[]; b text[];
BEGIN
  SET LOCAL gpuclust.custom_scan = on;
  EXECUTE format('SELECT array_agg(t::text ORDER BY n) FROM (SELECT t, row_number() OVER () n FROM (%s) t) s', q) INTO a;
  SET LOCAL gpuclust.custom_scan = off;
  EXECUTE format('SELECT array_agg(t::text ORDER BY n) FROM (SELECT t, row_number() OVER () n FROM (%s) t) s', q) INTO b;
  RETURN CASE WHEN a IS NOT DISTINCT FROM b THEN 'same ' || coalesce(cardinality(a), 0) || ' rows'
              ELSE 'DIFFERENT' END;
END $$;
SELECT cs_same($q$SELECT * FROM gpu_dbscan('SELECT id, f FROM cs_pts ORDER BY id DESC', 0.5, 3)$q$);
SELECT cs_same($q$SELECT * FROM gpu_kmeans('SELECT id, f FROM cs_pts ORDER BY id', 3, seed => 7)$q$);
SELECT cs_same($q$SELECT * FROM gpu_kmeans_assign('SELECT id, f FROM cs_pts ORDER BY id', '{{0,0},{10,10},{20,20}}')$q$);
SELECT cs_same($q$SELECT * FROM gpu_density_peaks('SELECT id, f FROM cs_pts ORDER BY id', n_clusters => 3)$q$);
SELECT cs_same($q$SELECT * FROM gpu_hdbscan('SELECT id, f FROM cs_pts ORDER BY id', 5)$q$);
SELECT cs_same($q$SELECT * FROM gpu_dbscan('SELECT id, f FROM cs_pts WHERE false', 0.5, 3)$q$);
-- the scan tuple holds only the columns used: subsets, reordered, in quals only, none
SELECT cs_same($q$SELECT outlier_score, id FROM gpu_hdbscan('SELECT id, f FROM cs_pts ORDER BY id', 5) WHERE probability < 1$q$);
SELECT cs_same($q$SELECT cluster_id FROM gpu_hdbscan('SELECT id, f FROM cs_pts ORDER BY id', 5) WHERE outlier_score > 0.1$q$);
SELECT cs_same($q$SELECT id * 2, is_core FROM gpu_dbscan('SELECT id, f FROM cs_pts ORDER BY id', 0.5, 3) WHERE cluster_id IS NULL OR id % 4 = 0$q$);
SELECT cs_same($q$SELECT distance, distance FROM gpu_kmeans_assign('SELECT id, f FROM cs_pts ORDER BY id', '{{0,0},{10,10},{20,20}}')$q$);
SELECT cs_same($q$SELECT 1 FROM gpu_density_peaks('SELECT id, f FROM cs_pts ORDER BY id', n_clusters => 3)$q$);
-- without quals, columns only: the node fills the output columns straight from the arrays
SELECT cs_same($q$SELECT cluster_id, id, cluster_id FROM gpu_dbscan('SELECT id, f FROM cs_pts ORDER BY id', 0.5, 3)$q$);
SELECT cs_same($q$SELECT probability FROM gpu_hdbscan('SELECT id, f FROM cs_pts ORDER BY id', 5)$q$);
SELECT cs_same($q$SELECT id, cluster_id FROM gpu_kmeans('SELECT id, f FROM cs_pts ORDER BY id', 3, seed => 7) ORDER BY id DESC$q$);
SELECT cs_same($q$SELECT count(*) FROM gpu_density_peaks('SELECT id, f FROM cs_pts ORDER BY id', n_clusters => 3)$q$);
EXPLAIN (COSTS OFF, VERBOSE)
SELECT cluster_id FROM gpu_hdbscan('SELECT id, f FROM cs_pts ORDER BY id', 5) WHERE outlier_score > 0.1;
-- a query that reads neither probability nor outlier_score: gpu_hdbscan computes neither
SELECT cs_same($q$SELECT id, cluster_id FROM gpu_hdbscan('SELECT id, f FROM cs_pts ORDER BY id', 5)$q$);
SELECT cs_same($q$SELECT cluster_id FROM gpu_hdbscan('SELECT id, f FROM cs_pts ORDER BY id', 5) WHERE cluster_id IS NOT NULL OR id % 5 = 0$q$);
SELECT cs_same($q$SELECT p.id, h.cluster_id FROM cs_pts p JOIN gpu_hdbscan('SELECT id, f FROM cs_pts ORDER BY id', 5) h USING (id) ORDER BY p.id$q$);
SELECT cs_explain($q$SELECT count(*) FROM gpu_hdbscan('SELECT id, f FROM cs_pts', 5)$q$);
SELECT cs_explain($q$SELECT id FROM gpu_hdbscan('SELECT id, f FROM cs_pts', 5) WHERE cluster_id = 0$q$);
-- one of them read: both computed
SELECT cs_explain($q$SELECT count(*) FROM gpu_hdbscan('SELECT id, f FROM cs_pts', 5) WHERE outlier_score > 0.1$q$);

-- the same rows both ways as sets (EXCEPT ALL each way), through the node
CREATE TEMP TABLE cs_off AS SELECT * FROM gpu_hdbscan('SELECT id, f FROM cs_pts', 5);
SELECT count(*) FROM (SELECT * FROM gpu_hdbscan('SELECT id, f FROM cs_pts', 5)
                      EXCEPT ALL SELECT * FROM cs_off) x;
SELECT count(*) FROM (SELECT * FROM cs_off
                      EXCEPT ALL SELECT * FROM gpu_hdbscan('SELECT id, f FROM cs_pts', 5)) x;
SET gpuclust.custom_scan = off;
CREATE TEMP TABLE cs_off2 AS SELECT * FROM gpu_density_peaks('SELECT id, f FROM cs_pts', n_clusters => 3);
RESET gpuclust.custom_scan;
SELECT count(*) FROM (SELECT * FROM gpu_density_peaks('SELECT id, f FROM cs_pts', n_clusters => 3)
                      EXCEPT ALL SELECT * FROM cs_off2) x;
SELECT count(*) FROM (SELECT * FROM cs_off2 EXCEPT ALL
                      SELECT * FROM gpu_density_peaks('SELECT id, f FROM cs_pts', n_clusters => 3)) x;

-- quals, projections and LIMIT
SELECT id, cluster_id FROM gpu_dbscan('SELECT id, f FROM cs_pts ORDER BY id', 0.5, 3)
WHERE is_core AND id % 10 = 0;
SELECT id FROM gpu_kmeans_assign('SELECT id, f FROM cs_pts ORDER BY id', '{{0,0},{10,10},{20,20}}') LIMIT 4;
SELECT count(*), count(cluster_id), sum(cluster_id) FROM gpu_dbscan('SELECT id, f FROM cs_pts', 0.5, 3);

-- a SCROLL cursor: forward, backward, absolute; the node scans backward itself (no Material)
EXPLAIN (COSTS OFF) DECLARE c SCROLL CURSOR FOR
  SELECT id, cluster_id FROM gpu_dbscan('SELECT id, f FROM cs_pts WHERE id <= 6 ORDER BY id', 0.5, 1);
BEGIN;
DECLARE c SCROLL CURSOR FOR
  SELECT id, cluster_id FROM gpu_dbscan('SELECT id, f FROM cs_pts WHERE id <= 6 ORDER BY id', 0.5, 1);
FETCH 3 FROM c;
FETCH BACKWARD 2 FROM c;
FETCH ALL FROM c;
FETCH BACKWARD 2 FROM c;
FETCH ABSOLUTE 1 FROM c;
FETCH BACKWARD 1 FROM c;
FETCH FORWARD 1 FROM c;
MOVE LAST IN c;
FETCH PRIOR FROM c;
COMMIT;
-- the same moves from PL/pgSQL, through the node and through the Function Scan
CREATE FUNCTION cs_moves(custom_scan text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  c refcursor;
  r record;
  out text := '';
BEGIN
  PERFORM set_config('gpuclust.custom_scan', custom_scan, true);
  OPEN c SCROLL FOR
    SELECT id, cluster_id FROM gpu_dbscan('SELECT id, f FROM cs_pts WHERE id <= 6 ORDER BY id', 0.5, 1);
  FOR i IN 1..3 LOOP FETCH c INTO r; out := out || r.id || ' '; END LOOP;
  FETCH RELATIVE -2 FROM c INTO r; out := out || '| ' || r.id;
  MOVE LAST IN c; FETCH PRIOR FROM c INTO r; out := out || ' | ' || r.id;
  FETCH ABSOLUTE 1 FROM c INTO r; out := out || ' | ' || r.id;
  FETCH PRIOR FROM c INTO r; out := out || ' | ' || coalesce(r.id::text, 'none');
  FETCH RELATIVE 4 FROM c INTO r; out := out || ' | ' || r.id;
  CLOSE c;
  RETURN out;
END $$;
SELECT cs_moves('on') AS node, cs_moves('off') AS function_scan;
DROP FUNCTION cs_moves(text);
-- a cursor without SCROLL
BEGIN;
DECLARE c2 CURSOR FOR
  SELECT id FROM gpu_dbscan('SELECT id, f FROM cs_pts WHERE id <= 4 ORDER BY id', 0.5, 1);
FETCH 2 FROM c2;
FETCH 5 FROM c2;
COMMIT;

-- rescans in a nested loop: the inner node rewinds (one computation)
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
EXPLAIN (COSTS OFF)
SELECT g, d.id FROM generate_series(1, 3) g,
  gpu_dbscan('SELECT id, f FROM cs_pts WHERE id <= 3 ORDER BY id', 0.5, 1) d
WHERE d.id <= g;
SELECT g, d.id FROM generate_series(1, 3) g,
  gpu_dbscan('SELECT id, f FROM cs_pts WHERE id <= 3 ORDER BY id', 0.5, 1) d
WHERE d.id <= g ORDER BY g, d.id;
SELECT cs_explain($q$
SELECT count(*) FROM generate_series(1, 3) g,
  gpu_dbscan('SELECT id, f FROM cs_pts WHERE id <= 3 ORDER BY id', 0.5, 1) d
WHERE d.id <= g$q$);
-- a parameter from a subquery in the arguments: rescans compute again when it changes
SELECT g, (SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM cs_pts WHERE id <= ' || g, 0.5, 1))
FROM generate_series(1, 3) g;
SELECT cs_explain($q$
SELECT g, (SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM cs_pts WHERE id <= ' || g, 0.5, 1))
FROM generate_series(1, 3) g$q$);
-- LATERAL keeps the Function Scan, and gives the same rows
SELECT v.e, count(*), count(cluster_id)
FROM (VALUES (0.5), (0.001)) v(e), LATERAL gpu_dbscan('SELECT id, f FROM cs_pts', v.e, 3)
GROUP BY v.e ORDER BY v.e;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;

-- a prepared statement, 10 executions (generic plans from the sixth)
PREPARE p(float8, int) AS
  SELECT count(*), count(cluster_id) FROM gpu_dbscan('SELECT id, f FROM cs_pts', $1, $2);
EXECUTE p(0.5, 3); EXECUTE p(0.5, 3); EXECUTE p(0.5, 3); EXECUTE p(0.5, 3); EXECUTE p(0.5, 3);
EXECUTE p(0.5, 3); EXECUTE p(0.5, 3); EXECUTE p(0.5, 3); EXECUTE p(0.001, 3); EXECUTE p(0.5, 3);
EXPLAIN (COSTS OFF) EXECUTE p(0.5, 3);
DEALLOCATE p;

-- errors are those of the function
SELECT * FROM gpu_dbscan('SELECT id, f FROM cs_pts', -1, 3);
SELECT * FROM gpu_dbscan('DELETE FROM cs_pts RETURNING id, f', 0.5, 3);
SELECT * FROM gpu_kmeans_assign('SELECT id, f FROM cs_pts', NULL);
SELECT * FROM gpu_dbscan(NULL, 0.5, 3);
SELECT count(*) FROM cs_pts;

-- the caller's privileges: EXECUTE and the inner query's SELECT
CREATE ROLE cs_user;
REVOKE EXECUTE ON FUNCTION gpu_hdbscan(text, integer, integer, double precision, text, boolean, integer, text, text) FROM PUBLIC;
SET ROLE cs_user;
SELECT * FROM gpu_hdbscan('SELECT id, f FROM cs_pts', 5);
SELECT * FROM gpu_dbscan('SELECT id, f FROM cs_pts', 0.5, 3);
RESET ROLE;
GRANT EXECUTE ON FUNCTION gpu_hdbscan(text, integer, integer, double precision, text, boolean, integer, text, text) TO PUBLIC;
DROP ROLE cs_user;

DROP FUNCTION cs_same(text);
DROP FUNCTION cs_explain(text);
DROP TABLE cs_pts;
