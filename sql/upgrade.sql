-- ALTER EXTENSION gpuclust UPDATE from the previous release gives exactly the
-- catalog of a fresh install: every member object, and for functions their
-- argument names and defaults, result, volatility, parallel label,
-- strictness, security, cost, C symbol and comment.

-- One line per member object of the extension.
CREATE FUNCTION pg_temp.gpuclust_catalog() RETURNS SETOF text LANGUAGE sql AS $$
  SELECT CASE WHEN d.classid = 'pg_proc'::regclass THEN
           format('function %s(%s) RETURNS %s volatile=%s parallel=%s strict=%s secdef=%s cost=%s rows=%s support=%s lang=%s symbol=%s comment=%s',
                  p.proname, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid),
                  p.provolatile, p.proparallel, p.proisstrict, p.prosecdef, p.procost,
                  p.prorows, p.prosupport::regproc, l.lanname, p.prosrc, obj_description(p.oid, 'pg_proc'))
         ELSE pg_describe_object(d.classid, d.objid, d.objsubid) END
  FROM pg_depend d
  LEFT JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND p.oid = d.objid
  LEFT JOIN pg_language l ON l.oid = p.prolang
  WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
    AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'gpuclust')
$$;

SELECT extversion = (SELECT default_version FROM pg_available_extensions
                     WHERE name = 'gpuclust') AS fresh_is_default
FROM pg_extension WHERE extname = 'gpuclust';
CREATE TEMP TABLE fresh AS SELECT * FROM pg_temp.gpuclust_catalog() item;
SELECT count(*) AS functions FROM fresh WHERE item LIKE 'function %';

-- the update paths this release offers
SELECT source, target, path FROM pg_extension_update_paths('gpuclust')
WHERE path IS NOT NULL ORDER BY source, target;

-- from each earlier release: install it, update, compare
DROP EXTENSION gpuclust;
CREATE EXTENSION gpuclust VERSION '0.1.0';
ALTER EXTENSION gpuclust UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'gpuclust';
SELECT 'missing after update' AS problem, item FROM
  (SELECT item FROM fresh EXCEPT SELECT item FROM pg_temp.gpuclust_catalog() item) m
UNION ALL
SELECT 'extra after update', item FROM
  (SELECT item FROM pg_temp.gpuclust_catalog() item EXCEPT SELECT item FROM fresh) e
ORDER BY 1, 2;

-- from 0.2.0 (released, tagged v0.2.0)
DROP EXTENSION gpuclust;
CREATE EXTENSION gpuclust VERSION '0.2.0';
ALTER EXTENSION gpuclust UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'gpuclust';
SELECT 'missing after update' AS problem, item FROM
  (SELECT item FROM fresh EXCEPT SELECT item FROM pg_temp.gpuclust_catalog() item) m
UNION ALL
SELECT 'extra after update', item FROM
  (SELECT item FROM pg_temp.gpuclust_catalog() item EXCEPT SELECT item FROM fresh) e
ORDER BY 1, 2;

-- the updated extension works
SELECT count(*) FROM gpu_dbscan('SELECT g, g::real FROM generate_series(1, 10) g', 1.5, 2);
