"""The agent runtime: prompts with skill blocks, action protocols, exact-token batched rollouts.

Entry points (see docs/agent.md): `shared.runtime.agent.runner.RolloutEngine` / `run_episodes` with an
`EpisodeSpec` per episode, a backend from `shared.runtime.agent.backends.make_backend`, and the
`Trajectory` records of `shared.runtime.agent.trajectory`. Importing this package loads no torch.
"""
