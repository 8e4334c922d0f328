"""In-process transformers backend: live episodes generate together; KV caches persist across turns.

Each turn has two phases:

1. **Prefill, one episode at a time.** The episode's stored KV cache (from its previous turn) is
   reused for the longest common token prefix with the new prompt, and only the remainder is run
   through the model. Prefill is compute-bound, so batching it would only add padding.
2. **Decode, all episodes together.** The prefilled caches are copied right-aligned into one
   preallocated slab (left padding masked out), and each step feeds every unfinished episode's last
   token with its own position id. A batch-1 step is bound by reading the weights, so a batch of
   16 costs far less than 16 steps. Finished rows leave the batch at once and their cache is kept
   for the episode's next turn.

Batching is continuous (`stream`): when a row's turn ends, the runtime's callback steps that
episode's environment and returns its next turn (or a new episode's first), which is prefilled
and joins the decode batch at the next slab rebuild, so no episode waits for the slowest turn of
a round.

Sampling is per row with its own seeded generator, so an episode's tokens do not depend on which
other episodes share its batch (up to floating-point differences of batched matmuls).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from shared.runtime.agent.backends.base import (
    TurnFailure,
    TurnOutput,
    TurnRequest,
    token_level_output,
)
from shared.runtime.agent.chat import ChatRenderer
from shared.runtime.agent.decoding import DecodingConfig

PREFILL_CHUNK = 2048  # bounds attention memory of a long prompt on CPU
REBUILD_EVERY = 4  # decode steps a prefilled row may wait before the slab is rebuilt to admit it


class _SlabLayer(CacheLayerMixin):
    """A KV layer over a preallocated [batch, heads, capacity, dim] buffer, written in place.

    transformers' DynamicLayer concatenates on every step, copying the whole cache each token; a
    slab writes only the new positions.
    """

    is_croppable = False

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, used: int) -> None:
        super().__init__()
        self.keys, self.values, self.used = keys, values, used
        self.is_initialized = True
        self.device = keys.device

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        raise RuntimeError("slab layers are allocated up front")

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ):
        end = self.used + key_states.shape[-2]
        if end > self.keys.shape[-2]:
            raise RuntimeError("KV slab overflow")
        self.keys[..., self.used : end, :] = key_states
        self.values[..., self.used : end, :] = value_states
        self.used = end
        return self.keys[..., :end, :], self.values[..., :end, :]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.used + query_length, 0

    def get_seq_length(self) -> int:
        return self.used

    def get_max_length(self) -> int:
        return self.keys.shape[-2]

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self.keys = self.keys[indices]
        self.values = self.values[indices]


@dataclass
class _StoredContext:
    """An episode's KV state: per layer (keys, values) of shape [1, heads, len(ids), dim]."""

    ids: tuple[int, ...]
    layers: list[tuple[torch.Tensor, torch.Tensor]]

    def owned(self) -> _StoredContext:
        """The same state in tensors of its own. A live row's layers are views into its decode
        batch's slab, which a pooled view would keep alive whole: 16 pooled episodes from
        different batches pinned ~7 GB of SmolLM2 slabs where their own states are ~0.7 GB."""
        layers = [(keys.clone(), values.clone()) for keys, values in self.layers]
        return _StoredContext(self.ids, layers)


@dataclass
class _Row:
    request: TurnRequest
    generator: torch.Generator
    layers: list[tuple[torch.Tensor, torch.Tensor]]  # prefilled cache, [1, h, prompt_len, d]
    prompt_len: int
    cached: int
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    prefill_s: float = 0.0
    decode_s: float = 0.0
    joined: float = 0.0  # when the row entered the decode loop

    @property
    def next_input(self) -> int:
        """The token the next decode step feeds: the last sampled, or the prompt's last."""
        return self.tokens[-1] if self.tokens else (self.request.prompt_ids or ())[-1]

    @property
    def context_len(self) -> int:
        """Tokens whose KV state exists: the prompt and every generated token but the last."""
        return self.prompt_len + len(self.tokens) - 1


