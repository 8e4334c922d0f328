"""The analyst service's wire contract (`schemas`) and its typed HTTP client (`client`)."""

from shared.contracts.analyst_api.client import (
    AnalystClient,
    AnalystError,
    AnalystUnavailable,
    JobFailed,
)

__all__ = ["AnalystClient", "AnalystError", "AnalystUnavailable", "JobFailed"]
