"""The registry's wire contract (`schemas`) and its typed HTTP client (`client`)."""

from shared.contracts.registry_api.client import (
    AuthError,
    Conflict,
    Invalid,
    NotFound,
    PreconditionFailed,
    RegistryClient,
    RegistryError,
    Unavailable,
)

__all__ = [
    "AuthError",
    "Conflict",
    "Invalid",
    "NotFound",
    "PreconditionFailed",
    "RegistryClient",
    "RegistryError",
    "Unavailable",
]
