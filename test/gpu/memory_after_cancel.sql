-- On the GPU machine: a GPU run cancelled (statement_timeout) while the GPU
-- computes, and one that fails with an ERROR raised by the GPU back end after
-- it has taken device memory, leave no device memory behind, and the backend
-- works afterwards.  Each case first asserts that what it claims took place:
-- the cancel happened, after the gather and inside the GPU run; the error is
-- the GPU back end's own.  Prints PASS or FAIL lines.
--
--   psql -X -f test/gpu/memory_after_cancel.sql     (test/gpu/run-device-suite runs it)
\set ON_ERROR_STOP 0
CREATE EXTENSION IF NOT EXISTS gpuclust;
SELECT setseed(0.7);
DROP TABLE IF EXISTS mem_pts;
-- 2M rows of 8 features: Gaussian density peaks compares every pair (4e12), seconds of GPU work
CREATE UNLOGGED TABLE mem_pts AS
  SELECT g::bigint AS id, ARRAY(SELECT random() FROM generate_series(1, 8) WHERE g > 0)::real[] AS f
  FROM generate_series(1, 2000000) g;
VACUUM ANALYZE mem_pts;
-- a first GPU call creates the CUDA context, and the first k-means the cuBLAS
-- handle and its workspace, which the backend keeps; measure after both
SELECT count(*) AS warm FROM gpu_dbscan('SELECT id, f FROM mem_pts LIMIT 50000', 0.3, 5, 'gpu');
SELECT count(*) AS warm_kmeans FROM gpu_kmeans('SELECT id, f FROM mem_pts LIMIT 50000', 5, device => 'gpu');
SELECT free_memory AS free_before FROM gpuclust_devices() WHERE device_id = 0 \gset

-- Runs q; says how it ended: its SQLSTATE (state, 'none' when it ended well), whether the error came from inside
-- the gather (its context names the gathered query, the gather's SPI
-- statement), and the milliseconds it ran.
CREATE FUNCTION pg_temp.outcome(q text, gathered text,
                                OUT state text, OUT in_gather boolean, OUT message text,
                                OUT ms double precision)
LANGUAGE plpgsql AS $$
DECLARE
  t0 timestamptz := clock_timestamp();
  ctx text;
BEGIN
  EXECUTE q;
  state := 'none';
  in_gather := false;
  ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
EXCEPTION WHEN query_canceled OR OTHERS THEN
  GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
                          ctx = PG_EXCEPTION_CONTEXT;
  in_gather := position(format('SQL statement "%s"', gathered) IN coalesce(ctx, '')) > 0;
  ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
END $$;

-- ------------------------------------------------ cancel inside the GPU run
-- The time of reading the rows (about the gather's), so that the timeout
-- falls well after the gather: three times it, plus 1.5 s.
SELECT (o).ms AS read_ms FROM (SELECT pg_temp.outcome('SELECT sum(cardinality(f)) FROM (SELECT id, f FROM mem_pts) s', '') o) x \gset
SELECT (3 * :read_ms + 1500)::bigint AS timeout_ms \gset
SELECT set_config('statement_timeout', :'timeout_ms', false);
CREATE TEMP TABLE cancel_outcome AS
  SELECT (o).* FROM (SELECT pg_temp.outcome(
    $q$SELECT count(*) FROM gpu_density_peaks('SELECT id, f FROM mem_pts', n_clusters => 5, device => 'gpu')$q$,
    'SELECT id, f FROM mem_pts') o) x;
RESET statement_timeout;
SELECT state, in_gather, message, round(ms) AS ms, :timeout_ms AS timeout_ms FROM cancel_outcome;
SELECT CASE WHEN state = '57014' AND NOT in_gather AND ms >= :read_ms
            THEN 'PASS' ELSE 'FAIL' END AS cancelled_in_gpu_run,
       CASE state WHEN 'none' THEN 'the run ended before the timeout: no cancel took place'
                     WHEN '57014' THEN CASE WHEN in_gather THEN 'cancelled during the gather, not the GPU run'
                                            ELSE 'cancelled after the gather' END
                     ELSE 'another error: ' || message END AS what
FROM cancel_outcome;
SELECT free_memory AS free_after_cancel FROM gpuclust_devices() WHERE device_id = 0 \gset
SELECT CASE WHEN abs(:free_before - :free_after_cancel) < 64 * 1024 * 1024
            THEN 'PASS' ELSE 'FAIL' END AS memory_after_cancel,
       :free_before AS free_before, :free_after_cancel AS free_after;

-- ------------------------------------------------ an ERROR inside the GPU run
-- Single-precision rows whose squared distances could pass the float limit
-- pass the gather (1e18 is a real) and are refused by the GPU k-means after
-- it has uploaded them and computed their statistics on the device
-- (KMeans::check_single_range): the error comes from inside the GPU run.
CREATE TEMP TABLE error_outcome AS
  SELECT (o).* FROM (SELECT pg_temp.outcome(
    $q$SELECT count(*) FROM gpu_kmeans('SELECT id, CASE WHEN id = 1999999 THEN array_fill(1e18::real, ARRAY[8]) ELSE f END FROM mem_pts', 5, device => 'gpu')$q$,
    'SELECT id, CASE WHEN id = 1999999') o) x;
SELECT state, in_gather, message FROM error_outcome;
SELECT CASE WHEN state = '22023' AND NOT in_gather
             AND message LIKE 'the rows%are too large for the GPU''s single-precision k-means%'
            THEN 'PASS' ELSE 'FAIL' END AS error_in_gpu_run
FROM error_outcome;
SELECT count(*) AS rows_after_error FROM gpu_dbscan('SELECT id, f FROM mem_pts LIMIT 50000', 0.3, 5, 'gpu');
SELECT free_memory AS free_after_error FROM gpuclust_devices() WHERE device_id = 0 \gset
SELECT CASE WHEN abs(:free_before - :free_after_error) < 64 * 1024 * 1024
            THEN 'PASS' ELSE 'FAIL' END AS memory_after_error,
       :free_before AS free_before, :free_after_error AS free_after;
DROP TABLE mem_pts;
