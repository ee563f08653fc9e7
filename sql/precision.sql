-- Features are kept and computed in the precision of the input: real,
-- real[], vector and halfvec in single precision, double precision, numeric,
-- integer columns and geometry in double precision (gpuclust.precision =
-- auto), unless gpuclust.precision says single or double.

-- Coordinates with five decimals and a round eps: as double precision (and
-- as PostGIS computes it) each pair lies within eps = 0.05; rounded to
-- single precision each pair lies just beyond it.
LOAD 'gpuclust';
CREATE TABLE prec_line (id bigint PRIMARY KEY, x double precision, y double precision);
INSERT INTO prec_line VALUES (1, 23.72754, 0), (2, 23.77754, 0), (3, -73.98657, 10), (4, -73.93657, 10);

SHOW gpuclust.precision;
SELECT * FROM gpu_dbscan('SELECT id, x, y FROM prec_line ORDER BY id', 0.05, 2);
SELECT * FROM gpu_dbscan('SELECT id, ARRAY[x, y] FROM prec_line ORDER BY id', 0.05, 2);
SELECT * FROM gpu_dbscan('SELECT id, x::numeric, y::integer FROM prec_line ORDER BY id', 0.05, 2);
-- the same values stored as real: single precision, both pairs apart
SELECT * FROM gpu_dbscan('SELECT id, x::real, y::real FROM prec_line ORDER BY id', 0.05, 2);
SELECT * FROM gpu_dbscan('SELECT id, ARRAY[x, y]::real[] FROM prec_line ORDER BY id', 0.05, 2);
-- one real column among double ones: double precision
SELECT * FROM gpu_dbscan('SELECT id, x, y::real FROM prec_line ORDER BY id', 0.05, 2);

-- the setting overrides the input's precision
SET gpuclust.precision = single;
SELECT * FROM gpu_dbscan('SELECT id, x, y FROM prec_line ORDER BY id', 0.05, 2);
SET gpuclust.precision = double;
-- real values widened exactly: still the rounded values, still apart
SELECT * FROM gpu_dbscan('SELECT id, x::real, y::real FROM prec_line ORDER BY id', 0.05, 2);
SET gpuclust.precision = 'Double';
SHOW gpuclust.precision;
SET gpuclust.precision = half;
RESET gpuclust.precision;

-- k-means: the row 0.1 is nearer to centroid 0 (distance 0.1) than to
-- centroid 1 (0.1000000015) in double precision; as a real it is 0.10000000149
-- and nearer to centroid 1.
CREATE TABLE prec_one (id bigint PRIMARY KEY, v double precision);
INSERT INTO prec_one VALUES (1, 0.1);
SELECT id, cluster_id, round(distance::numeric, 12) AS distance
FROM gpu_kmeans_assign('SELECT id, v FROM prec_one', ARRAY[[0], [0.2000000015]]);
-- (on the CPU: the GPU takes the nearest centroid of a real row with d <= 32
-- in single precision, where the centroids round to a tie)
SELECT id, cluster_id, round(distance::numeric, 12) AS distance
FROM gpu_kmeans_assign('SELECT id, v::real FROM prec_one', ARRAY[[0], [0.2000000015]], device => 'cpu');
SELECT cluster_id, centroid, size FROM gpu_kmeans_centroids('SELECT id, x, y FROM prec_line ORDER BY id', 2,
       initial_centroids => ARRAY[[23.7, 0], [-74, 10]]);

-- density peaks, cutoff kernel: rho counts the rows closer than dc; with
-- dc = 0.05 + 1e-15 the pair of each end of the line is closer in double
-- precision, not in single precision
SELECT id, rho FROM gpu_density_peaks('SELECT id, x, y FROM prec_line ORDER BY id', n_clusters => 2,
       dc => 0.050000000000001, kernel => 'cutoff') ORDER BY id;
SELECT id, rho FROM gpu_density_peaks('SELECT id, x::real, y::real FROM prec_line ORDER BY id', n_clusters => 2,
       dc => 0.050000000000001, kernel => 'cutoff') ORDER BY id;

-- values beyond the range of real are fine in double precision, refused in
-- single precision; beyond 1e150 a squared distance could overflow double
-- precision, and such a value is refused in both
CREATE TABLE prec_wide (id bigint PRIMARY KEY, x double precision);
INSERT INTO prec_wide VALUES (1, 1e100), (2, 1.0000000000001e100), (3, -1e100);
SELECT * FROM gpu_dbscan('SELECT id, x FROM prec_wide ORDER BY id', 1e88, 2);
SET gpuclust.precision = single;
SELECT * FROM gpu_dbscan('SELECT id, x FROM prec_wide ORDER BY id', 1e88, 2);
RESET gpuclust.precision;
INSERT INTO prec_wide VALUES (4, -2e150);
SELECT * FROM gpu_dbscan('SELECT id, x FROM prec_wide ORDER BY id', 1e88, 2);
SELECT * FROM gpu_dbscan('SELECT id, ARRAY[x] FROM prec_wide ORDER BY id', 1e88, 2);
SELECT * FROM gpu_dbscan('SELECT id, x::numeric FROM prec_wide ORDER BY id', 1e88, 2);
DELETE FROM prec_wide WHERE id = 4;
-- NaN and infinities are refused in both
INSERT INTO prec_wide VALUES (4, 'NaN');
SELECT * FROM gpu_dbscan('SELECT id, x FROM prec_wide ORDER BY id', 1, 2);
DROP TABLE prec_line, prec_one, prec_wide;
