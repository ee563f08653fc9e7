-- The window functions gpu_cluster_dbscan and gpu_cluster_kmeans: clustering
-- per partition, NULL features, one-row, all-NULL and bad partitions.  Every
-- answer here is the same on the CPU and the GPU.

-- three groups; group 3 is one row, group 4 has only NULL features, group 5
-- has no rows with a feature at all but one
CREATE TABLE wpts (id int PRIMARY KEY, g int, f real[]);
INSERT INTO wpts VALUES
  (1, 1, '{0,0}'), (2, 1, '{0,0.1}'), (3, 1, '{0.1,0}'), (4, 1, NULL), (5, 1, '{5,5}'),
  (6, 1, '{5,5.1}'), (7, 1, '{5.1,5}'), (8, 1, '{20,20}'),
  (9, 2, '{1,1}'), (10, 2, '{1,1.1}'), (11, 2, '{9,9}'),
  (12, 3, '{7,7}'),
  (13, 4, NULL), (14, 4, NULL),
  (15, 5, NULL), (16, 5, '{3,3}');

-- DBSCAN per group: numbering from 0 in each partition, noise and NULL features NULL
SELECT id, g, gpu_cluster_dbscan(f, 0.2, 2) OVER (PARTITION BY g ORDER BY id) AS cluster
FROM wpts ORDER BY id;

-- min_pts 1: every row with a feature is in a cluster, a one-row partition too
SELECT id, g, gpu_cluster_dbscan(f, 0.2, 1) OVER (PARTITION BY g ORDER BY id) AS cluster
FROM wpts ORDER BY id;

-- the same answers as gpu_dbscan on each group's rows in the same order
SELECT w.g, count(*) AS rows_compared,
       bool_and(w.cluster IS NOT DISTINCT FROM s.cluster_id) AS same
FROM (SELECT id, g, gpu_cluster_dbscan(f, 0.2, 2) OVER (PARTITION BY g ORDER BY id) AS cluster
        FROM wpts) w
JOIN LATERAL gpu_dbscan(format('SELECT id, f FROM wpts WHERE g = %s AND f IS NOT NULL ORDER BY id', w.g),
                        0.2, 2) s ON s.id = w.id
GROUP BY w.g ORDER BY w.g;

-- ORDER BY decides border points and numbering: point 11 is within eps of
-- the cores of both groups, and joins the one reached first
CREATE TABLE wline (id int, x real);
INSERT INTO wline VALUES
  (1, 0), (2, 0.05), (3, 0.1), (4, 0.15), (5, 0.2),
  (6, 1.0), (7, 1.05), (8, 1.1), (9, 1.15), (10, 1.2),
  (11, 0.6);
SELECT id,
       gpu_cluster_dbscan(x, 0.42, 4) OVER (ORDER BY id) AS ascending,
       gpu_cluster_dbscan(x, 0.42, 4) OVER (ORDER BY id DESC) AS descending,
       gpu_cluster_dbscan(x, 0.42, 4) OVER (ORDER BY id = 11 DESC, id) AS border_first
FROM wline ORDER BY id;

-- the frame does not matter: each row's answer is that of the whole partition
SELECT id, gpu_cluster_dbscan(x, 0.42, 4) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND CURRENT ROW) AS cluster
FROM wline ORDER BY id;

-- every feature type: scalar columns of each numeric type and both array types
SELECT id,
       gpu_cluster_dbscan(x::float8, 0.42, 4) OVER w AS f8,
       gpu_cluster_dbscan(x::numeric, 0.42, 4) OVER w AS num,
       gpu_cluster_dbscan((x * 100)::int, 42, 4) OVER w AS int4,
       gpu_cluster_dbscan((x * 100)::smallint, 42, 4) OVER w AS int2,
       gpu_cluster_dbscan((x * 100)::bigint, 42, 4) OVER w AS int8,
       gpu_cluster_dbscan(ARRAY[x, 0]::float8[], 0.42, 4) OVER w AS f8_array
FROM wline WINDOW w AS (ORDER BY id) ORDER BY id;

-- eps and min_pts are read at each partition's first row, as in PostGIS
SELECT id, g, gpu_cluster_dbscan(f, CASE WHEN g = 1 THEN 0.2 ELSE 10 END, 2)
              OVER (PARTITION BY g ORDER BY id) AS cluster
FROM wpts WHERE g <= 2 ORDER BY id;

-- device per call: cpu, auto, or the setting (the result does not depend on it)
SELECT id, gpu_cluster_dbscan(f, 0.2, 2, device => 'cpu') OVER w AS cpu,
       gpu_cluster_dbscan(f, 0.2, 2, 'auto') OVER w AS auto,
       gpu_cluster_dbscan(f, 0.2, 2, NULL) OVER w AS setting
FROM wpts WHERE g = 2 WINDOW w AS (ORDER BY id) ORDER BY id;

