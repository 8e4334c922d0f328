"""R_opt (spec 4): required option values against the selected values, axes ignored."""

from __future__ import annotations

from collections.abc import Mapping

from shared.runtime.shopsim.reward.text import fuzzy_match


def required_option_values(goal_options: object) -> list[str]:
    """A mapping gives its values; a list, tuple or set its elements (stringified, '' kept);
    any other scalar one value unless it is null or ''."""
    if isinstance(goal_options, Mapping):
        return [str(value) for value in goal_options.values()]
    if isinstance(goal_options, list | tuple | set | frozenset):
        return [str(value) for value in goal_options]
    if goal_options is None or goal_options == "":
        return []
    return [str(goal_options)]


def selected_option_values(selected_options: object) -> list[str]:
    """The values of the selection; anything that is not a mapping is an empty selection."""
    if not isinstance(selected_options, Mapping):
        return []
    return [str(value) for value in selected_options.values()]


def option_reward(selected_options: object, goal_options: object) -> tuple[float, int]:
    """(R_opt, M_opt); no required values gives (1.0, 0)."""
    required = required_option_values(goal_options)
    if not required:
        return 1.0, 0
    chosen = selected_option_values(selected_options)
    matched = sum(any(fuzzy_match(value, wanted) for value in chosen) for wanted in required)
    return matched / len(required), matched
