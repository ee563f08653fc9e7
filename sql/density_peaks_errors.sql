-- gpu_density_peaks: every bad argument is an ERROR with a SQLSTATE, a DETAIL
-- or HINT that says what to do.

\i sql/include/report_error.sql

CREATE TABLE dpe (id int, x real, y real);
INSERT INTO dpe VALUES (1, 0, 0), (2, 0, 1), (3, 1, 0), (4, 5, 5);

-- n_clusters below 1, above the rows
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id, x, y FROM dpe', n_clusters => 0)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id, x, y FROM dpe', n_clusters => -3)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id, x, y FROM dpe', n_clusters => 5)$$);

-- dc zero, negative, infinite, not a number
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id, x, y FROM dpe', 2, dc => 0)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id, x, y FROM dpe', 2, dc => -1)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id, x, y FROM dpe', 2, dc => 'infinity')$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id, x, y FROM dpe', 2, dc => 'NaN')$$);

-- neighbor_rate outside (0, 1)
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id, x, y FROM dpe', 2, neighbor_rate => 0)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id, x, y FROM dpe', 2, neighbor_rate => 1)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id, x, y FROM dpe', 2, neighbor_rate => -0.5)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id, x, y FROM dpe', 2, neighbor_rate => 'NaN')$$);

-- unknown kernel (the names are case-insensitive)
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id, x, y FROM dpe', 2, dc => 1, kernel => 'epanechnikov')$$);
SELECT count(*) FROM gpu_density_peaks('SELECT id, x, y FROM dpe', 2, dc => 1, kernel => 'Cutoff');

-- neither n_clusters nor both thresholds; n_clusters and a threshold
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id, x, y FROM dpe', dc => 1)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id, x, y FROM dpe', dc => 1, rho_min => 1)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id, x, y FROM dpe', dc => 1, delta_min => 1)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id, x, y FROM dpe', 2, dc => 1, rho_min => 1)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id, x, y FROM dpe', dc => 1, rho_min => 'NaN', delta_min => 1)$$);

-- NULL arguments that have no "not given" meaning
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks(NULL, 2)$$);
-- NULL neighbor_rate and kernel mean their defaults
SELECT count(*) FROM gpu_density_peaks('SELECT id, x, y FROM dpe', 2, NULL, NULL, NULL);

-- dc cannot be derived from one row, nor when the quantile distance is zero
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT 1, 0::real, 0::real', 1)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT g, 1::real, 1::real FROM generate_series(1, 10) g', 1)$$);

-- the input contract is the one of gpu_dbscan
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id FROM dpe', 2, dc => 1)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_density_peaks('SELECT id, x, NULL::real FROM dpe', 2, dc => 1)$$);
