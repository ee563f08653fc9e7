-- What a role without privileges can learn through the clustering functions.
-- The planner support function plans the inner query to give the planner a
-- row estimate; that estimate comes from the statistics of the query's
-- tables, so it may reach only a role that could EXPLAIN the inner query
-- itself.  Every other role gets the declared estimate (1000 rows), which
-- depends on no data.  The EXPLAIN outputs below (costs on) show the row
-- estimates: a leak would change them.  Every refusal must be 42501.
SET client_min_messages = warning;
DROP ROLE IF EXISTS regress_gc_reader;
RESET client_min_messages;
CREATE ROLE regress_gc_reader;
GRANT USAGE ON SCHEMA public TO regress_gc_reader;

-- runs a statement: 'ok', or the SQLSTATE and message of its error
CREATE FUNCTION gc_try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE q;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- the row estimate of the top of a statement's plan, as the current role
CREATE FUNCTION gc_plan_rows(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  plan json;
BEGIN
  EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO plan;
  RETURN plan -> 0 -> 'Plan' ->> 'Plan Rows';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- salaries: 2,500 rows of salary 5, one of 123456, one 'ceo'
CREATE TABLE q_sal (id int, f float8[], salary int, role text, owner name);
INSERT INTO q_sal
SELECT i, ARRAY[i % 10, i % 7],
       CASE WHEN i % 4 = 0 THEN 5 WHEN i = 1 THEN 123456 ELSE 1000 + i END,
       CASE WHEN i = 1 THEN 'ceo' ELSE 'staff' END,
       CASE WHEN i % 3 = 0 THEN 'regress_gc_reader' ELSE 'someone' END
FROM generate_series(1, 10000) i;
-- the same table, with column privileges on id and f only
CREATE TABLE q_col AS SELECT * FROM q_sal;
GRANT SELECT (id, f) ON q_col TO regress_gc_reader;
-- the same table under row-level security: the role sees its own rows
CREATE TABLE q_rls AS SELECT * FROM q_sal;
ALTER TABLE q_rls ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_rows ON q_rls FOR SELECT USING (owner = current_user);
GRANT SELECT ON q_rls TO regress_gc_reader;
-- a SECURITY DEFINER wrapper that shows the ids of a given salary
CREATE FUNCTION sal_ids(s int) RETURNS TABLE (id int, f float8[])
LANGUAGE sql STABLE SECURITY DEFINER ROWS 42
AS $$ SELECT id, f FROM q_sal WHERE salary = s $$;
-- a view with security_barrier that hides the salaries above 5000
CREATE VIEW v_sal WITH (security_barrier) AS
  SELECT id, f, salary FROM q_sal WHERE salary <= 5000;
GRANT SELECT ON v_sal TO regress_gc_reader;
CREATE VIEW v_nogrant AS SELECT id, f, salary FROM q_sal;
-- a function the role may not call
CREATE FUNCTION secret_pred(s int) RETURNS boolean LANGUAGE sql IMMUTABLE
AS $$ SELECT s = 5 $$;
REVOKE EXECUTE ON FUNCTION secret_pred(int) FROM PUBLIC;
-- a table the role may read, for the function's case
CREATE TABLE q_pub AS SELECT * FROM q_sal;
GRANT SELECT ON q_pub TO regress_gc_reader;
ANALYZE q_sal, q_col, q_rls, q_pub;

-- the owner sees the statistics: 2,500 rows of salary 5, 1 of 123456
EXPLAIN SELECT * FROM gpu_dbscan('SELECT id, f FROM q_sal WHERE salary = 5', 1, 1);
EXPLAIN SELECT * FROM gpu_dbscan('SELECT id, f FROM q_sal WHERE salary = 123456', 1, 1);
-- a statement prepared by the owner, then used by the role below
PREPARE owner_plan AS
  SELECT * FROM gpu_dbscan('SELECT id, f FROM q_sal WHERE salary = 5', 1, 1);
EXPLAIN EXECUTE owner_plan;

SET ROLE regress_gc_reader;

-- 1. a table without privilege: the declared estimate whatever the query,
-- as PostgreSQL refuses EXPLAIN of the query itself
EXPLAIN SELECT * FROM gpu_dbscan('SELECT id, f FROM q_sal WHERE salary = 5', 1, 1);
EXPLAIN SELECT * FROM gpu_dbscan('SELECT id, f FROM q_sal WHERE salary = 123456', 1, 1);
EXPLAIN SELECT * FROM gpu_dbscan('SELECT id, f FROM q_sal WHERE salary > 9000', 1, 1);
EXPLAIN SELECT * FROM gpu_dbscan('SELECT id, f FROM q_sal WHERE role = ''ceo''', 1, 1);
EXPLAIN SELECT * FROM gpu_kmeans('SELECT id, f FROM q_sal WHERE salary = 123456', 2);
EXPLAIN SELECT * FROM gpu_kmeans_assign('SELECT id, f FROM q_sal WHERE salary = 123456', '{{0,0}}');
EXPLAIN SELECT * FROM gpu_density_peaks('SELECT id, f FROM q_sal WHERE salary = 123456', 1);
SELECT gc_plan_rows('SELECT id FROM q_sal WHERE salary = 5') AS explain_of_query;
SELECT gc_try('SELECT count(*) FROM gpu_dbscan(''SELECT id, f FROM q_sal WHERE salary = 5'', 1, 1)') AS call;
SELECT gc_try('SELECT count(*) FROM gpu_kmeans(''SELECT id, f FROM q_sal'', 2)') AS call;
-- the owner's prepared plan is made again for the role
EXPLAIN EXECUTE owner_plan;
SELECT gc_try('EXECUTE owner_plan') AS call;

-- 2. a column without privilege: the query that reads only granted columns
-- gets its estimate, the one that reads salary the declared one
EXPLAIN SELECT * FROM gpu_dbscan('SELECT id, f FROM q_col WHERE id <= 100', 1, 1);
SELECT gc_plan_rows('SELECT id, f FROM q_col WHERE id <= 100') AS explain_of_query;
EXPLAIN SELECT * FROM gpu_dbscan('SELECT id, f FROM q_col WHERE salary = 123456', 1, 1);
EXPLAIN SELECT * FROM gpu_dbscan('SELECT id, f FROM q_col WHERE salary = 5', 1, 1);
SELECT gc_plan_rows('SELECT id, f FROM q_col WHERE salary = 5') AS explain_of_query;
SELECT gc_try('SELECT count(*) FROM gpu_dbscan(''SELECT id, f FROM q_col WHERE salary = 5'', 1, 1)') AS call;
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM q_col WHERE id <= 100', 1, 1);

-- 3. row-level security: the estimate is the one PostgreSQL gives the role
-- for the query itself, and the call sees the role's rows only
EXPLAIN SELECT * FROM gpu_dbscan('SELECT id, f FROM q_rls WHERE salary = 5', 1, 1);
SELECT gc_plan_rows('SELECT * FROM gpu_dbscan(''SELECT id, f FROM q_rls WHERE salary = 5'', 1, 1)')
     = gc_plan_rows('SELECT id, f FROM q_rls WHERE salary = 5') AS same_as_explain_of_query;
SELECT count(*) AS rows_seen FROM gpu_dbscan('SELECT id, f FROM q_rls', 1, 1);
SELECT count(*) AS rows_visible FROM q_rls;
SELECT count(*) AS others_rows FROM gpu_dbscan('SELECT id, f FROM q_rls WHERE owner <> current_user', 1, 1);
-- with row_security off the role may not run the query at all
SET row_security = off;
EXPLAIN SELECT * FROM gpu_dbscan('SELECT id, f FROM q_rls WHERE salary = 5', 1, 1);
SELECT gc_try('SELECT count(*) FROM gpu_dbscan(''SELECT id, f FROM q_rls'', 1, 1)') AS call;
RESET row_security;

-- 4. a SECURITY DEFINER wrapper: the role may call it, the estimate is the
-- wrapper's declared ROWS 42, and the call returns what the wrapper shows
EXPLAIN SELECT * FROM gpu_dbscan('SELECT id, f FROM sal_ids(123456)', 1, 1);
EXPLAIN SELECT * FROM gpu_dbscan('SELECT id, f FROM sal_ids(5)', 1, 1);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM sal_ids(5)', 1, 1);
RESET ROLE;
REVOKE EXECUTE ON FUNCTION sal_ids(int) FROM PUBLIC;
SET ROLE regress_gc_reader;
EXPLAIN SELECT * FROM gpu_dbscan('SELECT id, f FROM sal_ids(5)', 1, 1);
SELECT gc_try('SELECT count(*) FROM gpu_dbscan(''SELECT id, f FROM sal_ids(5)'', 1, 1)') AS call;

-- 5. a view with security_barrier: the estimate is the one PostgreSQL gives
-- the role for the query itself; rows beyond the view stay hidden
EXPLAIN SELECT * FROM gpu_dbscan('SELECT id, f FROM v_sal WHERE salary = 5', 1, 1);
SELECT gc_plan_rows('SELECT * FROM gpu_dbscan(''SELECT id, f FROM v_sal WHERE salary = 5'', 1, 1)')
     = gc_plan_rows('SELECT id, f FROM v_sal WHERE salary = 5') AS same_as_explain_of_query;
SELECT count(*) AS rows_seen FROM gpu_dbscan('SELECT id, f FROM v_sal WHERE salary > 5000', 1, 1);
SELECT count(*) AS rows_seen FROM gpu_dbscan('SELECT id, f FROM v_sal', 1, 1);
SELECT count(*) AS rows_visible FROM v_sal;
-- a view the role may not read
EXPLAIN SELECT * FROM gpu_dbscan('SELECT id, f FROM v_nogrant WHERE salary = 5', 1, 1);
SELECT gc_try('SELECT count(*) FROM gpu_dbscan(''SELECT id, f FROM v_nogrant'', 1, 1)') AS call;

-- 6. a function the role may not call: the declared estimate, and 42501
EXPLAIN SELECT * FROM gpu_dbscan('SELECT id, f FROM q_pub WHERE secret_pred(salary)', 1, 1);
SELECT gc_try('SELECT count(*) FROM gpu_dbscan(''SELECT id, f FROM q_pub WHERE secret_pred(salary)'', 1, 1)') AS call;

-- 7. a plan made with the privilege is not used after it is revoked
EXPLAIN SELECT * FROM gpu_dbscan('SELECT id, f FROM q_pub WHERE salary = 5', 1, 1);
PREPARE reader_plan AS
  SELECT * FROM gpu_dbscan('SELECT id, f FROM q_pub WHERE salary = 5', 1, 1);
EXPLAIN EXECUTE reader_plan;
RESET ROLE;
REVOKE SELECT ON q_pub FROM regress_gc_reader;
SET ROLE regress_gc_reader;
EXPLAIN EXECUTE reader_plan;
SELECT gc_try('EXECUTE reader_plan') AS call;
-- and one made without it gets the estimate once it is granted
RESET ROLE;
GRANT SELECT ON q_pub TO regress_gc_reader;
SET ROLE regress_gc_reader;
EXPLAIN EXECUTE reader_plan;

RESET ROLE;
DEALLOCATE owner_plan;
DEALLOCATE reader_plan;
DROP VIEW v_sal, v_nogrant;
DROP TABLE q_sal, q_col, q_rls, q_pub;
DROP FUNCTION sal_ids(int), secret_pred(int), gc_try(text), gc_plan_rows(text);
DROP OWNED BY regress_gc_reader;
DROP ROLE regress_gc_reader;
