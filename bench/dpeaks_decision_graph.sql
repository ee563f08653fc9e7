-- The sample set and the query behind doc/decision_graph.png (see
-- bench/dpeaks_decision_graph.py).  psql -f bench/dpeaks_decision_graph.sql
CREATE EXTENSION IF NOT EXISTS gpuclust;
-- 31 blobs of 100 rows (D31-like) from PostgreSQL's seeded random()
SELECT setseed(0.31);
CREATE TEMP TABLE sample_blobs AS
  WITH centres AS (SELECT c, 2 + random() * 26 AS cx, 2 + random() * 26 AS cy
                     FROM generate_series(0, 30) c)
  SELECT g AS id,
         (cx + (random() + random() + random() + random() - 2) * 1.0)::real AS x,
         (cy + (random() + random() + random() + random() - 2) * 1.0)::real AS y
    FROM generate_series(1, 3100) g JOIN centres ON c = g % 31;
\copy (SELECT b.id, b.x, b.y, r.cluster_id, r.rho, r.delta, r.is_center FROM gpu_density_peaks('SELECT id, x, y FROM sample_blobs', rho_min => 20, delta_min => 1) r JOIN sample_blobs b USING (id) ORDER BY b.id) TO '/tmp/decision_graph.csv' CSV HEADER
