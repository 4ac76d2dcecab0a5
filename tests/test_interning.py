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


def test_value_ids_read_a_row_map_and_a_plain_mapping_alike() -> None:
    from attnprof.trace.model import RowMap, row_columns, value_ids

    rng = random.Random(9)
    plain = {r: (b"[%d]" % rng.randrange(4), b"", b"") for r in rng.sample(range(500), 120)}
    rows, idx, distinct = row_columns(plain)
    packed = RowMap(rows, idx.astype(np.int32), distinct)
    asked = np.array(sorted(rng.sample(range(520), 200)), np.int64)
    for m in (plain, packed, {}, RowMap(np.zeros(0, np.int64), np.zeros(0, np.int32), [])):
        ids, values = value_ids(m, asked)
        got = [None if i < 0 else values[i] for i in ids.tolist()]
        assert got == [m.get(r) for r in asked.tolist()]
