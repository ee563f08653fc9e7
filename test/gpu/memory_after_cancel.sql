-- On the GPU machine: a GPU run cancelled by statement_timeout, and one that
-- fails with an ERROR, leave no device memory behind, and the backend works
-- afterwards.  Prints PASS or FAIL lines.
\set ON_ERROR_STOP 0
CREATE EXTENSION IF NOT EXISTS gpuclust;
SELECT setseed(0.7);
DROP TABLE IF EXISTS mem_pts;
CREATE UNLOGGED TABLE mem_pts AS
  SELECT g::bigint AS id, ARRAY(SELECT random() FROM generate_series(1, 8) WHERE g > 0)::real[] AS f
  FROM generate_series(1, 300000) g;
-- a first GPU call creates the CUDA context; measure after it
SELECT count(*) AS warm FROM gpu_dbscan('SELECT id, f FROM mem_pts LIMIT 50000', 0.3, 5, 'gpu');
SELECT free_memory AS free_before FROM gpuclust_devices() WHERE device_id = 0 \gset
-- gaussian density peaks on 300k 8-D rows is all pairs: seconds of GPU work
SET statement_timeout = '700ms';
\timing on
SELECT count(*) FROM gpu_density_peaks('SELECT id, f FROM mem_pts', n_clusters => 5, device => 'gpu');
\timing off
RESET statement_timeout;
SELECT free_memory AS free_after_cancel FROM gpuclust_devices() WHERE device_id = 0 \gset
SELECT CASE WHEN abs(:free_before - :free_after_cancel) < 64 * 1024 * 1024
            THEN 'PASS' ELSE 'FAIL' END AS after_cancel,
       :free_before AS free_before, :free_after_cancel AS free_after;
-- an ERROR raised while the GPU back end holds memory: k greater than the rows
-- is caught before; a bad initial_centroids shape too; use a query that fails
-- during the gather of a GPU call instead, then a run that works
SELECT count(*) FROM gpu_dbscan('SELECT id, CASE WHEN id = 299999 THEN NULL ELSE f END FROM mem_pts', 0.3, 5, 'gpu');
SELECT count(*) AS rows_after_error FROM gpu_dbscan('SELECT id, f FROM mem_pts LIMIT 50000', 0.3, 5, 'gpu');
SELECT free_memory AS free_after_error FROM gpuclust_devices() WHERE device_id = 0 \gset
SELECT CASE WHEN abs(:free_before - :free_after_error) < 64 * 1024 * 1024
            THEN 'PASS' ELSE 'FAIL' END AS after_error,
       :free_before AS free_before, :free_after_error AS free_after;
DROP TABLE mem_pts;
