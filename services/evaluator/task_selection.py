"""Which tasks of a split a request may name: its task ids (known, distinct) or the whole split,
optionally only the first n."""

from __future__ import annotations


class TaskSelectionError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def select_tasks_from(
    available: list[str], task_ids: list[str] | None, n_tasks: int | None, *, split: str = ""
) -> list[str]:
    """The requested tasks (default: the whole split), optionally only the first n."""
    if task_ids is not None:
        unknown = sorted(set(task_ids) - set(available))
        if unknown:
            raise TaskSelectionError(
                "task_ids", f"not in split {split!r}: {', '.join(unknown[:5])}"
            )
        if len(set(task_ids)) != len(task_ids):
            raise TaskSelectionError("task_ids", "task ids must be distinct")
        chosen = list(task_ids)
    else:
        chosen = list(available)
    if n_tasks is not None:
        if n_tasks > len(chosen):
            raise TaskSelectionError("n_tasks", f"only {len(chosen)} tasks available")
        chosen = chosen[:n_tasks]
    return chosen
