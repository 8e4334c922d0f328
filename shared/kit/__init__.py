"""The small service kit: auth, request bodies, validation errors, async jobs, readiness,
observability, the service CLI and services as child processes on loopback. Imports only
contracts and kit."""
