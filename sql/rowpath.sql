-- The row path: the gather of feature arrays, the result's tuplestore, the
-- planner's estimates and parallel plans of the user's query.

-- gpuclust.output_mem: memory a result may hold before it goes to a file
LOAD 'gpuclust';
SHOW gpuclust.output_mem;
SET gpuclust.output_mem = '64kB';
SHOW gpuclust.output_mem;
RESET gpuclust.output_mem;

-- NaN and infinities in real[] are found wherever they are: first, second
-- and third element, the last of an odd count, and the first bad one is named
SELECT * FROM gpu_dbscan('SELECT 1, ARRAY[''NaN'', 1, 2]::real[]', 1, 2);
SELECT * FROM gpu_dbscan('SELECT 2, ARRAY[0, ''Infinity'', 2]::real[]', 1, 2);
SELECT * FROM gpu_dbscan('SELECT 3, ARRAY[0, 1, ''-Infinity'']::real[]', 1, 2);
SELECT * FROM gpu_dbscan('SELECT g, array_append(array_fill(0.5::real, ARRAY[256]), CASE WHEN g = 7 THEN ''NaN''::real ELSE 1 END) FROM generate_series(1, 9) g', 1, 2);
SELECT * FROM gpu_dbscan('SELECT 5, ARRAY[0, ''Infinity'', ''NaN'']::real[]', 1, 2);
-- the largest and smallest reals, negative zero and subnormals are values
SELECT count(*), count(cluster_id) AS clustered
FROM gpu_dbscan('SELECT g, ARRAY[3.4028235e38, -3.4028235e38, -0.0, 1.4e-45, -1.2e-40]::real[] FROM generate_series(1, 3) g', 1, 2, device => 'cpu');
-- double precision[]: the first bad element is named, whichever check fails
SELECT * FROM gpu_dbscan('SELECT 6, ARRAY[1, 1e-50, ''NaN'']::float8[]', 1, 2);
SELECT * FROM gpu_dbscan('SELECT 6, ARRAY[1, ''NaN'', 1e-50]::float8[]', 1, 2);
SELECT * FROM gpu_dbscan('SELECT 6, ARRAY[1, 2, 1e300]::float8[]', 1, 2);
SELECT * FROM gpu_dbscan('SELECT 6, ARRAY[1, 2, ''-Infinity'']::float8[]', 1, 2);

-- a result larger than work_mem and output_mem goes to a temporary file and
-- reads back the same as one held in memory
CREATE TABLE rowpath_t AS
  SELECT g AS id, ARRAY[(g % 100) * 0.5, (g / 100) % 50 + (g % 7) * 0.01]::real[] AS f
  FROM generate_series(1, 30000) g;
INSERT INTO rowpath_t SELECT 30000 + g, ARRAY[1e6 + g, -1e6]::real[] FROM generate_series(1, 5) g;
SET work_mem = '64kB';
SET gpuclust.output_mem = '64kB';
CREATE TEMP TABLE spilled AS
  SELECT row_number() OVER () AS pos, * FROM gpu_dbscan('SELECT id, f FROM rowpath_t ORDER BY id', 0.6, 4, device => 'cpu');
RESET gpuclust.output_mem;
CREATE TEMP TABLE in_memory AS
  SELECT row_number() OVER () AS pos, * FROM gpu_dbscan('SELECT id, f FROM rowpath_t ORDER BY id', 0.6, 4, device => 'cpu');
RESET work_mem;
SELECT count(*) AS rows, count(DISTINCT cluster_id) AS clusters, count(*) - count(cluster_id) AS noise
FROM in_memory;
SELECT count(*) AS differing FROM
  ((TABLE spilled EXCEPT TABLE in_memory) UNION ALL (TABLE in_memory EXCEPT TABLE spilled)) d;
-- output order is the query's order
SELECT bool_and(id = pos) AS in_query_order FROM in_memory WHERE id <= 30000;

-- the developer setting gpuclust.gather_huge_pages changes no answer
-- (buffers of several huge pages: 5,000 rows of 300 reals)
SET gpuclust.gather_huge_pages = on;
SHOW gpuclust.gather_huge_pages;
CREATE TEMP TABLE huge AS SELECT * FROM gpu_kmeans('SELECT g, array_fill((g % 17)::real, ARRAY[300]) FROM generate_series(1, 5000) g', 4, seed => 1, device => 'cpu');
RESET gpuclust.gather_huge_pages;
CREATE TEMP TABLE small AS SELECT * FROM gpu_kmeans('SELECT g, array_fill((g % 17)::real, ARRAY[300]) FROM generate_series(1, 5000) g', 4, seed => 1, device => 'cpu');
SELECT (SELECT count(*) FROM huge) AS rows,
       (SELECT count(*) FROM ((TABLE huge EXCEPT TABLE small) UNION ALL (TABLE small EXCEPT TABLE huge)) d) AS differing;

