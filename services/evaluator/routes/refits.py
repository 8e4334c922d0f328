"""`POST /v1/refits`: re-fit and re-select a stored gate from its raw observations."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, status

from services.evaluator.decision import decide
from services.evaluator.deps import Context, may_read, registry_failed, unprocessable
from services.evaluator.design import DesignError
from services.evaluator.fit import FitError
from services.evaluator.gate_job import registry_error_status
from services.evaluator.stored_gate import load_gate_run
from shared.contracts.evaluator_api.schemas import RefitCreate
from shared.contracts.registry_api.client import RegistryError

router = APIRouter()


@router.post("/v1/refits", dependencies=[may_read("gate")], responses={503: {}})
def refit(body: RefitCreate, context: Context) -> dict[str, Any]:
    """Synchronous: 404 for a gate run the registry does not have, 422 for one that cannot be
    fitted, 503 + Retry-After when the registry is away."""
    client = context.planning_clients()
    try:
        design, observations, solver = load_gate_run(body.gate_run_id, client)
        decision = decide(
            design, observations, budget=body.budget, solver=body.solver or solver,
            admit=body.admit,
        )  # fmt: skip
    except LookupError as error:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=str(error)) from None
    except RegistryError as error:
        if registry_error_status(error) == 422:
            raise unprocessable(["gate_run_id"], str(error)) from None
        raise registry_failed(error) from None
    except (DesignError, FitError) as error:
        raise unprocessable(["gate_run_id"], str(error)) from None
    finally:
        client.close()
    return decision.as_json(intervals=True)
