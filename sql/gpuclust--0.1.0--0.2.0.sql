-- gpuclust 0.1.0 -> 0.2.0
\echo Use "ALTER EXTENSION gpuclust UPDATE TO '0.2.0'" to load this file. \quit

-- 0.2.0 changes no SQL object: the functions, their arguments, defaults and
-- labels are those of 0.1.0.  What changed is inside the library (one
-- back-end interface for the CPU and the GPU, developer settings instead of
-- environment variables); see CHANGELOG.md.
