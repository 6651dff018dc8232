"""The row index pandas' ``to_csv`` and R's ``write.csv`` write by default (a first column
with no name) is read and left out of the features, in memory and in chunks; any other
column without a name is still refused."""

from __future__ import annotations

import pytest

from bnserve.store.errors import InvalidInput
from bnserve.trainer.data import Preprocessing, load
from bnserve.trainer.data.streaming import load_streamed
from tests.user_files import credit_frame, write_r_csv

FEATURES = (
    "Seniority",
    "Home",
    "Time",
    "Age",
    "Marital",
    "Records",
    "Job",
    "Region",
    "Income",
    "Assets",
    "Debt",
    "Amount",
)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    where = tmp_path_factory.mktemp("exports")
    frame = credit_frame(400, seed=3)
    frame.to_csv(where / "pandas.csv")  # index=True: the default
    return {"pandas": where / "pandas.csv", "r": write_r_csv(frame, where / "r.csv")}


@pytest.mark.parametrize("tool", ["pandas", "r"])
def test_the_default_export_trains_without_its_row_index(exports, tool):
    data = load(str(exports[tool]), None, Preprocessing())
    assert tuple(v.name for v in data.features) == FEATURES
    assert data.class_variable.name == "Status" and data.n_rows == 400


@pytest.mark.parametrize("tool", ["pandas", "r"])
def test_chunked_reading_leaves_the_row_index_out_too(exports, tool):
    streamed = load_streamed(str(exports[tool]), None, Preprocessing(), None, 128, 1, None)
    assert tuple(v.name for v in streamed.features) == FEATURES


def test_a_column_without_a_name_elsewhere_is_refused(tmp_path):
    path = tmp_path / "unnamed.csv"
    path.write_text("a,,class\n1,2,x\n3,4,y\n")
    with pytest.raises(InvalidInput, match="column 2 needs a name"):
        load(str(path), None, Preprocessing())
