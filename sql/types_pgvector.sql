-- pgvector's vector and halfvec as features: in the query of the
-- set-returning functions and in the window functions.  Where pgvector is not
-- installed the test says so and stops (expected output types_pgvector_1.out);
-- test/run-all builds it from ../shared/vendor when it can, and
-- test/test_types_pgvector.py counts as skipped when it cannot.
SELECT NOT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'vector') AS skip_vector \gset
\if :skip_vector
\echo 'pgvector is not installed: test skipped'
\quit
\endif
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE vpts (id int PRIMARY KEY, g int, v vector(3));
INSERT INTO vpts VALUES
  (1, 1, '[0,0,0]'), (2, 1, '[0,0.1,0]'), (3, 1, '[0.1,0,0]'),
  (4, 1, '[5,5,5]'), (5, 1, '[5,5.1,5]'), (6, 1, '[5.1,5,5]'), (7, 1, '[20,20,20]'),
  (8, 2, '[1,1,1]'), (9, 2, '[1,1.1,1]'), (10, 2, NULL);

-- vector and halfvec columns give the answers of the same values as real[]
SELECT a.id, a.cluster_id,
       a.cluster_id IS NOT DISTINCT FROM b.cluster_id AS same_as_real_array,
       a.cluster_id IS NOT DISTINCT FROM c.cluster_id AS same_as_halfvec
FROM gpu_dbscan('SELECT id, v FROM vpts WHERE g = 1 ORDER BY id', 0.2, 3) a
JOIN gpu_dbscan('SELECT id, v::real[] FROM vpts WHERE g = 1 ORDER BY id', 0.2, 3) b USING (id)
JOIN gpu_dbscan('SELECT id, v::halfvec FROM vpts WHERE g = 1 ORDER BY id', 0.2, 3) c USING (id)
ORDER BY a.id;
SELECT cluster_id, centroid, size FROM gpu_kmeans_centroids('SELECT id, v FROM vpts WHERE g = 1', 1);

-- halfvec values are read exactly: the largest, the smallest normal and
-- subnormal values, negative zero, and a value that is not a short decimal
SELECT centroid
FROM gpu_kmeans_centroids($$SELECT 1, '[65504, -6.1035156e-05, 5.9604645e-08, -0, 0.333]'::halfvec$$, 1);
SELECT centroid = (SELECT array_agg(e::float8) FROM unnest('[65504, -6.1035156e-05, 5.9604645e-08, -0, 0.333]'::halfvec::real[]) e)
       AS same_as_cast_to_real
FROM gpu_kmeans_centroids($$SELECT 1, '[65504, -6.1035156e-05, 5.9604645e-08, -0, 0.333]'::halfvec$$, 1);

-- long vectors stored out of line (toasted) and compressed in line are read too
CREATE TABLE vlong (id int, v vector(3000), h halfvec(3000));
INSERT INTO vlong SELECT i, array_fill(i::real, ARRAY[3000])::vector, array_fill(i::real, ARRAY[3000])::halfvec
FROM generate_series(1, 4) i;
CREATE TABLE vlong_main (id int, v vector(3000));
ALTER TABLE vlong_main ALTER COLUMN v SET STORAGE main;
INSERT INTO vlong_main SELECT id, v FROM vlong;
SELECT pg_column_size(v) < 3000 * 4 AS compressed FROM vlong_main LIMIT 1;
SELECT id, cluster_id FROM gpu_dbscan('SELECT id, v FROM vlong ORDER BY id', 55, 2) ORDER BY id;
SELECT id, cluster_id FROM gpu_dbscan('SELECT id, h FROM vlong ORDER BY id', 55, 2) ORDER BY id;
SELECT id, cluster_id FROM gpu_dbscan('SELECT id, v FROM vlong_main ORDER BY id', 55, 2) ORDER BY id;
SELECT id, gpu_cluster_dbscan(v, 55, 2) OVER (ORDER BY id) FROM vlong_main ORDER BY id;

-- refused with the row's id: NULL in a query, vectors of different lengths;
-- a vector is the only feature column
SELECT * FROM gpu_dbscan('SELECT id, v FROM vpts WHERE g = 2', 0.2, 2);
SELECT * FROM gpu_dbscan($$SELECT * FROM (VALUES (1, '[1,2]'::vector), (2, '[1,2,3]')) v$$, 0.2, 2);
SELECT * FROM gpu_dbscan($$SELECT 1, '[1,2]'::vector, 2.0$$, 0.2, 2);
SELECT * FROM gpu_dbscan($$SELECT 1, '{1:1,3:2}/3'::sparsevec$$, 0.2, 2);

-- window form: per group, NULL vectors NULL
SELECT id, g, gpu_cluster_dbscan(v, 0.2, 2) OVER w AS v,
       gpu_cluster_dbscan(v::halfvec, 0.2, 2) OVER w AS h,
       gpu_cluster_kmeans(v, 1) OVER w AS one_cluster
FROM vpts WINDOW w AS (PARTITION BY g ORDER BY id) ORDER BY id;
SELECT id, gpu_cluster_dbscan(v, 0.2, 2) OVER (PARTITION BY g ORDER BY id)
FROM (VALUES (1, 1, '[1,2]'::vector), (2, 2, '[1,2]'), (3, 2, '[1,2,3]')) t(id, g, v);

-- the type is found again after the extension is dropped and created anew
DROP TABLE vpts, vlong, vlong_main;
DROP EXTENSION vector;
CREATE TYPE vpair AS (x real, y real);
SELECT * FROM gpu_dbscan($$SELECT 1, '(1,2)'::vpair$$, 0.2, 1);
CREATE EXTENSION vector;
SELECT * FROM gpu_dbscan($$SELECT 1, '[1,2]'::vector$$, 0.2, 1);
