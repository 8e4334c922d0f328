"""Policy backends behind one interface (`base.PolicyBackend`): transformers, vllm, openai.

Backends import their heavy dependencies lazily, so `from shared.agent.backends import base`
never loads torch.
"""
