"""Which frozen bank a round trains on, and the curriculum it implies.

S_0 is the bank given by id or alias (the gate alias by default); a fresh local registry with no
such alias gets a STAND-IN S_0 (`shared/runtime/standin_s0.py`, in place of the cold start and Gate A).
Each round pins its bank: frozen, and with the hash it had when the round began.
"""

from __future__ import annotations

from services.trainer.ablations import unmasked
from services.trainer.config import TrainerConfig
from services.trainer.run_context import RunContext, RunError
from services.trainer.service_wait import wait_for_alias
from services.trainer.treatments import CurriculumChunk, CurriculumState
from shared.contracts.chunks import InjectedChunk
from shared.contracts.inclusion import rho_from_coefficients
from shared.contracts.registry_api.client import NotFound, RegistryClient
from shared.contracts.registry_api.schemas import BankPublic
from shared.runtime.standin_s0 import seed_standin_s0


def curriculum_from_bank(
    bank: BankPublic, config: TrainerConfig
) -> tuple[CurriculumState, list[InjectedChunk]]:
    """The interval's curriculum: the bank's chunks in bank order with their rho.

    When every entry carries the gate coefficient that admitted it, rho must be the method's
    mapping of those coefficients (a bank whose rho disagrees is refused).
    """
    if bank.content_hash is None or bank.frozen_at is None:
        raise RunError(f"bank {bank.id} is not frozen: the trainer trains on frozen banks only")
    if abs(bank.q - config.q) > 1e-12:
        raise RunError(f"bank {bank.id} has q={bank.q}, the config q={config.q}")
    entries = sorted(bank.entries, key=lambda entry: entry.position)
    if entries and all(entry.coefficient is not None for entry in entries):
        expected = rho_from_coefficients(
            {entry.slug: entry.coefficient for entry in entries},  # type: ignore[misc]
            rho_min=config.rho_min,
            rho_max=config.rho_max,
        )
        for entry in entries:
            if abs(expected[entry.slug] - entry.rho) > 1e-9:
                raise RunError(
                    f"bank {bank.id}: {entry.slug} has rho {entry.rho}, its coefficient gives "
                    f"{expected[entry.slug]}"
                )
    chunks = tuple(
        CurriculumChunk(entry.chunk_id, entry.slug, entry.version, entry.content_hash, entry.rho)
        for entry in entries
    )
    state = CurriculumState(
        bank_id=bank.id, bank_hash=bank.content_hash, q=bank.q, seed=config.seed, chunks=chunks
    )
    if not config.mask:
        state = unmasked(state)
    injected = [
        InjectedChunk(chunk_id=e.slug, version=e.version, content=e.content) for e in entries
    ]
    return state, injected


def resolve_initial_bank(
    context: RunContext, name: str, *, local_operator: RegistryClient | None, wait_s: float = 0.0
) -> int:
    """S_0's id: `name` is an id or an alias. Only our own local registry (`local_operator`
    given) may get a stand-in S_0 when the alias is missing; a registry given by URL may get
    the alias within `wait_s` seconds (the deployment's bank-s0 Job makes it)."""
    if name.isdigit():
        return int(name)
    try:
        return context.clients.registry.get_alias(name).bank_id
    except NotFound:
        if local_operator is None and wait_s > 0:
            bank_id = wait_for_alias(
                context.clients.registry, name, within_s=wait_s, say=context.console.print
            )
            if bank_id is not None:
                return bank_id
        if local_operator is not None:
            config = context.config
            return seed_standin_s0(
                local_operator,
                alias=name,
                key=context.run_id,
                seeded_by="the trainer's local stack",
                q=config.q,
                rho_min=config.rho_min,
                rho_max=config.rho_max,
            )
        waited = f" after waiting {wait_s:.0f} s" if wait_s > 0 else ""
        raise RunError(
            f"no bank behind alias {name!r}{waited}: run the cold start first (or the "
            "deployment's bank-s0 Job) or pass --initial-bank"
        ) from None


def pin_bank(registry: RegistryClient, bank_id: int, expected_hash: str | None) -> BankPublic:
    """The bank, refused unless frozen and (when given) still of the expected hash."""
    summary = registry.bank_summary(bank_id)
    if summary.status.value != "frozen":
        raise RunError(f"bank {bank_id} is {summary.status.value}, not frozen")
    bank = registry.get_bank(bank_id, revalidate=True)
    if expected_hash is not None and bank.content_hash != expected_hash:
        raise RunError(
            f"bank {bank_id} hash {bank.content_hash} differs from the pinned {expected_hash}"
        )
    return bank
