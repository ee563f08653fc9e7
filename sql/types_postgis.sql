-- PostGIS geometry points as features: in the query of the set-returning
-- functions and in the window functions, next to ST_ClusterDBSCAN and
-- ST_ClusterKMeans.  Where PostGIS is not installed (the PostgreSQL 17 and 18
-- bundles) the test says so and stops (expected output types_postgis_1.out).
SELECT NOT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'postgis') AS skip_postgis \gset
\if :skip_postgis
\echo 'postgis is not installed: test skipped'
\quit
\endif
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS postgis;
RESET client_min_messages;

CREATE TABLE geo_pts (id int PRIMARY KEY, g int, geom geometry);
INSERT INTO geo_pts VALUES
  (1, 1, 'POINT(0 0)'), (2, 1, 'POINT(0 0.1)'), (3, 1, 'POINT(0.1 0)'),
  (4, 1, 'POINT(5 5)'), (5, 1, 'POINT(5 5.1)'), (6, 1, 'POINT(5.1 5)'), (7, 1, 'POINT(20 20)'),
  (8, 2, 'SRID=4326;POINT(1 1)'), (9, 2, 'SRID=4326;POINT(1 1.1)'), (10, 2, 'SRID=4326;POINT(9 9)'),
  (11, 3, NULL), (12, 3, 'POINT(3 3)');

-- a geometry column is the features x, y: the same answer as the coordinates
SELECT a.id, a.cluster_id, a.cluster_id IS NOT DISTINCT FROM b.cluster_id AS same_as_xy
FROM gpu_dbscan('SELECT id, geom FROM geo_pts WHERE g = 1 ORDER BY id', 0.2, 3) a
JOIN gpu_dbscan('SELECT id, ST_X(geom), ST_Y(geom) FROM geo_pts WHERE g = 1 ORDER BY id', 0.2, 3) b USING (id)
ORDER BY a.id;
-- SRID is ignored
SELECT * FROM gpu_dbscan('SELECT id, geom FROM geo_pts WHERE g = 2 ORDER BY id', 0.2, 2);

-- Z is a third feature, M is ignored; any SRID
SELECT cluster_id, centroid, size
FROM gpu_kmeans_centroids($$SELECT * FROM (VALUES (1, 'POINT Z (1 2 3)'::geometry),
                                                  (2, 'SRID=3857;POINT Z (3 4 5)'),
                                                  (3, 'POINT ZM (5 6 7 100)')) v$$, 1);
SELECT cluster_id, centroid, size
FROM gpu_kmeans_centroids($$SELECT * FROM (VALUES (1, 'POINT M (1 2 3)'::geometry),
                                                  (2, 'POINT M (3 4 -50)')) v$$, 1);
-- coordinates are kept in double precision, as PostGIS keeps them ...
SELECT centroid FROM gpu_kmeans_centroids($$SELECT 1, 'POINT(0.1 16777217)'::geometry$$, 1);
-- ... or rounded to real with gpuclust.precision = single
SET gpuclust.precision = single;
SELECT centroid FROM gpu_kmeans_centroids($$SELECT 1, 'POINT(0.1 16777217)'::geometry$$, 1);
RESET gpuclust.precision;

-- refused with the row's id: empty points, other geometry types, NULL in a query,
-- points of different dimensions, values beyond 1e150 (in single precision:
-- values real cannot hold)
SELECT * FROM gpu_dbscan($$SELECT * FROM (VALUES (1, 'POINT(1 2)'::geometry), (7, 'POINT EMPTY')) v$$, 1, 2);
\echo :SQLSTATE
SELECT * FROM gpu_dbscan($$SELECT * FROM (VALUES (1, 'POINT(1 2)'::geometry), (8, 'LINESTRING(0 0, 1 1)')) v$$, 1, 2);
\echo :SQLSTATE
SELECT * FROM gpu_dbscan($$SELECT 9, 'MULTIPOINT((0 0), (1 1))'::geometry$$, 1, 2);
SELECT * FROM gpu_dbscan($$SELECT 10, 'POLYGON((0 0, 1 0, 1 1, 0 0))'::geometry$$, 1, 2);
SELECT * FROM gpu_dbscan($$SELECT 11, 'GEOMETRYCOLLECTION(POINT(0 0))'::geometry$$, 1, 2);
SELECT * FROM gpu_dbscan($$SELECT * FROM (VALUES (1, 'POINT(1 2)'::geometry), (12, NULL)) v$$, 1, 2);
SELECT * FROM gpu_dbscan($$SELECT * FROM (VALUES (1, 'POINT(1 2)'::geometry), (13, 'POINT Z (1 2 3)')) v$$, 1, 2);
SELECT * FROM gpu_dbscan($$SELECT 14, 'POINT(1e151 0)'::geometry$$, 1, 2);
SET gpuclust.precision = single;
SELECT * FROM gpu_dbscan($$SELECT 14, 'POINT(1e39 0)'::geometry$$, 1, 2);
SELECT * FROM gpu_dbscan($$SELECT 15, 'POINT(0 1e-50)'::geometry$$, 1, 2);
RESET gpuclust.precision;
-- a geometry is the only feature column; geography is not a feature type
SELECT * FROM gpu_dbscan($$SELECT 16, 'POINT(1 2)'::geometry, 3.0$$, 1, 2);
SELECT * FROM gpu_dbscan($$SELECT 17, 'POINT(1 2)'::geography$$, 1, 2);

