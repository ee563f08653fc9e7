-- gpu_hdbscan, gpu_hdbscan_tree and gpu_cluster_hdbscan: answers, arguments and errors.
\i sql/include/report_error.sql

-- two blobs of rounded coordinates (ties), a far outlier and exact duplicates
CREATE TABLE hpts (id bigint PRIMARY KEY, x float8, y float8);
INSERT INTO hpts
SELECT g, round((g % 7) * 0.1 + (g % 3) * 0.05, 2), round((g % 5) * 0.1, 2) FROM generate_series(1, 40) g;
INSERT INTO hpts
SELECT 100 + g, round(5 + (g % 6) * 0.1, 2), round(5 + (g % 4) * 0.12, 2) FROM generate_series(1, 30) g;
INSERT INTO hpts VALUES (999, 1000, -1000);
INSERT INTO hpts SELECT 500 + g, 5.1, 5.12 FROM generate_series(1, 5) g;

-- clusters numbered by first appearance in query order, noise NULL
SELECT cluster_id, count(*), min(id), max(id), round(avg(probability)::numeric, 6) AS avg_prob,
       round(max(outlier_score)::numeric, 6) AS max_score
FROM gpu_hdbscan('SELECT id, x, y FROM hpts ORDER BY id', 10)
GROUP BY cluster_id ORDER BY cluster_id NULLS LAST;
SELECT id, cluster_id, probability, outlier_score
FROM gpu_hdbscan('SELECT id, x, y FROM hpts ORDER BY id', 10) WHERE id IN (1, 101, 501, 999) ORDER BY id;

-- every argument by name, leaf selection, epsilon, single cluster, a size cap
SELECT cluster_id, count(*) FROM gpu_hdbscan('SELECT id, x, y FROM hpts ORDER BY id', min_cluster_size => 5,
       min_samples => 3, cluster_selection_method => 'leaf') GROUP BY 1 ORDER BY 1 NULLS LAST;
SELECT cluster_id, count(*) FROM gpu_hdbscan('SELECT id, x, y FROM hpts ORDER BY id', 5, 3,
       cluster_selection_epsilon => 1.0) GROUP BY 1 ORDER BY 1 NULLS LAST;
SELECT cluster_id, count(*) FROM gpu_hdbscan('SELECT id, x, y FROM hpts WHERE id < 999 ORDER BY id', 40,
       allow_single_cluster => true) GROUP BY 1 ORDER BY 1 NULLS LAST;
SELECT cluster_id, count(*) FROM gpu_hdbscan('SELECT id, x, y FROM hpts ORDER BY id', 5,
       max_cluster_size => 20) GROUP BY 1 ORDER BY 1 NULLS LAST;
SELECT cluster_id, count(*) FROM gpu_hdbscan('SELECT id, x, y FROM hpts ORDER BY id', 10,
       metric => 'cosine', device => 'cpu') GROUP BY 1 ORDER BY 1 NULLS LAST;
-- min_samples NULL is min_cluster_size; real[] and numeric features give the same answer
SELECT (SELECT array_agg(cluster_id ORDER BY id) FROM gpu_hdbscan('SELECT id, x, y FROM hpts ORDER BY id', 10, NULL))
     = (SELECT array_agg(cluster_id ORDER BY id) FROM gpu_hdbscan('SELECT id, x, y FROM hpts ORDER BY id', 10, 10)) AS null_is_mcs,
       (SELECT array_agg(cluster_id ORDER BY id) FROM gpu_hdbscan('SELECT id, ARRAY[x, y] FROM hpts ORDER BY id', 10))
     = (SELECT array_agg(cluster_id ORDER BY id) FROM gpu_hdbscan('SELECT id, x::numeric, y::numeric FROM hpts ORDER BY id', 10)) AS types_agree;

-- small and degenerate inputs
SELECT * FROM gpu_hdbscan('SELECT id, x, y FROM hpts WHERE false', 5);
SELECT * FROM gpu_hdbscan('SELECT 7, 1.5::float8', 2, 1);
SELECT cluster_id, count(*), min(probability), max(outlier_score)
FROM gpu_hdbscan('SELECT g, 3.0::float8, 4.0::float8 FROM generate_series(1, 50) g', 5) GROUP BY 1;
SELECT cluster_id, count(*), min(probability), max(outlier_score)
FROM gpu_hdbscan('SELECT g, 3.0::float8, 4.0::float8 FROM generate_series(1, 50) g', 5,
                 allow_single_cluster => true) GROUP BY 1;
