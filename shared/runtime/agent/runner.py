"""The episode loop: many live episodes, one batched generation call per turn, exact-token records.

`RolloutEngine.run(specs)` keeps up to `concurrency` episodes live. Each round it builds every live
episode's next prompt, asks the backend for all of them at once, then reads each reply with the
action protocol and steps that episode's environment. An episode ends at purchase, at the step cap
(`action_limit`) or when a turn hits the token limit without a valid action (`generation_length`);
the last two score 0 and are still trained on. A technical failure (backend error, environment
exception) ends only its own episode, unscored. A finished episode's slot goes to the next spec.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.contracts.chunks import (
    RENDERER_VERSION,
    InjectedChunk,
    render_skill_block,
    select_injected,
)
from shared.contracts.hashing import content_hash, hash_key
from shared.runtime.agent.backends.base import PolicyBackend, TurnFailure, TurnOutput, TurnRequest
from shared.runtime.agent.chat import TokenContext
from shared.runtime.agent.decoding import CPU_DECODING, DecodingConfig
from shared.runtime.agent.prompts import DEFAULT_LAYOUT, PromptLayout, get_layout
from shared.runtime.agent.protocols import ActionProtocol, ParsedReply, Reply, make_protocol
from shared.runtime.agent.trajectory import (
    Provenance,
    StepRecord,
    Termination,
    TokenLedger,
    Trajectory,
    is_scorable,
    zero_components,
)
from shared.runtime.shopsim.types import Environment, Episode, PublicState, StepResult, TaskView


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to run: a task, a seed and the chunks injected into its prompt (bank order)."""

    task_id: str
    seed: int
    chunks: tuple[InjectedChunk, ...] = ()
    inclusion: tuple[int, ...] | None = None
    bank_id: str | None = None
    bank_hash: str | None = None
    group_id: str | None = None
    episode_id: str | None = None

    @classmethod
    def masked(
        cls,
        task_id: str,
        seed: int,
        bank: Sequence[InjectedChunk],
        inclusion: Sequence[int],
        *,
        bank_id: str | None = None,
        bank_hash: str | None = None,
        group_id: str | None = None,
        episode_id: str | None = None,
    ) -> EpisodeSpec:
        """An episode whose prompt carries the chunks of `bank` that `inclusion` switches on."""
        return cls(
            task_id=task_id,
            seed=seed,
            chunks=tuple(select_injected(bank, inclusion)),
            inclusion=tuple(int(value) for value in inclusion),
            bank_id=bank_id,
            bank_hash=bank_hash,
            group_id=group_id,
            episode_id=episode_id,
        )

    def resolved_id(self) -> str:
        """The given episode id, else one derived from the task, seed, group and injected chunks."""
        if self.episode_id:
            return self.episode_id
        injected = [f"{chunk.chunk_id}@{chunk.version}" for chunk in self.chunks]
        digest = hash_key(
            self.task_id, self.seed, self.group_id, ",".join(injected), self.bank_hash
        ).hex()
        return f"{self.task_id}-s{self.seed}-{digest[:10]}"


@dataclass(frozen=True)
class RolloutConfig:
    """How episodes run: the prompt layout (which fixes the protocol), decoding and concurrency."""

    prompt_version: str = DEFAULT_LAYOUT
    decoding: DecodingConfig = CPU_DECODING
    concurrency: int = 16
    """Episodes live at once; their turns are generated together."""
    max_turns: int | None = None
    """A step cap below the environment's (a CPU preset); None uses the environment's."""
    record_observations: bool = True

    def __post_init__(self) -> None:
        get_layout(self.prompt_version)
        if self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if self.max_turns is not None and self.max_turns < 1:
            raise ValueError("max_turns must be >= 1")


@dataclass
class RolloutStats:
    """Where a run's wall time went, summed over rounds (seconds) plus counts."""

    wall_s: float = 0.0
    generate_s: float = 0.0
    env_s: float = 0.0
    prompt_s: float = 0.0
    parse_s: float = 0.0
    rounds: int = 0
    turns: int = 0
    episodes: int = 0
    generated_tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    failures: int = 0

    def as_dict(self) -> dict[str, float]:
        other = self.wall_s - self.generate_s - self.env_s - self.prompt_s - self.parse_s
        return {**self.__dict__, "other_s": other}


