-- k-means on the CPU against PostGIS ST_ClusterKMeans, 1M 2-D rows, k = 20.
--   psql -X -f bench/kmeans_postgis.sql   (needs postgis and gpuclust)
-- Prints the wall time of each (\timing) and how the two partitions compare.
\set ON_ERROR_STOP on
CREATE EXTENSION IF NOT EXISTS postgis;
CREATE EXTENSION IF NOT EXISTS gpuclust;
SELECT setseed(0.25);
DROP TABLE IF EXISTS km_bench;
CREATE TABLE km_bench AS
SELECT i::bigint AS id, x, y, ST_MakePoint(x, y) AS geom
FROM (SELECT i, (random() * 1000)::real AS x, (random() * 1000)::real AS y
      FROM generate_series(1, 1000000) i) s;
VACUUM ANALYZE km_bench;
SELECT postgis_full_version() ~ 'POSTGIS="3' AS postgis3;

\timing on
-- PostGIS (k-means++ start, iterates until no row changes)
CREATE TEMP TABLE pg_km AS SELECT id, ST_ClusterKMeans(geom, 20) OVER () AS cid FROM km_bench;
-- gpuclust on the CPU, default stopping rule (tol = 1e-4 of the feature variance)
CREATE TEMP TABLE gc_km AS
  SELECT id, cluster_id AS cid FROM gpu_kmeans('SELECT id, x, y FROM km_bench', 20, device => 'cpu');
-- gpuclust on the CPU, until no row changes (PostGIS's rule)
CREATE TEMP TABLE gc_km0 AS
  SELECT id, cluster_id AS cid FROM gpu_kmeans('SELECT id, x, y FROM km_bench', 20, tol => 0,
                                                max_iter => 1000, device => 'cpu');
\timing off

-- inertia of each answer (sum of squared distances to the cluster means)
WITH a AS (SELECT 'postgis' AS who, id, cid FROM pg_km
           UNION ALL SELECT 'gpuclust', id, cid FROM gc_km
           UNION ALL SELECT 'gpuclust tol 0', id, cid FROM gc_km0),
     m AS (SELECT who, cid, avg(x) AS mx, avg(y) AS my FROM a JOIN km_bench USING (id) GROUP BY who, cid)
SELECT who, round(sum((x - mx) ^ 2 + (y - my) ^ 2)::numeric / 1e6, 3) AS inertia_millions
FROM a JOIN km_bench USING (id) JOIN m USING (who, cid)
GROUP BY who ORDER BY who;
