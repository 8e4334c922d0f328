"""Paired rollouts: identity checks, rollout records, and pairing them into observations.

A gate compares, per validation task, one bare rollout B_i and one masked rollout R_i. The two
must share the frozen checkpoint, task, sample, decoding settings, the prompt outside the skill
block, the environment version and the split; otherwise their difference is not the effect of
the skill block. Every check here names the field that differs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from services.evaluator.design import GateDesign, included_ids, mask_row
from services.evaluator.fit import COMPONENTS, PairedObservation
from shared.contracts.hashing import content_hash

Arm = Literal["bare", "masked"]
RecordStatus = Literal["completed", "failed"]

# The fields two rollouts must share to be paired (task and sample are the pairing key itself).
IDENTITY_FIELDS = (
    "checkpoint_id",
    "model",
    "decoding",
    "prompt_version",
    "prompt_fingerprint",
    "env_version",
    "action_protocol",
    "split",
)


class PairingError(ValueError):
    """The records cannot be paired into a valid gate."""


class IdentityMismatch(PairingError):
    """Two rollouts (or a run and a gate) differ in a field that must be identical."""

    def __init__(self, field_name: str, left: object, right: object, context: str) -> None:
        super().__init__(f"{context}: {field_name} differs ({left!r} vs {right!r})")
        self.field = field_name


class DuplicateRecordError(PairingError):
    """Two completed records for one (task, sample, arm): a gate may count each rollout once."""


@dataclass(frozen=True)
class RolloutIdentity:
    """What must be identical between the bare and the masked rollouts of a gate."""

    checkpoint_id: str
    model: str  # the backend's model id
    decoding: str  # fingerprint of the decoding settings
    prompt_version: str
    prompt_fingerprint: str  # the prompt layout outside the skill block
    env_version: str
    action_protocol: str  # the version of the action protocol the prompt describes
    split: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RolloutIdentity:
        return cls(**{name: str(data[name]) for name in IDENTITY_FIELDS})


def decoding_fingerprint(decoding: Mapping[str, Any]) -> str:
    """A stable hash of decoding settings (temperature, top-p, top-k, token limits, ...)."""
    return content_hash(dict(decoding))[:16]


def check_identity(expected: RolloutIdentity, actual: RolloutIdentity, *, context: str) -> None:
    """Raise `IdentityMismatch` naming the first field in which the two differ."""
    for name in IDENTITY_FIELDS:
        left, right = getattr(expected, name), getattr(actual, name)
        if left != right:
            raise IdentityMismatch(name, left, right, context)


def bare_plan_fingerprint(identity: RolloutIdentity, task_ids: Sequence[str], sample: int) -> str:
    """What a gate's bare rollouts must be: the shared identity, the sample and the tasks.

    Two gates with the same fingerprint can pair with the same bare runs; a changed checkpoint,
    decoding, prompt, environment, protocol, split, sample or task set changes it.
    """
    return content_hash(
        {"identity": identity.as_dict(), "sample": sample, "task_ids": list(task_ids)}
    )


@dataclass(frozen=True)
class RolloutRequest:
    """One rollout a gate or an evaluation asks for."""

    task_id: str
    sample: int
    arm: Arm
    included: tuple[str, ...] = ()  # intervention ids, bank order; () for a bare rollout
    inclusion: tuple[int, ...] | None = None  # the mask row (masked arm)
    attempt: int = 0
    condition: str = ""  # evaluation condition name; "" in gates

    @property
    def key(self) -> tuple[str, int, str, str]:
        return (self.condition, self.task_id, self.sample, self.arm)  # type: ignore[return-value]


@dataclass(frozen=True)
class RolloutRecord:
    """What one rollout attempt produced, with the identity it ran under."""

    task_id: str
    sample: int
    arm: Arm
    attempt: int
    status: RecordStatus
    identity: RolloutIdentity
    components: Mapping[str, float]
    injected: tuple[str, ...] = ()
    inclusion: tuple[int, ...] | None = None
    steps: int = 0
    protocol_errors: int = 0
    generated_tokens: int = 0
    prompt_tokens: int = 0
    termination: str | None = None
    error: str | None = None
    episode_id: str | None = None
    condition: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["identity"] = self.identity.as_dict()
        data["injected"] = list(self.injected)
        data["inclusion"] = None if self.inclusion is None else list(self.inclusion)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RolloutRecord:
        values = dict(data)
        values["identity"] = RolloutIdentity.from_dict(values["identity"])
        values["injected"] = tuple(values.get("injected") or ())
        inclusion = values.get("inclusion")
        values["inclusion"] = None if inclusion is None else tuple(int(v) for v in inclusion)
        values["components"] = {k: float(v) for k, v in values["components"].items()}
        return cls(**values)


def records_fingerprint(records: Iterable[RolloutRecord]) -> str:
    """sha256 of the completed records (task, sample, arm, identity, components), order-free."""
    rows = sorted(
        (
            [r.task_id, r.sample, r.arm, r.identity.as_dict(), dict(r.components)]
            for r in records
            if r.status == "completed"
        ),
        key=lambda row: (row[0], row[1], row[2]),
    )
    return content_hash(rows)


@dataclass(frozen=True)
class PairingResult:
    observations: tuple[PairedObservation, ...]
    unpaired: tuple[dict[str, Any], ...]  # {task_id, sample, missing: [...], last_error}
    failed_attempts: int

    @property
    def complete(self) -> bool:
        return not self.unpaired


def completed_record(records: Sequence[RolloutRecord], *, what: str) -> RolloutRecord | None:
    """The one completed record among a key's attempts; two completed is an error."""
    done = [record for record in records if record.status == "completed"]
    if len(done) > 1:
        attempts = ", ".join(str(record.attempt) for record in done)
        raise DuplicateRecordError(f"{what}: {len(done)} completed records (attempts {attempts})")
    return done[0] if done else None


