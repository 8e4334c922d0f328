"""The evaluator's routes, one module per resource: jobs (gate, Gate A, evaluation) and
refits; the probes are `shared/kit/readiness.probes_router`, the analyst's too."""
