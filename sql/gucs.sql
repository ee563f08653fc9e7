-- GUCs and the choice of device.  The output is the same with and without
-- a GPU: what depends on the hardware is checked inside DO blocks.

-- The settings exist once the library is loaded (any gpuclust call loads it).
LOAD 'gpuclust';

SHOW gpuclust.timing;
SET gpuclust.device = 'cpu';
SHOW gpuclust.device;
SET gpuclust.device = 'auto';
SHOW gpuclust.device;
SET gpuclust.device = 'tpu';
SET gpuclust.device_id = -1;
SET gpuclust.kmeans_precision = 'tf32';
SHOW gpuclust.kmeans_precision;
RESET gpuclust.kmeans_precision;
SET gpuclust.no_such_setting = 1;
RESET gpuclust.device;

CREATE TABLE gpts (id bigint, f real[]);
INSERT INTO gpts SELECT g, ARRAY[g % 10, g / 10]::real[] FROM generate_series(1, 200) g;

-- device => 'cpu' and 'auto' give the same answer whatever the hardware
SELECT count(*) AS differing FROM (
  (SELECT * FROM gpu_dbscan('SELECT id, f FROM gpts', 1.5, 4, device => 'cpu')
   EXCEPT SELECT * FROM gpu_dbscan('SELECT id, f FROM gpts', 1.5, 4, device => 'auto'))
  UNION ALL
  (SELECT * FROM gpu_dbscan('SELECT id, f FROM gpts', 1.5, 4, device => 'auto')
   EXCEPT SELECT * FROM gpu_dbscan('SELECT id, f FROM gpts', 1.5, 4, device => 'cpu'))) d;

-- device => 'gpu': the CPU's answer where a GPU is usable, otherwise a
-- clear error (SQLSTATE 55000) that says why
DO $$
DECLARE
  ngpu int;
  diff bigint;
  msg text;
  hint text;
BEGIN
  SELECT count(*) INTO ngpu FROM gpuclust_devices();
  BEGIN
    SELECT count(*) INTO diff FROM (
      SELECT * FROM gpu_dbscan('SELECT id, f FROM gpts', 1.5, 4, device => 'gpu')
      EXCEPT SELECT * FROM gpu_dbscan('SELECT id, f FROM gpts', 1.5, 4, device => 'cpu')) d;
    IF ngpu = 0 THEN
      RAISE EXCEPTION 'device gpu worked although gpuclust_devices() lists no GPU';
    END IF;
    IF diff <> 0 THEN
      RAISE EXCEPTION 'GPU and CPU differ in % rows', diff;
    END IF;
  EXCEPTION WHEN object_not_in_prerequisite_state THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
    IF ngpu > 0 THEN
      RAISE;
    END IF;
    IF msg <> 'no usable GPU for gpuclust' OR hint NOT LIKE 'Use device => ''cpu''%' THEN
      RAISE EXCEPTION 'unexpected error without a GPU: % (%)', msg, hint;
    END IF;
  END;
  RAISE NOTICE 'device => gpu behaves as expected';
END
$$;

-- gpuclust.device = 'gpu' is the same as device => 'gpu', and the argument wins
DO $$
DECLARE
  ngpu int;
  n bigint;
BEGIN
  SELECT count(*) INTO ngpu FROM gpuclust_devices();
  SET LOCAL gpuclust.device = 'gpu';
  BEGIN
    SELECT count(*) INTO n FROM gpu_dbscan('SELECT id, f FROM gpts', 1.5, 4);
    IF ngpu = 0 THEN
      RAISE EXCEPTION 'gpuclust.device = gpu worked without a GPU';
    END IF;
  EXCEPTION WHEN object_not_in_prerequisite_state THEN
    IF ngpu > 0 THEN
      RAISE;
    END IF;
  END;
  SELECT count(*) INTO n FROM gpu_dbscan('SELECT id, f FROM gpts', 1.5, 4, device => 'cpu');
  RAISE NOTICE 'device => cpu overrides gpuclust.device: % rows', n;
END
$$;

-- gpuclust_devices() has its columns whatever the hardware
SELECT count(*) >= 0 AS listed,
       bool_and(total_memory > 0 AND compute_capability ~ '^[0-9]+\.[0-9]+$') IS NOT FALSE AS well_formed
  FROM gpuclust_devices();

-- the timing NOTICE is off by default; SET turns it on (its figures vary,
-- so its exact form is tested in test/test_sql_behaviour.py)
SET gpuclust.timing = on;
SHOW gpuclust.timing;
RESET gpuclust.timing;
