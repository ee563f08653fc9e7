-- k-means as a model: greedy k-means++ (the default init), n_init, and
-- gpu_kmeans_assign applying fitted centroids to rows, with every error of
-- the new arguments and function.

\i sql/include/report_error.sql

-- seven clusters of rows with one decimal, many duplicates, one far outlier
CREATE TABLE kmm (id bigint, x real, y real);
INSERT INTO kmm
SELECT i, ((i % 7) * 10 + ((i * 37) % 11) / 10.0)::real, ((i % 7) * 3 + ((i * 53) % 13) / 10.0)::real
FROM generate_series(1, 3000) i;
INSERT INTO kmm VALUES (3001, 1000, -1000);

-- greedy k-means++ is the default, the plain one is still there; both give k clusters
SELECT count(DISTINCT cluster_id) FROM gpu_kmeans('SELECT id, x, y FROM kmm', 8);
SELECT count(DISTINCT cluster_id) FROM gpu_kmeans('SELECT id, x, y FROM kmm', 8, init => 'Plain-K-Means++');
SELECT count(*) FROM (
  SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kmm', 8)
  EXCEPT SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kmm', 8, init => 'k-means++', metric => 'euclidean')) d;

-- PostGIS ticket #3971: a 45 x 45 integer grid in 81 clusters, the smallest of 16 to 25 points
SELECT min(n) BETWEEN 16 AND 25 AS balanced, count(*) AS clusters
FROM (SELECT count(*) AS n
      FROM gpu_kmeans('SELECT x * 45 + y, x, y FROM generate_series(0, 44) x, generate_series(0, 44) y', 81)
      GROUP BY cluster_id) s;

-- n_init: 1 is the default; run 0 uses the seed itself, so more runs never do worse
SELECT count(*) FROM (
  SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kmm', 12, seed => 5)
  EXCEPT SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kmm', 12, seed => 5, n_init => 1)) d;
SELECT (SELECT sum(inertia) FROM gpu_kmeans_centroids('SELECT id, x, y FROM kmm', 12, seed => 5, n_init => 6))
    <= (SELECT sum(inertia) FROM gpu_kmeans_centroids('SELECT id, x, y FROM kmm', 12, seed => 5)) AS no_worse;
-- gpu_kmeans and gpu_kmeans_centroids keep the same run
SELECT count(*) FROM (
  SELECT cluster_id, size FROM gpu_kmeans_centroids('SELECT id, x, y FROM kmm', 12, seed => 5, n_init => 6)
  EXCEPT SELECT cluster_id, count(*) FROM gpu_kmeans('SELECT id, x, y FROM kmm', 12, seed => 5, n_init => 6)
         GROUP BY cluster_id) d;

-- gpu_kmeans_assign on the fitted centroids gives gpu_kmeans's labels and distances exactly
WITH model AS (
  SELECT array_agg(centroid ORDER BY cluster_id) AS c
  FROM gpu_kmeans_centroids('SELECT id, x, y FROM kmm', 9, seed => 2, n_init => 3)),
fit AS (SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kmm', 9, seed => 2, n_init => 3)),
applied AS (SELECT a.* FROM model, gpu_kmeans_assign('SELECT id, x, y FROM kmm', model.c) a)
SELECT count(*) AS rows, count(*) FILTER (WHERE f.cluster_id <> a.cluster_id) AS other_label,
       count(*) FILTER (WHERE f.distance <> a.distance) AS other_distance
FROM fit f JOIN applied a USING (id);

-- a model kept in a table; fit on a sample, assign every row
CREATE TABLE kmm_model AS
SELECT array_agg(centroid ORDER BY cluster_id) AS centroids
FROM gpu_kmeans_centroids('SELECT id, x, y FROM kmm WHERE id % 10 = 0', 7, seed => 1);
SELECT array_length(centroids, 1) AS k, array_length(centroids, 2) AS d FROM kmm_model;
CREATE TABLE kmm_assigned AS
SELECT a.* FROM kmm_model m, gpu_kmeans_assign('SELECT id, x, y FROM kmm', m.centroids) a;
-- every row's distance is the double-precision distance to its centroid, and off
-- near-ties (1e-4 relative: the GPU decides d <= 32 in FP32) its centroid is the nearest
WITH d AS (
  SELECT k.id, j - 1 AS cid,
         sqrt((k.x::float8 - m.centroids[j][1]) * (k.x::float8 - m.centroids[j][1]) +
              (k.y::float8 - m.centroids[j][2]) * (k.y::float8 - m.centroids[j][2])) AS dist
  FROM kmm k, kmm_model m, generate_series(1, array_length(m.centroids, 1)) j),
r AS (
  SELECT id, (array_agg(cid ORDER BY dist, cid))[1] AS nearest,
         (array_agg(dist ORDER BY dist, cid))[1] AS best,
         (array_agg(dist ORDER BY dist, cid))[2] AS second
  FROM d GROUP BY id)
SELECT count(*) AS rows,
       count(*) FILTER (WHERE a.distance <> (SELECT dist FROM d WHERE d.id = a.id AND d.cid = a.cluster_id)) AS bad_distance,
       count(*) FILTER (WHERE a.cluster_id <> r.nearest AND r.second > r.best * (1 + 1e-4)) AS not_nearest
FROM kmm_assigned a JOIN r USING (id);

-- one new row, and none
SELECT cluster_id, round(distance::numeric, 6) AS distance
FROM gpu_kmeans_assign('SELECT 1, 0.5::real, 0.25::real', ARRAY[[0, 0], [10, 10], [0, 0.5]]::float8[]);
SELECT cluster_id FROM gpu_kmeans_assign('SELECT 7, 5::real, 5::real', ARRAY[[0, 0], [10, 10]]::float8[]);
SELECT count(*) FROM kmm_model m, gpu_kmeans_assign('SELECT id, x, y FROM kmm WHERE false', m.centroids) a;
-- one centroid; an array feature column; three features
SELECT DISTINCT cluster_id FROM gpu_kmeans_assign('SELECT id, x, y FROM kmm', ARRAY[[3, 4]]::float8[]);
SELECT id, cluster_id, distance
FROM gpu_kmeans_assign('SELECT i, ARRAY[i, 0, 0]::real[] FROM generate_series(1, 3) i',
                       ARRAY[[0, 0, 0], [2, 0, 0]]::float8[]);

-- errors: n_init below 1, above 1 with initial_centroids; an unknown metric
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kmm', 2, n_init => 0)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_centroids('SELECT id, x, y FROM kmm', 2, n_init => -3)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kmm', 2, n_init => 2,
  initial_centroids => ARRAY[[0, 0], [5, 5]]::float8[])$$);
SELECT count(*) FROM gpu_kmeans('SELECT id, x, y FROM kmm', 2, n_init => NULL, metric => NULL);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans('SELECT id, x, y FROM kmm', 2, metric => 'chebyshev')$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_assign('SELECT id, x, y FROM kmm',
  ARRAY[[0, 0]]::float8[], metric => 'manhattan')$$);

-- errors of gpu_kmeans_assign: NULL, one-dimensional or empty centroids, a NULL, NaN
-- or infinite coordinate, other than d columns, a NULL query, an unknown device
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_assign('SELECT id, x, y FROM kmm', NULL)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_assign('SELECT id, x, y FROM kmm', ARRAY[0, 0]::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_assign('SELECT id, x, y FROM kmm', '{}'::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_assign('SELECT id, x, y FROM kmm',
  ARRAY[[0, 0], [NULL, 1]]::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_assign('SELECT id, x, y FROM kmm',
  ARRAY[[0, 'NaN'], [1, 1]]::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_assign('SELECT id, x, y FROM kmm',
  ARRAY[[0, 0], [1, '-infinity']]::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_assign('SELECT id, x, y FROM kmm',
  ARRAY[[0, 0, 0], [1, 1, 1]]::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_assign('SELECT id, x FROM kmm',
  ARRAY[[0, 0], [1, 1]]::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_assign(NULL, ARRAY[[0, 0]]::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_assign('SELECT id, x, y FROM kmm',
  ARRAY[[0, 0]]::float8[], device => 'tpu')$$);
