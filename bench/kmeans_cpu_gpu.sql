-- gpu_kmeans on the CPU against the GPU, through SQL, on the GPU machine:
--   psql -X -f bench/kmeans_cpu_gpu.sql
-- For each data set: rows, how many rows got a different cluster, the largest
-- distance difference among rows in the same cluster, the relative difference
-- of the total inertia, and the largest centroid difference.  Separated
-- blobs must give 0 differing labels and an inertia difference below 1e-6.
\set ON_ERROR_STOP on
CREATE EXTENSION IF NOT EXISTS gpuclust;
SELECT setseed(0.5);

-- 10M rows, 2 features, 8 blobs of half-width 0.5 on a grid 10 apart
CREATE TABLE kc10m AS
SELECT i::bigint AS id, ((i % 8) % 4 * 10 + random() - 0.5)::real AS x,
       ((i % 8) / 4 * 10 + random() - 0.5)::real AS y
FROM generate_series(1, 10000000) i;
-- 1M rows, 16 features, 40 blobs
CREATE TABLE kc16 AS
SELECT i::bigint AS id,
       (SELECT array_agg(((i % 40) * (t * 7 % 13) % 41 * 6 + random() - 0.5)::real ORDER BY t)
        FROM generate_series(1, 16) t) AS f
FROM generate_series(1, 1000000) i;
-- 200K rows, 64 features, 24 blobs (the GEMM form on the GPU)
CREATE TABLE kc64 AS
SELECT i::bigint AS id,
       (SELECT array_agg(((i % 24) * (t * 5 % 17) % 29 * 4 + random() - 0.5)::real ORDER BY t)
        FROM generate_series(1, 64) t) AS f
FROM generate_series(1, 200000) i;

CREATE FUNCTION km_compare(q text, k int, init text DEFAULT 'k-means++')
RETURNS TABLE (rows bigint, differing_labels bigint, max_distance_diff float8,
               inertia_rel_diff float8, max_centroid_diff float8)
LANGUAGE sql AS $$
  WITH c AS (SELECT * FROM gpu_kmeans(q, k, seed => 1, init => init, device => 'cpu')),
       g AS (SELECT * FROM gpu_kmeans(q, k, seed => 1, init => init, device => 'gpu')),
       cc AS (SELECT * FROM gpu_kmeans_centroids(q, k, seed => 1, init => init, device => 'cpu')),
       gc AS (SELECT * FROM gpu_kmeans_centroids(q, k, seed => 1, init => init, device => 'gpu'))
  SELECT count(*),
         count(*) FILTER (WHERE c.cluster_id <> g.cluster_id),
         max(abs(c.distance - g.distance)) FILTER (WHERE c.cluster_id = g.cluster_id),
         abs(sum(c.distance * c.distance) - sum(g.distance * g.distance)) / sum(c.distance * c.distance),
         (SELECT max(abs(u.a - u.b))
          FROM cc JOIN gc USING (cluster_id), unnest(cc.centroid, gc.centroid) AS u(a, b))
  FROM c JOIN g USING (id)
$$;

\echo 10M x 2, k = 8, k-means++
SELECT * FROM km_compare('SELECT id, x, y FROM kc10m', 8);
\echo 10M x 2, k = 8, random
SELECT * FROM km_compare('SELECT id, x, y FROM kc10m', 8, 'random');
\echo 1M x 16, k = 40, k-means++
SELECT * FROM km_compare('SELECT id, f FROM kc16', 40);
\echo 200K x 64, k = 24, k-means++
SELECT * FROM km_compare('SELECT id, f FROM kc64', 24);

-- timing of one call each way (gpuclust.timing NOTICE), 10M x 2 k = 8
SET gpuclust.timing = on;
SELECT count(*) FROM gpu_kmeans('SELECT id, x, y FROM kc10m', 8, seed => 1, device => 'cpu');
SELECT count(*) FROM gpu_kmeans('SELECT id, x, y FROM kc10m', 8, seed => 1, device => 'gpu');
