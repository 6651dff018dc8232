"""The data fingerprint: sha256 over the variables and the coded rows, the same however the
rows were read (held, streamed in chunks, or in parts read apart).

The rows are hashed in blocks of ``BLOCK_ROWS``, aligned to row 0: the fingerprint is
sha256 of the variables (canonical JSON), X's type and shape, the sha256 of each block of
X (int32 little-endian, row-major), y's type and shape and the sha256 of each block of y
(int64). A block's digest depends on its rows alone, so a part of the rows hashed by
itself (``RowDigests``, from the row it starts at) contributes its whole blocks, and only
the rows of the blocks it shares with its neighbours travel (``combine``). Weighted rows
(``weights``) add the block digests of their weights (float64 little-endian) after the
rows' fingerprint (``weighted``); unweighted rows' fingerprint is unchanged.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from bnserve.store.model import Variable

BLOCK_ROWS = 65536


@dataclass
class RowDigests:
    """The block digests of rows added in order from global row ``start``: blocks that lie
    whole in these rows are hashed; the rows of a block begun before ``start`` or not
    finished when ``finish`` is called are kept as fragments, for ``combine``."""

    start: int = 0
    rows: int = 0
    whole: dict[int, tuple[bytes, bytes]] = field(default_factory=dict)  # block -> digests of X and y
    fragments: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # block -> its rows here
    _current: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)

    def add(self, X: np.ndarray, y: np.ndarray) -> None:
        i = 0
        while i < y.shape[0]:
            at = self.start + self.rows
            block = at // BLOCK_ROWS
            take = min(y.shape[0] - i, (block + 1) * BLOCK_ROWS - at)
            self._current.append((X[i : i + take], y[i : i + take]))
            self.rows += take
            i += take
            if (self.start + self.rows) % BLOCK_ROWS == 0:
                self._close(block)

    def finish(self) -> RowDigests:
        """Keep the rows of an unfinished last block as a fragment; returns self."""
        if self._current:
            self._close((self.start + self.rows - 1) // BLOCK_ROWS)
        return self

    def _close(self, block: int) -> None:
        pieces, self._current = self._current, []
        began_here = block * BLOCK_ROWS >= self.start
        finished = (self.start + self.rows) % BLOCK_ROWS == 0
        if began_here and finished:
            self.whole[block] = (_sha256(*(x for x, _ in pieces)), _sha256(*(y for _, y in pieces)))
        else:
            X = np.concatenate([x for x, _ in pieces]).astype("<i4", copy=False)
            self.fragments[block] = (X, np.concatenate([y for _, y in pieces]).astype("<i8", copy=False))


def combine(parts: Sequence[RowDigests]) -> list[tuple[bytes, bytes]]:
    """Every block's digests, in order, from ``parts`` (finished, in row order, each
    starting where the one before ends)."""
    whole: dict[int, tuple[bytes, bytes]] = {}
    pieces: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    for part in parts:
        whole.update(part.whole)
        for block, rows in part.fragments.items():
            pieces.setdefault(block, []).append(rows)
    for block, fragments in pieces.items():
        X = np.concatenate([x for x, _ in fragments])
        whole[block] = (_sha256(X), _sha256(np.concatenate([y for _, y in fragments])))
    return [whole[block] for block in sorted(whole)]


def fingerprint(variables: Sequence[Variable], n_rows: int, blocks: Sequence[tuple[bytes, bytes]]) -> str:
    """The fingerprint of ``n_rows`` rows of the features and class ``variables`` from their block digests."""
    h = hashlib.sha256()
    h.update(json.dumps([v.to_dict() for v in variables], sort_keys=True, separators=(",", ":")).encode())
    h.update(f"|X|<i4|({n_rows}, {len(variables) - 1})|".encode())
    for x, _ in blocks:
        h.update(x)
    h.update(f"|y|<i8|({n_rows},)|".encode())
    for _, y in blocks:
        h.update(y)
    return h.hexdigest()


def fingerprint_of(
    variables: Sequence[Variable], X: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None
) -> str:
    """``fingerprint`` of rows held whole (``weighted`` when they have ``weights``)."""
    digests = RowDigests()
    digests.add(X, y)
    digest = fingerprint(variables, y.shape[0], combine([digests.finish()]))
    if weights is None:
        return digest
    weight_digests = RowDigests()
    weight_digests.add(weight_rows(weights), y)
    return weighted(digest, y.shape[0], combine([weight_digests.finish()]))


def weight_rows(weights: np.ndarray) -> np.ndarray:
    """The weights' float64 little-endian bytes as the (rows, 2) int32 rows ``RowDigests`` hashes."""
    return np.ascontiguousarray(weights, dtype="<f8").view("<i4").reshape(-1, 2)


def weighted(digest: str, n_rows: int, blocks: Sequence[tuple[bytes, bytes]]) -> str:
    """The fingerprint of weighted rows: the rows' ``digest``, then their weights' block digests."""
    h = hashlib.sha256(digest.encode())
    h.update(f"|w|<f8|({n_rows},)|".encode())
    for w, _ in blocks:
        h.update(w)
    return h.hexdigest()


HASH_ROWS = 4096  # rows converted at a time for hashing: a few hundred KiB, not a copy of the block


def _sha256(*pieces: np.ndarray) -> bytes:
    """sha256 of the rows of ``pieces`` in order, as row-major bytes of X's int32 or y's int64
    (the fingerprint's types): converted ``HASH_ROWS`` at a time, the same digest as of one
    converted copy of the block (13 MB for 50 columns), without it."""
    h = hashlib.sha256()
    for rows in pieces:
        dtype = "<i4" if rows.ndim == 2 else "<i8"
        for start in range(0, rows.shape[0], HASH_ROWS):
            h.update(np.ascontiguousarray(rows[start : start + HASH_ROWS], dtype=dtype).data)
    return h.digest()
