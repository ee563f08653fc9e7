-- gpuclust 0.1.0 -> 0.2.0
\echo Use "ALTER EXTENSION gpuclust UPDATE TO '0.2.0'" to load this file. \quit

-- Most of 0.2.0 is inside the library (one back-end interface for the CPU
-- and the GPU, developer settings instead of environment variables; see
-- CHANGELOG.md).  In SQL: a planner support function gives the estimated
-- result size, and the parallel labels are the most permissive correct ones.

CREATE FUNCTION gpuclust_support(internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'gpuclust_support'
LANGUAGE C STRICT;

ALTER FUNCTION gpu_dbscan(text, double precision, integer, text)
  SUPPORT gpuclust_support;
ALTER FUNCTION gpu_kmeans(text, integer, integer, double precision, integer, text, double precision[], text)
  SUPPORT gpuclust_support;
ALTER FUNCTION gpu_kmeans_centroids(text, integer, integer, double precision, integer, text, double precision[], text)
  ROWS 10 SUPPORT gpuclust_support;
ALTER FUNCTION gpu_density_peaks(text, integer, double precision, double precision, text, double precision, double precision, text)
  SUPPORT gpuclust_support;
ALTER FUNCTION gpuclust_devices() PARALLEL SAFE ROWS 4;

-- Parallel labels: see gpuclust--0.2.0.sql.
DO $$
BEGIN
  IF current_setting('server_version_num')::integer >= 170000 THEN
    ALTER FUNCTION gpu_dbscan(text, double precision, integer, text) PARALLEL RESTRICTED;
    ALTER FUNCTION gpu_kmeans(text, integer, integer, double precision, integer, text, double precision[], text) PARALLEL RESTRICTED;
    ALTER FUNCTION gpu_kmeans_centroids(text, integer, integer, double precision, integer, text, double precision[], text) PARALLEL RESTRICTED;
    ALTER FUNCTION gpu_density_peaks(text, integer, double precision, double precision, text, double precision, double precision, text) PARALLEL RESTRICTED;
  END IF;
END
$$;
