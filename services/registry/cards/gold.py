"""Gold the firewall found stays in the privileged audit.

A firewall finding's `text` is the gold string it matched (a brand, a model code, a price), and
a blocked card's deployable text is what carried it. Every role reads cards and the audit log,
so what they read carries the finding's rule and field only, and no deployable text for a
card with findings; `GET /v1/cards/{id}/audit` (analysts and operators) serves them whole.
"""

from __future__ import annotations

from typing import Any

WITHHELD = "[withheld: see the card's privileged audit]"


def withhold_gold(card: dict[str, Any]) -> dict[str, Any]:
    """A card document (as the API answers it, or an audit entry's before/after) without the
    firewall's matched text, and without the deployable text when the firewall found any."""
    findings = card.get("firewall_findings") or []
    if not findings:
        return card
    return {
        **card,
        "firewall_findings": [{**finding, "text": WITHHELD} for finding in findings],
        "deployable": None,
    }