def sample_tokens(
    logits: torch.Tensor, decoding: DecodingConfig, generators: Sequence[torch.Generator]
) -> tuple[list[int], list[float]]:
    """Sample one token per row of `logits` [rows, vocab]; returns (tokens, log-probs).

    The log-prob is taken under the temperature-scaled full distribution, the one a trainer
    recomputes as log_softmax(logits / T); top-k / top-p only restrict where the sample may fall
    (the method trains with top_p=1, top_k=-1, where the two coincide).

    Each row draws a single uniform number from its own generator and inverts its CDF, so a row's
    sample depends only on its seed and logits, never on its batch-mates, and the whole batch
    costs one softmax and one cumsum instead of a multinomial per row.
    """
    if logits.dtype != torch.float64:
        logits = logits.float()  # bf16 log-probs would be too coarse for importance ratios
    if decoding.temperature == 0:
        logprobs = torch.log_softmax(logits, dim=-1)
        tokens = torch.argmax(logits, dim=-1)
        return tokens.tolist(), logprobs.gather(1, tokens[:, None])[:, 0].tolist()
    logprobs = torch.log_softmax(logits / decoding.temperature, dim=-1)
    candidates = logprobs
    if 0 < decoding.top_k < candidates.shape[-1]:
        threshold = torch.topk(candidates, decoding.top_k, dim=-1).values[:, -1:]
        candidates = candidates.masked_fill(candidates < threshold, float("-inf"))
    if decoding.top_p < 1.0:
        sorted_values, order = torch.sort(candidates, dim=-1, descending=True)
        sorted_probs = torch.softmax(sorted_values, dim=-1)
        drop = (
            torch.cumsum(sorted_probs, dim=-1) - sorted_probs >= decoding.top_p
        )  # keep the first past p
        candidates = candidates.scatter(1, order, sorted_values.masked_fill(drop, float("-inf")))
    cdf = torch.cumsum(torch.softmax(candidates, dim=-1).double(), dim=-1)
    uniform = torch.cat(
        [torch.rand(1, generator=g, device=g.device, dtype=torch.float64) for g in generators]
    )
    draw = (uniform.to(cdf.device) * cdf[:, -1])[:, None]
    # right=True: the first token whose cumulative mass exceeds the draw (never a zero-mass one)
    tokens = torch.searchsorted(cdf, draw, right=True)[:, 0].clamp(max=cdf.shape[-1] - 1)
    return tokens.tolist(), logprobs.gather(1, tokens[:, None])[:, 0].tolist()


def sample_token(
    logits: torch.Tensor, decoding: DecodingConfig, generator: torch.Generator
) -> tuple[int, float]:
    """`sample_tokens` for one row of logits [vocab]."""
    tokens, logprobs = sample_tokens(logits[None, :], decoding, [generator])
    return tokens[0], logprobs[0]


