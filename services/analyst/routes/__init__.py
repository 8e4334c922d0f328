"""The analyst's routes, one module per resource: all-wrong groups (and the funnel), jobs
(compile, cold start); the probes are `shared/kit/readiness.probes_router`."""
