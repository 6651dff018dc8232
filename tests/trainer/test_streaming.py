"""Training in chunks (``--chunk-rows``) gives the in-memory model, bit for bit."""

from __future__ import annotations

import gzip
import itertools

import numpy as np
import pytest

from bnserve.store.errors import ClusterUnavailable, InvalidInput
from bnserve.trainer.data import IMPUTE, Preprocessing, fingerprint, load, streaming
from bnserve.trainer.data.discretize import Method
from bnserve.trainer.data.streaming import load_streamed
from bnserve.trainer.fit import fit
from bnserve.trainer.learners.registry import LEARNERS

STREAMABLE = [name for name, learner in LEARNERS.items() if learner.counts_only]
from tests.data_helpers import dataset_path, write
from tests.trainer.conftest import run


def _mixed_csv(rng: np.random.Generator, rows: int = 300) -> str:
    """Nominal, integer-code and real columns with missing values, a class that depends on them."""
    y = rng.integers(0, 3, size=rows)
    lines = ["colour,level,size,weight,class"]
    for c in y:
        colour = "" if rng.random() < 0.05 else "rgb"[(c + rng.integers(0, 2)) % 3]
        level = "" if rng.random() < 0.05 else str(int(c + rng.integers(0, 3)))
        size = "" if rng.random() < 0.05 else f"{rng.normal(c, 1.0):.2f}"
        weight = f"{rng.normal(2 * c, 3.0):.1f}"
        lines.append(f"{colour},{level},{size},{weight},{'ABC'[c] if rng.random() > 0.02 else ''}")
    return "\n".join(lines) + "\n"


def assert_same_model(streamed, in_memory, same_source: bool = True) -> None:
    assert streamed.variables == in_memory.variables
    assert (streamed.algorithm, streamed.params, streamed.combination) == (
        in_memory.algorithm,
        in_memory.params,
        in_memory.combination,
    )
    for a, b in zip(streamed.networks, in_memory.networks, strict=True):
        assert [(n.name, n.parents) for n in a.nodes] == [(n.name, n.parents) for n in b.nodes]
        for x, y in zip(a.nodes, b.nodes):
            assert x.cpt.tobytes() == y.cpt.tobytes(), x.name

    def meta(model):  # all but when it was made, how the file was read, and the spec (a CLI model's only)
        skip = {"chunk_rows"} | (set() if same_source else {"source"})
        training = {k: v for k, v in model.metadata["training"].items() if k not in skip}
        made = {k: v for k, v in model.metadata.items() if k not in ("created_at", "training_spec")}
        return {**made, "training": training}

    assert meta(streamed) == meta(in_memory)


@pytest.mark.parametrize("algo", STREAMABLE)
@pytest.mark.parametrize("chunk_rows", [1, 7, 64, 10_000])
def test_a_streamed_fit_equals_the_in_memory_fit(tmp_path, algo, chunk_rows):
    path = write(tmp_path, _mixed_csv(np.random.default_rng(len(algo) + chunk_rows)))
    prep = Preprocessing(per_column={"weight": Method("equal-frequency", 4)})
    streamed = fit(algo, load_streamed(path, None, prep, None, chunk_rows))
    assert_same_model(streamed, fit(algo, load(path, preprocessing=prep)))


@pytest.mark.parametrize("algo, params", [("kdb", {"k": 2}), ("tan", {})])
def test_a_shared_data_set_with_numeric_columns_and_missing_values(algo, params):
    path = str(dataset_path("hepatitis"))
    streamed = fit(algo, load_streamed(path, None, Preprocessing(), None, 23), **params)
    assert_same_model(streamed, fit(algo, load(path), **params))


