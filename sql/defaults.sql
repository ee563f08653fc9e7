-- The DEFAULT clause of every optional argument of the clustering functions
-- agrees with the defaults of the C code (common/params.h), which the
-- functions use for a NULL argument: gpuclust_defaults() reads them there.

-- what the C code says
SELECT * FROM gpuclust_defaults() ORDER BY algorithm, argument;

-- each SQL function's default of those arguments, beside the C default
WITH fns AS (
  SELECT p.oid, p.proname, p.proargnames,
         CASE WHEN p.proname LIKE '%kmeans%' THEN 'kmeans'
              WHEN p.proname LIKE '%density_peaks%' THEN 'density_peaks'
              WHEN p.proname LIKE '%hdbscan%' THEN 'hdbscan'
              WHEN p.proname LIKE '%dbscan%' THEN 'dbscan' END AS algorithm
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
  WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
    AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'gpuclust')
), args AS (
  SELECT f.proname, f.algorithm, a.name AS argument,
         pg_get_function_arg_default(f.oid, a.pos::integer) AS sql_default
  FROM fns f CROSS JOIN LATERAL unnest(f.proargnames) WITH ORDINALITY a(name, pos)
)
SELECT a.proname, a.argument, a.sql_default, c.value AS c_default,
       CASE WHEN a.sql_default IS NULL THEN false
            WHEN c.value ~ '^-?[0-9.]+(e-?[0-9]+)?$'
              THEN regexp_replace(a.sql_default, '::.*$', '')::float8 = c.value::float8
            ELSE regexp_replace(a.sql_default, '^''(.*)''::text$', '\1') = c.value END AS agrees
FROM args a JOIN gpuclust_defaults() c ON c.algorithm = a.algorithm AND c.argument = a.argument
ORDER BY a.proname, a.argument;

-- every C default is the default of some SQL function's argument
SELECT c.algorithm, c.argument AS without_sql_argument
FROM gpuclust_defaults() c
WHERE NOT EXISTS (
  SELECT 1 FROM pg_proc p
  WHERE p.proname LIKE '%' || c.algorithm || '%' AND (c.algorithm <> 'dbscan' OR p.proname NOT LIKE '%hdbscan%')
    AND c.argument = ANY (p.proargnames)
    AND p.pronamespace = (SELECT extnamespace FROM pg_extension WHERE extname = 'gpuclust'));
