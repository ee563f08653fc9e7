-- gpu_density_peaks: the decision graph (rho, delta) and the clusters on small
-- sets with known centres.  Every figure here is hardware-independent: the
-- CPU and the GPU compute bit-identical rho and delta; they are rounded only
-- to keep the output short.

-- three groups of different density and one far point
CREATE TABLE dp (id bigint PRIMARY KEY, f real[]);
INSERT INTO dp VALUES
  -- A: a 3 x 3 lattice around (0, 0), the densest group
  (1, '{-0.1,-0.1}'), (2, '{0,-0.1}'), (3, '{0.1,-0.1}'),
  (4, '{-0.1,0}'),    (5, '{0,0}'),    (6, '{0.1,0}'),
  (7, '{-0.1,0.1}'),  (8, '{0,0.1}'),  (9, '{0.1,0.1}'),
  -- B: a cross around (3, 0)
  (10, '{3,0}'), (11, '{3.1,0}'), (12, '{2.9,0}'), (13, '{3,0.1}'), (14, '{3,-0.1}'),
  -- C: a smaller cross around (0, 4)
  (15, '{0,4}'), (16, '{0.1,4}'), (17, '{-0.1,4}'), (18, '{0,4.1}'),
  -- a far point
  (19, '{10,10}');

-- gaussian kernel, three centres: the middles of A, B and C, numbered by density
SELECT id, cluster_id, round(rho::numeric, 6) AS rho, round(delta::numeric, 6) AS delta, is_center
  FROM gpu_density_peaks('SELECT id, f FROM dp ORDER BY id', n_clusters => 3, dc => 0.25);

-- cutoff kernel: rho counts the neighbours closer than dc (ties broken by query order)
SELECT id, cluster_id, rho, round(delta::numeric, 6) AS delta, is_center
  FROM gpu_density_peaks('SELECT id, f FROM dp ORDER BY id', n_clusters => 3, dc => 0.15,
                         kernel => 'cutoff');

-- the same query in reverse order: equal densities now break the other way
SELECT id, cluster_id, rho, round(delta::numeric, 6) AS delta, is_center
  FROM gpu_density_peaks('SELECT id, f FROM dp ORDER BY id DESC', n_clusters => 3, dc => 0.15,
                         kernel => 'cutoff');

-- thresholds instead of n_clusters: the far point is a centre of its own
-- when delta_min is below its delta and rho_min is zero
SELECT id, cluster_id, is_center
  FROM gpu_density_peaks('SELECT id, f FROM dp ORDER BY id', dc => 0.25,
                         rho_min => 0, delta_min => 2.5)
 WHERE is_center;
SELECT cluster_id, count(*) AS members
  FROM gpu_density_peaks('SELECT id, f FROM dp', dc => 0.25, rho_min => 1, delta_min => 2.5)
 GROUP BY cluster_id ORDER BY cluster_id;

-- the densest point is a centre even when the thresholds exclude it
SELECT id, cluster_id, is_center
  FROM gpu_density_peaks('SELECT id, f FROM dp ORDER BY id', dc => 0.25,
                         rho_min => 1e9, delta_min => 1e9)
 WHERE is_center;

-- n_clusters = every row: each point its own cluster, numbered in density order
SELECT id, cluster_id FROM gpu_density_peaks('SELECT id, f FROM dp WHERE id >= 10 ORDER BY id',
                                             n_clusters => 10, dc => 0.15, kernel => 'cutoff');

-- dc from neighbor_rate is the k-th smallest distance over ordered pairs,
-- k = ceil(rate * n * (n - 1)): the cutoff densities match those with that dc
WITH pairs AS (
  SELECT sqrt(((a.f[1]::float8 - b.f[1]::float8) ^ 2) + ((a.f[2]::float8 - b.f[2]::float8) ^ 2)) AS d
    FROM dp a, dp b WHERE a.id <> b.id),
kth AS (
  SELECT d FROM pairs ORDER BY d OFFSET ceil(0.1 * 19 * 18) - 1 LIMIT 1),
