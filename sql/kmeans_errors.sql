-- gpu_kmeans / gpu_kmeans_centroids: every bad argument is an ERROR with a
-- SQLSTATE and a DETAIL or HINT that says what to do.

\i sql/include/report_error.sql

CREATE TABLE kme (id int, x real, y real);
INSERT INTO kme VALUES (1, 0, 0), (2, 0, 1), (3, 5, 5), (4, 5, 6);

-- k below 1, above the number of rows, NULL; an empty query gives no rows
-- (no clusters), as for the other functions
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', 0)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', -2)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', 5)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_centroids('SELECT id, x, y FROM kme', 5)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', NULL)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme WHERE false', 1)$$);
SELECT count(*) FROM gpu_kmeans('SELECT id, x, y FROM kme WHERE false', 3);
SELECT count(*) FROM gpu_kmeans_centroids('SELECT id, x, y FROM kme WHERE false', 3);
SELECT count(*) FROM gpu_kmeans_centroids('SELECT id, ARRAY[x, y] FROM kme WHERE false', 2,
  initial_centroids => ARRAY[[0, 0], [5, 5]]::float8[]);

-- max_iter below 1; tol negative, not a number, infinite
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', 2, max_iter => 0)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', 2, tol => -1e-4)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', 2, tol => 'NaN')$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_centroids('SELECT id, x, y FROM kme', 2, tol => 'infinity')$$);

-- unknown init (the names are case-insensitive)
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', 2, init => 'kmeans||')$$);
SELECT count(*) FROM gpu_kmeans('SELECT id, x, y FROM kme', 2, init => 'RANDOM');

-- initial_centroids: one-dimensional, wrong number of rows or columns, NULL, NaN, infinity
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', 2,
  initial_centroids => ARRAY[0, 0, 5, 5]::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', 2,
  initial_centroids => ARRAY[[0, 0], [5, 5], [1, 1]]::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', 2,
  initial_centroids => ARRAY[[0, 0, 0], [5, 5, 5]]::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', 2,
  initial_centroids => ARRAY[[0, 0], [5, NULL]]::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', 2,
  initial_centroids => ARRAY[[0, 'NaN'], [5, 5]]::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_centroids('SELECT id, x, y FROM kme', 2,
  initial_centroids => ARRAY[[0, 0], ['-infinity', 5]]::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', 2,
  initial_centroids => '{}'::float8[])$$);

-- centroids follow the features' rules, with their SQLSTATE, DETAIL and HINT:
-- at most 1e150 in magnitude in double precision (else both squared distances
-- overflow and a row goes to the farther centroid), within real in single
-- precision; the same for the features themselves, for comparison
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_assign('SELECT 1, 0::float8', '{{3e154},{2e154}}')$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_assign('SELECT 1, 3e154::float8', '{{3},{2}}')$$);
SELECT cluster_id, distance FROM gpu_kmeans_assign('SELECT 1, 0::float8', '{{1e150},{-9e149}}');
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_assign('SELECT 1, 0::float8', '{{3},{-2e151}}')$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_assign('SELECT 1, 0::float8', '{{3},{NaN}}')$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_assign('SELECT 1, 0::float8', '{{3},{Infinity}}')$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_assign('SELECT id, x, y FROM kme', '{{0,0},{1e39,5}}')$$);
-- within real, so accepted; on the CPU (the GPU's single-precision products refuse
-- coordinates whose squares could pass the float limit, see the README)
SELECT cluster_id FROM gpu_kmeans_assign('SELECT id, x, y FROM kme', '{{0,0},{1e30,5}}', device => 'cpu') ORDER BY id;
SELECT cluster_id FROM gpu_kmeans_assign('SELECT id, x::float8, y::float8 FROM kme', '{{0,0},{1e39,5}}') ORDER BY id;
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', 2,
  initial_centroids => ARRAY[[0, 0], [1e39, 5]]::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_centroids('SELECT id, x::float8, y::float8 FROM kme', 2,
  initial_centroids => ARRAY[[0, 0], [5, 2e150]]::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x::float8, y::float8 FROM kme', 2,
  initial_centroids => ARRAY[[0, 0], [5, -1e151]]::float8[], device => 'cpu')$$);

-- a NULL query, an unknown device
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans(NULL, 2)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', 2, device => 'tpu')$$);
