-- gpuclust 0.2.0 -> 0.3.0
\echo Use "ALTER EXTENSION gpuclust UPDATE TO '0.3.0'" to load this file. \quit

-- gpu_kmeans_fit_distributed over a table Citus distributes runs one call per
-- shard and pass (gpu_kmeans_shard_step, gpu_kmeans_shard_rows) instead of an
-- aggregate query per iteration.

COMMENT ON FUNCTION gpu_kmeans_fit_distributed(text, integer, integer, double precision, integer, double precision[], integer, text, double precision, integer) IS
'k-means without gathering the rows: on a Citus table each Lloyd iteration is one call per shard (gpu_kmeans_shard_call) on rows the workers keep for the fit, else one aggregate query; k-means|| seeding';

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
