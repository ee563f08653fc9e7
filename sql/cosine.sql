-- metric => 'cosine': the distance of rows a and b is 1 - cos(a, b),
-- computed as half the squared Euclidean distance of the rows scaled to unit
-- length in double precision.  Rows of one direction coincide whatever
-- their lengths.
CREATE TABLE rays (id bigint PRIMARY KEY, f double precision[]);
INSERT INTO rays VALUES
  (1, '{1,0}'), (2, '{100,1}'), (3, '{0.01,0}'), (4, '{5,0.2}'),
  (5, '{0,1}'), (6, '{0.1,20}'), (7, '{-0.05,3}'),
  (8, '{-1,-1}');

-- DBSCAN: two directions and a lone one; eps 0.01 is about 8 degrees
SELECT * FROM gpu_dbscan('SELECT id, f FROM rays ORDER BY id', eps => 0.01, min_pts => 2, metric => 'cosine');
SELECT * FROM gpu_dbscan('SELECT id, f::real[] FROM rays ORDER BY id', 0.01, 2, metric => 'COSINE');
-- Euclidean, for contrast: lengths matter
SELECT * FROM gpu_dbscan('SELECT id, f FROM rays ORDER BY id', 0.01, 2);

-- k-means with the cosine metric is spherical k-means: unit centroids, the
-- distance is the cosine distance to the row's centroid
SELECT id, cluster_id, round(distance::numeric, 9) AS distance
FROM gpu_kmeans('SELECT id, f FROM rays ORDER BY id', 3, metric => 'cosine',
                initial_centroids => ARRAY[[1, 0], [0, 5], [-1, -1]]);
SELECT cluster_id, (SELECT array_agg(round(c::numeric, 9)) FROM unnest(centroid) c) AS centroid,
       size, round(inertia::numeric, 9) AS inertia
FROM gpu_kmeans_centroids('SELECT id, f FROM rays ORDER BY id', 3, metric => 'cosine',
                          initial_centroids => ARRAY[[1, 0], [0, 5], [-1, -1]]);
-- the given centroids are directions too: [2, 0] is the direction of [1, 0]
SELECT id, cluster_id, round(distance::numeric, 9) AS distance
FROM gpu_kmeans_assign('SELECT id, f FROM rays ORDER BY id', ARRAY[[2, 0], [0, 3]], metric => 'cosine');

-- density peaks: dc and delta in cosine units
SELECT id, cluster_id, round(rho::numeric, 6) AS rho, round(delta::numeric, 9) AS delta, is_center
FROM gpu_density_peaks('SELECT id, f FROM rays ORDER BY id', n_clusters => 3, dc => 0.01,
                       kernel => 'cutoff', metric => 'cosine') ORDER BY id;

-- errors: a zero row has no direction; the row is named
INSERT INTO rays VALUES (9, '{0,0}');
SELECT * FROM gpu_dbscan('SELECT id, f FROM rays ORDER BY id', 0.01, 2, metric => 'cosine');
SELECT * FROM gpu_kmeans('SELECT id, f FROM rays ORDER BY id', 2, metric => 'cosine');
SELECT * FROM gpu_density_peaks('SELECT id, f FROM rays ORDER BY id', 2, metric => 'cosine');
-- ... but it is an ordinary row for the Euclidean metric
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM rays ORDER BY id', 0.01, 2);
DELETE FROM rays WHERE id = 9;
SELECT * FROM gpu_kmeans_assign('SELECT id, f FROM rays', ARRAY[[1, 0], [0, 0]], metric => 'cosine');
SELECT * FROM gpu_kmeans('SELECT id, f FROM rays', 2, metric => 'cosine',
                         initial_centroids => ARRAY[[0, 0], [1, 1]]);
SELECT * FROM gpu_dbscan('SELECT id, f FROM rays', 0.01, 2, metric => 'manhattan');
SELECT * FROM gpu_density_peaks('SELECT id, f FROM rays', 2, metric => 'angular');
-- NULL means the default
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM rays', 0.01, 2, metric => NULL);
DROP TABLE rays;
