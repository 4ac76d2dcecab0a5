"""Strings and pairs of values to small integer ids, in order of first appearance, chunk by chunk.

Ids are given in the order keys first appear, so that they do not depend on how the events were
cut into chunks or blocks (streamed, forked and whole-file loads agree). The per-event loops run
in C: a map over the events and one dict lookup per event for a single field (intern). A pair of
fields whose values repeat as the same objects (an event's category and its one-letter phase,
which Python keeps one object of) is two such lookups, the two ids joined into one 64-bit code
and a chunk's codes found among the known ones by binary search (PairTable): 0.74x the time of
a tuple per event built, hashed and looked up (on the 48 MB benchmark trace). Pairs of fresh
numbers (pid, tid) gain nothing so: each number is hashed either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["PairTable", "intern"]


def intern(table: dict[Any, int], field: Callable[[Any], Any], items: Sequence[Any]) -> np.ndarray:
    """Ids of field(item) in table, adding new ones in order of first appearance."""
    if len(table) > 0:
        # after the first chunks nearly every key is known: one lookup pass straight from the
        # events, no list of the keys (a key not yet known falls through to the pass that adds
        # them in order)
        try:
            return np.fromiter(map(table.__getitem__, map(field, items)), np.int64, len(items))
        except KeyError:
            pass
    keys = list(map(field, items))
    for k in [k for k in dict.fromkeys(keys) if k not in table]:
        table[k] = len(table)
    return np.fromiter(map(table.__getitem__, keys), np.int64, len(keys))


class PairTable:
    """(first, second) -> id in order of first appearance, each value interned on its own.

    ids is the table callers read (key tuples, as a dict of tuples would hold them); first and
    second are the two values' own tables (first is a table callers may use: the categories of
    the (category, phase) pairs)."""

    def __init__(self) -> None:
        self.ids: dict[tuple[Any, Any], int] = {}
        self.first: dict[Any, int] = {}
        self.second: dict[Any, int] = {}
        self._codes = np.zeros(0, np.int64)  # the known pairs' codes, sorted
        self._code_ids = np.zeros(0, np.int64)  # the id of each of _codes

    def add(
        self, first: Callable[[Any], Any], second: Callable[[Any], Any], items: Sequence[Any]
    ) -> np.ndarray:
        """The pair id of each item, (first(item), second(item)); new pairs added in order."""
        code = (intern(self.first, first, items) << 32) | intern(self.second, second, items)
        pos, hit = self._find(code)
        if not hit.all():
            new, at = np.unique(code[~hit], return_index=True)
            new = new[np.argsort(at, kind="stable")]  # in order of first appearance
            firsts, seconds = list(self.first), list(self.second)
            start = len(self.ids)
            for c in new.tolist():
                self.ids[(firsts[c >> 32], seconds[c & 0xFFFFFFFF])] = len(self.ids)
            self._insert(new, np.arange(start, start + new.size, dtype=np.int64))
            pos, hit = self._find(code)
        return self._code_ids[pos]

    def _find(self, code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos = np.searchsorted(self._codes, code)
        np.minimum(pos, max(self._codes.size - 1, 0), out=pos)
        hit = self._codes[pos] == code if self._codes.size else np.zeros(code.size, bool)
        return pos, hit

    def _insert(self, codes: np.ndarray, ids: np.ndarray) -> None:
        all_codes = np.concatenate([self._codes, codes])
        all_ids = np.concatenate([self._code_ids, ids])
        o = np.argsort(all_codes, kind="stable")
        self._codes, self._code_ids = all_codes[o], all_ids[o]
