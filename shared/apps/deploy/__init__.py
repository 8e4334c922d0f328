"""Deployment tooling: reading rendered manifests and running them locally (`intraskill deploy`)."""
