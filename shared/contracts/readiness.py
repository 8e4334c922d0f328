"""The body of the evaluator's and the analyst's `/readyz`: ready or not, and each check's
result ("ok" or what is wrong). 200 when ready, 503 + Retry-After otherwise."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Readiness(BaseModel):
    ready: bool
    checks: dict[str, str] = Field(default_factory=dict)
