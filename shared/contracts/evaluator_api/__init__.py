"""The evaluator's wire contract (`schemas`) and its typed HTTP client (`client`)."""

from shared.contracts.evaluator_api.client import (
    EvaluatorClient,
    EvaluatorError,
    EvaluatorUnavailable,
    JobFailed,
)

__all__ = ["EvaluatorClient", "EvaluatorError", "EvaluatorUnavailable", "JobFailed"]
