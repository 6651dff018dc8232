"""One axis of a table moved to the end or back, as a plain transpose: the same view as
``np.moveaxis``, whose argument checks cost more than the move itself on the thousands of
small tables a pooled alr fit or an hdp ensemble handles (laode on promoters: 3,306 a fit)."""

from __future__ import annotations

import numpy as np


def axis_last(table: np.ndarray, axis: int) -> np.ndarray:
    """``np.moveaxis(table, axis, -1)`` for an ``axis`` of 0..ndim - 1."""
    return table.transpose((*range(axis), *range(axis + 1, table.ndim), axis))


def last_axis_to(table: np.ndarray, axis: int) -> np.ndarray:
    """``np.moveaxis(table, -1, axis)`` for an ``axis`` of 0..ndim - 1."""
    last = table.ndim - 1
    return table.transpose((*range(axis), last, *range(axis, last)))
