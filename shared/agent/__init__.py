"""The agent runtime: prompts with skill blocks, action protocols, exact-token batched rollouts.

Entry points (see docs/agent.md): `shared.agent.runner.RolloutEngine` / `run_episodes` with an
`EpisodeSpec` per episode, a backend from `shared.agent.backends.make_backend`, and the
`Trajectory` records of `shared.agent.trajectory`. Importing this package loads no torch.
"""