-- k-means per group, with the row numbering of gpu_kmeans on the same rows
CREATE TABLE wkm (id int, g int, x real, y real);
INSERT INTO wkm
  SELECT g * 100 + i, g, (i % 3) * 10 + (i % 2) * 0.5 + g, (i % 3) * 10 + (i / 2 % 2) * 0.5
  FROM generate_series(1, 4) g, generate_series(1, 12) i;
INSERT INTO wkm VALUES (501, 5, NULL, NULL);
SELECT g, array_agg(members ORDER BY members) AS groups
FROM (SELECT g, array_agg(id ORDER BY id) AS members
        FROM (SELECT id, g, gpu_cluster_kmeans(ARRAY[x, y], 3, seed => 1)
                            OVER (PARTITION BY g ORDER BY id) AS c
                FROM wkm WHERE g <= 4) s
       GROUP BY g, c) t
GROUP BY g ORDER BY g;
SELECT w.g, count(*) AS rows_compared, bool_and(w.c = s.cluster_id) AS same
FROM (SELECT id, g, gpu_cluster_kmeans(ARRAY[x, y], 3, seed => 7, init => 'random')
                    OVER (PARTITION BY g ORDER BY id) AS c FROM wkm WHERE g <= 4) w
JOIN LATERAL gpu_kmeans(format('SELECT id, ARRAY[x, y] FROM wkm WHERE g = %s ORDER BY id', w.g),
                        3, seed => 7, init => 'random') s ON s.id = w.id
GROUP BY w.g ORDER BY w.g;
-- a partition of NULL features gives NULL clusters, whatever k (an array of
-- NULLs is not a NULL feature, and an error)
SELECT id, gpu_cluster_kmeans(CASE WHEN x IS NOT NULL THEN ARRAY[x, y] END, 3)
           OVER (PARTITION BY g ORDER BY id) AS c
FROM wkm WHERE g = 5;
SELECT id, gpu_cluster_kmeans(ARRAY[x, y], 3) OVER (PARTITION BY g ORDER BY id) AS c
FROM wkm WHERE g = 5;
-- every argument by name, NULL meaning the default
SELECT count(DISTINCT c) AS clusters, count(c) AS rows
FROM (SELECT gpu_cluster_kmeans(feature => ARRAY[x, y], k => 2, max_iter => NULL, tol => NULL,
                                seed => NULL, init => NULL, device => NULL)
             OVER (PARTITION BY g) AS c FROM wkm WHERE g = 1) s;

-- a bad row in one partition is an error of the statement that names the
-- row by its place in window order and the partition
SELECT id, gpu_cluster_dbscan(f, 0.2, 2) OVER (PARTITION BY g ORDER BY id)
FROM (VALUES (1, 1, '{0,0}'::real[]), (2, 2, '{1,1}'), (3, 2, '{1,NULL}')) v(id, g, f);
SELECT id, gpu_cluster_dbscan(f, 0.2, 2) OVER (PARTITION BY g ORDER BY id)
FROM (VALUES (1, 1, '{0,0}'::float8[]), (2, 2, '{1,1}'), (3, 2, '{1,1,1}')) v(id, g, f);
SELECT id, gpu_cluster_dbscan(f, 0.2, 2) OVER (PARTITION BY g ORDER BY id)
FROM (VALUES (1, 1, '{0,0}'::float8[]), (2, 2, '{1e151,1}')) v(id, g, f);
SET gpuclust.precision = single;
SELECT id, gpu_cluster_dbscan(f, 0.2, 2) OVER (PARTITION BY g ORDER BY id)
FROM (VALUES (1, 1, '{0,0}'::float8[]), (2, 2, '{1e39,1}')) v(id, g, f);
SELECT id, gpu_cluster_dbscan(f, 0.2, 2) OVER (ORDER BY id)
FROM (VALUES (1, 1e-50::numeric)) v(id, f);
RESET gpuclust.precision;
SELECT id, gpu_cluster_dbscan(f, 0.2, 2) OVER (ORDER BY id)
FROM (VALUES (1, 1e-400::numeric), (2, 1e400::numeric)) v(id, f);
SELECT id, gpu_cluster_dbscan(f, 0.2, 2) OVER (ORDER BY id)
FROM (VALUES (1, 'NaN'::float8), (2, 1)) v(id, f);
SELECT id, gpu_cluster_dbscan(f, 0.2, 2) OVER (ORDER BY id)
FROM (VALUES (1, '{}'::real[])) v(id, f);
SELECT id, gpu_cluster_dbscan(f, 0.2, 2) OVER (ORDER BY id)
FROM (VALUES (1, '{{1,2},{3,4}}'::real[])) v(id, f);
-- k greater than the features of a partition (NULL features do not count)
SELECT id, gpu_cluster_kmeans(ARRAY[x, y], 12) OVER (PARTITION BY g ORDER BY id)
FROM (SELECT * FROM wkm WHERE NOT (g = 3 AND id % 4 = 0)) s;