-- parallel labels: RESTRICTED from PostgreSQL 17 (subtransactions in
-- parallel mode), UNSAFE before; gpuclust_devices, gpuclust_defaults, the GPU
-- service's views (gpuclust_service, gpuclust_service_requests), the window
-- functions and the per-row k-means functions and aggregates run no query: SAFE;
-- gpu_kmeans_fit_distributed runs distributed queries from the leader, and the
-- per-shard functions it calls on the workers (gpu_kmeans_shard_*) are UNSAFE too
SELECT proname, proparallel = CASE WHEN proname IN ('gpuclust_devices', 'gpuclust_defaults', 'gpuclust_service',
                                                      'gpuclust_service_requests') OR proname LIKE 'gpu_cluster_%'
                                     OR proname ~ '^gpu_kmeans_(step|state|predict|distance|row_hash|sample)' THEN 's'
                                   WHEN proname = 'gpu_kmeans_fit_distributed' OR proname LIKE 'gpu_kmeans_shard_%' THEN 'u'
                                   WHEN current_setting('server_version_num')::int >= 170000 THEN 'r'
                                   ELSE 'u' END AS label_ok,
       prosupport::regproc AS support
FROM pg_proc WHERE proname LIKE 'gpu%' AND proname <> 'gpuclust_support' ORDER BY proname;

-- the rest of a statement may use workers; the function runs in the leader
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SELECT count(*), count(DISTINCT d.cluster_id) AS clusters
FROM gpu_dbscan('SELECT id, f FROM rowpath_t WHERE id % 3 = 0', 0.6, 4, device => 'cpu') d
JOIN rowpath_t t USING (id);
-- and the user's query may use workers: the same answer as a serial plan
-- when the query fixes its order
CREATE TEMP TABLE par AS SELECT * FROM gpu_kmeans('SELECT id, f FROM rowpath_t WHERE id % 2 = 0 ORDER BY id', 5, seed => 3, device => 'cpu');
SET max_parallel_workers_per_gather = 0;
CREATE TEMP TABLE ser AS SELECT * FROM gpu_kmeans('SELECT id, f FROM rowpath_t WHERE id % 2 = 0 ORDER BY id', 5, seed => 3, device => 'cpu');
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
SELECT (SELECT count(*) FROM par) AS rows,
       (SELECT count(*) FROM ((TABLE par EXCEPT TABLE ser) UNION ALL (TABLE ser EXCEPT TABLE par)) d) AS differing;


-- the gather's buffers start at the planner's estimate of the rows: an
-- estimate far above or far below the rows changes no answer, and an error
-- past the estimate names its row
CREATE FUNCTION rowpath_rows(lim int) RETURNS TABLE (id int, f real[])
  LANGUAGE plpgsql ROWS 1000000 AS $$
BEGIN RETURN QUERY SELECT t.id, t.f FROM rowpath_t t WHERE t.id <= lim ORDER BY t.id; END $$;
CREATE FUNCTION rowpath_rows_few(lim int) RETURNS TABLE (id int, f real[])
  LANGUAGE plpgsql ROWS 5000 AS $$
BEGIN RETURN QUERY SELECT t.id, t.f FROM rowpath_t t WHERE t.id <= lim ORDER BY t.id; END $$;
CREATE TEMP TABLE direct AS SELECT * FROM gpu_dbscan('SELECT id, f FROM rowpath_t WHERE id <= 20000 ORDER BY id', 0.6, 4, device => 'cpu');
CREATE TEMP TABLE over AS SELECT * FROM gpu_dbscan('SELECT id, f FROM rowpath_rows(20000)', 0.6, 4, device => 'cpu');
CREATE TEMP TABLE under AS SELECT * FROM gpu_dbscan('SELECT id, f FROM rowpath_rows_few(20000)', 0.6, 4, device => 'cpu');
SELECT (SELECT count(*) FROM direct) AS rows,
       (SELECT count(*) FROM ((TABLE direct EXCEPT TABLE over) UNION ALL (TABLE over EXCEPT TABLE direct)) d) AS differing_over,
       (SELECT count(*) FROM ((TABLE direct EXCEPT TABLE under) UNION ALL (TABLE under EXCEPT TABLE direct)) d) AS differing_under;
-- wide rows (300 reals), 12,000 of them against an estimate of 5,000
CREATE FUNCTION rowpath_wide(bad int) RETURNS TABLE (id int, f real[])
  LANGUAGE plpgsql ROWS 5000 AS $$
BEGIN RETURN QUERY SELECT g, array_append(array_fill((g % 13)::real, ARRAY[299]), CASE WHEN g = bad THEN 'NaN'::real ELSE (g % 5)::real END)
  FROM generate_series(1, 12000) g; END $$;
SELECT count(*) AS rows, count(DISTINCT cluster_id) AS clusters, count(*) - count(cluster_id) AS noise
FROM gpu_dbscan('SELECT id, f FROM rowpath_wide(0)', 0.5, 3, device => 'cpu');
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM rowpath_wide(11000)', 0.5, 3, device => 'cpu');
DROP FUNCTION rowpath_rows(int), rowpath_rows_few(int), rowpath_wide(int);

