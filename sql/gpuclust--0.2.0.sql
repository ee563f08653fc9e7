-- gpuclust 0.2.0: clustering where the data lives, on the GPU or the CPU.
\echo Use "CREATE EXTENSION gpuclust" to load this file. \quit

-- Every function takes a query whose first column is the row id (smallint,
-- integer or bigint) and whose other columns are the features: one
-- real[] / double precision[] column, or one or more numeric scalar columns.
-- The query runs read-only with the caller's privileges.

CREATE FUNCTION gpu_dbscan(query text, eps double precision, min_pts integer,
                           device text DEFAULT NULL)
RETURNS TABLE (id bigint, cluster_id integer, is_core boolean)
AS 'MODULE_PATHNAME', 'gpu_dbscan'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_dbscan(text, double precision, integer, text) IS
'DBSCAN (ST_ClusterDBSCAN compatible): one row per input row with its cluster (NULL for noise)';

CREATE FUNCTION gpu_kmeans(query text, k integer, max_iter integer DEFAULT 300,
                           tol double precision DEFAULT 1e-4, seed integer DEFAULT 0,
                           init text DEFAULT 'k-means++',
                           initial_centroids double precision[] DEFAULT NULL,
                           device text DEFAULT NULL, n_init integer DEFAULT 1,
                           metric text DEFAULT 'euclidean')
RETURNS TABLE (id bigint, cluster_id integer, distance double precision)
AS 'MODULE_PATHNAME', 'gpu_kmeans'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_kmeans(text, integer, integer, double precision, integer, text, double precision[], text, integer, text) IS
'k-means (Lloyd): one row per input row with its cluster and its distance to the centroid';

CREATE FUNCTION gpu_kmeans_centroids(query text, k integer, max_iter integer DEFAULT 300,
                                     tol double precision DEFAULT 1e-4, seed integer DEFAULT 0,
                                     init text DEFAULT 'k-means++',
                                     initial_centroids double precision[] DEFAULT NULL,
                                     device text DEFAULT NULL, n_init integer DEFAULT 1,
                                     metric text DEFAULT 'euclidean')
RETURNS TABLE (cluster_id integer, centroid double precision[], size bigint, inertia double precision)
AS 'MODULE_PATHNAME', 'gpu_kmeans_centroids'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_kmeans_centroids(text, integer, integer, double precision, integer, text, double precision[], text, integer, text) IS
'k-means (Lloyd): one row per cluster with its centroid, size and inertia';

CREATE FUNCTION gpu_kmeans_assign(query text, centroids double precision[],
                                  metric text DEFAULT 'euclidean', device text DEFAULT NULL)
RETURNS TABLE (id bigint, cluster_id integer, distance double precision)
AS 'MODULE_PATHNAME', 'gpu_kmeans_assign'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_kmeans_assign(text, double precision[], text, text) IS
'k-means assignment: one row per input row with its nearest of the given k x d centroids and its distance';

CREATE FUNCTION gpu_density_peaks(query text, n_clusters integer DEFAULT NULL,
                                  dc double precision DEFAULT NULL,
                                  neighbor_rate double precision DEFAULT 0.02,
                                  kernel text DEFAULT 'gaussian',
                                  rho_min double precision DEFAULT NULL,
                                  delta_min double precision DEFAULT NULL,
                                  device text DEFAULT NULL)
RETURNS TABLE (id bigint, cluster_id integer, rho double precision, delta double precision,
               is_center boolean)
AS 'MODULE_PATHNAME', 'gpu_density_peaks'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_density_peaks(text, integer, double precision, double precision, text, double precision, double precision, text) IS
'density peaks clustering (Rodriguez and Laio): cluster, rho, delta and centre flag per row';

CREATE FUNCTION gpuclust_devices()
RETURNS TABLE (device_id integer, name text, total_memory bigint,
               compute_capability text, free_memory bigint)
AS 'MODULE_PATHNAME', 'gpuclust_devices'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION gpuclust_devices() IS
'the GPUs gpuclust can use (no rows when none is usable)';
