"""In-process cache of frozen bank documents: bytes and ETag, keyed by bank id.

A frozen bank never changes, so a cached copy can never be stale; the hot path (trainer and
evaluator workers fetching the bank they run under) is then a dictionary lookup with no
database round trip and no serialisation.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True)
class CachedBank:
    etag: str
    body: bytes


class FrozenBankCache:
    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._items: OrderedDict[int, CachedBank] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, bank_id: int) -> CachedBank | None:
        item = self._items.get(bank_id)
        if item is not None and self._capacity:
            with self._lock:
                if bank_id in self._items:
                    self._items.move_to_end(bank_id)
        return item

    def put(self, bank_id: int, item: CachedBank) -> None:
        if not self._capacity:
            return
        with self._lock:
            self._items[bank_id] = item
            self._items.move_to_end(bank_id)
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)