est AS (
  SELECT * FROM gpu_density_peaks('SELECT id, f FROM dp', n_clusters => 3, neighbor_rate => 0.1,
                                  kernel => 'cutoff')),
given AS (
  SELECT g.* FROM kth, LATERAL gpu_density_peaks('SELECT id, f FROM dp', n_clusters => 3,
                                                 dc => kth.d, kernel => 'cutoff') g)
SELECT (SELECT round(d::numeric, 6) FROM kth) AS dc,
       count(*) AS rows,
       count(*) FILTER (WHERE e.rho = g.rho AND e.delta = g.delta AND e.cluster_id = g.cluster_id) AS same
  FROM est e JOIN given g USING (id);

-- duplicate rows: equal density, the first in the query is denser
SELECT id, cluster_id, round(rho::numeric, 6) AS rho, delta, is_center
  FROM gpu_density_peaks('SELECT * FROM (VALUES (1, 1::real, 1::real), (2, 1, 1), (3, 1, 1), (4, 5, 5), (5, 5, 5)) v(id, x, y)',
                         n_clusters => 2, dc => 1);

-- a dc so small that dc * dc underflows (gaussian kernel): exact duplicates
-- still contribute 1 each, every other pair 0
SELECT id, cluster_id, rho, is_center
  FROM gpu_density_peaks('SELECT * FROM (VALUES (1, 1::real, 1::real), (2, 1, 1), (3, 1, 1), (4, 5, 5), (5, 5, 5), (6, 0, 0)) v(id, x, y)',
                         n_clusters => 2, dc => 1e-170)
 ORDER BY id;

-- one row: rho 0, delta 0, its own centre
SELECT * FROM gpu_density_peaks('SELECT 7, ARRAY[1, 2]::real[]', n_clusters => 1, dc => 1);

-- no rows: an empty result
SELECT * FROM gpu_density_peaks('SELECT id, f FROM dp WHERE false', n_clusters => 1);

-- scalar feature columns; five dimensions (no grid index) give the same answer
-- as the same points in two
SELECT count(*) AS rows,
       count(*) FILTER (WHERE a.cluster_id = b.cluster_id AND a.rho = b.rho AND a.delta = b.delta
                          AND a.is_center = b.is_center) AS same
  FROM gpu_density_peaks('SELECT id, f[1] AS x, f[2] AS y FROM dp', n_clusters => 3, dc => 0.25) a
  JOIN gpu_density_peaks('SELECT id, f[1], f[2], 0::real, 0::real, 0::real FROM dp', n_clusters => 3, dc => 0.25) b
 USING (id);

-- a generated set of four blobs (PostgreSQL's seeded random(): the same rows
-- everywhere), 4000 rows, dc from neighbor_rate: every blob is one cluster
SELECT setseed(0.25);
CREATE TABLE blobs AS
  SELECT g AS id, c AS blob,
         (cx + (random() + random() + random() + random() - 2) * 0.6)::real AS x,
         (cy + (random() + random() + random() + random() - 2) * 0.6)::real AS y
    FROM generate_series(1, 4000) g,
         LATERAL (SELECT g % 4 AS c) k,
         LATERAL (SELECT (ARRAY[0, 5, 0, 5])[c + 1] AS cx, (ARRAY[0, 0, 5, 5])[c + 1] AS cy) m;
SELECT kernel, count(DISTINCT cluster_id) AS clusters,
       count(*) FILTER (WHERE is_center) AS centers,
       count(*) FILTER (WHERE pure) AS rows_in_pure_clusters
  FROM (SELECT k AS kernel, r.cluster_id, r.is_center,
               min(b.blob) OVER w = max(b.blob) OVER w AS pure
          FROM unnest(ARRAY['gaussian', 'cutoff']) k,
               LATERAL gpu_density_peaks('SELECT id, x, y FROM blobs ORDER BY id', n_clusters => 4,
                                         kernel => k) r
          JOIN blobs b ON b.id = r.id
        WINDOW w AS (PARTITION BY k, r.cluster_id)) s
 GROUP BY kernel ORDER BY kernel;