class TransformersBackend:
    """A causal LM held in this process; see the module docstring for the batching scheme."""

    name = "transformers"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        model_id: str,
        checkpoint_id: str,
        max_batch_size: int = 32,
        kv_reuse: bool = True,
        prefix_pool_size: int = 16,
        template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.model = model.eval()
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
        self.renderer = ChatRenderer(
            tokenizer, template_kwargs=template_kwargs, stop_token_ids=eos_ids
        )
        self.model_id, self.checkpoint_id = model_id, checkpoint_id
        self.max_batch_size = max_batch_size
        self.device = next(model.parameters()).device
        config = model.config.get_text_config(decoder=True)
        layer_types = set(getattr(config, "layer_types", None) or ["full_attention"])
        # Slab caches assume plain full attention in every layer (Llama, Qwen3, SmolLM2, ...).
        if layer_types != {"full_attention"}:
            raise ValueError(f"unsupported attention layer types {sorted(layer_types)}; use vllm")
        self.kv_reuse = kv_reuse
        self.vocab_size = model.get_input_embeddings().weight.shape[0]
        self._contexts: dict[str, _StoredContext] = {}  # live episodes, by key
        # Contexts of recently finished episodes: a GRPO sibling, or any episode whose prompt
        # shares a prefix with them (same instructions and persona), starts from their KV state.
        self._pool: OrderedDict[str, _StoredContext] = OrderedDict()
        self.prefix_pool_size = prefix_pool_size if kv_reuse else 0
        self.stats = {
            "prefill_s": 0.0,
            "decode_s": 0.0,
            "prefill_tokens": 0,
            "cached_tokens": 0,
            "decode_steps": 0,
            "generated_tokens": 0,
        }

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        *,
        dtype: str = "float32",
        device: str = "cpu",
        model_id: str | None = None,
        checkpoint_id: str | None = None,
        **kwargs: Any,
    ) -> TransformersBackend:
        """Load a local model directory (never a hub download)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = Path(path)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            path, dtype=getattr(torch, dtype), local_files_only=True
        ).to(device)
        from shared.runtime.agent.models import model_identity

        identity = model_identity(path)
        return cls(
            model,
            tokenizer,
            model_id=model_id or identity["model_id"],
            checkpoint_id=checkpoint_id or identity["checkpoint_id"],
            **kwargs,
        )

    def release(self, key: str) -> None:
        context = self._contexts.pop(key, None)
        if context is not None and self.prefix_pool_size > 0:
            self._pool[key] = context.owned()
            self._pool.move_to_end(key)
            while len(self._pool) > self.prefix_pool_size:
                self._pool.popitem(last=False)

    def clear_cache(self) -> None:
        """Forget every stored KV state (live and finished episodes)."""
        self._contexts.clear()
        self._pool.clear()

    def close(self) -> None:
        self.clear_cache()

    def generate(
        self, requests: Sequence[TurnRequest], decoding: DecodingConfig
    ) -> list[TurnOutput | TurnFailure]:
        """One round: every request's turn, decoded together."""
        results: dict[int, TurnOutput | TurnFailure] = {}

        def collect(request: TurnRequest, output: TurnOutput | TurnFailure) -> None:
            results[id(request)] = output

        self.stream(requests, decoding, collect)
        return [results.get(id(request), TurnFailure("no output")) for request in requests]

    @torch.inference_mode()
    def stream(
        self,
        requests: Sequence[TurnRequest],
        decoding: DecodingConfig,
        follow_up: Callable[[TurnRequest, TurnOutput | TurnFailure], TurnRequest | None],
    ) -> None:
        """Continuous batching: as soon as a row's turn ends, `follow_up` gets its output and may
        hand back the next request (the same episode's next turn, or a new episode), which is
        prefilled and joins the running decode batch. Returns when no row is left."""
        waiting: list[_Row] = []
        active: list[_Row] = []

        def admit(request: TurnRequest | None) -> None:
            while request is not None:
                try:
                    if request.prompt_ids is None:
                        raise ValueError("the transformers backend needs prompt_ids")
                    row = self._prefill(request, decoding, waiting)
                except Exception as error:  # one episode's failure must not end the batch
                    self.release(request.key)
                    failure = TurnFailure(f"prefill failed: {type(error).__name__}: {error}")
                    request = follow_up(request, failure)
                    continue
                if self._finished(row):  # a one-token turn never enters the decode batch
                    self._keep(row, row.layers)
                    request = follow_up(row.request, self._output(row))
                    continue
                waiting.append(row)
                return

        for request in requests:
            admit(request)
        slab: _Batch | None = None
        since_rebuild = 0
        while active or waiting:
            # New rows join at a rebuild of the slab (a copy of every live KV state), so joins
            # are gathered for a few steps rather than paid for one at a time.
            if waiting and (not active or since_rebuild >= REBUILD_EVERY):
                now = time.perf_counter()
                for row in waiting:
                    row.joined = now
                if slab is not None:
                    for position, row in enumerate(active):
                        row.layers = slab.row_views(position, row.context_len)
                active = active + waiting
                waiting = []
                slab = self._build(active, slab)
                since_rebuild = 0
            assert slab is not None
            try:
                finished = self._step(active, slab, decoding)
            except Exception as error:
                failed, active = active, []
                for row in failed:
                    self.release(row.request.key)
                    admit(
                        follow_up(
                            row.request,
                            TurnFailure(f"decode failed: {type(error).__name__}: {error}"),
                        )
                    )
                continue
            since_rebuild += 1
            if finished:
                keep = [position for position in range(len(active)) if position not in finished]
                done = [active[position] for position in finished]
                slab.select(keep)
                active = [active[position] for position in keep]
                for row in done:
                    admit(follow_up(row.request, self._output(row)))

    def _output(self, row: _Row) -> TurnOutput:
        if row.joined:
            row.decode_s = time.perf_counter() - row.joined
        return token_level_output(
            self.renderer,
            row.request.prompt_ids or (),
            row.tokens,
            row.logprobs,
            row.request.max_new_tokens,
            cached_tokens=row.cached,
            timings={"prefill_s": row.prefill_s, "decode_s": row.decode_s},
        )

    # -- prefill ---------------------------------------------------------------------------

    def _prefill(self, request: TurnRequest, decoding: DecodingConfig, earlier: list[_Row]) -> _Row:
        started = time.perf_counter()
        ids = request.prompt_ids or ()
        if not ids:
            raise ValueError("empty prompt")
        if min(ids) < 0 or max(ids) >= self.vocab_size:
            raise ValueError(f"prompt token ids outside the vocabulary [0, {self.vocab_size})")
        stored, reuse = self._best_prefix(request, ids, earlier)
        reuse = min(reuse, len(ids) - 1)  # at least one token must run to give the next logits
        slab = self._allocate(1, len(ids), zero=False)  # every position read is written first
        for (keys, values), (old_keys, old_values) in zip(
            slab, stored.layers if reuse else [], strict=False
        ):
            keys[..., :reuse, :] = old_keys[..., :reuse, :]
            values[..., :reuse, :] = old_values[..., :reuse, :]
        generator = torch.Generator(device=self.device).manual_seed(request.seed)
        row = _Row(request, generator, slab, len(ids), reuse)
        self.stats["cached_tokens"] += reuse
        if 0 < reuse == len(ids) - 1:
            # Only the last prompt token is new (a GRPO sibling, say): the decode batch runs it
            # and samples the first token there, sparing a batch-1 forward pass.
            row.prefill_s = time.perf_counter() - started
            self.stats["prefill_s"] += row.prefill_s
            return row
        cache = Cache(layers=[_SlabLayer(keys, values, reuse) for keys, values in slab])
        logits = None
        for chunk_start in range(reuse, len(ids), PREFILL_CHUNK):
            chunk = torch.tensor(
                [ids[chunk_start : chunk_start + PREFILL_CHUNK]], device=self.device
            )
            output = self.model(input_ids=chunk, cache=cache, use_cache=True, logits_to_keep=1)
            logits = output.logits[0, -1]
        assert logits is not None
        token, logprob = sample_token(logits, decoding, generator)
        row.tokens.append(token)
        row.logprobs.append(logprob)
        row.prefill_s = time.perf_counter() - started
        self.stats["prefill_s"] += row.prefill_s
        self.stats["prefill_tokens"] += len(ids) - reuse
        self.stats["generated_tokens"] += 1
        return row

    def _best_prefix(
        self, request: TurnRequest, ids: Sequence[int], earlier: list[_Row]
    ) -> tuple[_StoredContext | None, int]:
        """The stored KV state sharing the longest token prefix with `ids`, and that length.

        Candidates: the episode's own previous turn, other live episodes, recently finished
        ones, and the prompts prefilled earlier in this round (siblings of a GRPO group share
        their whole first prompt). A KV state depends only on its prefix tokens, so any of them
        serves.
        """
        if not self.kv_reuse:
            return None, 0
        own = self._contexts.pop(request.key, None)
        candidates = [own] if own is not None else []
        candidates += list(self._contexts.values()) + list(self._pool.values())
        candidates += [
            _StoredContext(tuple((row.request.prompt_ids or ())[: row.context_len]), row.layers)
            for row in earlier
        ]
        best, best_length = None, 0
        for candidate in candidates:
            length = _common_prefix(candidate.ids, ids)
            if length > best_length:
                best, best_length = candidate, length
        return best, best_length

    def _allocate(
        self, batch: int, capacity: int, *, zero: bool = True
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        config = self.model.config.get_text_config(decoder=True)
        heads = config.num_key_value_heads
        head_dim = (
            getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        )
        dtype = self.model.dtype
        shape = (batch, heads, capacity, head_dim)
        make = torch.zeros if zero else torch.empty
        return [
            (
                make(shape, dtype=dtype, device=self.device),
                make(shape, dtype=dtype, device=self.device),
            )
            for _ in range(config.num_hidden_layers)
        ]

    # -- decode ----------------------------------------------------------------------------

    def _finished(self, row: _Row) -> bool:
        if not row.tokens:  # its first token is sampled in the decode batch
            return False
        return (
            row.tokens[-1] in self.renderer.stop_token_ids
            or len(row.tokens) >= row.request.max_new_tokens
        )

    def _keep(self, row: _Row, layers: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Keep the row's cache: prompt + generated tokens but the last (which was never fed)."""
        if self.kv_reuse:
            ids = tuple(row.request.prompt_ids or ()) + tuple(row.tokens[:-1])
            self._contexts[row.request.key] = _StoredContext(ids, layers)

    def _build(self, rows: list[_Row], previous: _Batch | None) -> _Batch:
        """A fresh slab holding every row's KV state right-aligned (left padding masked out)."""
        longest = max(row.context_len for row in rows)
        steps = max(row.request.max_new_tokens - len(row.tokens) for row in rows) + 1
        # Columns right of `longest` are written before they are read; left padding is masked
        # but must be finite (a masked NaN still poisons probabilities @ values), so zero it.
        slab = self._allocate(len(rows), longest + steps, zero=False)
        mask = torch.zeros((len(rows), longest + steps), dtype=torch.long, device=self.device)
        for position, row in enumerate(rows):
            length = row.context_len
            offset = longest - length
            for (keys, values), (row_keys, row_values) in zip(slab, row.layers, strict=True):
                keys[position, :, :offset, :] = 0
                values[position, :, :offset, :] = 0
                keys[position, :, offset:longest, :] = row_keys[0, :, :length, :]
                values[position, :, offset:longest, :] = row_values[0, :, :length, :]
            mask[position, offset:longest] = 1
            row.layers = []  # the slab holds it now
        del previous  # its rows were copied; finished rows keep views of their own
        return _Batch([_SlabLayer(keys, values, longest) for keys, values in slab], mask)

    def _step(self, rows: list[_Row], batch: _Batch, decoding: DecodingConfig) -> list[int]:
        """Feed every row its last token; sample the next. Returns the positions that finished."""
        started = time.perf_counter()
        used = batch.layers[0].used
        batch.mask[:, used] = 1
        input_ids = torch.tensor([[row.next_input] for row in rows], device=self.device)
        positions = torch.tensor([[row.context_len] for row in rows], device=self.device)
        output = self.model(
            input_ids=input_ids,
            attention_mask=batch.mask[:, : used + 1],
            position_ids=positions,
            cache=Cache(layers=batch.layers),
            use_cache=True,
        )
        logits = output.logits[:, -1, :]
        tokens, logprobs = sample_tokens(logits, decoding, [row.generator for row in rows])
        finished = []
        for position, row in enumerate(rows):
            row.tokens.append(tokens[position])
            row.logprobs.append(logprobs[position])
            if self._finished(row):
                # Views, not copies: the next prefill copies what it reuses anyway, and
                # `select`/`_build` allocate new slabs rather than writing into this one.
                self._keep(row, batch.row_views(position, row.context_len))
                finished.append(position)
        self.stats["decode_steps"] += 1
        self.stats["generated_tokens"] += len(rows)
        self.stats["decode_s"] += time.perf_counter() - started
        return finished


@dataclass
class _Batch:
    """The decode batch's KV slab (one layer object per model layer) and its attention mask."""

    layers: list[_SlabLayer]
    mask: torch.Tensor

    def row_views(self, position: int, length: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Views of one row's last `length` KV positions, per layer ([1, heads, length, dim])."""
        end = self.layers[0].used
        return [
            (
                layer.keys[position : position + 1, :, end - length : end, :],
                layer.values[position : position + 1, :, end - length : end, :],
            )
            for layer in self.layers
        ]

    def select(self, keep: list[int]) -> None:
        """Keep only these rows (finished rows leave at once: their compute is not wasted)."""
        if not keep:
            return
        index = torch.tensor(keep, device=self.mask.device)
        for layer in self.layers:
            layer.batch_select_indices(index)
        self.mask = self.mask[index]


def _common_prefix(first: Sequence[int], second: Sequence[int], block: int = 256) -> int:
    """Length of the common prefix; compares blocks as tuples (C speed) before single tokens."""
    limit = min(len(first), len(second))
    start = 0
    while start < limit and tuple(first[start : start + block]) == tuple(
        second[start : start + block]
    ):
        start += block
    for position in range(start, limit):
        if first[position] != second[position]:
            return position
    return limit
