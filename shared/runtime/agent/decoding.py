"""The decoding contract every policy backend honours: train, validation and test sample alike."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any


@dataclass(frozen=True)
class DecodingConfig:
    """Sampling settings for one rollout; recorded verbatim in every trajectory."""

    temperature: float = 0.6
    """Softmax temperature; 0 means greedy (argmax)."""
    top_p: float = 1.0
    """Nucleus mass kept before sampling; 1.0 keeps the whole distribution."""
    top_k: int = -1
    """Keep only the k most likely tokens; -1 keeps all."""
    max_new_tokens: int = 4096
    """Generated tokens allowed per turn; a turn that hits it without a valid action ends the
    episode as `generation_length`."""
    context_cap: int = 24_576
    """Tokens allowed in one token-contiguous segment (prompt plus generation)."""
    seed: int | None = None
    """Base sampling seed. In-process backends always seed (from this, the episode seed and the
    turn); an OpenAI-compatible server receives a seed only when this is set."""
    thinking: bool = True
    """Passed to chat templates that know `enable_thinking` (Qwen3); ignored by the others."""

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if self.top_k == 0 or self.top_k < -1:
            raise ValueError("top_k must be -1 (off) or a positive integer")
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")
        if self.context_cap <= self.max_new_tokens // 64:
            raise ValueError("context_cap is too small for any prompt")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def with_(self, **changes: Any) -> DecodingConfig:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)


# The method's values (reference section 1, Decoding): identical for train, validation and test.
PAPER_DECODING = DecodingConfig(
    temperature=0.6, top_p=1.0, top_k=-1, max_new_tokens=4096, context_cap=24_576, seed=None
)

# A laptop preset: the same sampling distribution, short turns and a small context so a 135M model
# on two CPU threads finishes episodes in seconds.
CPU_DECODING = DecodingConfig(
    temperature=0.6,
    top_p=1.0,
    top_k=-1,
    max_new_tokens=48,
    context_cap=8192,
    seed=0,
    thinking=False,
)
