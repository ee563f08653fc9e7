-- k-means on distributed tables, on one node: gpu_kmeans_step (the Lloyd
-- step as an aggregate), its state type and text form, gpu_kmeans_predict,
-- gpu_kmeans_distance and gpu_kmeans_fit_distributed; every bad argument is
-- an ERROR with a SQLSTATE and a DETAIL or HINT.

\i sql/include/report_error.sql

-- three blobs in two dimensions, values with many bits (sums that round)
CREATE TABLE kd (id bigint, f real[], g double precision[], x double precision);
INSERT INTO kd
SELECT i, ARRAY[(i % 3) * 4 + sin(i) / 3, (i % 3) * 2 + cos(i * 1.3) / 7]::real[],
       ARRAY[(i % 3) * 4 + sin(i) / 3, (i % 3) * 2 + cos(i * 1.3) / 7],
       (i % 3) * 4 + sin(i) / 3
FROM generate_series(1, 3000) i;
ANALYZE kd;

-- the step: its centroids are the exact sums rounded once and divided by the
-- counts (here the features times 2^40 are integers, summed exactly as
-- numeric), its sizes those of gpu_kmeans_assign's labels
SELECT bool_and((f[1]::float8 * 2^40)::bigint = f[1]::float8 * 2^40) AS scaled_exact FROM kd;
SELECT (s).sizes, (s).inertia, (s).centroids
FROM (SELECT gpu_kmeans_step(f, '{{0,0},{4,2},{8,4}}'::float8[]) AS s FROM kd) q;
WITH a AS (SELECT * FROM gpu_kmeans_assign('SELECT id, f FROM kd', '{{0,0},{4,2},{8,4}}'::float8[], device => 'cpu')),
     s AS (SELECT gpu_kmeans_step(f, '{{0,0},{4,2},{8,4}}'::float8[]) AS s FROM kd)
SELECT (SELECT array_agg(n ORDER BY c) FROM (SELECT cluster_id c, count(*) n FROM a GROUP BY 1) z) = (s).sizes AS sizes_agree,
       (SELECT array_agg(m ORDER BY c) FROM (SELECT a.cluster_id c, sum((kd.f[1]::float8 * 2^40)::bigint)::numeric::float8 / 2^40 / count(*) m
                                              FROM a JOIN kd USING (id) GROUP BY 1) z)
         = (SELECT array_agg((s).centroids[j][1] ORDER BY j) FROM generate_series(1, 3) j) AS means_exact
FROM s;

-- predict and distance: gpu_kmeans_assign's labels and distances, both metrics
SELECT count(*) AS rows,
       count(*) FILTER (WHERE a.cluster_id = gpu_kmeans_predict(kd.f, '{{0,0},{4,2},{8,4}}'::float8[])) AS same_label,
       count(*) FILTER (WHERE a.distance = gpu_kmeans_distance(kd.f, '{{0,0},{4,2},{8,4}}'::float8[])) AS same_distance
FROM gpu_kmeans_assign('SELECT id, f FROM kd', '{{0,0},{4,2},{8,4}}'::float8[], device => 'cpu') a JOIN kd USING (id);
SELECT count(*) AS rows,
       count(*) FILTER (WHERE a.cluster_id = gpu_kmeans_predict(kd.g, '{{1,0},{4,2},{8,1}}'::float8[], 'cosine')) AS same_label,
       count(*) FILTER (WHERE a.distance = gpu_kmeans_distance(kd.g, '{{1,0},{4,2},{8,1}}'::float8[], 'cosine')) AS same_distance
FROM gpu_kmeans_assign('SELECT id, g FROM kd', '{{1,0},{4,2},{8,1}}'::float8[], 'cosine', device => 'cpu') a JOIN kd USING (id);
-- scalar features (anyelement), a NULL feature
SELECT gpu_kmeans_predict(5.9::float8, '{{0},{4},{8}}'::float8[]), gpu_kmeans_predict(6::int, '{{0},{4},{8}}'::float8[]),
       gpu_kmeans_predict(6.5::numeric, '{{0},{4},{8}}'::float8[]), gpu_kmeans_distance(7::smallint, '{{0},{4},{8}}'::float8[]),
       gpu_kmeans_predict(NULL::real[], '{{0},{4},{8}}'::float8[]) IS NULL AS null_feature;
-- a tie goes to the lower cluster number
SELECT gpu_kmeans_predict(ARRAY[2, 0]::real[], '{{0,0},{4,0}}'::float8[]);

