"""The trainer's limits on what it reads: columns, decompressed bytes and the size of an
imported CPT. Each is met on a small file with the limit scaled down by its flag, and is
refused with one line naming the limit and the flag that raises it; nothing is published.
The same files pass at the default limits (or with the flag raised)."""

from __future__ import annotations

import gzip
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bnserve.store.db import ModelStore
from bnserve.trainer.data import load
from bnserve.trainer.data.preprocessing import Preprocessing
from bnserve.trainer.data.streaming import load_streamed
from tests.trainer.conftest import run

ROWS = [("a", "x", "b", "yes"), ("b", "y", "b", "no"), ("a", "y", "a", "yes"), ("b", "x", "a", "no")] * 50


def csv_text(rows=ROWS) -> str:
    return "f1,f2,f3,class\n" + "".join(",".join(r) + "\n" for r in rows)


def write(path: Path, text: str) -> str:
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return str(path)


def published(store: str) -> int:
    if not Path(store.removeprefix("sqlite:///")).exists():
        return 0
    with ModelStore(store) as opened:
        return len(opened.list_versions())


def fit(capsys, data: str, store: str, *flags: str) -> tuple[int, str, str]:
    return run(capsys, "fit", "--algo", "nb", "--data", data, "--name", "m", "--store", store, *flags)


# ---------------------------------------------------------------- columns


def parquet(path: Path) -> str:
    pd.DataFrame(ROWS, columns=["f1", "f2", "f3", "class"]).to_parquet(path)
    return str(path)


def arff(path: Path) -> str:
    head = "@relation r\n" + "".join(
        f"@attribute {n} {{{v}}}\n" for n, v in [("f1", "a,b"), ("f2", "x,y"), ("f3", "a,b"), ("class", "yes,no")]
    )
    return write(path, head + "@data\n" + "".join(",".join(r) + "\n" for r in ROWS))


@pytest.mark.parametrize(
    "make, chunked",
    [
        (lambda p: write(p / "d.csv", csv_text()), False),
        (lambda p: write(p / "d.csv", csv_text()), True),
        (lambda p: write(p / "d.tsv", csv_text().replace(",", "\t")), False),
        (lambda p: write(p / "d.csv.gz", csv_text()), True),
        (lambda p: parquet(p / "d.parquet"), False),
        (lambda p: parquet(p / "d.parquet"), True),
        (lambda p: arff(p / "d.arff"), False),
    ],
    ids=["csv", "csv in chunks", "tsv", "csv.gz in chunks", "parquet", "parquet in chunks", "arff"],
)
def test_a_file_of_more_columns_than_the_limit_is_refused(capsys, tmp_path, store, make, chunked):
    data = make(tmp_path)
    chunks = ("--chunk-rows", "10") if chunked else ()
    code, _, err = fit(capsys, data, store, "--max-columns", "3", *chunks)
    assert code == 1, err
    assert err.startswith(f"trainer: error: {data}: line ") and err.count("\n") == 1
    assert "4 columns, more than the limit of 3 (--max-columns raises it)" in err
    assert published(store) == 0
    code, _, err = fit(capsys, data, store, "--max-columns", "4", *chunks)
    assert code == 0, err


def test_a_header_line_too_long_for_the_limit_is_refused_before_it_is_split(capsys, tmp_path, store):
    """A header line longer than --max-columns names can make: no field list is built."""
    name = "n" * 256
    data = write(tmp_path / "wide.csv.gz", ",".join(f"{name}{i}"[-256:] for i in range(5000)) + ",class\n")
    code, _, err = fit(capsys, data, store, "--max-columns", "2")
    assert code == 1
    assert "line 1: the header line is longer than 1,032 characters, more than 2 columns can take" in err
    assert "(--max-columns raises the limit)" in err


def test_the_default_column_limit_is_ten_thousand(tmp_path):
    header = ",".join(f"c{i}" for i in range(10_001))
    data = write(tmp_path / "wide.csv", header + "\n" + ",".join("a" for _ in range(10_001)) + "\n")
    with pytest.raises(Exception, match="10,001 columns, more than the limit of 10,000"):
        load(data)


# ---------------------------------------------------------------- decompressed bytes


def test_a_gz_that_decompresses_past_the_limit_is_refused(capsys, tmp_path, store):
    data = write(tmp_path / "d.csv.gz", csv_text())  # 2,015 bytes decompressed
    code, _, err = fit(capsys, data, store, "--max-decompressed", "1KiB")
    assert (code, err) == (
        1,
        f"trainer: error: {data}: decompresses to more than 1 KiB, the limit (--max-decompressed raises it)\n",
    )
    assert published(store) == 0
    code, _, err = fit(capsys, data, store, "--max-decompressed", "4KiB")
    assert code == 0, err


def test_by_default_a_gz_read_whole_may_decompress_to_what_fits_the_memory_budget(capsys, tmp_path, store):
    """--memory-budget 2KiB, about 10 bytes of memory a byte of CSV: 204 bytes of text for a
    file read whole (k2, which needs the rows); nb reads the same file in chunks, one chunk held: no limit."""
    data = write(tmp_path / "d.csv.gz", csv_text())  # 79 bytes, counted as 79 x 5 x 10 > 2 KiB: nb streams it
    code, _, err = fit(capsys, data, store, "--memory-budget", "2KiB", "--algo", "k2")
    assert code == 1 and "decompresses to more than 204 bytes, the limit (--max-decompressed raises it)" in err
    code, _, err = fit(capsys, data, store, "--memory-budget", "2KiB")
    assert code == 0, err
    code, _, err = fit(capsys, data, store, "--memory-budget", "2KiB", "--algo", "k2", "--max-decompressed", "none")
    assert code == 0, err


