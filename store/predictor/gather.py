"""One fused gather of log CPT entries for a batch of coded rows.

Shared by the fast path (``compiled``: the trailing axis is the class) and by
variable elimination (``elimination``: the trailing axes are a factor's free
variables), so there is one implementation of the flat-table indexing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from bnserve.store.model import Node

GATHER_ROWS = 4096  # rows per chunk of a large batch
FEW_ROWS = 8  # batches up to this many rows compute their indices in the fewest numpy calls
CLASS_MAJOR_MAX_BLOCK = 16  # trailing blocks up to this size are stored block-major


class LogGather:
    """Sums of log CPT entries of nodes whose family members, bar the ``trailing`` ones, are inputs.

    One flat float64 table holds every node's log CPT transposed to (other family
    members..., trailing variables...), so the trailing block is contiguous; a trailing
    variable missing from a node's family is broadcast along its axis. A row's block for
    a node starts at ``offset + sum(code * stride)`` over the other members, read through
    padded (nodes, width) ``cols``/``strides`` (stride 0 for padding). Nodes are grouped in
    consecutive segments; a call returns (rows, segments, prod(trailing cards)).

    When the block is small (the class), the table is stored block-major instead, shape
    (block, entries / block), and a batch is one gather per block position from a
    contiguous table and one sum over the nodes, contiguous too. ``dtype`` is the table's
    (float64; float32 halves it, opt-in); sums are always accumulated in float64.
    """

    def __init__(
        self,
        segments: Sequence[Sequence[Node]],
        trailing: Sequence[str],
        cards: Mapping[str, int],
        feature_index: Mapping[str, int],
        dtype: np.dtype | type = np.float64,
    ):
        trailing_cards = [cards[t] for t in trailing]
        block_size = math.prod(trailing_cards)
        blocks: list[np.ndarray] = []
        cols: list[list[int]] = []
        strides: list[list[int]] = []
        offsets: list[int] = []
        starts: list[int] = []
        size = 0
        # per node: its log CPT's entries in (other members..., trailing...) order, flattened once
        # by the concatenation below (no copy per node), and its columns and strides
        for nodes in segments:
            starts.append(len(offsets))
            for n in nodes:
                family = (n.name, *n.parents)
                others = [v for v in family if v not in trailing]
                present = [t for t in trailing if t in family]
                other_cards = [cards[v] for v in others]
                block = np.asarray(n.cpt, dtype=np.float64).transpose([family.index(v) for v in others + present])
                if len(present) < len(trailing):
                    block = block.reshape(other_cards + [cards[t] if t in family else 1 for t in trailing])
                    block = np.broadcast_to(block, other_cards + trailing_cards)
                stride, node_strides = block_size, [0] * len(others)
                for i in range(len(others) - 1, -1, -1):  # block_size x the cards after position i
                    node_strides[i] = stride
                    stride *= other_cards[i]
                cols.append([feature_index[v] for v in others])
                strides.append(node_strides)
                offsets.append(size)
                blocks.append(block)
                size += block.size
        width = max(map(len, cols), default=0)
        with np.errstate(divide="ignore"):
            table = (np.log(np.concatenate(blocks, axis=None)) if blocks else np.zeros(0)).astype(dtype, copy=False)
        # a small trailing block (the class on the fast path) is stored block-major, (block, entries /
        # block): each block position is one contiguous table that a whole batch gathers from
        self.class_major = block_size <= CLASS_MAJOR_MAX_BLOCK
        self.table = np.ascontiguousarray(table.reshape(-1, block_size).T) if self.class_major else table
        # padded with column 0 and stride 0
        self.cols = np.array([c + [0] * (width - len(c)) for c in cols], dtype=np.intp).reshape(len(cols), width)
        self.strides = np.array([s + [0] * (width - len(s)) for s in strides], dtype=np.intp).reshape(len(cols), width)
        self.offsets = np.array(offsets, dtype=np.intp)
        self.starts = np.array(starts, dtype=np.intp)
        self._block = np.arange(block_size, dtype=np.intp)
        self._real = self.strides != 0  # (nodes, width): not padding (a real stride is >= 1)
        # every offset and stride is a multiple of the block size: in block units they index
        # the block-major table's columns, in int32 where every column's index fits (the same
        # integers: a batch's index arithmetic on int32 takes a third of the time on int64)
        index = np.int32 if table.size // block_size <= np.iinfo(np.int32).max else np.intp
        self._block_offsets = (self.offsets // block_size).astype(index)
        self._block_strides = (self.strides // block_size).astype(index)

    @property
    def nbytes(self) -> int:
        arrays = (
            self.table,
            self.cols,
            self.strides,
            self.offsets,
            self.starts,
            self._block,
            self._real,
            self._block_offsets,
            self._block_strides,
        )
        return sum(a.nbytes for a in arrays)

    def nodes_reading(self, inputs: np.ndarray) -> np.ndarray:
        """bool (rows, nodes): which nodes read any of the flagged inputs, bool (rows, n_inputs)."""
        return (np.take(inputs, self.cols, axis=1) & self._real).any(axis=-1)

    def __call__(self, codes: np.ndarray, skip: np.ndarray | None = None) -> np.ndarray:
        """(rows, segments, block) float64 sums of log entries; codes int (rows, n_inputs), each >= 0.

        ``skip``: bool (rows, nodes), entries left out of the sums (counted as probability 1).
        A large batch goes ``GATHER_ROWS`` rows at a time, so its (rows, nodes) temporaries
        stay in cache; every row's sums are the same whatever the batch.
        """
        rows = codes.shape[0]
        if rows <= GATHER_ROWS:
            return self._sums(codes, skip)
        out = np.empty((rows, self.starts.size, self._block.size))
        for start in range(0, rows, GATHER_ROWS):
            stop = start + GATHER_ROWS
            out[start:stop] = self._sums(codes[start:stop], None if skip is None else skip[start:stop])
        return out

    def _sums(self, codes: np.ndarray, skip: np.ndarray | None) -> np.ndarray:
        if not self.class_major:
            idx = self._entries(codes, self.offsets, self.strides)
            values = self.table[idx[..., None] + self._block]
            if skip is not None:
                values[skip] = 0.0
            if self.starts.size == 1:
                return values.sum(axis=1, keepdims=True)
            return np.add.reduceat(values, self.starts, axis=1)
        values = self.table.take(self._entries(codes, self._block_offsets, self._block_strides), axis=1)
        if skip is not None:
            values[:, skip] = 0.0  # values: (block, rows, nodes)
        if self.starts.size == 1:
            sums = np.add.reduce(values, axis=-1, keepdims=True, dtype=np.float64)
        else:
            sums = np.add.reduceat(values, self.starts, axis=-1, dtype=np.float64)
        return sums.transpose(1, 2, 0)

    def _entries(self, codes: np.ndarray, offsets: np.ndarray, strides: np.ndarray) -> np.ndarray:
        """(rows, nodes) index of each node's block: ``offsets + sum(code * stride)`` over its inputs.

        A few rows: one gather of every input and a sum (fewest calls). More: one gather and
        multiply-add per input position, which avoids numpy's slow sum over a short last axis.
        """
        width = self.cols.shape[1]
        if codes.shape[0] <= FEW_ROWS or width == 0:
            return offsets + np.add.reduce(codes.take(self.cols, axis=1) * strides, axis=-1)
        idx = offsets + np.take(codes, self.cols[:, 0], axis=1) * strides[:, 0]
        for w in range(1, width):
            idx += np.take(codes, self.cols[:, w], axis=1) * strides[:, w]
        return idx