def test_counts_reach_no_learner_that_reads_the_rows(tmp_path):
    """``fit`` itself refuses streamed data to a learner that needs the rows, and fkdb's rows
    rule, naming them (a training plan refuses them before reading the file)."""
    streamed = load_streamed(write(tmp_path, _mixed_csv(np.random.default_rng(3))), None, Preprocessing(), None, 50)
    with pytest.raises(InvalidInput, match="algorithm 'rtan' needs the rows in memory, not only their counts"):
        fit("rtan", streamed, members=2, sample_seed=0)
    with pytest.raises(InvalidInput, match="fkdb: --fd-min-count reads the rows themselves"):
        fit("fkdb", streamed, k=1, fd_min_count=5)


def test_streamed_chunks_are_coded_as_in_memory(tmp_path):
    """The later passes count each chunk coded as the rows in memory are: in the narrowest
    type for the states, column-major, so that each column's counts read it in sequence."""
    path = write(tmp_path, _mixed_csv(np.random.default_rng(4)))
    in_memory = load(path)
    blocks = list(load_streamed(path, None, Preprocessing(), None, 64).blocks())
    assert len(blocks) == 5
    for X, _, _ in blocks:
        assert X.dtype == in_memory.X.dtype == np.int8 and X.flags.f_contiguous
    assert np.array_equal(np.concatenate([X for X, _, _ in blocks]), in_memory.X)


def test_a_part_sends_the_rows_of_its_shared_blocks_a_byte_a_cell(tmp_path, monkeypatch):
    """Pass 2 sends back the rows of the fingerprint's blocks its part shares with others (the
    trainer hashes them in order) in the narrowest types, not int32 and int64: a byte a cell
    for a few states, and row-major, as they are hashed; the fingerprint is still that of
    the rows in memory."""
    monkeypatch.setattr(fingerprint, "BLOCK_ROWS", 64)
    rng = np.random.default_rng(6)
    text = _mixed_csv(rng, rows=600)
    lines = text.splitlines(keepends=True)
    for i in range(3):  # a part per file, about 200 rows each, so parts share blocks
        write(tmp_path, "".join([lines[0], *lines[1 + 200 * i : 201 + 200 * i]]), f"{i}.csv")
    types = []

    def sending(*args):
        counts = counted(*args)
        types.extend((X.dtype, y.dtype) for X, y in counts[2].fragments.values())
        return counts

    def hashing(parts):
        hashed.extend(X.flags.c_contiguous for part in parts for X, _ in part.fragments.values())
        return combine(parts)

    counted, combine, hashed = streaming._pass2, streaming.combine, []
    monkeypatch.setattr(streaming, "_pass2", sending)
    monkeypatch.setattr(streaming, "combine", hashing)
    streamed = fit("nb", load_streamed(str(tmp_path / "*.csv"), None, Preprocessing(), None, 50))
    assert len(types) >= 4 and set(types) == {(np.dtype(np.int8), np.dtype(np.int8))}
    assert len(hashed) == len(types) and all(hashed)  # by rows, as hashed: not copied again
    assert_same_model(streamed, fit("nb", load(write(tmp_path, text, "all.csv"))), same_source=False)


def test_gzip_and_tsv_stream(tmp_path):
    text = _mixed_csv(np.random.default_rng(5)).replace(",", "\t")
    path = tmp_path / "d.tsv.gz"
    path.write_bytes(gzip.compress(text.encode()))
    assert_same_model(fit("nb", load_streamed(str(path), None, Preprocessing(), None, 50)), fit("nb", load(str(path))))


