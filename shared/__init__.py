"""Contracts the IntraSkill services share: wire models, chunk rendering, hashing, the registry
client, the ShopSim environment and the agent runtime. Nothing here imports a service."""
