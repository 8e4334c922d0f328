"""Contracts: what crosses a service boundary. Wire models and their clients (`registry_api`,
`analyst_api`, `evaluator_api`), the clients' retrying transport (`http_retry`), chunk
rendering, hashing and the inclusion rule. Imports nothing from shared outside contracts."""