@pytest.mark.parametrize(
    "text, prep, message",
    [
        ("a,c\n", Preprocessing(), "no data rows"),
        ("a,c\nx,\ny,\n", Preprocessing(), "every row has an empty class"),
        ("a,c\nx,1\ny,1\n", Preprocessing(), "at least two states"),
        ("a,c\nx,1\ny,2\n", Preprocessing(numeric=("a",)), "column 'a' is numeric, but has the value"),
        ("a,c\nx,1\ny,2\n", Preprocessing(missing=IMPUTE), "needs the rows in memory"),
        ("a,c\nx,1\ny,2\n", Preprocessing(ignore=("zz",)), "--ignore: no column 'zz'"),
        # not "which is always nominal", the --numeric message: the class cannot be ignored
        ("a,c\nx,1\ny,2\n", Preprocessing(ignore=("c",)), r"--ignore: 'c' is the class column, it cannot be left out"),
        (
            "a,c\nx,1\ny,2\n",
            Preprocessing(numeric=("c",)),
            "--numeric: 'c' is the class column, which is always nominal",
        ),
    ],
)
def test_bad_input_is_refused_as_in_memory(tmp_path, text, prep, message):
    with pytest.raises(InvalidInput, match=message):
        load_streamed(write(tmp_path, text), None, prep, None, 10)


def test_arff_is_not_streamed(tmp_path):
    path = write(tmp_path, "@relation r\n@attribute a {x,y}\n@attribute c {1,2}\n@data\nx,1\ny,2\n", "d.arff")
    with pytest.raises(InvalidInput, match="CSV, TSV or Parquet"):
        load_streamed(path, None, Preprocessing(), None, 10)


def test_cli_streams_and_refuses_what_needs_the_rows(capsys, store, tmp_path):
    path = write(tmp_path, _mixed_csv(np.random.default_rng(9)))
    code, out, err = run(
        capsys,
        "fit",
        "--algo",
        "fkdb",
        "--k",
        "2",
        "--data",
        path,
        "--name",
        "m",
        "--store",
        store,
        "--chunk-rows",
        "50",
    )
    assert (code, err) == (0, "") and "version 1 (fkdb, k=2)" in out
    code, _, err = run(
        capsys, "fit", "--algo", "bsej", "--data", path, "--name", "m", "--store", store, "--chunk-rows", "50"
    )
    assert (
        code == 2
        and "--chunk-rows trains a2de, aode, eskdb, fkdb, kdb, laode, nb, skdb, tan, tan-ddr (without --fd-min-count, --projections lda)"
        in err
    )
    code, _, err = run(
        capsys,
        "fit",
        "--algo",
        "fkdb",
        "--fd-min-count",
        "5",
        "--data",
        path,
        "--name",
        "m",
        "--store",
        store,
        "--chunk-rows",
        "50",
    )
    assert code == 2 and "not --algo fkdb with those flags" in err


def test_the_learners_that_need_only_counts_are_declared_so():
    assert set(STREAMABLE) == {"nb", "tan", "tan-ddr", "kdb", "fkdb", "skdb", "eskdb", "aode", "a2de", "laode"}


def test_one_number_written_two_ways_is_one_value(tmp_path):
    rows = "".join(f"{['1', '1.0', '2.50', '2.5', '7'][i % 5]}{i % 3},{'xy'[i % 2]}\n" for i in range(200))
    path = write(tmp_path, "v,c\n" + rows)
    prep = Preprocessing(numeric=("v",), discretize=Method("equal-width", 3))
    streamed = load_streamed(path, None, prep, None, 13)
    assert streamed.features[0].kind == "numeric"
    assert_same_model(fit("nb", streamed), fit("nb", load(path, preprocessing=prep)))


# ---------------------------------------------------------------- the memory budget


