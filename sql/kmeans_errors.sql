-- gpu_kmeans / gpu_kmeans_centroids: every bad argument is an ERROR with a
-- SQLSTATE and a DETAIL or HINT that says what to do.

\i sql/include/report_error.sql

CREATE TABLE kme (id int, x real, y real);
INSERT INTO kme VALUES (1, 0, 0), (2, 0, 1), (3, 5, 5), (4, 5, 6);

-- k below 1, above the number of rows, NULL; an empty query
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', 0)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', -2)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', 5)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_centroids('SELECT id, x, y FROM kme', 5)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', NULL)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme WHERE false', 1)$$);

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

-- a NULL query, an unknown device
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans(NULL, 2)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kme', 2, device => 'tpu')$$);
