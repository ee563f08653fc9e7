-- gpuclust.cpu_blas: off keeps the CPU k-means on its exact loops instead of
-- OpenBLAS's checked product (d >= 64 and k >= 16 take the product where
-- OpenBLAS is installed); the answers are the same either way.
SET gpuclust.device = cpu;
CREATE TEMP TABLE bpts AS
  SELECT i AS id,
         (SELECT array_agg(((i * 7919 + j * 104729) % 1000) / 1000.0 + (i % 5) * 3)::real[]
          FROM generate_series(1, 64) j) AS f
  FROM generate_series(1, 3000) i;
CREATE TEMP TABLE with_blas AS
  SELECT * FROM gpu_kmeans('SELECT id, f FROM bpts', 16, seed => 1);
SHOW gpuclust.cpu_blas;
SET gpuclust.cpu_blas = off;
SHOW gpuclust.cpu_blas;
SELECT count(*) AS rows,
       (SELECT count(*) FROM (SELECT * FROM gpu_kmeans('SELECT id, f FROM bpts', 16, seed => 1)
                              EXCEPT SELECT * FROM with_blas) d) AS differing
FROM with_blas;
RESET gpuclust.cpu_blas;
RESET gpuclust.device;
