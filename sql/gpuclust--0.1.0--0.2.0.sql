-- gpuclust 0.1.0 -> 0.2.0
\echo Use "ALTER EXTENSION gpuclust UPDATE TO '0.2.0'" to load this file. \quit

-- Much of 0.2.0 is inside the library (one back-end interface for the CPU
-- and the GPU, developer settings instead of environment variables, pgvector
-- and PostGIS feature columns; see CHANGELOG.md).  In SQL: a planner support
-- function gives the estimated result size, the parallel labels are the most
-- permissive correct ones, k-means gains n_init (several runs, the one of
-- lowest inertia kept), gpu_dbscan, gpu_density_peaks and k-means gain
-- metric ('euclidean' or 'cosine'), a fitted model is applied to new rows
-- with gpu_kmeans_assign (init => 'k-means++' is now greedy k-means++), and
-- the window functions are new.

CREATE FUNCTION gpuclust_support(internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'gpuclust_support'
LANGUAGE C STRICT;

ALTER FUNCTION gpuclust_devices() PARALLEL SAFE ROWS 4;

-- DBSCAN and density peaks: a new argument, metric.
DROP FUNCTION gpu_dbscan(text, double precision, integer, text);
DROP FUNCTION gpu_density_peaks(text, integer, double precision, double precision, text, double precision, double precision, text);

CREATE FUNCTION gpu_dbscan(query text, eps double precision, min_pts integer,
                           device text DEFAULT NULL, metric text DEFAULT 'euclidean')
RETURNS TABLE (id bigint, cluster_id integer, is_core boolean)
AS 'MODULE_PATHNAME', 'gpu_dbscan'
LANGUAGE C VOLATILE PARALLEL UNSAFE SUPPORT gpuclust_support;

COMMENT ON FUNCTION gpu_dbscan(text, double precision, integer, text, text) IS
'DBSCAN (ST_ClusterDBSCAN compatible): one row per input row with its cluster (NULL for noise)';

CREATE FUNCTION gpu_density_peaks(query text, n_clusters integer DEFAULT NULL,
                                  dc double precision DEFAULT NULL,
                                  neighbor_rate double precision DEFAULT 0.02,
                                  kernel text DEFAULT 'gaussian',
                                  rho_min double precision DEFAULT NULL,
                                  delta_min double precision DEFAULT NULL,
                                  device text DEFAULT NULL, metric text DEFAULT 'euclidean')
RETURNS TABLE (id bigint, cluster_id integer, rho double precision, delta double precision,
               is_center boolean)
AS 'MODULE_PATHNAME', 'gpu_density_peaks'
LANGUAGE C VOLATILE PARALLEL UNSAFE SUPPORT gpuclust_support;

COMMENT ON FUNCTION gpu_density_peaks(text, integer, double precision, double precision, text, double precision, double precision, text, text) IS
'density peaks clustering (Rodriguez and Laio): cluster, rho, delta and centre flag per row';

-- k-means: two new arguments (a function's arguments cannot be added in place).
DROP FUNCTION gpu_kmeans(text, integer, integer, double precision, integer, text, double precision[], text);
DROP FUNCTION gpu_kmeans_centroids(text, integer, integer, double precision, integer, text, double precision[], text);

CREATE FUNCTION gpu_kmeans(query text, k integer, max_iter integer DEFAULT 300,
                           tol double precision DEFAULT 1e-4, seed integer DEFAULT 0,
                           init text DEFAULT 'k-means++',
                           initial_centroids double precision[] DEFAULT NULL,
                           device text DEFAULT NULL, n_init integer DEFAULT 1,
                           metric text DEFAULT 'euclidean')
RETURNS TABLE (id bigint, cluster_id integer, distance double precision)
AS 'MODULE_PATHNAME', 'gpu_kmeans'
LANGUAGE C VOLATILE PARALLEL UNSAFE SUPPORT gpuclust_support;

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
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10 SUPPORT gpuclust_support;

COMMENT ON FUNCTION gpu_kmeans_centroids(text, integer, integer, double precision, integer, text, double precision[], text, integer, text) IS
'k-means (Lloyd): one row per cluster with its centroid, size and inertia';

CREATE FUNCTION gpu_kmeans_assign(query text, centroids double precision[],
                                  metric text DEFAULT 'euclidean', device text DEFAULT NULL)
RETURNS TABLE (id bigint, cluster_id integer, distance double precision)
AS 'MODULE_PATHNAME', 'gpu_kmeans_assign'
LANGUAGE C VOLATILE PARALLEL UNSAFE SUPPORT gpuclust_support;

COMMENT ON FUNCTION gpu_kmeans_assign(text, double precision[], text, text) IS
'k-means assignment: one row per input row with its nearest of the given k x d centroids and its distance';

-- Parallel labels: see gpuclust--0.2.0.sql.
DO $$
BEGIN
  IF current_setting('server_version_num')::integer >= 170000 THEN
    ALTER FUNCTION gpu_dbscan(text, double precision, integer, text, text) PARALLEL RESTRICTED;
    ALTER FUNCTION gpu_kmeans(text, integer, integer, double precision, integer, text, double precision[], text, integer, text) PARALLEL RESTRICTED;
    ALTER FUNCTION gpu_kmeans_centroids(text, integer, integer, double precision, integer, text, double precision[], text, integer, text) PARALLEL RESTRICTED;
    ALTER FUNCTION gpu_kmeans_assign(text, double precision[], text, text) PARALLEL RESTRICTED;
    ALTER FUNCTION gpu_density_peaks(text, integer, double precision, double precision, text, double precision, double precision, text, text) PARALLEL RESTRICTED;
  END IF;
END
$$;

-- Window functions: clustering per partition, drop-ins for PostGIS's
-- ST_ClusterDBSCAN and ST_ClusterKMeans, and density peaks.  The feature is
-- a real[] or double precision[] array, pgvector's vector or halfvec, a
-- PostGIS geometry point or one numeric value; a NULL feature gives a NULL
-- cluster.

CREATE FUNCTION gpu_cluster_dbscan(feature anyelement, eps double precision, min_pts integer,
                                   device text DEFAULT NULL, metric text DEFAULT 'euclidean')
RETURNS integer
AS 'MODULE_PATHNAME', 'gpu_cluster_dbscan'
LANGUAGE C WINDOW STABLE PARALLEL SAFE;

COMMENT ON FUNCTION gpu_cluster_dbscan(anyelement, double precision, integer, text, text) IS
'DBSCAN per window partition (ST_ClusterDBSCAN compatible): the row''s cluster, NULL for noise and NULL features';

CREATE FUNCTION gpu_cluster_kmeans(feature anyelement, k integer, max_iter integer DEFAULT 300,
                                   tol double precision DEFAULT 1e-4, seed integer DEFAULT 0,
                                   init text DEFAULT 'k-means++', device text DEFAULT NULL,
                                   metric text DEFAULT 'euclidean')
RETURNS integer
AS 'MODULE_PATHNAME', 'gpu_cluster_kmeans'
LANGUAGE C WINDOW STABLE PARALLEL SAFE;

COMMENT ON FUNCTION gpu_cluster_kmeans(anyelement, integer, integer, double precision, integer, text, text, text) IS
'k-means per window partition: the row''s cluster, NULL for NULL features';

CREATE FUNCTION gpu_cluster_density_peaks(feature anyelement, n_clusters integer DEFAULT NULL,
                                          dc double precision DEFAULT NULL,
                                          neighbor_rate double precision DEFAULT 0.02,
                                          kernel text DEFAULT 'gaussian',
                                          rho_min double precision DEFAULT NULL,
                                          delta_min double precision DEFAULT NULL,
                                          device text DEFAULT NULL, metric text DEFAULT 'euclidean')
RETURNS integer
AS 'MODULE_PATHNAME', 'gpu_cluster_density_peaks'
LANGUAGE C WINDOW STABLE PARALLEL SAFE;

COMMENT ON FUNCTION gpu_cluster_density_peaks(anyelement, integer, double precision, double precision, text, double precision, double precision, text, text) IS
'density peaks clustering per window partition: the row''s cluster, NULL for NULL features';

-- ---------------------------------------------------------------- HDBSCAN
-- (gpu_hdbscan, gpu_hdbscan_tree, gpu_cluster_hdbscan)

-- end of HDBSCAN


-- ---------------------------------------------------------------- k-means on distributed tables
-- (gpu_kmeans_step, gpu_kmeans_predict and what they need)

-- end of k-means on distributed tables


-- ---------------------------------------------------------------- other additions

CREATE FUNCTION gpuclust_defaults()
RETURNS TABLE (algorithm text, argument text, value text)
AS 'MODULE_PATHNAME', 'gpuclust_defaults'
LANGUAGE C IMMUTABLE PARALLEL SAFE ROWS 10;

COMMENT ON FUNCTION gpuclust_defaults() IS
'the defaults of the clustering functions'' optional arguments, as the C code has them';

-- end of other additions