def test_the_limit_holds_in_every_reader_and_in_worker_processes(tmp_path):
    limits = Preprocessing().limits.__class__(max_decompressed=1024)
    for name, text in (("d.csv.gz", csv_text()), ("d.tsv.gz", csv_text().replace(",", "\t"))):
        data = write(tmp_path / name, text)
        with pytest.raises(Exception, match="decompresses to more than 1 KiB"):
            load(data, preprocessing=Preprocessing(limits=limits))
        with pytest.raises(Exception, match="decompresses to more than 1 KiB"):
            load_streamed(data, None, Preprocessing(limits=limits), None, chunk_rows=10, jobs=2)


# ---------------------------------------------------------------- CPT size


def bif(parents: int) -> str:
    names = [f"P{i}" for i in range(parents)]
    text = "".join(f"variable {v} {{ type discrete [ 2 ] {{ a, b }}; }}\n" for v in ["C", *names])
    text += "".join(f"probability ( {p} ) {{ table 0.5, 0.5; }}\n" for p in names)
    return text + f"probability ( C | {', '.join(names)} ) {{ default 0.5, 0.5; }}\n"


def xmlbif(parents: int) -> str:
    names = [f"P{i}" for i in range(parents)]
    text = "".join(
        f'<VARIABLE TYPE="nature"><NAME>{v}</NAME><OUTCOME>a</OUTCOME><OUTCOME>b</OUTCOME></VARIABLE>'
        for v in ["C", *names]
    )
    text += "".join(f"<DEFINITION><FOR>{p}</FOR><TABLE>0.5 0.5</TABLE></DEFINITION>" for p in names)
    table = " ".join(["0.5"] * 2 ** (parents + 1))
    text += (
        f"<DEFINITION><FOR>C</FOR>{''.join(f'<GIVEN>{p}</GIVEN>' for p in names)}<TABLE>{table}</TABLE></DEFINITION>"
    )
    return f'<?xml version="1.0"?><BIF VERSION="0.3"><NETWORK><NAME>n</NAME>{text}</NETWORK></BIF>'


@pytest.mark.parametrize("name, text", [("n.bif", bif(3)), ("n.xml", xmlbif(3))])
def test_an_imported_cpt_over_the_limit_is_refused_before_it_is_built(capsys, tmp_path, store, name, text):
    path = write(tmp_path / name, text)
    code, _, err = run(capsys, "import", path, "--class", "C", "--name", "n", "--store", store, "--max-cpt-cells", "15")
    assert code == 1
    assert err == (
        f"trainer: error: {path}: line {8 if name.endswith('bif') else 1}: variable 'C': its CPT would hold "
        "16 probabilities (2 states × 8 configurations of 3 parents), more than the limit of 15 "
        "(--max-cpt-cells raises it)\n"
    )
    assert published(store) == 0
    code, _, err = run(capsys, "import", path, "--class", "C", "--name", "n", "--store", store, "--max-cpt-cells", "16")
    assert code == 0, err


def test_a_few_lines_of_bif_cannot_ask_for_any_cpt_by_default(capsys, tmp_path, store):
    """22 binary parents and a default row: 2,097 bytes that built a 64 MiB CPT (890 MB of memory)."""
    path = write(tmp_path / "bomb.bif", bif(22))
    code, _, err = run(capsys, "import", path, "--class", "C", "--name", "n", "--store", store)
    assert code == 1 and "8,388,608 probabilities" in err and "limit of 4,194,304 (--max-cpt-cells" in err


def test_out_of_memory_past_a_lifted_limit_is_one_line_not_a_traceback(tmp_path, store):
    """40 parents with the limit lifted: numpy cannot allocate 16 TiB (the process's address
    space is capped at 4 GiB, so nothing is really allocated whatever the machine)."""
    path = write(tmp_path / "bomb.bif", bif(40))

    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bnserve.trainer.cli",
            "import",
            path,
            "--class",
            "C",
            "--name",
            "n",
            "--store",
            store,
            "--max-cpt-cells",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=cap_memory,
    )
    assert (result.returncode, result.stderr) == (1, "trainer: error: out of memory; nothing was published\n")


# ---------------------------------------------------------------- the cost of many columns


def test_the_feature_cardinalities_are_computed_once(tmp_path):
    """Family counts index them per column: computed per call, 20,000 columns took minutes."""
    rng = np.random.default_rng(0)
    rows = [tuple(rng.choice(["a", "b"], 3)) + (str(rng.choice(["yes", "no"])),) for _ in range(40)]
    data = load(write(tmp_path / "d.csv", csv_text(rows)))
    assert data.cards is data.cards and data.features is data.features
    streamed = load_streamed(str(tmp_path / "d.csv"), None, Preprocessing(), None, chunk_rows=10)
    assert streamed.cards is streamed.cards
    assert [c.tolist() for c in streamed.family_counts([(0, -1)])] == [
        c.tolist() for c in data.family_counts([(0, -1)])
    ]