def check_components(record: RolloutRecord, *, what: str) -> None:
    missing = [name for name in COMPONENTS if name not in record.components]
    if missing:
        raise PairingError(f"{what}: missing reward components {', '.join(missing)}")
    bad = [name for name, value in record.components.items() if not math.isfinite(float(value))]
    if bad:
        raise PairingError(f"{what}: non-finite reward components {', '.join(sorted(bad))}")


def pair_records(
    design: GateDesign,
    identity: RolloutIdentity,
    records: Iterable[RolloutRecord],
    task_ids: Sequence[str],
    *,
    sample: int = 0,
) -> PairingResult:
    """Pair the completed bare and masked records of each task into observations.

    Refuses (raises) on a record from another checkpoint / decoding / prompt / environment /
    split, a masked record whose mask or injected chunks differ from the design's, a record for a
    task outside the gate, or two completed records of one rollout. Tasks without both completed
    rollouts are listed as unpaired, and the gate is then incomplete.
    """
    by_key: dict[tuple[str, str], list[RolloutRecord]] = defaultdict(list)
    wanted = set(task_ids)
    failed = 0
    for record in records:
        what = f"task {record.task_id} sample {record.sample} {record.arm}"
        if record.task_id not in wanted or record.sample != sample:
            raise PairingError(f"{what}: not a rollout of this gate")
        check_identity(identity, record.identity, context=what)
        failed += record.status == "failed"
        by_key[(record.task_id, record.arm)].append(record)

    observations: list[PairedObservation] = []
    unpaired: list[dict[str, Any]] = []
    for task_id in task_ids:
        arms: dict[str, RolloutRecord | None] = {}
        for arm in ("bare", "masked"):
            what = f"task {task_id} sample {sample} {arm}"
            record = completed_record(by_key.get((task_id, arm), []), what=what)
            if record is not None:
                check_components(record, what=what)
            arms[arm] = record
        bare, masked = arms["bare"], arms["masked"]
        if bare is not None and bare.injected:
            raise PairingError(
                f"task {task_id} bare: injected {list(bare.injected)}, expected none"
            )
        mask = mask_row(design, task_id, sample)
        if masked is not None:
            if masked.inclusion is not None and tuple(masked.inclusion) != mask:
                raise PairingError(f"task {task_id} masked: inclusion differs from the design mask")
            expected = included_ids(design, mask)
            if tuple(masked.injected) != expected:
                raise PairingError(
                    f"task {task_id} masked: injected {list(masked.injected)}, "
                    f"the mask includes {list(expected)}"
                )
        if bare is None or masked is None:
            errors = [r.error for arm in ("bare", "masked") for r in by_key.get((task_id, arm), [])]
            unpaired.append(
                {
                    "task_id": task_id,
                    "sample": sample,
                    "missing": [arm for arm in ("bare", "masked") if arms[arm] is None],
                    "last_error": next((e for e in reversed(errors) if e), None),
                }
            )
            continue
        observations.append(
            PairedObservation(
                task_id=task_id,
                mask=mask,
                masked={name: float(masked.components[name]) for name in COMPONENTS},
                bare={name: float(bare.components[name]) for name in COMPONENTS},
                sample=sample,
            )
        )
    return PairingResult(tuple(observations), tuple(unpaired), failed)
