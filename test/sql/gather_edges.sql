-- Edges of the gather and of the device choice.

-- SELECT INTO creates a table: refused, and named as what it is
SELECT * FROM gpu_dbscan('SELECT g::bigint AS id, g::real AS x INTO gather_edges_t FROM generate_series(1, 3) g', 1, 2);
SELECT to_regclass('gather_edges_t') AS not_created;

-- very wide rows: the first buffer is sized by bytes, not by a fixed row count
SELECT count(*), count(cluster_id) AS clustered
FROM gpu_dbscan('SELECT g, array_fill(0.5::real, ARRAY[5000000]) FROM generate_series(1, 2) g', 1, 2, device => 'cpu');

-- infinities get a hint about infinities
SELECT * FROM gpu_dbscan('SELECT 5, ''-Infinity''::float8 AS x', 0.2, 3);

-- device => 'gpu' without a usable GPU fails before the query runs (55000),
-- even when the query returns no row; with a GPU the query's own error comes
DO $$
DECLARE
  ngpu int;
  st text;
BEGIN
  SELECT count(*) INTO ngpu FROM gpuclust_devices();
  BEGIN
    PERFORM * FROM gpu_dbscan('SELECT 1::bigint, (1 / 0)::real', 1, 2, device => 'gpu');
    st := 'no error';
  EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE;
  END;
  IF st <> (CASE WHEN ngpu = 0 THEN '55000' ELSE '22012' END) THEN
    RAISE EXCEPTION 'device gpu with % GPU(s) on a failing query: SQLSTATE %', ngpu, st;
  END IF;
  BEGIN
    PERFORM * FROM gpu_dbscan('SELECT 1::bigint, 1::real WHERE false', 1, 2, device => 'gpu');
    st := 'no error';
  EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE;
  END;
  IF st <> (CASE WHEN ngpu = 0 THEN '55000' ELSE 'no error' END) THEN
    RAISE EXCEPTION 'device gpu with % GPU(s) on an empty query: %', ngpu, st;
  END IF;
  RAISE NOTICE 'device gpu: as expected for the GPUs present';
END $$;
