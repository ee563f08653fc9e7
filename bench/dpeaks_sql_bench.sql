-- End-to-end timings of gpu_density_peaks through SQL (gather, compute,
-- output), read from the timing NOTICE.  psql -f bench/dpeaks_sql_bench.sql
-- 31 blobs in a 30 x 30 square (sd 0.6, sum of uniforms), 46,000 and 1,000,000 rows.
\timing on
SET gpuclust.timing = on;
SELECT setseed(0.5);
CREATE TEMP TABLE centres AS
  SELECT c, random() * 30 AS cx, random() * 30 AS cy FROM generate_series(0, 30) c;
CREATE TEMP TABLE b1m AS
  SELECT g AS id,
         (cx + (random() + random() + random() + random() - 2) * 1.04)::real AS x,
         (cy + (random() + random() + random() + random() - 2) * 1.04)::real AS y
    FROM generate_series(1, 1000000) g JOIN centres ON c = g % 31;
CREATE TEMP TABLE b46k AS SELECT * FROM b1m WHERE id <= 46000;
VACUUM ANALYZE b1m;
VACUUM ANALYZE b46k;

SELECT count(DISTINCT cluster_id) AS clusters FROM gpu_density_peaks('SELECT id, x, y FROM b46k', n_clusters => 31, device => 'gpu');
SELECT count(DISTINCT cluster_id) AS clusters FROM gpu_density_peaks('SELECT id, x, y FROM b46k', n_clusters => 31, kernel => 'cutoff', device => 'gpu');
SELECT count(DISTINCT cluster_id) AS clusters FROM gpu_density_peaks('SELECT id, x, y FROM b1m', n_clusters => 31, kernel => 'cutoff', device => 'gpu');
SELECT count(DISTINCT cluster_id) AS clusters FROM gpu_density_peaks('SELECT id, x, y FROM b1m', n_clusters => 31, device => 'gpu');
SELECT count(DISTINCT cluster_id) AS clusters FROM gpu_density_peaks('SELECT id, x, y FROM b46k', n_clusters => 31, kernel => 'cutoff', device => 'cpu');
-- CPU and GPU agree row for row on the 46k set, both kernels
SELECT k AS kernel, count(*) AS rows,
       count(*) FILTER (WHERE c.cluster_id = g.cluster_id AND c.rho = g.rho AND c.delta = g.delta) AS identical
  FROM unnest(ARRAY['gaussian', 'cutoff']) k,
       LATERAL gpu_density_peaks('SELECT id, x, y FROM b46k', n_clusters => 31, kernel => k, device => 'cpu') c
  JOIN LATERAL gpu_density_peaks('SELECT id, x, y FROM b46k', n_clusters => 31, kernel => k, device => 'gpu') g
       USING (id)
 GROUP BY k;
