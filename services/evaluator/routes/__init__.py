"""The evaluator's routes, one module per resource: probes, jobs (gate, Gate A, evaluation),
refits."""
