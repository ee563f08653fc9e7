-- gpuclust 0.1.0 -> 0.2.0
\echo Use "ALTER EXTENSION gpuclust UPDATE TO '0.2.0'" to load this file. \quit

-- k-means gains n_init (several runs, the one of lowest inertia kept) and
-- metric ('euclidean'), and a fitted model can be applied to new rows with
-- gpu_kmeans_assign.  init => 'k-means++' is now greedy k-means++.  The other
-- changes are inside the library; see CHANGELOG.md.

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
