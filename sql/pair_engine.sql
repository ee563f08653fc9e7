-- The pair engine (common/pairs.h): DBSCAN and density peaks from 16
-- features on decide every pair of rows through matrix-product tiles with a
-- proven error bound, and the pairs the bound cannot decide in the
-- canonical arithmetic.  The answers are those of the grid and the scans:
-- gpuclust.pair_path forces either path, and both must give the same rows.
-- The data: 16 features of one decimal on a lattice (pairs at exactly eps),
-- duplicate rows, and a far outlier; as real[] and as double precision[].
CREATE TABLE wide16 AS
SELECT g AS id,
       ARRAY(SELECT round((((g * 7 + k * 13) % 10) / 10.0 + (g % 3) * 5)::numeric, 1)::float8
             FROM generate_series(1, 16) k) AS f
FROM generate_series(1, 400) g;
INSERT INTO wide16 SELECT id + 1000, f FROM wide16 WHERE id <= 40;   -- duplicates
INSERT INTO wide16 VALUES (2000, array_fill(1e9::float8, ARRAY[16])); -- a far outlier

CREATE TEMP TABLE runs (path text, kind text, id bigint, a integer, b boolean, r float8, d float8);

CREATE FUNCTION run_paths() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  p text;
BEGIN
  FOREACH p IN ARRAY ARRAY['pairs', 'index'] LOOP
    PERFORM set_config('gpuclust.pair_path', p, true);
    INSERT INTO runs SELECT p, 'dbscan f8', id, cluster_id, is_core, NULL, NULL
      FROM gpu_dbscan('SELECT id, f FROM wide16', eps => 1.0, min_pts => 4);
    INSERT INTO runs SELECT p, 'dbscan f4', id, cluster_id, is_core, NULL, NULL
      FROM gpu_dbscan('SELECT id, f::real[] FROM wide16', eps => 1.0, min_pts => 4);
    INSERT INTO runs SELECT p, 'dbscan cosine', id, cluster_id, is_core, NULL, NULL
      FROM gpu_dbscan('SELECT id, f FROM wide16', eps => 0.01, min_pts => 4, metric => 'cosine');
    INSERT INTO runs SELECT p, 'dpeaks gaussian', id, cluster_id, is_center, rho, delta
      FROM gpu_density_peaks('SELECT id, f FROM wide16', n_clusters => 3, dc => 1.0);
    INSERT INTO runs SELECT p, 'dpeaks cutoff', id, cluster_id, is_center, rho, delta
      FROM gpu_density_peaks('SELECT id, f::real[] FROM wide16', n_clusters => 3, dc => 1.0,
                             kernel => 'cutoff');
  END LOOP;
END $$;
SELECT run_paths();

-- every answer the same on both paths (no row printed)
(SELECT kind, id, a, b, r, d FROM runs WHERE path = 'pairs'
 EXCEPT SELECT kind, id, a, b, r, d FROM runs WHERE path = 'index')
UNION ALL
(SELECT kind, id, a, b, r, d FROM runs WHERE path = 'index'
 EXCEPT SELECT kind, id, a, b, r, d FROM runs WHERE path = 'pairs');

-- and not a trivial answer: clusters, core rows and noise on each
SELECT kind, count(DISTINCT a) AS clusters, count(*) FILTER (WHERE b) AS flagged,
       count(*) FILTER (WHERE a IS NULL) AS noise, count(*) AS rows
FROM runs WHERE path = 'pairs' GROUP BY kind ORDER BY kind;

-- the settings take only their values
SET gpuclust.pair_path = 'sometimes';
SET gpuclust.pair_screen = 'fp16';
SHOW gpuclust.pair_path;
SHOW gpuclust.pair_screen;

DROP FUNCTION run_paths();
DROP TABLE wide16;