def test_sizes_and_the_budget_rule(tmp_path):
    from bnserve.trainer.data import budget

    assert budget.parse_size("1GiB") == budget.parse_size("1g") == 1 << 30
    assert budget.parse_size("1.5 GiB") == 3 << 29 and budget.parse_size("512") == 512
    assert budget.parse_size("none") is None
    for bad in ("", "12XB", "-1G", "0", "1.2.3M"):
        with pytest.raises(ValueError):
            budget.parse_size(bad)
    path = write(tmp_path, "a,c\n" + "x,1\ny,2\n" * 50_000)  # 4 bytes a row, 400 KB
    assert budget.chunk_rows_within(path, 1 << 30) is None  # fits
    assert budget.chunk_rows_within(path, None) is None  # no budget
    assert budget.chunk_rows_within(path, 1024) == budget.MIN_CHUNK_ROWS
    assert budget.chunk_rows_within(path, 1 << 20) == (1 << 20) // (4 * budget.IN_MEMORY_PER_FILE_BYTE * 4)
    assert budget.chunk_rows_within(path, 1 << 20, jobs=2) == (1 << 20) // (8 * budget.IN_MEMORY_PER_FILE_BYTE * 4)
    gz = tmp_path / "d.csv.gz"
    gz.write_bytes(gzip.compress(open(path, "rb").read()))
    size = gz.stat().st_size
    fits = size * budget.GZIP_RATIO * budget.IN_MEMORY_PER_FILE_BYTE
    assert budget.chunk_rows_within(str(gz), fits) is None and budget.chunk_rows_within(str(gz), fits - 1)
    assert budget.chunk_rows_within("builtin:chess", 1) is None
    assert budget.chunk_rows_within(str(tmp_path / "absent.csv"), 1) is None  # the reader will say why


def test_a_file_over_the_memory_budget_is_streamed_to_the_same_model(capsys, store, tmp_path):
    from bnserve.store.db import ModelStore

    path = write(tmp_path, _mixed_csv(np.random.default_rng(11), rows=2500))
    for budget in ("64KiB", "none"):
        code, out, err = run(
            capsys,
            "fit",
            "--algo",
            "fkdb",
            "--k",
            "2",
            "--data",
            path,
            "--name",
            "m",
            "--store",
            store,
            "--memory-budget",
            budget,
        )
        assert (code, err) == (0, "")
    with ModelStore(store) as models:
        streamed, whole = (models.load("m", version=v).model for v in (1, 2))
    assert streamed.metadata["training"]["chunk_rows"] == 1000 and "chunk_rows" not in whole.metadata["training"]
    assert_same_model(streamed, whole)
    code, out, err = run(
        capsys, "fit", "--algo", "bsej", "--data", path, "--name", "m", "--store", store, "--memory-budget", "64KiB"
    )
    assert code == 0 and "may need more memory than --memory-budget; it is read whole" in err
    code, _, err = run(
        capsys, "fit", "--algo", "nb", "--data", path, "--name", "m", "--store", store, "--memory-budget", "lots"
    )
    assert code == 2 and "not a size: 'lots'" in err


# ---------------------------------------------------------------- parts read by processes (--jobs)


def test_a_file_is_cut_into_parts_at_line_ends_only_where_a_line_end_ends_a_row(tmp_path):
    from bnserve.trainer.io.delimited import byte_parts

    text = "a,c\n" + "".join(f"x{i % 7},{i % 2}\n" for i in range(1000))
    path = write(tmp_path, text)
    parts = byte_parts(path, 3, 100)
    data = text.encode()
    assert parts is not None and len(parts) == 3
    assert parts[0][0] == len("a,c\n") and parts[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(parts))  # no byte lost or read twice
    assert all(data[start - 1 : start] == b"\n" for start, _ in parts)
    assert byte_parts(path, 3, len(data)) is None  # too small to be worth two parts
    assert byte_parts(path, 1, 100) is None
    gz = tmp_path / "d.csv.gz"
    gz.write_bytes(gzip.compress(data))
    assert byte_parts(str(gz), 3, 100) is None
    assert byte_parts("builtin:chess", 3, 100) is None


