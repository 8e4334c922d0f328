"""The runtime the services run: ShopSim (`shopsim`), the agent (`agent`), the leak firewall
(`leak`), paired statistics, vLLM weight loading, the S_0 stand-in and the test doubles the
deploy smoke runs (`doubles`). Imports only contracts, kit and runtime."""
