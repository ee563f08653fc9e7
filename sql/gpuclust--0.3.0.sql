-- gpuclust 0.3.0: clustering where the data lives, on the GPU or the CPU.
\echo Use "CREATE EXTENSION gpuclust" to load this file. \quit

-- Every set-returning function takes a query whose first column is the row
-- id (smallint, integer or bigint) and whose other columns are the features:
-- one real[] / double precision[] / vector / halfvec / geometry column, or
-- one or more numeric scalar columns.  The query runs read-only with the
-- caller's privileges.

-- Planner support: the estimated result size (k rows for the centroids, the
-- planned row count of a constant query for the per-row functions).
CREATE FUNCTION gpuclust_support(internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'gpuclust_support'
LANGUAGE C STRICT;

CREATE FUNCTION gpu_dbscan(query text, eps double precision, min_pts integer,
                           device text DEFAULT NULL, metric text DEFAULT 'euclidean')
RETURNS TABLE (id bigint, cluster_id integer, is_core boolean)
AS 'MODULE_PATHNAME', 'gpu_dbscan'
LANGUAGE C VOLATILE PARALLEL UNSAFE SUPPORT gpuclust_support;

COMMENT ON FUNCTION gpu_dbscan(text, double precision, integer, text, text) IS
'DBSCAN (ST_ClusterDBSCAN compatible): one row per input row with its cluster (NULL for noise)';

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

CREATE FUNCTION gpuclust_devices()
RETURNS TABLE (device_id integer, name text, total_memory bigint,
               compute_capability text, free_memory bigint)
AS 'MODULE_PATHNAME', 'gpuclust_devices'
LANGUAGE C VOLATILE PARALLEL SAFE ROWS 4;

COMMENT ON FUNCTION gpuclust_devices() IS
'the GPUs gpuclust can use (no rows when none is usable)';

-- Parallel labels.  The clustering functions run the user's query (which may
-- read temporary tables, visible only to this backend) in a subtransaction:
-- PARALLEL RESTRICTED lets the rest of the statement use parallel workers
-- while they run in the leader.  Before PostgreSQL 17 a subtransaction
-- cannot start while the leader is in parallel mode, so there they stay
-- PARALLEL UNSAFE.  gpuclust_devices runs no query: PARALLEL SAFE.
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

CREATE FUNCTION gpu_hdbscan(query text, min_cluster_size integer DEFAULT 5,
                            min_samples integer DEFAULT NULL,
                            cluster_selection_epsilon double precision DEFAULT 0,
                            cluster_selection_method text DEFAULT 'eom',
                            allow_single_cluster boolean DEFAULT false,
                            max_cluster_size integer DEFAULT NULL,
                            metric text DEFAULT 'euclidean', device text DEFAULT NULL)
RETURNS TABLE (id bigint, cluster_id integer, probability double precision,
               outlier_score double precision)
AS 'MODULE_PATHNAME', 'gpu_hdbscan'
LANGUAGE C VOLATILE PARALLEL UNSAFE SUPPORT gpuclust_support;

COMMENT ON FUNCTION gpu_hdbscan(text, integer, integer, double precision, text, boolean, integer, text, text) IS
'HDBSCAN (scikit-learn compatible): one row per input row with its cluster (NULL for noise), membership probability and GLOSH outlier score';

CREATE FUNCTION gpu_hdbscan_tree(query text, min_cluster_size integer DEFAULT 5,
                                 min_samples integer DEFAULT NULL,
                                 cluster_selection_epsilon double precision DEFAULT 0,
                                 cluster_selection_method text DEFAULT 'eom',
                                 allow_single_cluster boolean DEFAULT false,
                                 max_cluster_size integer DEFAULT NULL,
                                 metric text DEFAULT 'euclidean', device text DEFAULT NULL)
RETURNS TABLE (parent integer, child integer, child_id bigint, lambda_val double precision,
               child_size bigint, selected boolean, cluster_id integer)
AS 'MODULE_PATHNAME', 'gpu_hdbscan_tree'
LANGUAGE C VOLATILE PARALLEL UNSAFE SUPPORT gpuclust_support;

COMMENT ON FUNCTION gpu_hdbscan_tree(text, integer, integer, double precision, text, boolean, integer, text, text) IS
'HDBSCAN''s condensed tree: the root, then one row per cluster node and per input row, with lambda, size, selection and cluster';

