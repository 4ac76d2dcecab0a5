"""trace/interning.py: ids in order of first appearance, whichever way the items are chunked."""

from __future__ import annotations

import random
from operator import itemgetter

import numpy as np

from attnprof.trace.interning import PairTable, intern


def test_pair_ids_are_those_of_a_table_of_tuples_however_the_items_are_chunked() -> None:
    rng = random.Random(5)
    cats = ["kernel", "cpu_op", "ac2g", "", "Trace", "cuda_runtime"]
    items = [(rng.choice(cats), rng.choice("XsfMiB")) for _ in range(3000)]
    want: dict[tuple[str, str], int] = {}
    want_ids = intern(want, lambda x: x, items)
    for size in (1, 7, 100, 3000):
        table = PairTable()
        got = np.concatenate(
            [table.add(itemgetter(0), itemgetter(1), items[i : i + size]) for i in range(0, len(items), size)]
        )
        assert table.ids == want and list(table.ids) == list(want), size
        assert got.tolist() == want_ids.tolist(), size
        # the first values' own table: in order of first appearance too
        assert list(table.first) == list(dict.fromkeys(c for c, _ in items)), size