-- bad arguments
SELECT gpu_cluster_dbscan(f, 0, 2) OVER () FROM wpts;
SELECT gpu_cluster_dbscan(f, NULL, 2) OVER () FROM wpts;
SELECT gpu_cluster_dbscan(f, 'NaN', 2) OVER () FROM wpts;
SELECT gpu_cluster_dbscan(f, 0.2, 0) OVER () FROM wpts;
SELECT gpu_cluster_dbscan(f, 0.2, 2, 'tpu') OVER () FROM wpts;
SELECT gpu_cluster_kmeans(f, 0) OVER () FROM wpts;
SELECT gpu_cluster_kmeans(f, NULL) OVER () FROM wpts;
SELECT gpu_cluster_kmeans(f, 2, init => 'kmeans||') OVER () FROM wpts;
SELECT gpu_cluster_kmeans(f, 2, max_iter => 0) OVER () FROM wpts;
SELECT gpu_cluster_dbscan(id::text, 0.2, 2) OVER () FROM wpts;
SELECT gpu_cluster_dbscan(ARRAY[id], 0.2, 2) OVER () FROM wpts;
-- it is a window function only
SELECT gpu_cluster_dbscan(f, 0.2, 2) FROM wpts;

-- after an error the session works
SELECT count(*) FILTER (WHERE c IS NOT NULL) AS clustered
FROM (SELECT gpu_cluster_dbscan(f, 0.2, 2) OVER (PARTITION BY g ORDER BY id) AS c FROM wpts) s;

-- density peaks per group: the answers of gpu_density_peaks on each group's
-- rows; NULL features NULL
SELECT id, g, gpu_cluster_density_peaks(f, n_clusters => 2, dc => 0.5) OVER (PARTITION BY g ORDER BY id) AS cluster
FROM wpts WHERE g IN (1, 2, 4) ORDER BY id;
SELECT w.g, count(*) AS rows_compared, bool_and(w.c = s.cluster_id) AS same
FROM (SELECT id, g, gpu_cluster_density_peaks(ARRAY[x, y], 3, dc => 1, kernel => 'cutoff')
                    OVER (PARTITION BY g ORDER BY id) AS c FROM wkm WHERE g <= 4) w
JOIN LATERAL gpu_density_peaks(format('SELECT id, ARRAY[x, y] FROM wkm WHERE g = %s ORDER BY id', w.g),
                               3, dc => 1, kernel => 'cutoff') s ON s.id = w.id
GROUP BY w.g ORDER BY w.g;
-- thresholds instead of n_clusters, the defaults by name
SELECT count(DISTINCT c) AS clusters, count(c) AS rows
FROM (SELECT gpu_cluster_density_peaks(ARRAY[x, y], dc => 1, rho_min => 1, delta_min => 5,
                                       neighbor_rate => NULL, kernel => NULL, device => NULL)
             OVER (PARTITION BY g ORDER BY id) AS c FROM wkm WHERE g = 2) s;
-- errors: the arguments, and n_clusters above a partition's rows
SELECT gpu_cluster_density_peaks(f) OVER () FROM wpts;
SELECT gpu_cluster_density_peaks(f, 2, rho_min => 1) OVER () FROM wpts;
SELECT gpu_cluster_density_peaks(f, 2, kernel => 'box') OVER () FROM wpts;
SELECT id, gpu_cluster_density_peaks(f, 2, dc => 0.5) OVER (PARTITION BY g ORDER BY id) FROM wpts;

-- the cosine metric per partition: directions, whatever the lengths; a zero
-- feature is named by its place in the partition
SELECT id, g,
       gpu_cluster_dbscan(f, 0.01, 2, metric => 'cosine') OVER w AS dbscan,
       gpu_cluster_kmeans(f, 2, metric => 'cosine', seed => 1) OVER w AS kmeans,
       gpu_cluster_density_peaks(f, 2, dc => 0.01, kernel => 'cutoff', metric => 'cosine') OVER w AS dpeaks
FROM (VALUES (1, 1, '{1,0}'::float8[]), (2, 1, '{100,1}'), (3, 1, '{0,2}'), (4, 1, '{0.1,20}'),
             (5, 2, '{-1,-1}'), (6, 2, '{-3,-3.01}'), (7, 2, '{1,-1}'), (8, 2, NULL)) v(id, g, f)
WINDOW w AS (PARTITION BY g ORDER BY id) ORDER BY id;
SELECT id, gpu_cluster_dbscan(f, 0.01, 2, metric => 'cosine') OVER (PARTITION BY g ORDER BY id)
FROM (VALUES (1, 1, '{1,0}'::real[]), (2, 2, '{1,1}'), (3, 2, '{0,0}')) v(id, g, f);
SELECT gpu_cluster_kmeans(f, 1, metric => 'taxicab') OVER () FROM wpts;
