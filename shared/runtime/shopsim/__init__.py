"""ShopSim: an offline, deterministic personalized shopping environment (see types.py for the
contract the agent runtime, trainer, evaluator and analyst rely on)."""
