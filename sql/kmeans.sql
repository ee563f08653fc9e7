-- gpu_kmeans and gpu_kmeans_centroids: known answers on small, well-separated
-- data, every input form, the defaults, and determinism.  The output does not
-- depend on the device: the same expected file passes with
-- gpuclust.device = gpu.

CREATE TABLE km (id bigint, x real, y real);
INSERT INTO km VALUES
  (1, 0, 0), (2, 0, 1), (3, 1, 0), (4, 1, 1),
  (5, 10, 10), (6, 10, 11), (7, 11, 10), (8, 11, 11),
  (9, 0, 10), (10, 0, 11), (11, 1, 10), (12, 1, 11);

-- Given initial centroids: cluster j starts at row j of the array and keeps
-- its number; every row is sqrt(0.5) from its centroid.
SELECT id, cluster_id, round(distance::numeric, 6) AS distance
FROM gpu_kmeans('SELECT id, x, y FROM km', 3,
                initial_centroids => ARRAY[[0, 0], [10, 10], [0, 10]]::float8[])
ORDER BY id;

SELECT cluster_id, centroid, size, round(inertia::numeric, 6) AS inertia
FROM gpu_kmeans_centroids('SELECT id, x, y FROM km', 3,
                          initial_centroids => ARRAY[[0, 10], [0, 0], [10, 10]]::float8[])
ORDER BY cluster_id;

-- k-means++ and random find the three groups for these seeds; the numbering
-- follows the initial centroids, so the groups are listed by their rows.
SELECT s AS seed, g.init, array_agg(members ORDER BY members) AS groups
FROM generate_series(0, 2) s,
     (VALUES ('k-means++'), ('random')) g(init),
     LATERAL (SELECT array_agg(id ORDER BY id) AS members
              FROM gpu_kmeans('SELECT id, x, y FROM km', 3, seed => s, init => g.init)
              GROUP BY cluster_id) c
GROUP BY s, g.init
ORDER BY g.init, s;

-- The same call twice gives the same rows (2000 rows, 6 clusters, 3 features).
CREATE TABLE km3 AS
SELECT i AS id,
       ARRAY[(i % 6) * 7 + sin(i) * 2, (i % 6 % 2) * 9 + cos(i * 1.7) * 2,
             (i % 6 / 3) * 8 + sin(i * 0.3) * 2]::real[] AS f
FROM generate_series(1, 2000) i;

SELECT count(*) AS rows,
       count(*) FILTER (WHERE a.cluster_id = b.cluster_id AND a.distance = b.distance) AS identical
FROM gpu_kmeans('SELECT id, f FROM km3', 6, seed => 11) a
JOIN gpu_kmeans('SELECT id, f FROM km3', 6, seed => 11) b USING (id);

-- The six generated groups are found: each cluster holds one residue of id mod 6.
SELECT count(DISTINCT cluster_id) AS clusters,
       bool_and(n_residues = 1) AS pure
FROM (SELECT cluster_id, count(DISTINCT id % 6) AS n_residues
      FROM gpu_kmeans('SELECT id, f FROM km3', 6, seed => 3)
      GROUP BY cluster_id) s;

-- The centroid rows agree with the row output: sizes, inertia = sum of squared distances.
SELECT sum(c.size) AS rows,
       abs(sum(c.inertia) - (SELECT sum(distance * distance)
                             FROM gpu_kmeans('SELECT id, f FROM km3', 6, seed => 3)))
         < 1e-9 * sum(c.inertia) AS inertia_matches,
       min(array_length(c.centroid, 1)) AS d
FROM gpu_kmeans_centroids('SELECT id, f FROM km3', 6, seed => 3) c;

-- Features as double precision[] and as several scalar columns give the same answer.
SELECT count(*) AS agree
FROM gpu_kmeans('SELECT id, ARRAY[x, y]::float8[] FROM km', 3,
                initial_centroids => ARRAY[[0, 0], [10, 10], [0, 10]]::float8[]) a
JOIN gpu_kmeans('SELECT id::int, x::float8, y::numeric FROM km', 3,
                initial_centroids => ARRAY[[0, 0], [10, 10], [0, 10]]::float8[]) b
  USING (id, cluster_id);

-- NULL for an optional argument means its default.
SELECT count(*) FROM gpu_kmeans('SELECT id, x, y FROM km', 3, NULL, NULL, NULL, NULL, NULL);

-- k = the number of rows: every row its own cluster, no inertia.
SELECT count(DISTINCT cluster_id) AS clusters, max(distance) AS max_distance
FROM gpu_kmeans('SELECT id, x, y FROM km', 12);

-- A starting centroid far from every row: its cluster is re-seeded with the
-- row farthest from its centroid, and no cluster ends empty.
SELECT cluster_id, size
FROM gpu_kmeans_centroids('SELECT id, x, y FROM km', 4,
                          initial_centroids => ARRAY[[0, 0], [10, 10], [0, 10], [1000, 1000]]::float8[])
ORDER BY cluster_id;

-- max_iter => 1 stops after the first move; tol => 0 runs until nothing changes.
SELECT cluster_id, centroid
FROM gpu_kmeans_centroids('SELECT id, x, y FROM km', 3, max_iter => 1, tol => 0,
                          initial_centroids => ARRAY[[0, 0], [10, 10], [0, 10]]::float8[])
ORDER BY cluster_id;

-- One cluster: its centroid is the mean.
SELECT round(centroid[1]::numeric, 9) AS x, round(centroid[2]::numeric, 9) AS y, size
FROM gpu_kmeans_centroids('SELECT id, x, y FROM km', 1);

-- Identical rows: nothing to separate.  k-means++ falls back to uniform
-- draws, the empty clusters are re-seeded and emptied again, and in the end
-- every row is in cluster 0 (the lowest number on a tie).
CREATE TABLE kmsame AS SELECT i::bigint AS id, 1.5::real AS x, -2::real AS y FROM generate_series(1, 50) i;
SELECT cluster_id, centroid, size, inertia
FROM gpu_kmeans_centroids('SELECT id, x, y FROM kmsame', 3)
ORDER BY cluster_id;
