-- gpu_dbscan: semantics on small sets with known answers.
-- Every answer here is hardware-independent: the CPU and the GPU agree exactly.

CREATE TABLE pts (id bigint PRIMARY KEY, f real[]);
INSERT INTO pts VALUES
  (1, '{0,0}'), (2, '{0,0.1}'), (3, '{0.1,0}'), (4, '{0.1,0.1}'),
  (5, '{5,5}'), (6, '{5,5.1}'), (7, '{5.1,5}'),
  (8, '{20,20}');

-- two clusters and one noise point, numbered by first appearance
SELECT * FROM gpu_dbscan('SELECT id, f FROM pts ORDER BY id', eps => 0.2, min_pts => 3);

-- output follows the query's order, and numbering follows it too
SELECT * FROM gpu_dbscan('SELECT id, f FROM pts ORDER BY id DESC', 0.2, 3);

-- min_pts counts the point itself: with 4 the second group is noise
SELECT * FROM gpu_dbscan('SELECT id, f FROM pts ORDER BY id', 0.2, 4);

-- min_pts 1: every point is core; isolated points are clusters of their own
SELECT * FROM gpu_dbscan('SELECT id, f FROM pts ORDER BY id', 0.05, 1);

-- min_pts 2: a pair is a cluster
SELECT * FROM gpu_dbscan('SELECT id, f FROM pts ORDER BY id', 0.15, 2);

-- scalar feature columns of mixed types, and integer ids of each width
SELECT * FROM gpu_dbscan('SELECT id::int, f[1]::numeric AS x, f[2]::float8 AS y FROM pts ORDER BY id', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT id::smallint, f[1]::int AS x, f[2]::bigint AS y FROM pts ORDER BY id', 1, 3);

-- A border point within eps of two clusters joins the cluster of the first
-- core point, in query order, whose neighbourhood contains it.
CREATE TABLE line (id int, x real);
INSERT INTO line VALUES
  (1, 0), (2, 0.05), (3, 0.1), (4, 0.15), (5, 0.2),
  (6, 1.0), (7, 1.05), (8, 1.1), (9, 1.15), (10, 1.2),
  (11, 0.6);
SELECT * FROM gpu_dbscan('SELECT id, x FROM line ORDER BY id', 0.42, 4);
SELECT * FROM gpu_dbscan('SELECT id, x FROM line ORDER BY id DESC', 0.42, 4);
-- the border point first: its cluster is numbered 0
SELECT * FROM gpu_dbscan('SELECT id, x FROM line ORDER BY id = 11 DESC, id', 0.42, 4);

-- duplicate points: five copies are a cluster with min_pts 5, noise with 6
CREATE TABLE dup AS SELECT g AS id, ARRAY[1.5, -2.5]::real[] AS f FROM generate_series(1, 5) g;
SELECT * FROM gpu_dbscan('SELECT id, f FROM dup', 0.001, 5);
SELECT * FROM gpu_dbscan('SELECT id, f FROM dup', 0.001, 6);

-- a point at exactly eps is a neighbour
SELECT * FROM gpu_dbscan('SELECT * FROM (VALUES (1, 0::real), (2, 0.5::real), (3, 1::real)) v(id, x)', 0.5, 3);

-- high dimension: 1024 features, two groups of three points
CREATE TABLE hd AS
  SELECT i AS id,
         ARRAY(SELECT ((CASE WHEN i <= 3 THEN 0 ELSE 10 END) + 0.001 * i + 0.0001 * k)::real
               FROM generate_series(1, 1024) k) AS f
  FROM generate_series(1, 7) i;
SELECT * FROM gpu_dbscan('SELECT id, f FROM hd ORDER BY id', 0.1, 3);
SELECT count(*) AS n, count(DISTINCT cluster_id) AS clusters, count(*) FILTER (WHERE is_core) AS core
  FROM gpu_dbscan('SELECT id, f::float8[] FROM hd', 0.1, 2);

-- an empty result gives no rows
SELECT * FROM gpu_dbscan('SELECT id, f FROM pts WHERE false', 0.2, 3);

-- a larger set: a 40 x 40 grid of spacing 1 plus far points; eps 1 links
-- each grid point to its 4 neighbours (5 with itself)
CREATE TABLE grid AS
  SELECT (i * 40 + j)::bigint AS id, ARRAY[i, j]::real[] AS f
  FROM generate_series(0, 39) i, generate_series(0, 39) j
  UNION ALL SELECT 10000 + k, ARRAY[1000 + 10 * k, 0]::real[] FROM generate_series(1, 5) k;
SELECT count(*) AS n,
       count(DISTINCT cluster_id) AS clusters,
       count(*) FILTER (WHERE is_core) AS core,
       count(*) FILTER (WHERE cluster_id IS NULL) AS noise
  FROM gpu_dbscan('SELECT id, f FROM grid', 1, 5);
-- corners have 3 neighbours with themselves: border points of the one cluster
SELECT id, cluster_id, is_core FROM gpu_dbscan('SELECT id, f FROM grid ORDER BY id', 1, 5)
  WHERE id IN (0, 39, 1560, 1599, 1, 41, 10001) ORDER BY id;
