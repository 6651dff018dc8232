"""The learners' axis moves are np.moveaxis's, on any table shape and axis."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from bnserve.trainer.learners.axes import axis_last, last_axis_to

shapes = st.lists(st.integers(1, 4), min_size=1, max_size=5)


@given(shapes, st.data())
def test_axis_moves_are_moveaxis(shape, data):
    table = np.arange(int(np.prod(shape))).reshape(shape)
    axis = data.draw(st.integers(0, len(shape) - 1))
    assert np.array_equal(axis_last(table, axis), np.moveaxis(table, axis, -1))
    assert np.array_equal(last_axis_to(table, axis), np.moveaxis(table, -1, axis))
    assert np.shares_memory(axis_last(table, axis), table)  # a view, as moveaxis gives
