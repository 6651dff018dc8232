"""The chunks pass 1 keeps on disk come back as they were (trainer/data/kept.py): every text,
including the empty one, non-ASCII, NUL and a lone surrogate, every position and weight, in
order; and a part that was never kept reads as None (the file is read again)."""

from __future__ import annotations

import numpy as np

from bnserve.trainer.data.kept import Chunk, keeping, kept, new_folder, remove
from bnserve.trainer.io import TextColumn


def column(labels: list[str], index: list[int]) -> TextColumn:
    texts = np.empty(len(labels), dtype=object)
    texts[:] = labels
    return TextColumn(texts, np.asarray(index, dtype=np.int32))


def test_kept_chunks_come_back_text_for_text_in_order():
    folder = new_folder()
    try:
        odd = ["", "é", "a\x00", "\udcff", "x" * 300]
        chunks = [
            Chunk(column(["p", "q"], [0, 1, 1]), (column(odd, [4, 3, 2]), column(["1"], [0, 0, 0])), None),
            Chunk(column(["q"], [0]), (column(["é"], [0]), column([""], [0])), np.array([0.5])),
        ]
        with keeping(folder, "part-1") as keep:
            for chunk in chunks:
                keep(chunk)
        back = list(kept(folder, "part-1") or [])
        assert len(back) == len(chunks)
        for got, want in zip(back, chunks):
            for g, w in zip((got.y, *got.features), (want.y, *want.features)):
                assert list(g.texts()) == list(w.texts())
                assert g.labels.dtype == object
            assert (got.weights is None) == (want.weights is None)
            if want.weights is not None:
                assert got.weights is not None and np.array_equal(got.weights, want.weights)
        assert kept(folder, "part-2") is None
    finally:
        remove(folder)
