-- The developer settings: settable per session, shown by name, hidden from
-- SHOW ALL, and none of them changes an answer.  With gpuclust.device = gpu
-- (the GPU suite) the comparisons below run the GPU with each setting
-- against the CPU.

LOAD 'gpuclust';

SET gpuclust.dbscan_grid = 'coarse';
SHOW gpuclust.dbscan_grid;
SET gpuclust.dbscan_grid = 'hexagonal';
SET gpuclust.kmeans_gemm = 'sgemm';
SHOW gpuclust.kmeans_gemm;
SET gpuclust.kmeans_window = 1e6;
SHOW gpuclust.kmeans_window;
SET gpuclust.kmeans_window = -1;
-- a factor between 0 and 1 would narrow the window: refused, 0 (the default) and 1 taken
SET gpuclust.kmeans_window = 0.5;
SET gpuclust.kmeans_window = 1;
SHOW gpuclust.kmeans_window;
SET gpuclust.kmeans_window = 0;
SET gpuclust.kmeans_window = 1e6;
SET gpuclust.kmeans_tile_rows = 64;
SET gpuclust.kmeans_chunk_rows = 2048;
SET gpuclust.backend_debug = on;
SHOW gpuclust.backend_debug;
RESET ALL;
SHOW gpuclust.dbscan_grid;

-- hidden from SHOW ALL and pg_settings; the user settings are listed (those read at server
-- start, gpuclust.service*, exist only where gpuclust is in shared_preload_libraries)
SELECT name FROM pg_settings WHERE name LIKE 'gpuclust.%' AND context <> 'postmaster' ORDER BY name;

CREATE TABLE tpts (id bigint, f real[]);
-- two blobs of 1,500 rows on a 0.01 lattice, with duplicates, and a far outlier
INSERT INTO tpts
SELECT g, ARRAY[(g % 2) * 5 + round((sin(g * 1.3) * 0.8)::numeric, 2),
                round((cos(g * 0.7) * 0.8)::numeric, 2)]::real[]
FROM generate_series(1, 3000) g;
INSERT INTO tpts VALUES (3001, ARRAY[1e6, 1e6]::real[]);

CREATE TABLE tpts_wide (id bigint, f real[]);
INSERT INTO tpts_wide
SELECT g, array_agg(((g % 7) * 3 + sin(g * j * 0.37))::real ORDER BY j)
FROM generate_series(1, 2000) g, generate_series(1, 40) j GROUP BY g;

CREATE TEMP TABLE ref_dbscan AS
  SELECT * FROM gpu_dbscan('SELECT id, f FROM tpts', 0.05, 4, device => 'cpu');
CREATE TEMP TABLE ref_kmeans AS
  SELECT * FROM gpu_kmeans('SELECT id, f FROM tpts_wide', 7, seed => 3, device => 'cpu');

SELECT count(DISTINCT cluster_id) AS clusters, count(*) FILTER (WHERE cluster_id IS NULL) AS noise
FROM ref_dbscan;
SELECT count(DISTINCT cluster_id) AS clusters FROM ref_kmeans;

-- rows of gpu_dbscan / gpu_kmeans with one setting changed that differ from the CPU's
CREATE FUNCTION pg_temp.dbscan_diff(setting text, value text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE diff bigint;
BEGIN
  PERFORM set_config(setting, value, true);
  SELECT count(*) INTO diff FROM (
    (SELECT * FROM gpu_dbscan('SELECT id, f FROM tpts', 0.05, 4) EXCEPT SELECT * FROM ref_dbscan)
    UNION ALL
    (SELECT * FROM ref_dbscan EXCEPT SELECT * FROM gpu_dbscan('SELECT id, f FROM tpts', 0.05, 4))) d;
  RETURN diff;
END $$;
CREATE FUNCTION pg_temp.kmeans_diff(setting text, value text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE diff bigint;
BEGIN
  PERFORM set_config(setting, value, true);
  SELECT count(*) INTO diff FROM (
    SELECT id, cluster_id FROM gpu_kmeans('SELECT id, f FROM tpts_wide', 7, seed => 3)
    EXCEPT SELECT id, cluster_id FROM ref_kmeans) d;
  RETURN diff;
END $$;

BEGIN;
SELECT v AS grid, pg_temp.dbscan_diff('gpuclust.dbscan_grid', v) AS differing
FROM unnest(ARRAY['auto', 'fine', 'coarse']) v;
SELECT s AS setting, pg_temp.kmeans_diff(split_part(s, '=', 1), split_part(s, '=', 2)) AS differing
FROM unnest(ARRAY['gpuclust.kmeans_gemm=sgemm', 'gpuclust.kmeans_window=1e6',
                  'gpuclust.kmeans_tile_rows=64', 'gpuclust.kmeans_chunk_rows=1024']) s;
COMMIT;