-- the same step bit for bit under parallel aggregation (the partial states
-- combined in arrival order) and on one process
CREATE TEMP TABLE serial_step AS
SELECT gpu_kmeans_step(f, '{{0,0},{4,2},{8,4}}'::float8[])::text AS s1,
       gpu_kmeans_step(g, '{{1,0},{4,2},{8,1}}'::float8[], 'cosine')::text AS s2,
       gpu_kmeans_step_state(x, '{{0},{5}}'::float8[], 'euclidean', 1)::text AS s3
FROM kd;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 4;
SET parallel_leader_participation = off;
EXPLAIN (COSTS OFF) SELECT gpu_kmeans_step(f, '{{0,0},{4,2},{8,4}}'::float8[]) FROM kd;
SELECT s1 = (SELECT gpu_kmeans_step(f, '{{0,0},{4,2},{8,4}}'::float8[])::text FROM kd) AS parallel_same,
       s2 = (SELECT gpu_kmeans_step(g, '{{1,0},{4,2},{8,1}}'::float8[], 'cosine')::text FROM kd) AS parallel_cosine_same,
       s3 = (SELECT gpu_kmeans_step_state(x, '{{0},{5}}'::float8[], 'euclidean', 1)::text FROM kd) AS parallel_state_same
FROM serial_step;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
RESET parallel_leader_participation;

-- partial states through their text form, combined in every order and grouping
CREATE TEMP TABLE parts AS
SELECT id % 4 AS part, gpu_kmeans_step_state(f, '{{0,0},{4,2},{8,4}}'::float8[], 'euclidean', 1) AS st
FROM kd GROUP BY 1;
CREATE TEMP TABLE parts_text AS SELECT part, st::text AS t FROM parts;
SELECT bool_and(t::gpu_kmeans_state::text = t) AS text_round_trip FROM parts_text;
WITH p AS (SELECT array_agg(t::gpu_kmeans_state ORDER BY part) a FROM parts_text),
     whole AS (SELECT gpu_kmeans_step_state(f, '{{0,0},{4,2},{8,4}}'::float8[], 'euclidean', 1)::text w FROM kd)
SELECT gpu_kmeans_step_combine(gpu_kmeans_step_combine(a[1], a[2]), gpu_kmeans_step_combine(a[3], a[4]))::text = w AS pairs,
       gpu_kmeans_step_combine(a[4], gpu_kmeans_step_combine(a[2], gpu_kmeans_step_combine(a[3], a[1])))::text = w AS reversed,
       gpu_kmeans_step_combine(gpu_kmeans_step_combine(gpu_kmeans_step_combine(a[1], a[3]), a[4]), a[2])::text = w AS shuffled,
       (gpu_kmeans_step_final(gpu_kmeans_step_combine(a[2], gpu_kmeans_step_combine(a[4], gpu_kmeans_step_combine(a[1], a[3])))))::text
         = (SELECT gpu_kmeans_step(f, '{{0,0},{4,2},{8,4}}'::float8[])::text FROM kd) AS final_same
FROM p, whole;

-- sums that cancel exactly, and magnitudes far apart (an ordinary sum would lose them)
SELECT (gpu_kmeans_step(v, '{{0}}'::float8[])).centroids
FROM (VALUES (ARRAY[1e100]::float8[]), (ARRAY[1]::float8[]), (ARRAY[-1e100]::float8[]), (ARRAY[2e-300]::float8[])) v(v);
SELECT (gpu_kmeans_step(v, '{{0}}'::float8[])).centroids
FROM (SELECT ARRAY[CASE WHEN i % 2 = 0 THEN 0.1 ELSE -0.1 END]::float8[] FROM generate_series(1, 1000) i) v(v);

-- NULL features are left out; an empty group gives NULL; a group of only
-- NULL features gives sizes 0 and the centroids unchanged
SELECT (gpu_kmeans_step(v, '{{0,0},{5,5}}'::float8[])).*
FROM (VALUES (ARRAY[1, 1]::real[]), (NULL), (ARRAY[6, 6]::real[]), (ARRAY[4, 4]::real[])) v(v);
SELECT gpu_kmeans_step(f, '{{0,0},{5,5}}'::float8[]) IS NULL AS empty_is_null FROM kd WHERE false;
SELECT (gpu_kmeans_step(NULL::real[], '{{0,0},{5,5}}'::float8[])).* FROM generate_series(1, 3);
-- per group, as a GROUP BY
SELECT id % 2 AS g, (gpu_kmeans_step(f, '{{0,0},{4,2},{8,4}}'::float8[])).sizes FROM kd GROUP BY 1 ORDER BY 1;