CREATE FUNCTION gpu_cluster_hdbscan(feature anyelement, min_cluster_size integer DEFAULT 5,
                                    min_samples integer DEFAULT NULL,
                                    cluster_selection_epsilon double precision DEFAULT 0,
                                    cluster_selection_method text DEFAULT 'eom',
                                    allow_single_cluster boolean DEFAULT false,
                                    max_cluster_size integer DEFAULT NULL,
                                    metric text DEFAULT 'euclidean', device text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'gpu_cluster_hdbscan'
LANGUAGE C WINDOW STABLE PARALLEL SAFE;

COMMENT ON FUNCTION gpu_cluster_hdbscan(anyelement, integer, integer, double precision, text, boolean, integer, text, text) IS
'HDBSCAN per window partition: the row''s cluster, NULL for noise and NULL features';

-- PARALLEL RESTRICTED from PostgreSQL 17 on, as the other clustering functions
DO $$
BEGIN
  IF current_setting('server_version_num')::integer >= 170000 THEN
    ALTER FUNCTION gpu_hdbscan(text, integer, integer, double precision, text, boolean, integer, text, text) PARALLEL RESTRICTED;
    ALTER FUNCTION gpu_hdbscan_tree(text, integer, integer, double precision, text, boolean, integer, text, text) PARALLEL RESTRICTED;
  END IF;
END
$$;

-- end of HDBSCAN


-- ---------------------------------------------------------------- k-means on distributed tables
-- (gpu_kmeans_step, gpu_kmeans_predict and what they need)

-- The state of a Lloyd step: per cluster the rows, the exact sums of their
-- features and of their squared distances, and the centroids of the step.
-- A plain type (not internal), so that Citus ships a shard's partial state
-- to the coordinator as its text form, which is the state exactly.
CREATE TYPE gpu_kmeans_state;

CREATE FUNCTION gpu_kmeans_state_in(cstring)
RETURNS gpu_kmeans_state
AS 'MODULE_PATHNAME', 'gpu_kmeans_state_in'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION gpu_kmeans_state_out(gpu_kmeans_state)
RETURNS cstring
AS 'MODULE_PATHNAME', 'gpu_kmeans_state_out'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE gpu_kmeans_state (
    INPUT = gpu_kmeans_state_in,
    OUTPUT = gpu_kmeans_state_out,
    INTERNALLENGTH = VARIABLE,
    ALIGNMENT = double,
    STORAGE = extended
);

COMMENT ON TYPE gpu_kmeans_state IS
'the partial state of a k-means step (gpu_kmeans_step): counts, exact sums and the centroids of the step';

-- What a step gives: the centroids it moves to (k x d), and per cluster the
-- rows nearest to the step's centroids and the sum of their distances
-- (squared Euclidean, or cosine distances).
CREATE TYPE gpu_kmeans_step_result AS (
    centroids double precision[],
    sizes bigint[],
    inertia double precision[]
);

CREATE FUNCTION gpu_kmeans_step_trans(gpu_kmeans_state, real[], double precision[])
RETURNS gpu_kmeans_state AS 'MODULE_PATHNAME', 'gpu_kmeans_step_trans_f4a'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION gpu_kmeans_step_trans(gpu_kmeans_state, real[], double precision[], text)
RETURNS gpu_kmeans_state AS 'MODULE_PATHNAME', 'gpu_kmeans_step_trans_f4a'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION gpu_kmeans_step_trans(gpu_kmeans_state, real[], double precision[], text, integer)
RETURNS gpu_kmeans_state AS 'MODULE_PATHNAME', 'gpu_kmeans_step_trans_f4a'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION gpu_kmeans_step_trans(gpu_kmeans_state, double precision[], double precision[])
RETURNS gpu_kmeans_state AS 'MODULE_PATHNAME', 'gpu_kmeans_step_trans_f8a'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION gpu_kmeans_step_trans(gpu_kmeans_state, double precision[], double precision[], text)
RETURNS gpu_kmeans_state AS 'MODULE_PATHNAME', 'gpu_kmeans_step_trans_f8a'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION gpu_kmeans_step_trans(gpu_kmeans_state, double precision[], double precision[], text, integer)
RETURNS gpu_kmeans_state AS 'MODULE_PATHNAME', 'gpu_kmeans_step_trans_f8a'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION gpu_kmeans_step_trans(gpu_kmeans_state, anyelement, double precision[])
RETURNS gpu_kmeans_state AS 'MODULE_PATHNAME', 'gpu_kmeans_step_trans_any'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION gpu_kmeans_step_trans(gpu_kmeans_state, anyelement, double precision[], text)
RETURNS gpu_kmeans_state AS 'MODULE_PATHNAME', 'gpu_kmeans_step_trans_any'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION gpu_kmeans_step_trans(gpu_kmeans_state, anyelement, double precision[], text, integer)
RETURNS gpu_kmeans_state AS 'MODULE_PATHNAME', 'gpu_kmeans_step_trans_any'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION gpu_kmeans_step_combine(gpu_kmeans_state, gpu_kmeans_state)
RETURNS gpu_kmeans_state AS 'MODULE_PATHNAME', 'gpu_kmeans_step_combine'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION gpu_kmeans_step_final(gpu_kmeans_state)
RETURNS gpu_kmeans_step_result AS 'MODULE_PATHNAME', 'gpu_kmeans_step_final'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- gpu_kmeans_step(feature, centroids [, metric]): one Lloyd step over the
-- group's rows.  Overloads for real[] and double precision[] features, and
-- anyelement for the other feature types (aggregates take no defaults).
CREATE AGGREGATE gpu_kmeans_step(real[], double precision[]) (
    STYPE = gpu_kmeans_state, SFUNC = gpu_kmeans_step_trans,
    COMBINEFUNC = gpu_kmeans_step_combine, FINALFUNC = gpu_kmeans_step_final, PARALLEL = SAFE);
CREATE AGGREGATE gpu_kmeans_step(real[], double precision[], text) (
    STYPE = gpu_kmeans_state, SFUNC = gpu_kmeans_step_trans,
    COMBINEFUNC = gpu_kmeans_step_combine, FINALFUNC = gpu_kmeans_step_final, PARALLEL = SAFE);
CREATE AGGREGATE gpu_kmeans_step(double precision[], double precision[]) (
    STYPE = gpu_kmeans_state, SFUNC = gpu_kmeans_step_trans,
    COMBINEFUNC = gpu_kmeans_step_combine, FINALFUNC = gpu_kmeans_step_final, PARALLEL = SAFE);
CREATE AGGREGATE gpu_kmeans_step(double precision[], double precision[], text) (
    STYPE = gpu_kmeans_state, SFUNC = gpu_kmeans_step_trans,
    COMBINEFUNC = gpu_kmeans_step_combine, FINALFUNC = gpu_kmeans_step_final, PARALLEL = SAFE);
CREATE AGGREGATE gpu_kmeans_step(anyelement, double precision[]) (
    STYPE = gpu_kmeans_state, SFUNC = gpu_kmeans_step_trans,
    COMBINEFUNC = gpu_kmeans_step_combine, FINALFUNC = gpu_kmeans_step_final, PARALLEL = SAFE);
CREATE AGGREGATE gpu_kmeans_step(anyelement, double precision[], text) (
    STYPE = gpu_kmeans_state, SFUNC = gpu_kmeans_step_trans,
    COMBINEFUNC = gpu_kmeans_step_combine, FINALFUNC = gpu_kmeans_step_final, PARALLEL = SAFE);

COMMENT ON AGGREGATE gpu_kmeans_step(real[], double precision[]) IS
'one Lloyd step of k-means over the group: the centroids it moves to, the cluster sizes and inertias';

-- gpu_kmeans_step_state(feature, centroids, metric, mode): the state itself
-- (what gpu_kmeans_fit_distributed reads); mode 1 sums the features, 2 keeps
-- cosine centroids as given.
CREATE AGGREGATE gpu_kmeans_step_state(real[], double precision[], text, integer) (
    STYPE = gpu_kmeans_state, SFUNC = gpu_kmeans_step_trans,
    COMBINEFUNC = gpu_kmeans_step_combine, PARALLEL = SAFE);
CREATE AGGREGATE gpu_kmeans_step_state(double precision[], double precision[], text, integer) (
    STYPE = gpu_kmeans_state, SFUNC = gpu_kmeans_step_trans,
    COMBINEFUNC = gpu_kmeans_step_combine, PARALLEL = SAFE);
CREATE AGGREGATE gpu_kmeans_step_state(anyelement, double precision[], text, integer) (
    STYPE = gpu_kmeans_state, SFUNC = gpu_kmeans_step_trans,
    COMBINEFUNC = gpu_kmeans_step_combine, PARALLEL = SAFE);

CREATE FUNCTION gpu_kmeans_predict(feature anyelement, centroids double precision[],
                                   metric text DEFAULT 'euclidean')
RETURNS integer
AS 'MODULE_PATHNAME', 'gpu_kmeans_predict'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION gpu_kmeans_predict(anyelement, double precision[], text) IS
'the cluster (0-based) of the nearest centroid, as gpu_kmeans_assign gives it; NULL for a NULL feature';

CREATE FUNCTION gpu_kmeans_distance(feature anyelement, centroids double precision[],
                                    metric text DEFAULT 'euclidean')
RETURNS double precision
AS 'MODULE_PATHNAME', 'gpu_kmeans_distance'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION gpu_kmeans_distance(anyelement, double precision[], text) IS
'the distance to the nearest centroid, as gpu_kmeans_assign gives it; NULL for a NULL feature';

CREATE FUNCTION gpu_kmeans_row_hash(id bigint, seed bigint, round integer)
RETURNS double precision
AS 'MODULE_PATHNAME', 'gpu_kmeans_row_hash'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION gpu_kmeans_row_hash(bigint, bigint, integer) IS
'the draw in [0, 1) of a row id in a round of k-means|| seeding (gpu_kmeans_fit_distributed)';

CREATE FUNCTION gpu_kmeans_sample(feature anyelement, centroids double precision[], metric text,
                                  id bigint, seed bigint, round integer, scale double precision)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gpu_kmeans_sample'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION gpu_kmeans_sample(anyelement, double precision[], text, bigint, bigint, integer, double precision) IS
'whether a round of k-means|| seeding draws the row (gpu_kmeans_fit_distributed)';

CREATE FUNCTION gpu_kmeans_fit_distributed(query text, k integer, max_iter integer DEFAULT 300,
                                           tol double precision DEFAULT 1e-4, seed integer DEFAULT 0,
                                           initial_centroids double precision[] DEFAULT NULL,
                                           n_init integer DEFAULT 1, metric text DEFAULT 'euclidean',
                                           oversampling double precision DEFAULT 2.0,
                                           rounds integer DEFAULT 5)
RETURNS TABLE (cluster_id integer, centroid double precision[], size bigint, inertia double precision)
AS 'MODULE_PATHNAME', 'gpu_kmeans_fit_distributed'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10;

COMMENT ON FUNCTION gpu_kmeans_fit_distributed(text, integer, integer, double precision, integer, double precision[], integer, text, double precision, integer) IS
'k-means without gathering the rows: on a Citus table each Lloyd iteration is one call per shard (gpu_kmeans_shard_call) on rows the workers keep for the fit, else one aggregate query; k-means|| seeding';

-- end of k-means on distributed tables

-- ---------------------------------------------------------------- k-means on Citus, one call per shard (0.3.0)

-- gpu_kmeans_fit_distributed over SELECT id, f FROM t of a distributed table
-- runs these on every shard, as the caller (0.3.0 development versions ran
-- them through Citus's run_command_on_shards).
CREATE FUNCTION gpu_kmeans_shard_step(shard regclass, feature name, centroids double precision[],
                                      metric text DEFAULT 'euclidean', mode integer DEFAULT 1)
RETURNS gpu_kmeans_state
AS 'MODULE_PATHNAME', 'gpu_kmeans_shard_step'
LANGUAGE C STABLE SECURITY INVOKER PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_kmeans_shard_step(regclass, name, double precision[], text, integer) IS
'the partial state of a k-means step over one relation (a shard): one scan, the centroids taken once';

CREATE FUNCTION gpu_kmeans_shard_rows(shard regclass, id name, feature name, job text,
                                      centroids double precision[], metric text, seed bigint,
                                      round integer, scale double precision, count bigint)
RETURNS text
AS 'MODULE_PATHNAME', 'gpu_kmeans_shard_rows'
LANGUAGE C STABLE SECURITY INVOKER PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_kmeans_shard_rows(regclass, name, name, text, double precision[], text, bigint, integer, double precision, bigint) IS
'the rows of one relation (a shard) that a step of k-means|| seeding picks (gpu_kmeans_fit_distributed)';

-- Since 0.3.0 each pass is one ordinary distributed query that Citus sends
-- to every shard on the connections it keeps for the transaction:
--   SELECT gpu_kmeans_shard_call(tableoid, ctid, fit, pass, ...) FROM t
--   WHERE [ctid = ANY(probes) AND] gpu_kmeans_shard_once(tableoid, fit, pass)
-- so one worker backend serves a shard in every pass of a fit and keeps its
-- rows, their clusters and Hamerly bounds (gpuclust.kmeans_shard_cache).
CREATE FUNCTION gpu_kmeans_shard_once(shard oid, fit bigint, pass integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gpu_kmeans_shard_once'
LANGUAGE C VOLATILE SECURITY INVOKER PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_kmeans_shard_once(oid, bigint, integer) IS
'true for the first row asked about per shard, fit and pass in this backend (gpu_kmeans_fit_distributed)';

CREATE FUNCTION gpu_kmeans_shard_call(shard oid, probe tid, fit bigint, pass integer, job text,
                                      id name, feature name, centroids double precision[], metric text,
                                      mode integer, seed bigint, round integer, scale double precision,
                                      count bigint, cache_mb integer)
RETURNS text
AS 'MODULE_PATHNAME', 'gpu_kmeans_shard_call'
LANGUAGE C VOLATILE SECURITY INVOKER PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_kmeans_shard_call(oid, tid, bigint, integer, text, name, name, double precision[], text, integer, bigint, integer, double precision, bigint, integer) IS
'one pass of gpu_kmeans_fit_distributed on one shard: a step''s partial state on the rows this backend keeps for the fit, or the rows k-means|| picks';

CREATE FUNCTION gpu_kmeans_shard_cache()
RETURNS TABLE (fit bigint, shard regclass, rows bigint, k integer, bytes bigint)
AS 'MODULE_PATHNAME', 'gpu_kmeans_shard_cache'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 8;

COMMENT ON FUNCTION gpu_kmeans_shard_cache() IS
'the shards whose rows this backend keeps for a gpu_kmeans_fit_distributed, and the bytes it holds';

-- end of k-means on Citus, one call per shard


-- ---------------------------------------------------------------- other additions

CREATE FUNCTION gpuclust_defaults()
RETURNS TABLE (algorithm text, argument text, value text)
AS 'MODULE_PATHNAME', 'gpuclust_defaults'
LANGUAGE C IMMUTABLE PARALLEL SAFE ROWS 10;

COMMENT ON FUNCTION gpuclust_defaults() IS
'the defaults of the clustering functions'' optional arguments, as the C code has them';

-- end of other additions

-- ---------------------------------------------------------------- the GPU service (0.3.0)

-- With gpuclust in shared_preload_libraries, one GPU service process runs
-- the GPU calls of every session: these show it (no rows without it).
CREATE FUNCTION gpuclust_service()
RETURNS TABLE (device_id integer, name text, backend text, pid integer, threads integer,
               running integer, queued integer, memory_reserved bigint, memory_budget bigint)
AS 'MODULE_PATHNAME', 'gpuclust_service'
LANGUAGE C VOLATILE PARALLEL SAFE ROWS 4;

COMMENT ON FUNCTION gpuclust_service() IS
'the GPU service: per device its worker threads, requests running and queued, and the device memory they reserved of the budget';

CREATE FUNCTION gpuclust_service_requests()
RETURNS TABLE (pid integer, state text, algorithm text, device_id integer, rows bigint,
               dims integer, memory bigint, submitted timestamptz, started timestamptz)
AS 'MODULE_PATHNAME', 'gpuclust_service_requests'
LANGUAGE C VOLATILE PARALLEL SAFE ROWS 10;

COMMENT ON FUNCTION gpuclust_service_requests() IS
'the requests the GPU service holds, queued or running: session, algorithm, size and memory estimate';

-- end of the GPU service
