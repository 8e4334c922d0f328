"""TEST DOUBLES that ship in the package because a command runs them: the deploy smoke starts
`fake_vllm_server` in place of vLLM. Nothing here is used by a real deployment."""
