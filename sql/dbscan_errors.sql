-- gpu_dbscan: arguments, the input contract and its errors, read-only queries.

CREATE TABLE epts (id bigint, f real[]);
INSERT INTO epts VALUES (1, '{0,0}'), (2, '{0,0.1}'), (3, '{0.1,0}');

-- arguments
SELECT * FROM gpu_dbscan('SELECT id, f FROM epts', 0, 3);
SELECT * FROM gpu_dbscan('SELECT id, f FROM epts', -1, 3);
SELECT * FROM gpu_dbscan('SELECT id, f FROM epts', 'Infinity', 3);
SELECT * FROM gpu_dbscan('SELECT id, f FROM epts', 'NaN', 3);
SELECT * FROM gpu_dbscan('SELECT id, f FROM epts', NULL, 3);
SELECT * FROM gpu_dbscan('SELECT id, f FROM epts', 0.2, 0);
SELECT * FROM gpu_dbscan('SELECT id, f FROM epts', 0.2, NULL);
SELECT * FROM gpu_dbscan(NULL, 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT id, f FROM epts', 0.2, 3, device => 'tpu');

-- columns
SELECT * FROM gpu_dbscan('SELECT id FROM epts', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT id::text, f FROM epts', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT id::float8, f FROM epts', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT id, f::text FROM epts', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT id, f, f[1] FROM epts', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT id, f::int[] FROM epts', 0.2, 3);

-- values
SELECT * FROM gpu_dbscan('SELECT NULL::int, ARRAY[1,2]::real[]', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT 7, NULL::real[]', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT 7, ARRAY[1,NULL]::real[]', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT 7, ARRAY[1,''NaN'']::real[]', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT 7, ARRAY[1,''-Infinity'']::float8[]', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT 7, ARRAY[1,1e300]::float8[]', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT 7, ''{}''::real[]', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT 7, ''{{1,2},{3,4}}''::real[]', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT * FROM (VALUES (1, ARRAY[1,2]::real[]), (2, ARRAY[1,2,3]::real[])) v', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT 3, 1.0::float8, NULL::float8 AS y', 0.2, 3);
-- the hint names a column by its name only where WHERE can use it
SELECT * FROM gpu_dbscan('SELECT id, y FROM (VALUES (1, 1.0::float8), (2, NULL)) v(id, y)', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT 4, ''NaN''::numeric AS x', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT 5, ''Infinity''::float4 AS x', 0.2, 3);

-- the query itself
SELECT * FROM gpu_dbscan('SELEC id, f FROM epts', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT id, f FROM no_such_table', 0.2, 3);
SELECT * FROM gpu_dbscan('', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT id, f FROM epts; SELECT id, f FROM epts', 0.2, 3);

-- read-only: writes are refused and nothing changes
SELECT * FROM gpu_dbscan('DELETE FROM epts RETURNING id, f', 0.2, 3);
SELECT * FROM gpu_dbscan('WITH d AS (DELETE FROM epts RETURNING id, f) SELECT * FROM d', 0.2, 3);
SELECT * FROM gpu_dbscan('UPDATE epts SET f = f RETURNING id, f', 0.2, 3);
SELECT * FROM gpu_dbscan('INSERT INTO epts VALUES (9, ''{1,1}'') RETURNING id, f', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT id, f FROM epts FOR UPDATE', 0.2, 3);
-- row locks anywhere in the query: a subquery, a WITH query, a view
SELECT * FROM gpu_dbscan('SELECT id, f FROM (SELECT id, f FROM epts FOR UPDATE) s', 0.2, 3);
SELECT * FROM gpu_dbscan('WITH l AS (SELECT id, f FROM epts FOR SHARE) SELECT id, f FROM l', 0.2, 3);
SELECT * FROM gpu_dbscan('SELECT id, f FROM epts WHERE id IN (SELECT id FROM epts FOR KEY SHARE)', 0.2, 3);
CREATE VIEW epts_locked AS SELECT id, f FROM epts FOR UPDATE;
SELECT * FROM gpu_dbscan('SELECT id, f FROM epts_locked', 0.2, 3);
DROP VIEW epts_locked;
SELECT * FROM gpu_dbscan('CREATE TABLE x AS SELECT id, f FROM epts', 0.2, 3);
SELECT count(*) FROM epts;

-- the backend is still fine after all these errors
SELECT * FROM gpu_dbscan('SELECT id, f FROM epts ORDER BY id', 0.2, 3);
