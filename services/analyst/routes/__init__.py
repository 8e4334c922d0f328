"""The analyst's routes, one module per resource: probes, all-wrong groups (and the funnel),
jobs (compile, cold start)."""