@dataclass
class _Live:
    """One running episode's state."""

    spec: EpisodeSpec
    episode_id: str
    episode: Episode
    state: PublicState
    messages: list[dict[str, Any]]
    provenance: Provenance
    initial_observation: str
    started: float
    ledger: TokenLedger = field(default_factory=TokenLedger)
    context: TokenContext | None = None
    prompt: TokenContext | None = None
    steps: list[StepRecord] = field(default_factory=list)
    turn: int = 0
    estimated_context: int = 0
    exact: bool = True
    timings: dict[str, float] = field(
        default_factory=lambda: {"generate_s": 0.0, "env_s": 0.0, "prompt_s": 0.0, "parse_s": 0.0}
    )
    counts: dict[str, int] = field(
        default_factory=lambda: {
            "prompt_tokens": 0,
            "prompt_tokens_new": 0,
            "cached_tokens": 0,
            "generated_tokens": 0,
        }
    )
    # set when the episode ends
    trajectory: Trajectory | None = None


class RolloutEngine:
    """Runs episodes of one environment with one backend under one configuration."""

    def __init__(
        self, env: Environment, backend: PolicyBackend, config: RolloutConfig | None = None
    ) -> None:
        self.env, self.backend = env, backend
        self.config = config or RolloutConfig()
        self.layout: PromptLayout = get_layout(self.config.prompt_version)
        self.protocol: ActionProtocol = make_protocol(self.layout.protocol, self.layout.language)
        renderer = backend.renderer
        if renderer is not None and self.layout.protocol == "tools" and not renderer.supports_tools:
            raise ValueError(
                f"{backend.model_id}'s chat template renders no tools; "
                f"prompt {self.layout.version} needs them"
            )
        prepare = getattr(backend, "prepare", None)
        if prepare is not None:  # a server backend checks once what the run relies on
            prepare(self.layout.protocol, self.config.decoding)
        self.stats = RolloutStats()

    # -- public -----------------------------------------------------------------------------

    def run(
        self,
        specs: Sequence[EpisodeSpec],
        on_trajectory: Callable[[Trajectory], None] | None = None,
    ) -> list[Trajectory]:
        """Run every spec to its end; trajectories return in spec order, streamed as they end."""
        ids = [spec.resolved_id() for spec in specs]
        if len(set(ids)) != len(ids):
            raise ValueError(
                "episode ids must be unique within a run (give distinct seeds or episode_id)"
            )
        self.stats = RolloutStats()
        started = time.perf_counter()
        finished: dict[str, Trajectory] = {}
        pending = list(zip(specs, ids, strict=True))
        pending.reverse()

        def finish(item: _Live) -> None:
            assert item.trajectory is not None
            finished[item.episode_id] = item.trajectory
            self.backend.release(item.episode_id)
            self.stats.episodes += 1
            self.stats.failures += int(not item.trajectory.scored)
            if on_trajectory is not None:
                on_trajectory(item.trajectory)

        if getattr(self.backend, "stream", None) is not None:
            self._run_streaming(pending, finish)
        else:
            self._run_rounds(pending, finish)
        self.stats.wall_s = time.perf_counter() - started
        return [finished[episode_id] for episode_id in ids]

    def _next_episode(
        self, pending: list[tuple[EpisodeSpec, str]], finish: Callable[[_Live], None]
    ) -> tuple[_Live, TurnRequest] | None:
        """Start pending episodes until one asks for a turn; returns (episode, request) or None."""
        while pending:
            spec, episode_id = pending.pop()
            item = self._start(spec, episode_id)
            request = self._request(item) if item.trajectory is None else None
            if request is not None:
                return item, request
            finish(item)
        return None

    def _run_streaming(
        self, pending: list[tuple[EpisodeSpec, str]], finish: Callable[[_Live], None]
    ) -> None:
        """Continuous batching: a turn's end immediately yields that episode's next turn, or a new
        episode's first when it ended, so the backend's decode batch never waits for a round."""
        live: dict[str, _Live] = {}
        outside = 0.0  # time spent in callbacks here rather than generating

        def follow_up(request: TurnRequest, output: TurnOutput | TurnFailure) -> TurnRequest | None:
            nonlocal outside
            entered = time.perf_counter()
            try:
                item = live[request.key]
                self._apply(item, output)
                if item.trajectory is None:
                    following = self._request(item)
                    if following is not None:
                        return following
                finish(live.pop(item.episode_id))
                started = self._next_episode(pending, finish)
                if started is None:
                    return None
                live[started[0].episode_id] = started[0]
                return started[1]
            finally:
                outside += time.perf_counter() - entered

        while True:
            requests: list[TurnRequest] = []
            while pending and len(requests) < self.config.concurrency:
                started = self._next_episode(pending, finish)
                if started is not None:
                    live[started[0].episode_id] = started[0]
                    requests.append(started[1])
            if not requests:
                return
            began, outside = time.perf_counter(), 0.0
            try:
                self.backend.stream(requests, self.config.decoding, follow_up)  # type: ignore[attr-defined]
                problem = "backend returned no output"
            except Exception as error:  # fails the live episodes, not the run
                problem = f"backend error: {type(error).__name__}: {error}"
            self.stats.generate_s += time.perf_counter() - began - outside
            self.stats.rounds += 1
            for item in list(live.values()):
                self._end_unscored(item, problem)
                finish(live.pop(item.episode_id))

    def _run_rounds(
        self, pending: list[tuple[EpisodeSpec, str]], finish: Callable[[_Live], None]
    ) -> None:
        """One `generate` call per round over every live episode."""
        live: list[_Live] = []
        while pending or live:
            while pending and len(live) < self.config.concurrency:
                spec, episode_id = pending.pop()
                item = self._start(spec, episode_id)
                if item.trajectory is not None:
                    finish(item)
                else:
                    live.append(item)
            if not live:
                continue
            requests: list[TurnRequest] = []
            asking: list[_Live] = []
            for item in live:
                request = self._request(item)
                if request is not None:
                    requests.append(request)
                    asking.append(item)
            if requests:
                outputs = self._generate(requests)
                for item, output in zip(asking, outputs, strict=True):
                    self._apply(item, output)
                self.stats.rounds += 1
            still = []
            for item in live:
                if item.trajectory is not None:
                    finish(item)
                else:
                    still.append(item)
            live = still

    # -- episode lifecycle ------------------------------------------------------------------

    def _start(self, spec: EpisodeSpec, episode_id: str) -> _Live:
        provenance = self._provenance(spec)
        started = time.perf_counter()
        try:
            episode, first = self.env.reset(spec.task_id, seed=spec.seed)
        except Exception as error:
            self.stats.env_s += time.perf_counter() - started
            item = _Live(spec, episode_id, None, None, [], provenance, "", started)  # type: ignore[arg-type]
            self._end_unscored(item, f"environment reset failed: {type(error).__name__}: {error}")
            return item
        env_s = time.perf_counter() - started
        self.stats.env_s += env_s
        task: TaskView = episode.task
        messages = [
            {"role": "system", "content": self.layout.system_message(task.persona, spec.chunks)},
            {
                "role": "user",
                "content": self.layout.first_user_message(task.instruction, first.observation),
            },
        ]
        item = _Live(
            spec, episode_id, episode, first.state, messages, provenance, first.observation, started
        )
        item.timings["env_s"] += env_s
        return item

    def _provenance(self, spec: EpisodeSpec) -> Provenance:
        block = render_skill_block(
            spec.chunks, header=self.layout.skill_header, caveat=self.layout.skill_caveat
        )
        return Provenance(
            backend=self.backend.name,
            model_id=self.backend.model_id,
            checkpoint_id=self.backend.checkpoint_id,
            bank_id=spec.bank_id,
            bank_hash=spec.bank_hash,
            inclusion=list(spec.inclusion) if spec.inclusion is not None else None,
            injected=[f"{chunk.chunk_id}@{chunk.version}" for chunk in spec.chunks],
            skill_block_hash=content_hash(block) if block else None,
            prompt_version=self.layout.version,
            prompt_fingerprint=self.layout.fingerprint(),
            action_protocol=self.protocol.version,
            skill_renderer=RENDERER_VERSION,
            env_version=self.env.version,
            decoding=self.config.decoding.to_dict(),
            seed=spec.seed,
        )

    def _turn_limit(self, item: _Live) -> int:
        cap = item.state.max_steps
        return min(cap, self.config.max_turns) if self.config.max_turns else cap

    def _request(self, item: _Live) -> TurnRequest | None:
        """The episode's next request, or None when it ended here (context exhausted, failure)."""
        decoding = self.config.decoding
        started = time.perf_counter()
        tools = self.protocol.tools(item.state)
        renderer = self.backend.renderer
        prompt_ids = None
        try:
            if renderer is not None:
                item.prompt = renderer.prompt(
                    item.messages, tools, item.context, enable_thinking=decoding.thinking
                )
                prompt_ids = item.prompt.ids
                used = len(prompt_ids)
            else:
                # The server renders the prompt; a backend that counts it keeps the cap exact.
                count = getattr(self.backend, "count_prompt", None)
                counted = count(item.messages, tools, decoding) if count else None
                used = item.estimated_context if counted is None else counted
        except Exception as error:
            self._end_unscored(item, f"prompt rendering failed: {type(error).__name__}: {error}")
            return None
        finally:
            elapsed = time.perf_counter() - started
            item.timings["prompt_s"] += elapsed
            self.stats.prompt_s += elapsed
        room = min(decoding.max_new_tokens, decoding.context_cap - used)
        if room < 1:
            # The segment is full before the model could answer: as a turn that ran out of tokens.
            self._end_by_runtime(item, "generation_length")
            return None
        seed = (
            int.from_bytes(
                hash_key(
                    "sample",
                    decoding.seed if decoding.seed is not None else "",
                    item.spec.seed,
                    item.episode_id,
                    item.turn,
                )[:8],
                "big",
            )
            >> 1
        )
        return TurnRequest(
            key=item.episode_id,
            messages=tuple(item.messages),
            tools=tools,
            max_new_tokens=room,
            seed=seed,
            prompt_ids=prompt_ids,
        )

    def _generate(self, requests: list[TurnRequest]) -> list[TurnOutput | TurnFailure]:
        started = time.perf_counter()
        try:
            outputs = self.backend.generate(requests, self.config.decoding)
            if len(outputs) != len(requests):
                raise RuntimeError(
                    f"backend returned {len(outputs)} outputs for {len(requests)} requests"
                )
        except Exception as error:  # a backend that raises fails this round's episodes, not the run
            outputs = [
                TurnFailure(f"backend error: {type(error).__name__}: {error}") for _ in requests
            ]
        elapsed = time.perf_counter() - started
        self.stats.generate_s += elapsed
        return outputs

    def _apply(self, item: _Live, output: TurnOutput | TurnFailure) -> None:
        """Read one reply, act on it, and decide whether the episode ended."""
        if isinstance(output, TurnFailure):
            self._end_unscored(item, output.error)
            return
        round_s = sum(output.timings.values()) if output.timings else 0.0
        item.timings["generate_s"] += round_s
        turn = item.turn
        item.turn += 1
        self.stats.turns += 1
        generated = output.token_ids or ()
        generated_count = (
            len(generated) if output.token_ids is not None else output.completion_tokens or 0
        )
        self.stats.generated_tokens += generated_count
        item.counts["generated_tokens"] += generated_count
        item.counts["cached_tokens"] += output.cached_tokens
        self.stats.cached_tokens += output.cached_tokens
        segment, new_prompt = None, None
        if (
            output.prompt_ids is not None
            and output.token_ids is not None
            and output.logprobs is not None
        ):
            segment, new_prompt = item.ledger.add_turn(
                turn, output.prompt_ids, output.token_ids, output.logprobs
            )
            item.counts["prompt_tokens"] += len(output.prompt_ids)
            item.counts["prompt_tokens_new"] += new_prompt
            self.stats.prompt_tokens += len(output.prompt_ids)
            renderer = self.backend.renderer
            if renderer is not None and item.prompt is not None:
                item.context = renderer.extend(item.prompt, output.token_ids)
        else:
            item.exact = False
        if output.prompt_tokens is not None:
            item.estimated_context = output.prompt_tokens + generated_count

        started = time.perf_counter()
        parsed: ParsedReply = self.protocol.parse(
            Reply(output.text, output.tool_calls, output.reasoning), item.state
        )
        parse_s = time.perf_counter() - started
        item.timings["parse_s"] += parse_s
        self.stats.parse_s += parse_s
        step = StepRecord(
            turn=turn,
            reply=output.text,
            reasoning=parsed.reasoning,
            finish_reason=output.finish_reason,
            prompt_tokens=output.prompt_tokens,
            prompt_tokens_new=new_prompt,
            generated_tokens=generated_count,
            segment=segment,
            generate_s=round_s,
        )
        item.steps.append(step)
        item.messages.append(output.assistant_message)

        if parsed.error is not None:
            step.protocol_error = {"code": parsed.error.code, "message": parsed.error.message}
            if output.finish_reason == "length":
                self._end_by_runtime(item, "generation_length")
                return
            item.messages.extend(self.protocol.feedback_messages(parsed, parsed.error.feedback()))
        else:
            assert parsed.action is not None
            step.action = parsed.action
            started = time.perf_counter()
            try:
                result: StepResult = item.episode.step(parsed.action)
            except Exception as error:
                self._end_unscored(
                    item, f"environment step failed: {type(error).__name__}: {error}"
                )
                return
            finally:
                env_s = time.perf_counter() - started
                step.env_s = env_s
                item.timings["env_s"] += env_s
                self.stats.env_s += env_s
            item.state = result.state
            step.env_reason, step.page, step.done = result.reason, result.state.page, result.done
            if self.config.record_observations:
                step.observation = result.observation
            if result.done:
                self._end_done(item, result)
                return
            item.messages.extend(self.protocol.feedback_messages(parsed, result.observation))
        if item.turn >= self._turn_limit(item):
            self._end_by_runtime(item, "action_limit")

    # -- endings ----------------------------------------------------------------------------

    def _end_done(self, item: _Live, result: StepResult) -> None:
        if result.breakdown is None:
            self._end_unscored(item, "environment ended the episode without a reward breakdown")
            return
        components = {name: float(value) for name, value in result.breakdown.components().items()}
        if not is_scorable(components):
            self._end_unscored(item, f"unscorable reward components {components}")
            return
        self._end(item, result.breakdown.termination_reason, components)

    def _end(self, item: _Live, termination: Termination, components: dict[str, float]) -> None:
        item.trajectory = self._trajectory(item, True, termination, components, None)

    def _end_by_runtime(self, item: _Live, termination: Termination) -> None:
        """An ending the runtime decides (step cap, token limit): reward 0, trained on.

        An environment that offers `terminate` (ShopSim does) closes the episode itself, so its
        books show the same ending; the components are its zero breakdown.
        """
        terminate = getattr(item.episode, "terminate", None)
        if terminate is None:
            self._end(item, termination, zero_components())
            return
        started = time.perf_counter()
        try:
            result: StepResult = terminate(termination)
        except Exception as error:
            self._end_unscored(
                item, f"environment terminate failed: {type(error).__name__}: {error}"
            )
            return
        finally:
            elapsed = time.perf_counter() - started
            item.timings["env_s"] += elapsed
            self.stats.env_s += elapsed
        if result.breakdown is None:
            self._end(item, termination, zero_components())
        else:
            components = {k: float(v) for k, v in result.breakdown.components().items()}
            self._end(item, termination, components)

    def _end_unscored(self, item: _Live, error: str) -> None:
        item.trajectory = self._trajectory(item, False, None, zero_components(), error)

    def _trajectory(
        self,
        item: _Live,
        scored: bool,
        termination: Termination | None,
        components: dict[str, float],
        error: str | None,
    ) -> Trajectory:
        exact = item.exact and bool(item.ledger.segments)
        return Trajectory(
            episode_id=item.episode_id,
            group_id=item.spec.group_id,
            task_id=item.spec.task_id,
            provenance=item.provenance,
            scored=scored,
            termination=termination,
            error=error,
            reward=components["r_strict"] if scored else 0.0,
            components=components,
            steps=item.steps,
            initial_observation=item.initial_observation if self.config.record_observations else "",
            segments=item.ledger.segments if exact else [],
            exact_tokens=exact,
            token_counts={**item.counts, "segments": len(item.ledger.segments), "turns": item.turn},
            timings={**item.timings, "wall_s": time.perf_counter() - item.started},
            protocol_errors=sum(step.protocol_error is not None for step in item.steps),
        )


def run_episodes(
    env: Environment,
    backend: PolicyBackend,
    specs: Sequence[EpisodeSpec],
    config: RolloutConfig | None = None,
    on_trajectory: Callable[[Trajectory], None] | None = None,
) -> list[Trajectory]:
    """Run `specs` with `backend` on `env`; one trajectory per spec, in order."""
    return RolloutEngine(env, backend, config).run(specs, on_trajectory)