def test_a_file_with_a_quote_is_read_in_order_not_in_parts(tmp_path, monkeypatch):
    """A quoted field may hold a line end, so a cut at a line end may split a row: the part that
    reads a quote refuses it (the trainer does not scan the file first), and the file is read
    in order, giving the model of the rows as csv reads them."""
    from bnserve.trainer.io.delimited import PartUnreadable, byte_parts, part_chunks

    monkeypatch.setattr(streaming, "MIN_PART_BYTES", 1024)
    lines = _mixed_csv(np.random.default_rng(19), rows=900).splitlines()
    lines[700] = '"x\ny"' + lines[700][lines[700].index(",") :]  # a colour with a line end, in the last part
    path = write(tmp_path, "\n".join(lines) + "\n")
    parts = byte_parts(path, 3, 1024)
    assert parts is not None and len(parts) == 3
    header = lines[0].split(",")
    assert sum(t.n_rows for t in part_chunks(path, ",", header, parts[0], 64)) > 0  # no quote in it
    with pytest.raises(PartUnreadable):
        list(part_chunks(path, ",", header, parts[-1], 64))
    streamed = load_streamed(path, None, Preprocessing(), None, 64, jobs=3)
    assert [p.byte_range for p in streamed.reader.parts] == [None]
    assert_same_model(fit("kdb", streamed, k=2), fit("kdb", load(path), k=2))


@pytest.mark.parametrize("algo", STREAMABLE)
def test_parts_counted_by_processes_give_the_same_model(tmp_path, monkeypatch, algo):
    """--jobs 3 on a file cut into 3 parts: the same model, fingerprint included, as one
    process reading it in order and as the rows held in memory."""
    from bnserve.trainer.data import streaming

    monkeypatch.setattr(streaming, "MIN_PART_BYTES", 1024)
    path = write(tmp_path, _mixed_csv(np.random.default_rng(13), rows=900))
    prep = Preprocessing()
    params = {"k": 2} if LEARNERS[algo].takes("k") else {}
    in_parts = load_streamed(path, None, prep, None, 64, jobs=3)
    assert len(in_parts.reader.parts) == 3
    in_order = load_streamed(path, None, prep, None, 64)
    assert [p.byte_range for p in in_order.reader.parts] == [None]
    model = fit(algo, in_parts, **params)
    assert_same_model(model, fit(algo, in_order, **params))
    assert_same_model(model, fit(algo, load(path), **params))


def test_processes_forked_at_the_start_give_the_same_model_and_a_dead_one_a_clear_error(tmp_path):
    """The CLI forks its --jobs processes before any thread starts (``start_pool(fork=True)``):
    the same model as one process, no progress reported by them; and a process that dies
    mid-pass stops the fit with one line saying so, not a traceback or a hang. Checked in a
    fresh interpreter, as the CLI starts: a fork needs a process with no other thread, which
    this one (after the suites that run servers and readers) need not be, and then the pool
    rightly takes the fork server."""
    import subprocess
    import sys
    from pathlib import Path

    code = "import sys; from tests.trainer.test_streaming import check_forked_pool; check_forked_pool(sys.argv[1])"
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def check_forked_pool(directory: str) -> None:
    """The body of the test above, in a process of its own (one thread: the fork is taken)."""
    import os
    from pathlib import Path

    from bnserve.trainer.data import parallel
    from bnserve.trainer.progress import reporting

    streaming.MIN_PART_BYTES = 1024
    tmp_path = Path(directory)
    path = write(tmp_path, _mixed_csv(np.random.default_rng(18), rows=900))
    stages = tmp_path / "stages"  # written by whichever process reports a stage

    def reporter(description, total, unit):
        with open(stages, "a") as out:
            print(os.getpid(), description, file=out)
        return parallel.SILENT

    with reporting(reporter):  # as the CLI's: the processes are forked inside it
        parallel.start_pool(2, fork=True)
        assert parallel._POOLS[2]._mp_context.get_start_method() == "fork"
        forked = load_streamed(path, None, Preprocessing(), None, 64, jobs=2)
    assert len(forked.reader.parts) == 2
    reported = [line.split(" ", 1) for line in stages.read_text().splitlines()]
    assert reported and all(pid == str(os.getpid()) for pid, _ in reported), reported
    assert_same_model(fit("kdb", forked, k=2), fit("kdb", load(path), k=2))
    parallel.close()
    streaming.Part.check = lambda part: os._exit(9)  # type: ignore[method-assign]  # in the processes forked next
    parallel.start_pool(2, fork=True)
    with pytest.raises(ClusterUnavailable, match="--jobs 2: a process counting a part .* ended abruptly"):
        load_streamed(path, None, Preprocessing(), None, 64, jobs=2)
    assert 2 not in parallel._POOLS  # the next fit starts another pool
    parallel.close()


