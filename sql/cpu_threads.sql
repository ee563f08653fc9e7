-- gpuclust.cpu_threads: the threads of the CPU back end.  The answers do not
-- depend on it: every algorithm gives the same rows on 1, 3 and 8 threads.

LOAD 'gpuclust';
SET gpuclust.cpu_threads = 3;
SHOW gpuclust.cpu_threads;
SET gpuclust.cpu_threads = 0;
SET gpuclust.cpu_threads = 257;
RESET gpuclust.cpu_threads;
SELECT current_setting('gpuclust.cpu_threads')::int BETWEEN 1 AND 64 AS default_in_range;

-- 40,000 rows: blobs on a 0.01 lattice (duplicates), a sparse background and far rows
CREATE TABLE tpts AS
SELECT g::bigint AS id,
       CASE WHEN g % 10 = 0
            THEN ARRAY[round(((g::bigint * 7919) % 1000 / 10.0)::numeric, 2),
                       round(((g::bigint * 104729) % 1000 / 10.0)::numeric, 2)]
            ELSE ARRAY[(g % 25) * 4 + round((sin(g * 1.3) * 0.6)::numeric, 2),
                       (g % 7) * 12 + round((cos(g * 0.7) * 0.6)::numeric, 2)]
       END::real[] AS f
FROM generate_series(1, 40000) g
UNION ALL SELECT 40001, ARRAY[1e6, -1e6]::real[]
UNION ALL SELECT 40002, ARRAY[-1e6, 1e6]::real[];

CREATE TABLE answers (threads int, algorithm text, id bigint, a text);
CREATE FUNCTION answer_with(t int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('gpuclust.cpu_threads', t::text, true);
  INSERT INTO answers
    SELECT t, 'dbscan', id, concat_ws(' ', cluster_id, is_core)
    FROM gpu_dbscan('SELECT id, f FROM tpts', 0.05, 5, device => 'cpu');
  INSERT INTO answers
    SELECT t, 'density_peaks', id, concat_ws(' ', cluster_id, rho, delta, is_center)
    FROM gpu_density_peaks('SELECT id, f FROM tpts', 40, dc => 0.5, kernel => 'cutoff', device => 'cpu');
  INSERT INTO answers
    SELECT t, 'kmeans', id, concat_ws(' ', cluster_id, distance)
    FROM gpu_kmeans('SELECT id, f FROM tpts', 30, seed => 5, device => 'cpu');
  INSERT INTO answers
    SELECT t, 'kmeans_centroids', cluster_id, concat_ws(' ', centroid, size, inertia)
    FROM gpu_kmeans_centroids('SELECT id, f FROM tpts', 30, seed => 5, device => 'cpu');
END $$;
BEGIN;
SELECT answer_with(1);
SELECT answer_with(3);
SELECT answer_with(8);
COMMIT;

-- every answer of 3 and 8 threads is the one thread's, text for text (all digits of the doubles)
SELECT x.algorithm, count(*) FILTER (WHERE x.threads = 3) AS rows,
       count(*) FILTER (WHERE x.a IS DISTINCT FROM b.a) AS differing
FROM answers x LEFT JOIN answers b ON b.threads = 1 AND b.algorithm = x.algorithm AND b.id = x.id
WHERE x.threads > 1 GROUP BY x.algorithm ORDER BY x.algorithm;
-- and the answers are not trivial
SELECT algorithm, count(DISTINCT split_part(a, ' ', 1)) > 5 AS several_clusters
FROM answers WHERE threads = 1 GROUP BY algorithm ORDER BY algorithm;

DROP FUNCTION answer_with(int);
DROP TABLE answers, tpts;
