"""Every table model, imported once so SQLModel.metadata is complete (Alembic, tests)."""

from services.registry.aliases.models import Alias, AliasEvent
from services.registry.audit.models import AuditEntry
from services.registry.banks.models import Bank, BankEntry
from services.registry.cards.models import Candidate, CandidateCitation, CardAudit, FailureCard
from services.registry.chunks.models import Chunk, ChunkText, ChunkVersion
from services.registry.evidence.models import AllWrongGroup, Checkpoint
from services.registry.gates.models import GateDecision, GateDecisionRow, GateObservation, GateRun
from services.registry.idempotency.models import IdempotencyRecord

__all__ = [
    "Alias",
    "AliasEvent",
    "AllWrongGroup",
    "AuditEntry",
    "Bank",
    "BankEntry",
    "Candidate",
    "CandidateCitation",
    "CardAudit",
    "Checkpoint",
    "Chunk",
    "ChunkText",
    "ChunkVersion",
    "FailureCard",
    "GateDecision",
    "GateDecisionRow",
    "GateObservation",
    "GateRun",
    "IdempotencyRecord",
]
