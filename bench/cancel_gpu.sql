-- cancel_gpu.sql: statement_timeout on the GPU back end, with psql alone (the GPU
-- machine has no psycopg2 for bench/cancel_bench.py).  The cases of
-- cancel_bench.py and two of the pair engine's epilogues at 768 features; each call runs under statement_timeout = 1 s and must end
-- with "canceling statement due to statement timeout"; the Time line says when.
-- A call that ends well after 1 s ignored the timeout that long.
--   psql -X -f bench/cancel_gpu.sql
\set ON_ERROR_STOP 0
CREATE EXTENSION IF NOT EXISTS gpuclust;
\timing on
CREATE TEMP TABLE cancel_u10 AS SELECT g::bigint AS id,
    ARRAY(SELECT random() FROM generate_series(1, 10) WHERE g > 0)::real[] AS f
  FROM generate_series(1, 300000) g;
CREATE TEMP TABLE cancel_w500 AS SELECT g::bigint AS id,
    ARRAY(SELECT random() FROM generate_series(1, 500) WHERE g > 0)::real[] AS f
  FROM generate_series(1, 20000) g;
CREATE TEMP TABLE cancel_dp500 AS SELECT g::bigint AS id,
    ARRAY(SELECT random() FROM generate_series(1, 500) WHERE g > 0)::real[] AS f
  FROM generate_series(1, 50000) g;
CREATE TEMP TABLE cancel_w768 AS SELECT g::bigint AS id,
    ARRAY(SELECT random() FROM generate_series(1, 768) WHERE g > 0)::real[] AS f
  FROM generate_series(1, 50000) g;
CREATE TEMP TABLE cancel_same768 AS SELECT g::bigint AS id, array_fill(0.5::real, ARRAY[768]) AS f
  FROM generate_series(1, 50000) g;
CREATE TEMP TABLE cancel_sorted AS SELECT g::bigint AS id, g::float8 AS x
  FROM generate_series(1, 500000) g;
SET gpuclust.device = 'gpu';
SET statement_timeout = '1s';
\echo == DBSCAN, 300k x 10-D uniform, eps 1, min_pts 5 (one cell)
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM cancel_u10', 1, 5);
\echo == DBSCAN, 20k x 500-D, min_pts 2147483647
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM cancel_w500', 1, 2147483647);
\echo == density peaks, 50k x 500-D
SELECT count(*) FROM gpu_density_peaks('SELECT id, f FROM cancel_dp500', 5);
\echo == density peaks on the pair engine, 50k x 768-D, Gaussian rho (every pair canonical)
SELECT count(*) FROM gpu_density_peaks('SELECT id, f FROM cancel_w768', 5);
\echo == density peaks on the pair engine, 50k equal 768-D rows (delta prunes nothing)
SELECT count(*) FROM gpu_density_peaks('SELECT id, f FROM cancel_same768', 5, kernel => 'cutoff');
\echo == k-means, 500k sorted 1-D rows, k 1000 identical initial centroids
SELECT count(*) FROM gpu_kmeans('SELECT id, x FROM cancel_sorted ORDER BY id', 1000,
    initial_centroids => array_fill(0::float8, ARRAY[1000, 1]));
\echo == the session still answers
RESET statement_timeout;
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM cancel_u10 LIMIT 1000', 0.1, 5);