-- errors of the step: NULL, one-dimensional, NULL element, NaN, infinite and
-- too large centroids; dimension mismatch; zero cosine centroid; unknown
-- metric; feature errors; changing centroids within a group
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step(f, NULL) FROM kd$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step(f, '{0,0}'::float8[]) FROM kd$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step(f, '{{0,NULL}}'::float8[]) FROM kd$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step(f, '{{0,NaN}}'::float8[]) FROM kd$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step(f, '{{0,Infinity}}'::float8[]) FROM kd$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step(f, '{{0,1e200}}'::float8[]) FROM kd$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step(f, '{{0,0,0}}'::float8[]) FROM kd$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step(f, '{{0,0},{1,1}}'::float8[], 'cosine') FROM kd$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step(f, '{{0,0}}'::float8[], 'manhattan') FROM kd$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step(v, '{{0,0}}'::float8[]) FROM (VALUES ('{1,NaN}'::float8[])) v(v)$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step(v, '{{0,0}}'::float8[]) FROM (VALUES ('{1,NULL}'::float8[])) v(v)$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step(v, '{{0,0}}'::float8[], 'cosine') FROM (VALUES ('{0,0}'::float8[])) v(v)$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step(v, '{{0,0}}'::float8[]) FROM (VALUES ('{1,1e200}'::float8[])) v(v)$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step(v, '{{0,0}}'::float8[]) FROM (VALUES ('abc'::text)) v(v)$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step(f, CASE WHEN id < 10 THEN '{{0,0}}'::float8[] ELSE '{{1,1}}'::float8[] END) FROM kd$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step(f, '{{0,0}}'::float8[], CASE WHEN id < 10 THEN 'euclidean' ELSE 'cosine' END) FROM kd$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step_state(f, '{{0,0}}'::float8[], 'euclidean', 7) FROM kd$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step_trans(NULL, '{1,1}'::real[], '{{0,0}}'::float8[])$$);
-- combining states of different centroids or metrics
SELECT pg_temp.report_error($$SELECT gpu_kmeans_step_combine(
  (SELECT gpu_kmeans_step_state(f, '{{0,0}}'::float8[], 'euclidean', 1) FROM kd),
  (SELECT gpu_kmeans_step_state(f, '{{1,0}}'::float8[], 'euclidean', 1) FROM kd))$$);
-- states that are not one: bad prefix, odd or bad hex, truncated, inconsistent counts
SELECT pg_temp.report_error($$SELECT 'abc'::gpu_kmeans_state$$);
SELECT pg_temp.report_error($$SELECT 'gkm1:0'::gpu_kmeans_state$$);
SELECT pg_temp.report_error($$SELECT 'gkm1:zz'::gpu_kmeans_state$$);
SELECT pg_temp.report_error($$SELECT 'gkm1:0100000001000000'::gpu_kmeans_state$$);
SELECT pg_temp.report_error($$SELECT left(t, length(t) - 8)::gpu_kmeans_state FROM parts_text LIMIT 1$$);
SELECT pg_temp.report_error($$SELECT (t || '00')::gpu_kmeans_state FROM parts_text LIMIT 1$$);

-- errors of predict: NULL centroids, a feature of another dimension, not a feature type
SELECT pg_temp.report_error($$SELECT gpu_kmeans_predict(ARRAY[1,2]::real[], NULL)$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_predict(ARRAY[1,2,3]::real[], '{{0,0}}'::float8[])$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_predict('x'::text, '{{0,0}}'::float8[])$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_predict(ARRAY[1,2]::real[], '{{0,0}}'::float8[], 'cosine')$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_distance(ARRAY[1,'NaN']::float8[], '{{0,0}}'::float8[])$$);

-- the distributed fit (here over one node): with the same initial centroids
-- the model of gpu_kmeans_centroids, up to the last bits of the means
SELECT d.cluster_id, d.size, c.size AS single_node_size,
       (SELECT max(abs(a - b)) FROM unnest(d.centroid, c.centroid) u(a, b)) < 1e-9 AS centroid_close,
       abs(d.inertia - c.inertia) < 1e-6 * c.inertia AS inertia_close
FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kd', 3, initial_centroids => '{{0,0},{4,2},{8,4}}'::float8[]) d
JOIN gpu_kmeans_centroids('SELECT id, f FROM kd', 3, initial_centroids => '{{0,0},{4,2},{8,4}}'::float8[], device => 'cpu') c
  USING (cluster_id)
ORDER BY 1;
-- k-means|| finds the three blobs, the same whatever the parallel workers
CREATE TEMP TABLE fit1 AS SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kd', 3, seed => 7);
SELECT size, round(centroid[1]) + 0 AS x, round(centroid[2]) + 0 AS y FROM fit1 ORDER BY x;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SELECT (SELECT array_agg(m::text ORDER BY m.cluster_id) FROM fit1 m) =
       (SELECT array_agg(m::text ORDER BY m.cluster_id) FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kd', 3, seed => 7) m)
       AS parallel_fit_same;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
-- its labels are gpu_kmeans_assign's with its centroids
WITH m AS (SELECT array_agg(centroid ORDER BY cluster_id) c FROM fit1)
SELECT count(*) FILTER (WHERE a.cluster_id <> gpu_kmeans_predict(kd.f, m.c)) AS differ
FROM m, gpu_kmeans_assign('SELECT id, f FROM kd', (SELECT c FROM m), device => 'cpu') a JOIN kd USING (id);
-- other feature types, n_init, cosine, max_iter
SELECT count(*), sum(size) FROM gpu_kmeans_fit_distributed('SELECT id, x FROM kd', 3, n_init => 3);
SELECT count(*), sum(size) FROM gpu_kmeans_fit_distributed('SELECT id, g FROM kd', 3, metric => 'cosine', max_iter => 2);
SELECT sum(size) FROM gpu_kmeans_fit_distributed('SELECT id::int, f FROM kd', 2, tol => 0, oversampling => 0.5, rounds => 1);
-- more clusters than distinct rows: the duplicates become centroids
SELECT count(*), sum(size) FROM gpu_kmeans_fit_distributed('SELECT i, ARRAY[i % 2]::real[] FROM generate_series(1, 10) i', 3);

-- errors of the fit
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kd', 0)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kd', 5000)$$);
-- an empty query gives no model rows, as gpu_kmeans_centroids does
SELECT count(*) AS model_rows FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kd WHERE false', 1);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed(NULL, 2)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kd', 2, max_iter => 0)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kd', 2, tol => -1)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kd', 2, n_init => 0)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kd', 2, metric => 'l1')$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kd', 2, oversampling => 0)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kd', 2, rounds => 0)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kd', 2, initial_centroids => '{{0,0}}'::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kd', 1, initial_centroids => '{{0,0,0}}'::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kd', 1, initial_centroids => '{{0,NaN}}'::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kd', 1, n_init => 2, initial_centroids => '{{0,0}}'::float8[])$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, f, x FROM kd', 2)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed('SELECT f, id FROM kd', 2)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, id::text FROM kd', 2)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, CASE WHEN id = 5 THEN NULL ELSE f END FROM kd', 2)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, CASE WHEN id = 5 THEN ''{1,NaN}'' ELSE f END FROM kd', 2)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_kmeans_fit_distributed('SELECT id, f FROM no_such_table', 2)$$);


-- one call per shard (what gpu_kmeans_fit_distributed runs on each shard of a
-- Citus table), here over a plain table: gpu_kmeans_shard_step is
-- gpu_kmeans_step_state over the same rows, bit for bit; an empty relation
-- gives an empty state, not NULL
SELECT gpu_kmeans_shard_step('kd', 'f', '{{0,0},{4,2},{8,4}}'::float8[])::text
       = (SELECT gpu_kmeans_step_state(f, '{{0,0},{4,2},{8,4}}'::float8[], 'euclidean', 1)::text FROM kd) AS shard_step_same,
       gpu_kmeans_shard_step('kd', 'g', '{{1,0},{4,2},{8,1}}'::float8[], 'cosine', 2)::text
       = (SELECT gpu_kmeans_step_state(g, '{{1,0},{4,2},{8,1}}'::float8[], 'cosine', 2)::text FROM kd) AS cosine_same,
       gpu_kmeans_shard_step('kd', 'x', '{{0},{5}}'::float8[], 'euclidean', 0)::text
       = (SELECT gpu_kmeans_step_state(x, '{{0},{5}}'::float8[], 'euclidean', 0)::text FROM kd) AS scalar_same;
