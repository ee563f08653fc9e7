-- report_error(q) runs a statement and shows the SQLSTATE, message, detail and
-- hint of its error (or 'no error'); included by the *_errors tests.
CREATE OR REPLACE FUNCTION pg_temp.report_error(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  st text; msg text; det text; hint text;
BEGIN
  EXECUTE q;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                          det = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
  RETURN st || E'\n  ' || msg || E'\n  DETAIL: ' || coalesce(det, '') || E'\n  HINT: ' || coalesce(hint, '');
END
$$;