-- toasted feature arrays (out of line and compressed in line, of 2.4 kB and
-- 8.8 kB) read the same as the same arrays in memory, over many batches of
-- the gather's detoasting
CREATE TABLE rowpath_toast (id int, f float8[], g float8[]);
ALTER TABLE rowpath_toast ALTER COLUMN f SET STORAGE EXTERNAL;
INSERT INTO rowpath_toast
  SELECT i, array_append(array_fill((i % 11)::float8, ARRAY[299]), (i % 3) * 0.25),
         array_append(array_fill((i % 7)::float8, ARRAY[1099]), (i % 5) * 0.25)
  FROM generate_series(1, 4000) i;
SELECT bool_and(pg_column_size(f) > 2400) AS f_out_of_line, bool_and(pg_column_size(g) < 2000) AS g_compressed
FROM rowpath_toast;
CREATE TEMP TABLE toasted_f AS SELECT * FROM gpu_dbscan('SELECT id, f FROM rowpath_toast', 0.1, 3, device => 'cpu');
CREATE TEMP TABLE plain_f AS SELECT * FROM gpu_dbscan('SELECT id, f[1:300] FROM rowpath_toast', 0.1, 3, device => 'cpu');
CREATE TEMP TABLE toasted_g AS SELECT * FROM gpu_dbscan('SELECT id, g FROM rowpath_toast', 0.1, 3, device => 'cpu');
CREATE TEMP TABLE plain_g AS SELECT * FROM gpu_dbscan('SELECT id, g[1:1100] FROM rowpath_toast', 0.1, 3, device => 'cpu');
SELECT (SELECT count(DISTINCT cluster_id) FROM toasted_f) AS clusters_f,
       (SELECT count(*) FROM ((TABLE toasted_f EXCEPT TABLE plain_f) UNION ALL (TABLE plain_f EXCEPT TABLE toasted_f)) d) AS differing_f,
       (SELECT count(DISTINCT cluster_id) FROM toasted_g) AS clusters_g,
       (SELECT count(*) FROM ((TABLE toasted_g EXCEPT TABLE plain_g) UNION ALL (TABLE plain_g EXCEPT TABLE toasted_g)) d) AS differing_g;
DROP TABLE rowpath_toast;

-- gpuclust.gather_prefault (on by default: a thread faults in feature buffers
-- of 64 MB and more where cpu_threads is above 1) changes no answer, also
-- when the rows outgrow the estimate or an error stops the gather
CREATE FUNCTION rowpath_big(n int, bad int) RETURNS TABLE (id int, f real[])
  LANGUAGE plpgsql ROWS 17000 AS $$
BEGIN RETURN QUERY SELECT g, array_append(array_fill((g % 5)::real, ARRAY[999]), CASE WHEN g = bad THEN 'Infinity'::real ELSE (g % 3)::real END)
  FROM generate_series(1, n) g; END $$;
SET gpuclust.gather_prefault = on;
SET gpuclust.cpu_threads = 2;
SHOW gpuclust.gather_prefault;
CREATE TEMP TABLE prefault AS SELECT * FROM gpu_kmeans('SELECT g, array_fill((g % 7)::real, ARRAY[1000]) FROM generate_series(1, 17000) g', 4, seed => 1, device => 'cpu');
CREATE TEMP TABLE prefault_grown AS SELECT * FROM gpu_kmeans('SELECT id, f FROM rowpath_big(20000, 0)', 4, seed => 1, device => 'cpu');
SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM rowpath_big(17000, 16500)', 4, seed => 1, device => 'cpu');
SET gpuclust.gather_prefault = off;
CREATE TEMP TABLE no_prefault AS SELECT * FROM gpu_kmeans('SELECT g, array_fill((g % 7)::real, ARRAY[1000]) FROM generate_series(1, 17000) g', 4, seed => 1, device => 'cpu');
CREATE TEMP TABLE no_prefault_grown AS SELECT * FROM gpu_kmeans('SELECT id, f FROM rowpath_big(20000, 0)', 4, seed => 1, device => 'cpu');
SELECT (SELECT count(*) FROM prefault) AS rows,
       (SELECT count(*) FROM ((TABLE prefault EXCEPT TABLE no_prefault) UNION ALL (TABLE no_prefault EXCEPT TABLE prefault)) d) AS differing,
       (SELECT count(*) FROM prefault_grown) AS rows_grown,
       (SELECT count(*) FROM ((TABLE prefault_grown EXCEPT TABLE no_prefault_grown) UNION ALL (TABLE no_prefault_grown EXCEPT TABLE prefault_grown)) d) AS differing_grown;
RESET gpuclust.gather_prefault;
RESET gpuclust.cpu_threads;
DROP FUNCTION rowpath_big(int, int);

DROP TABLE rowpath_t;
