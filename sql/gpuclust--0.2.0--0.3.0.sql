-- gpuclust 0.2.0 -> 0.3.0
\echo Use "ALTER EXTENSION gpuclust UPDATE TO '0.3.0'" to load this file. \quit

-- gpu_kmeans_fit_distributed over a table Citus distributes runs one call per
-- shard and pass (gpu_kmeans_shard_step, gpu_kmeans_shard_rows) instead of an
-- aggregate query per iteration.

COMMENT ON FUNCTION gpu_kmeans_fit_distributed(text, integer, integer, double precision, integer, double precision[], integer, text, double precision, integer) IS
'k-means without gathering the rows: on a Citus table each Lloyd iteration is one call per shard (gpu_kmeans_shard_step), else one aggregate query; k-means|| seeding';

-- ---------------------------------------------------------------- k-means on Citus, one call per shard (0.3.0)

-- gpu_kmeans_fit_distributed over SELECT id, f FROM t of a distributed table
-- runs these on every shard (Citus's run_command_on_shards), as the caller.
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