def test_the_later_passes_read_the_chunks_pass_1_kept_not_the_file(tmp_path, monkeypatch):
    """Pass 1 keeps each part's chunks on disk; the families' counts (pass 3) are then those
    of the file in memory though the file is gone, and the kept files go with the data."""
    import gc
    import os

    from bnserve.trainer.data import streaming

    monkeypatch.setattr(streaming, "MIN_PART_BYTES", 1024)
    path = write(tmp_path, _mixed_csv(np.random.default_rng(16), rows=900))
    in_memory = load(path)
    families = [[0, -1], [1, 0, -1], [3, 2, -1]]
    expected = in_memory.family_counts(families)
    for jobs in (1, 2):
        streamed = load_streamed(path, None, Preprocessing(), None, 64, jobs=jobs)
        folder = streamed.reader.kept
        assert folder is not None and len(os.listdir(folder)) == len(streamed.reader.parts)
        os.rename(path, f"{path}.away")  # a reading of the file would fail
        try:
            counts = streamed.family_counts(families)
        finally:
            os.rename(f"{path}.away", path)
        assert [c.tobytes() for c in counts] == [c.tobytes() for c in expected]
        del streamed
        gc.collect()
        assert not os.path.exists(folder)


def test_a_part_not_kept_is_read_from_the_file_again(tmp_path):
    """A kept part that is missing (a full disk, another machine's worker) is read again: the same counts."""
    import os

    path = write(tmp_path, _mixed_csv(np.random.default_rng(17)))
    streamed = load_streamed(path, None, Preprocessing(), None, 64)
    for name in os.listdir(streamed.reader.kept):
        os.remove(os.path.join(streamed.reader.kept, name))
    families = [[0, -1], [2, 1, -1]]
    expected = load(path).family_counts(families)
    assert [c.tobytes() for c in streamed.family_counts(families)] == [c.tobytes() for c in expected]


def test_a_part_pyarrow_cannot_read_sends_the_file_to_be_read_in_order(tmp_path, monkeypatch):
    """A ragged row in the second part: the file is read again in order, and csv names its line."""
    from bnserve.trainer.data import streaming

    monkeypatch.setattr(streaming, "MIN_PART_BYTES", 1024)
    text = _mixed_csv(np.random.default_rng(14), rows=900).splitlines()
    text[800] += ",9"
    with pytest.raises(InvalidInput, match="line 801: row has 6 fields, the header has 5"):
        load_streamed(write(tmp_path, "\n".join(text) + "\n"), None, Preprocessing(), None, 64, jobs=2)


def test_the_cli_takes_jobs(capsys, store, tmp_path):
    path = write(tmp_path, _mixed_csv(np.random.default_rng(15)))
    code, out, err = run(
        capsys,
        "fit",
        "--algo",
        "nb",
        "--data",
        path,
        "--name",
        "m",
        "--store",
        store,
        "--chunk-rows",
        "50",
        "--jobs",
        "2",
    )
    assert (code, err) == (0, "")
    code, _, err = run(capsys, "fit", "--algo", "nb", "--data", path, "--name", "m", "--store", store, "--jobs", "0")
    assert code == 2 and "must be at least 1, got 0" in err


