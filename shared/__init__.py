"""What the services and the apps share, by kind: contracts, kit, runtime, apps.

- `contracts`: what crosses a service boundary (wire models and their clients, the job document,
  chunk rendering, hashing, the inclusion rule). Imports nothing from shared outside contracts.
- `kit`: the small service kit (auth, request bodies, jobs, readiness, observability, service CLI,
  services as child processes on loopback). Imports only contracts and kit.
- `runtime`: ShopSim, the agent, the leak firewall, paired statistics, vLLM weight loading and
  the test doubles a command runs. Imports only contracts, kit and runtime.
- `apps`: what a person runs (the `intraskill` CLI, demo, experiment, report, operator, deploy
  smoke). May import all of the above.

A service imports contracts, kit and runtime, never an app nor another service; nothing here
imports `tests`. tests/test_import_rules.py enforces the rule.
"""