SELECT count(*) FILTER (WHERE cluster_id IS NULL) AS noise
FROM gpu_hdbscan('SELECT g, g::float8 FROM generate_series(1, 9) g', 10, 9);

-- the condensed tree: the root, then cluster nodes and rows
SELECT parent, child, lambda_val, child_size, selected, cluster_id
FROM gpu_hdbscan_tree('SELECT id, x, y FROM hpts ORDER BY id', 10) WHERE child IS NOT NULL OR parent IS NULL;
SELECT count(*) AS row_children, count(DISTINCT child_id) AS distinct_rows, sum(child_size) AS size
FROM gpu_hdbscan_tree('SELECT id, x, y FROM hpts ORDER BY id', 10) WHERE child IS NULL;
-- a row's cluster in the tree is its cluster in gpu_hdbscan
SELECT count(*) AS disagree FROM gpu_hdbscan_tree('SELECT id, x, y FROM hpts ORDER BY id', 10) t
JOIN gpu_hdbscan('SELECT id, x, y FROM hpts ORDER BY id', 10) h ON h.id = t.child_id
WHERE t.cluster_id IS DISTINCT FROM h.cluster_id;

-- the window form: per partition, as the call on each partition
SELECT * FROM (
  SELECT id, gpu_cluster_hdbscan(ARRAY[x, y], 5) OVER (PARTITION BY id >= 100 ORDER BY id) AS c FROM hpts) w
WHERE id IN (1, 2, 39, 101, 130, 501, 999) OR id % 17 = 0 ORDER BY id;
SELECT count(*) AS disagree FROM (
  SELECT id, gpu_cluster_hdbscan(ARRAY[x, y], 5, 3) OVER (PARTITION BY id >= 100 ORDER BY id) AS c FROM hpts) w
JOIN (SELECT * FROM gpu_hdbscan('SELECT id, x, y FROM hpts WHERE id < 100 ORDER BY id', 5, 3)
      UNION ALL
      SELECT * FROM gpu_hdbscan('SELECT id, x, y FROM hpts WHERE id >= 100 ORDER BY id', 5, 3)) h USING (id)
WHERE w.c IS DISTINCT FROM h.cluster_id;
SELECT gpu_cluster_hdbscan(NULL::real[], 5) OVER ();

-- errors: SQLSTATE, message, DETAIL and HINT
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan('SELECT id, x, y FROM hpts', 1)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan('SELECT id, x, y FROM hpts', NULL)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan('SELECT id, x, y FROM hpts', 5, 0)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan('SELECT id, x, y FROM hpts', 5, 1000)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan('SELECT id, x, y FROM hpts', 5, cluster_selection_epsilon => -0.5)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan('SELECT id, x, y FROM hpts', 5, cluster_selection_epsilon => 'NaN')$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan('SELECT id, x, y FROM hpts', 5, cluster_selection_epsilon => 'Infinity')$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan('SELECT id, x, y FROM hpts', 5, cluster_selection_epsilon => NULL)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan('SELECT id, x, y FROM hpts', 5, cluster_selection_method => 'dbscan')$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan('SELECT id, x, y FROM hpts', 5, cluster_selection_method => NULL)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan('SELECT id, x, y FROM hpts', 5, allow_single_cluster => NULL)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan('SELECT id, x, y FROM hpts', 5, max_cluster_size => 0)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan('SELECT id, x, y FROM hpts', 5, metric => 'manhattan')$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan('SELECT id, x, y FROM hpts', 5, device => 'tpu')$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan(NULL, 5)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan('SELECT id, x - 5.1, y - 5.12 FROM hpts', 5, metric => 'cosine')$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan('SELECT 1, ''NaN''::float8', 5)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan('DELETE FROM hpts RETURNING id, x, y', 5)$$);
SELECT pg_temp.report_error($$SELECT * FROM gpu_hdbscan_tree('SELECT id, x, y FROM hpts', 5, 100)$$);
SELECT pg_temp.report_error($$SELECT gpu_cluster_hdbscan(ARRAY[x, y], 1) OVER () FROM hpts$$);
SELECT pg_temp.report_error($$SELECT gpu_cluster_hdbscan(ARRAY[x, y], 5, 500) OVER () FROM hpts$$);
SELECT count(*) FROM hpts;

-- the planner's estimate is the inner query's
ANALYZE hpts;
EXPLAIN (COSTS ON) SELECT * FROM gpu_hdbscan('SELECT id, x, y FROM hpts WHERE id < 50', 5);
DROP TABLE hpts;
