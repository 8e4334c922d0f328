"""The operator console: server-rendered pages over the registry's (and, read-only, the
evaluator's) HTTP APIs, with each user's own registry token."""