@pytest.mark.parametrize("algo", ["nb", "kdb", "tan-ddr"])
@pytest.mark.parametrize("chunk_rows", [1, 50, 10_000])
def test_a_parquet_file_streamed_equals_it_in_memory(tmp_path, algo, chunk_rows):
    """Parquet read batch by batch: declared types (numeric columns, a dictionary column's
    domain united over the row groups) as the whole file read at once gives them."""
    import pyarrow as pa
    import pyarrow.compute  # pa.compute
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    table = pa_csv.read_csv(pa.BufferReader(_mixed_csv(np.random.default_rng(21), rows=400).encode()))
    table = table.set_column(0, "colour", table.column("colour").dictionary_encode())
    classes = table.column("class").combine_chunks()  # a declared domain with a state no row has
    domain = pa.array(["C", "B", "A", "Z"])
    indices = pa.compute.index_in(classes, value_set=domain).cast(pa.int32())
    table = table.set_column(4, "class", pa.DictionaryArray.from_arrays(indices, domain))
    path = tmp_path / "d.parquet"
    pq.write_table(table, path, row_group_size=37)
    params = {"k": 2} if LEARNERS[algo].takes("k") else {}
    streamed = load_streamed(str(path), None, Preprocessing(), None, chunk_rows)
    assert streamed.class_variable.states == ("C", "B", "A", "Z")
    assert_same_model(fit(algo, streamed, **params), fit(algo, load(str(path)), **params))


def test_a_glob_of_files_streams_as_their_rows_in_one_file(tmp_path, capsys, store):
    """Files a pattern names are read in name order as one data set; --jobs counts them apart."""
    lines = _mixed_csv(np.random.default_rng(22), rows=600).splitlines()
    header, rows = lines[0], lines[1:]
    (tmp_path / "p").mkdir()
    for i in range(3):
        (tmp_path / "p" / f"{i}.csv").write_text("\n".join([header, *rows[i * 200 : (i + 1) * 200]]) + "\n")
    whole = write(tmp_path, "\n".join(lines) + "\n")
    pattern = str(tmp_path / "p" / "*.csv")
    for jobs in (1, 2):
        streamed = load_streamed(pattern, None, Preprocessing(), None, 64, jobs=jobs)
        assert [p.source for p in streamed.reader.parts] == [str(tmp_path / "p" / f"{i}.csv") for i in range(3)]
        assert_same_model(fit("tan", streamed), fit("tan", load(whole)), same_source=False)
    code, out, err = run(capsys, "fit", "--algo", "nb", "--data", pattern, "--name", "m", "--store", store)
    assert (code, err) == (0, "") and "published m version 1" in out
    code, _, err = run(capsys, "fit", "--algo", "k2", "--data", pattern, "--name", "m", "--store", store)
    assert code == 2 and "a set of files trains a2de, " in err
    code, _, err = run(
        capsys, "fit", "--algo", "nb", "--data", str(tmp_path / "q*.csv"), "--name", "m", "--store", store
    )
    assert code == 1 and "q*.csv: no file matches the pattern" in err


def test_a_url_is_read_through_fsspec_in_memory_and_in_chunks(tmp_path):
    """file:// (fsspec's local file system, as s3:// would be read): the texts and the model of the path."""
    path = write(tmp_path, _mixed_csv(np.random.default_rng(23)))
    from bnserve.trainer.io import read_table

    assert read_table(f"file://{path}").columns[0].texts().tolist() == read_table(path).columns[0].texts().tolist()
    in_memory = fit("tan", load(path))
    assert_same_model(fit("tan", load(f"file://{path}")), in_memory, same_source=False)
    assert_same_model(
        fit("tan", load_streamed(f"file://{path}", None, Preprocessing(), None, 50)), in_memory, same_source=False
    )
    with pytest.raises(InvalidInput, match="no such file"):
        read_table(f"file://{tmp_path}/absent.csv")
    with pytest.raises(InvalidInput, match="nosuchprotocol"):
        read_table("nosuchprotocol://bucket/data.csv")
