"""Operator commands over the registry's HTTP API: `intraskill bank ...` and `intraskill chunk ...`.

They go through the typed client in `shared/contracts/registry_api/` only, print rich tables for people and
`--json` for scripts, and turn every registry error into a sentence that says what to do next.
"""