-- window form next to PostGIS: the same clusters, NULL geometries NULL
SELECT id, g,
       gpu_cluster_dbscan(geom, 0.2, 2) OVER w AS gpuclust,
       ST_ClusterDBSCAN(geom, 0.2, 2) OVER w AS postgis
FROM geo_pts WINDOW w AS (PARTITION BY g ORDER BY id) ORDER BY id;
-- an empty point is an error in gpuclust (PostGIS gives it no cluster); as a
-- NULL feature it gets a NULL cluster
SELECT id, gpu_cluster_dbscan(geom, 1.5, 2) OVER (ORDER BY id)
FROM (VALUES (1, 'POINT(0 0)'::geometry), (2, 'POINT EMPTY'), (3, 'POINT(1 0)')) v(id, geom);
SELECT id, gpu_cluster_dbscan(CASE WHEN NOT ST_IsEmpty(geom) THEN geom END, 1.5, 2) OVER w AS gpuclust,
       ST_ClusterDBSCAN(geom, 1.5, 2) OVER w AS postgis
FROM (VALUES (1, 'POINT(0 0)'::geometry), (2, 'POINT EMPTY'), (3, 'POINT(1 0)')) v(id, geom)
WINDOW w AS (ORDER BY id) ORDER BY id;
SELECT id, gpu_cluster_dbscan(geom, 1.5, 2) OVER (PARTITION BY g ORDER BY id)
FROM (VALUES (1, 1, 'POINT(0 0)'::geometry), (2, 2, 'POINT(0 0)'), (3, 2, 'LINESTRING(0 0, 1 1)')) v(id, g, geom);
-- 3-D points cluster in three dimensions (ST_ClusterDBSCAN measures in 2-D)
SELECT id, gpu_cluster_dbscan(geom, 1.5, 2) OVER w AS gpuclust,
       gpu_cluster_dbscan(ST_Force2D(geom), 1.5, 2) OVER w AS gpuclust_2d,
       ST_ClusterDBSCAN(geom, 1.5, 2) OVER w AS postgis
FROM (VALUES (1, 'POINT Z (0 0 0)'::geometry), (2, 'POINT Z (1 0 100)')) v(id, geom)
WINDOW w AS (ORDER BY id) ORDER BY id;

-- k-means per group on separated groups: the same partition as ST_ClusterKMeans
CREATE TABLE geo_km AS
  SELECT g * 100 + i AS id, g, ST_MakePoint((i % 3) * 10 + (i % 2) * 0.5, i * 0.1 + g) AS geom
  FROM generate_series(1, 3) g, generate_series(1, 12) i;
SELECT g, bool_and(same) AS same_partition
FROM (SELECT g, count(DISTINCT a) = count(DISTINCT (a, b)) AND count(DISTINCT b) = count(DISTINCT (a, b)) AS same
        FROM (SELECT g, gpu_cluster_kmeans(geom, 3) OVER w AS a, ST_ClusterKMeans(geom, 3) OVER w AS b
                FROM geo_km WINDOW w AS (PARTITION BY g ORDER BY id)) s
       GROUP BY g) t
GROUP BY g ORDER BY g;
SELECT count(DISTINCT c) AS clusters, count(*) AS rows
FROM (SELECT gpu_cluster_kmeans(geom, 3) OVER (PARTITION BY g ORDER BY id) AS c FROM geo_km WHERE g = 1) s;

-- every serialized form a geometry point may have on disk, built byte by byte
-- (srid[3], flags, [extended flags], [bounding box], type, npoints,
-- coordinates; PostGIS reads each as the point it is): PostGIS 3's format
-- (flag 0x40) and PostGIS 2's, with and without a bounding box, with the
-- extended flags, with Z and M
CREATE FUNCTION pg_temp.raw_geometry(bytea, bytea) RETURNS geometry
  LANGUAGE internal IMMUTABLE STRICT AS 'byteacat';
CREATE TEMP TABLE raw_geoms (form text, hex text);
INSERT INTO raw_geoms VALUES
  ('v2', '000000400100000001000000000000000000f83f0000000000000440'),
  ('v1', '000000000100000001000000000000000000f83f0000000000000440'),
  ('v1 bbox', '000000040000c03f0000c03f00002040000020400100000001000000000000000000f83f0000000000000440'),
  ('v2 extended bbox', '0000005401000000000000000000c03f0000c03f00002040000020400100000001000000000000000000f83f0000000000000440'),
  ('v2 zm bbox', '000000470000c03f0000c03f0000204000002040000060400000604000001041000010410100000001000000000000000000f83f00000000000004400000000000000c400000000000002240'),
  ('v1 zm', '000000030100000001000000000000000000f83f00000000000004400000000000000c400000000000002240');
SELECT form, ST_AsText(pg_temp.raw_geometry(decode(hex, 'hex'), '')) AS postgis_reads,
       (SELECT centroid FROM gpu_kmeans_centroids(
          format($$SELECT 1, pg_temp.raw_geometry(decode(%L, 'hex'), '')$$, hex), 1)) AS gpuclust_reads
FROM raw_geoms;
-- a later serialization, and a truncated value
SELECT * FROM gpu_dbscan($$SELECT 1, pg_temp.raw_geometry('\x000000800100000001000000000000000000f83f0000000000000440', '')$$, 1, 1);
SELECT * FROM gpu_dbscan($$SELECT 1, pg_temp.raw_geometry('\x000000400100000001000000000000000000f83f', '')$$, 1, 1);
