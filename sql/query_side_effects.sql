-- The user's query cannot change anything: it runs as in a read-only
-- transaction, inside a subtransaction that is always rolled back once its
-- rows are copied out.  Each kind of side effect that a read-only transaction
-- lets through is tried here (each call runs: 'ran'), and nothing of it may
-- remain.  Newer PostgreSQL versions (17 and 18 here) refuse the large
-- object functions in a read-only transaction (query_side_effects_1.out).

-- runs a statement: 'ran', or the error it raised
CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE q;
  RETURN 'ran';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLERRM;
END $$;

-- the clustering call with a side effect in its query's WHERE clause
CREATE FUNCTION pg_temp.dbscan_where(cond text) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM gpu_dbscan(
    format('SELECT g::bigint, g::real FROM generate_series(1, 10) g WHERE %s', cond), 1.5, 2)
$$;

-- large objects: created, overwritten
SELECT count(*) AS large_objects_before FROM pg_largeobject_metadata;
SELECT lo_from_bytea(424242, 'original') > 0 AS made;
SELECT pg_temp.try($$SELECT pg_temp.dbscan_where('lo_create(0) > 0')$$);
SELECT pg_temp.try($$SELECT pg_temp.dbscan_where('lo_put(424242, 0, ''CHANGED'') IS NULL')$$);
SELECT count(*) AS large_objects_after FROM pg_largeobject_metadata;
SELECT convert_from(lo_get(424242), 'UTF8') AS contents;
SELECT lo_unlink(424242);

-- temporary tables: a row inserted, a table created
CREATE TEMP TABLE side_rows (x int);
CREATE FUNCTION pg_temp.add_row() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO side_rows VALUES (1);
  RETURN true;
END $$;
CREATE FUNCTION pg_temp.make_table() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  CREATE TEMP TABLE IF NOT EXISTS side_table (x int);
  RETURN true;
END $$;
SELECT pg_temp.try($$SELECT pg_temp.dbscan_where('pg_temp.add_row()')$$);
SELECT pg_temp.try($$SELECT pg_temp.dbscan_where('pg_temp.make_table()')$$);
SELECT count(*) AS temp_rows FROM side_rows;
SELECT to_regclass('pg_temp.side_table') AS temp_table;

-- settings
SET work_mem = '4MB';
SELECT pg_temp.try($$SELECT pg_temp.dbscan_where('set_config(''work_mem'', ''77MB'', false) IS NOT NULL')$$);
SHOW work_mem;
RESET work_mem;

-- notifications: a LISTEN in this session would print any that got through
LISTEN gpuclust_side_effects;
SELECT pg_temp.try($$SELECT pg_temp.dbscan_where('pg_notify(''gpuclust_side_effects'', ''leaked'') IS NULL')$$);
UNLISTEN gpuclust_side_effects;

-- transaction-level advisory locks are released with the subtransaction
BEGIN;
SELECT pg_temp.try($$SELECT pg_temp.dbscan_where('pg_advisory_xact_lock(4242) IS NULL')$$);
SELECT count(*) AS advisory_locks FROM pg_locks
WHERE locktype = 'advisory' AND objid = 4242 AND pid = pg_backend_pid();
COMMIT;

-- not transactional in PostgreSQL, so kept as after any rollback: sequence values
CREATE TEMP SEQUENCE side_seq;
SELECT pg_temp.dbscan_where('nextval(''side_seq'') > 0') AS rows;
SELECT last_value AS sequence_advanced_to FROM side_seq;
