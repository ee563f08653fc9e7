-- Edges of the gather and of the device choice.

-- SELECT INTO creates a table: refused, and named as what it is
SELECT * FROM gpu_dbscan('SELECT g::bigint AS id, g::real AS x INTO gather_edges_t FROM generate_series(1, 3) g', 1, 2);
SELECT to_regclass('gather_edges_t') AS not_created;

-- very wide rows: the first buffer is sized by bytes, not by a fixed row count
SELECT count(*), count(cluster_id) AS clustered
FROM gpu_dbscan('SELECT g, array_fill(0.5::real, ARRAY[5000000]) FROM generate_series(1, 2) g', 1, 2, device => 'cpu');

-- infinities get a hint about infinities
SELECT * FROM gpu_dbscan('SELECT 5, ''-Infinity''::float8 AS x', 0.2, 3);

-- in double precision (the default for these types) values beyond 1e150 in
-- magnitude, where squared distances could overflow, are refused with the
-- row id (22003): beyond the range of double precision (numeric only) ...
SELECT * FROM gpu_dbscan('SELECT g * 10 AS id, (CASE WHEN g = 3 THEN 1e400 ELSE g END)::numeric AS x FROM generate_series(1, 4) g', 1, 2);
\echo :SQLSTATE
SELECT * FROM gpu_dbscan('SELECT 7, -1.5e400::numeric AS x', 1, 2);
SELECT * FROM gpu_dbscan('SELECT 7, 1e-400::numeric AS x', 1, 2);
\echo :SQLSTATE
-- ... or within it but beyond 1e150
SELECT * FROM gpu_dbscan('SELECT 8, 1.5e150::float8 AS x', 1, 2);
SELECT * FROM gpu_dbscan('SELECT 8, 0::real AS x, -1e200::numeric AS y', 1, 2);
-- values of 1e39 or 1e-50 are fine in double precision
SELECT * FROM gpu_dbscan('SELECT 8, 1e39::numeric AS x UNION ALL SELECT 9, 1e-50::float8', 1, 2);
-- in single precision, values that real cannot hold are refused with the row
-- id (22003), whatever the input type: beyond the range of double precision
-- (numeric only) ...
SET gpuclust.precision = single;
SELECT * FROM gpu_dbscan('SELECT 7, -1.5e400::numeric AS x', 1, 2);
SELECT * FROM gpu_dbscan('SELECT 7, 1e-400::numeric AS x', 1, 2);
-- ... beyond the range of real ...
SELECT * FROM gpu_dbscan('SELECT 8, 1e39::numeric AS x', 1, 2);
\echo :SQLSTATE
SELECT * FROM gpu_dbscan('SELECT 8, 0::real AS x, -1e39::float8 AS y', 1, 2);
SELECT * FROM gpu_dbscan('SELECT 8, ARRAY[0, 1e39]::float8[] AS f', 1, 2);
-- ... and not zero but zero as a real (a real or real[] value never is)
SELECT * FROM gpu_dbscan('SELECT 9, 1e-50::float8 AS x', 1, 2);
\echo :SQLSTATE
SELECT * FROM gpu_dbscan('SELECT 9, 1e-50::numeric AS x', 1, 2);
SELECT * FROM gpu_dbscan('SELECT 9, 1e-310::numeric AS x', 1, 2);
SELECT * FROM gpu_dbscan('SELECT g, ARRAY[g, CASE WHEN g = 2 THEN -1e-46 ELSE 0 END]::float8[] FROM generate_series(1, 3) g', 1, 2);
\echo :SQLSTATE
RESET gpuclust.precision;
-- NaN and infinities of numeric are named as such
SELECT * FROM gpu_dbscan('SELECT 11, ''NaN''::numeric AS x', 1, 2);
SELECT * FROM gpu_dbscan('SELECT 11, ''Infinity''::numeric AS x', 1, 2);
-- zeros, and subnormal reals, stay as they are on every input path
SELECT count(*), count(cluster_id) AS clustered
FROM gpu_dbscan('SELECT g, 0::numeric AS a, -0.0::float8 AS b, 0::real AS c, 0::int AS d FROM generate_series(1, 3) g', 1, 2, device => 'cpu');
SELECT centroid[1] > 0 AS x_nonzero, centroid[1] < 1.2e-38 AS x_subnormal,
       centroid[2] > 0 AS y_nonzero, centroid[2] < 1.2e-38 AS y_subnormal
FROM gpu_kmeans_centroids('SELECT g, 1e-40::float8 * g AS x, (g * 1e-44)::numeric AS y FROM generate_series(1, 3) g', 1, device => 'cpu');
SELECT centroid[1] > 0 AS f8_nonzero, centroid[1] < 1.2e-38 AS f8_subnormal,
       centroid[2] > 0 AS smallest_nonzero
FROM gpu_kmeans_centroids('SELECT g, ARRAY[1e-40 * g, 1e-45]::float8[] FROM generate_series(1, 3) g', 1, device => 'cpu');
SELECT centroid[1] > 0 AS f4_nonzero, centroid[1] < 1.2e-38 AS f4_subnormal
FROM gpu_kmeans_centroids('SELECT g, ARRAY[1e-40 * g]::real[] FROM generate_series(1, 3) g', 1, device => 'cpu');
-- subnormal points 1e-40 apart are distinct: all noise at eps 5e-41, one cluster at 1.5e-40
SELECT count(cluster_id) AS at_5e_41 FROM gpu_dbscan('SELECT g, (g * 1e-40)::float8 AS x FROM generate_series(0, 3) g', 5e-41, 2, device => 'cpu');
SELECT count(DISTINCT cluster_id) AS clusters, count(cluster_id) AS clustered
FROM gpu_dbscan('SELECT g, ARRAY[g * 1e-40]::float8[] FROM generate_series(0, 3) g', 1.5e-40, 2, device => 'cpu');

-- device => 'gpu' without a usable GPU fails before the query runs (55000),
-- even when the query returns no row; with a GPU the query's own error comes
DO $$
DECLARE
  ngpu int;
  st text;
  c text[];
BEGIN
  SELECT count(*) INTO ngpu FROM gpuclust_devices();
  -- the case, its query, the SQLSTATE without a GPU, with one
  FOREACH c SLICE 1 IN ARRAY ARRAY[
    ['a failing query', 'SELECT 1::bigint, (1 / 0)::real', '55000', '22012'],
    ['an empty query', 'SELECT 1::bigint, 1::real WHERE false', '55000', 'no error']]
  LOOP
    BEGIN
      PERFORM * FROM gpu_dbscan(c[2], 1, 2, device => 'gpu');
      st := 'no error';
    EXCEPTION WHEN OTHERS THEN
      GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE;
    END;
    IF st <> (CASE WHEN ngpu = 0 THEN c[3] ELSE c[4] END) THEN
      RAISE EXCEPTION 'device gpu with % GPU(s) on %: SQLSTATE %', ngpu, c[1], st;
    END IF;
  END LOOP;
  RAISE NOTICE 'device gpu: as expected for the GPUs present';
END $$;
