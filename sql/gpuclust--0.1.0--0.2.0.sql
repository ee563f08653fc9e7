-- gpuclust 0.1.0 -> 0.2.0
\echo Use "ALTER EXTENSION gpuclust UPDATE TO '0.2.0'" to load this file. \quit

-- The functions of 0.1.0 keep their arguments, defaults and labels; what
-- changed in them is inside the library (one back-end interface for the CPU
-- and the GPU, developer settings instead of environment variables, pgvector
-- and PostGIS feature columns); see CHANGELOG.md.  New: the window functions.

-- Window functions: clustering per partition, drop-ins for PostGIS's
-- ST_ClusterDBSCAN and ST_ClusterKMeans, and density peaks.  The feature is
-- a real[] or double precision[] array, pgvector's vector or halfvec, a
-- PostGIS geometry point or one numeric value; a NULL feature gives a NULL
-- cluster.

CREATE FUNCTION gpu_cluster_dbscan(feature anyelement, eps double precision, min_pts integer,
                                   device text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'gpu_cluster_dbscan'
LANGUAGE C WINDOW STABLE PARALLEL SAFE;

COMMENT ON FUNCTION gpu_cluster_dbscan(anyelement, double precision, integer, text) IS
'DBSCAN per window partition (ST_ClusterDBSCAN compatible): the row''s cluster, NULL for noise and NULL features';

CREATE FUNCTION gpu_cluster_kmeans(feature anyelement, k integer, max_iter integer DEFAULT 300,
                                   tol double precision DEFAULT 1e-4, seed integer DEFAULT 0,
                                   init text DEFAULT 'k-means++', device text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'gpu_cluster_kmeans'
LANGUAGE C WINDOW STABLE PARALLEL SAFE;

COMMENT ON FUNCTION gpu_cluster_kmeans(anyelement, integer, integer, double precision, integer, text, text) IS
'k-means per window partition: the row''s cluster, NULL for NULL features';

CREATE FUNCTION gpu_cluster_density_peaks(feature anyelement, n_clusters integer DEFAULT NULL,
                                          dc double precision DEFAULT NULL,
                                          neighbor_rate double precision DEFAULT 0.02,
                                          kernel text DEFAULT 'gaussian',
                                          rho_min double precision DEFAULT NULL,
                                          delta_min double precision DEFAULT NULL,
                                          device text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'gpu_cluster_density_peaks'
LANGUAGE C WINDOW STABLE PARALLEL SAFE;

COMMENT ON FUNCTION gpu_cluster_density_peaks(anyelement, integer, double precision, double precision, text, double precision, double precision, text) IS
'density peaks clustering per window partition: the row''s cluster, NULL for NULL features';