CREATE TEMP TABLE kd_empty (id bigint, f real[]);
SELECT (gpu_kmeans_step_final(gpu_kmeans_shard_step('kd_empty', 'f', '{{0,0},{4,2}}'::float8[]))).sizes AS empty_sizes;
-- the rows k-means|| picks: as many as asked, in a text form
SELECT left(gpu_kmeans_shard_rows('kd', 'id', 'f', 'first', NULL, 'euclidean', 1, 0, 0, 3), 5) AS form,
       length(gpu_kmeans_shard_rows('kd', 'id', 'f', 'first', NULL, 'euclidean', 1, 0, 0, 3))
       = 5 + 2 * (8 + 4 + 1 + 3 * (8 + 8 + 2 * 8)) AS three_rows,
       length(gpu_kmeans_shard_rows('kd', 'id', 'f', 'far', '{{0,0}}'::float8[], 'euclidean', 1, 0, 0, 2))
       = 5 + 2 * (8 + 4 + 1 + 2 * (8 + 8 + 2 * 8)) AS two_far;
-- errors
SELECT pg_temp.report_error($$SELECT gpu_kmeans_shard_step('kd', 'nosuch', '{{0,0}}'::float8[])$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_shard_step('kd', 'f', '{{0,0,0}}'::float8[])$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_shard_step('kd', 'f', NULL)$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_shard_step('kd', 'f', '{{0,0}}'::float8[], 'euclidean', 7)$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_shard_rows('kd', 'id', 'f', 'other', NULL, 'euclidean', 1, 0, 0, 3)$$);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_shard_rows('kd', 'f', 'f', 'first', NULL, 'euclidean', 1, 0, 0, 3)$$);
-- gpu_kmeans_shard_call (what the fit runs per shard and pass since 0.3.0):
-- inside a transaction block the backend keeps the relation's rows, labels
-- and Hamerly bounds between passes, and every pass's state is still the
-- stateless step's bit for bit (32 features, 20 centroids: the checked
-- product where OpenBLAS is installed); outside one it keeps nothing
CREATE TEMP TABLE kc AS
SELECT i AS id, ARRAY(SELECT (sin(i * 0.37 + t) * 3 + (i % 7) * 5 + t % 3)::real
                      FROM generate_series(1, 32) t) AS f
FROM generate_series(1, 3000) i;
CREATE FUNCTION pg_temp.kc_passes(metric text, passes integer) RETURNS TABLE (pass integer, cache text, same boolean)
LANGUAGE plpgsql AS $$
DECLARE
  c float8[];
  answer text;
BEGIN
  SELECT array_agg(f::float8[] ORDER BY id) INTO c FROM kc WHERE id % 150 = 1;
  FOR p IN 1..passes LOOP
    answer := gpu_kmeans_shard_call('kc'::regclass, '(0,1)', 7, p, 'step', 'id', 'f', c, metric, 1, 0, 0, 0, 0, 64);
    pass := p;
    cache := CASE split_part(answer, ':', 3) WHEN '0' THEN 'off' WHEN '1' THEN 'read' ELSE 'kept' END;
    same := regexp_replace(answer, '^([^:]*:){6}', '') = gpu_kmeans_shard_step('kc', 'f', c, metric, 1)::text;
    RETURN NEXT;
    c := (SELECT (gpu_kmeans_step(f, c, metric)).centroids FROM kc);
  END LOOP;
END $$;
BEGIN;
SELECT * FROM pg_temp.kc_passes('euclidean', 6);
SELECT rows, k FROM gpu_kmeans_shard_cache();
SELECT * FROM pg_temp.kc_passes('cosine', 4);
COMMIT;
SELECT count(*) AS kept_after_commit FROM gpu_kmeans_shard_cache();
SELECT * FROM pg_temp.kc_passes('euclidean', 2);
SELECT pg_temp.report_error($$SELECT gpu_kmeans_shard_call('kc'::regclass, '(0,1)', 7, 1, 'step', 'id', 'f', '{{1,2}}', 'euclidean', 1, 0, 0, 0, 0, 64)$$);
DROP TABLE kc;
-- the fit over a plain table goes through the aggregate, as before
SET gpuclust.timing = on;
SELECT count(*) FROM gpu_kmeans_fit_distributed('SELECT id, f FROM kd', 3, seed => 1);
RESET gpuclust.timing;
DROP TABLE kd_empty;
DROP TABLE kd;
