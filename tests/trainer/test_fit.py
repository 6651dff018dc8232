"""fit: structure + Laplace CPTs into a valid Model with its training record."""

import json
from collections import Counter

import numpy as np
import pytest

from bnserve.store.errors import InvalidInput
from bnserve.store.model import Model
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import load
from bnserve.trainer.fit import fit
from bnserve.trainer.io import source_name
from bnserve.trainer.learners.kdb import kdb
from bnserve.trainer.learners.parameters import estimate
from bnserve.trainer.learners.registry import LEARNERS


def reference_posterior(model: Model, X: np.ndarray) -> np.ndarray:
    """P(c | x) for complete rows by direct CPT lookup, node by node (no compilation)."""
    values = {v.name: X[:, i] for i, v in enumerate(model.features)}
    n_classes = model.class_variable.cardinality
    log = np.zeros((X.shape[0], n_classes))
    for c in range(n_classes):
        values[model.class_variable.name] = np.full(X.shape[0], c)
        for node in model.networks[0].nodes:
            log[:, c] += np.log(node.cpt[tuple(values[f] for f in (node.name, *node.parents))])
    log -= log.max(axis=1, keepdims=True)
    p = np.exp(log)
    return p / p.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("algo", ["nb", "tan", "kdb", "fkdb"])
def test_fit_gives_a_valid_model_that_predicts_like_its_cpts(chess, algo):
    model = fit(algo, chess)
    assert model.validate() is model
    assert model.algorithm == algo
    assert dict(model.params) == {p.name: p.default for p in LEARNERS[algo].params if p.default is not None}
    assert model.variables == chess.variables
    net = model.networks[0]
    assert [n.name for n in net.nodes] == [v.name for v in chess.variables]
    assert all(n.cpt.dtype == np.float64 for n in net.nodes)
    rows = chess.X[::7]
    assert np.allclose(compile_model(model).predict_proba(rows), reference_posterior(model, rows), atol=1e-10)


def test_metadata_records_the_training(chess):
    model = fit("fkdb", chess, k=1)
    meta = model.metadata
    assert meta["training"] == {
        "source": "builtin:chess",
        "rows": 3196,
        "rows_dropped": 0,
        "features": 36,
        "class_counts": {"nowin": 1527, "won": 1669},
    }
    assert meta["data_fingerprint"] == chess.fingerprint() and len(meta["data_fingerprint"]) == 64
    assert meta["created_at"].endswith("Z")
    assert isinstance(meta["code_version"], str) and meta["code_version"]
    assert sorted(meta["order"]) == sorted(v.name for v in chess.features)
    assert len(meta["order_scores"]) == 36


def test_cpts_are_laplace_estimates_of_the_family_counts(chess):
    structure = kdb(chess, 2)
    net = estimate(structure, chess)
    node = next(n for n in net.nodes if len(n.parents) == 3)
    cols = {v.name: chess.X[:, i] for i, v in enumerate(chess.features)} | {"class": chess.y}
    family = (node.name, *node.parents)
    counts = Counter(zip(*(cols[f].tolist() for f in family)))
    cards = [chess.variables[[v.name for v in chess.variables].index(f)].cardinality for f in family]
    for index in np.ndindex(*cards):
        n_pa = sum(counts[(x, *index[1:])] for x in range(cards[0]))
        assert node.cpt[index] == pytest.approx((counts[index] + 1) / (n_pa + cards[0]))
    prior = net.node("class").cpt
    assert prior.tolist() == pytest.approx([(1527 + 1) / (3196 + 2), (1669 + 1) / (3196 + 2)])


def laplace_by_hand(model: Model, rows: list[list[str]], missing_as_first_state: bool = False) -> dict:
    """Each node's CPT from the raw text rows (columns in ``model.variables`` order, "" =
    missing), row by row: P(x | pa) = (N(x, pa) + 1) / (N(pa) + |X|), both counts over the
    rows where the node and all its parents are present. ``missing_as_first_state``: the bug
    this must catch, a missing value counted as the variable's state 0."""
    variables = {v.name: v for v in model.variables}
    column = {v.name: j for j, v in enumerate(model.variables)}
    cpts = {}
    for node in model.networks[0].nodes:
        family = (node.name, *node.parents)
        counts = np.zeros([variables[f].cardinality for f in family])
        for row in rows:
            values = [row[column[f]] for f in family]
            if missing_as_first_state:
                values = [v if v else variables[f].states[0] for f, v in zip(family, values)]
            if all(values):
                counts[tuple(variables[f].states.index(v) for f, v in zip(family, values))] += 1
        cpts[node.name] = (counts + 1) / (counts.sum(axis=0, keepdims=True) + variables[node.name].cardinality)
    return cpts


@pytest.mark.parametrize("algo, params", [("nb", {}), ("tan", {}), ("kdb", {"k": 2})])
def test_missing_values_are_counted_available_case(tmp_path, rng, algo, params):
    """Each CPT counts the rows where its node and parents are all present; a row missing
    one of them counts for none of that family's cells, not as state 0."""
    rows = []
    for _ in range(300):
        c = int(rng.integers(0, 3))
        a = (c + int(rng.integers(0, 2))) % 3
        b = (a + int(rng.integers(0, 2))) % 3  # depends on a, so TAN and KDB give it a as a parent
        d = int(rng.integers(0, 2))
        row = ["uvw"[a], "uvw"[b], "pq"[d], "ABC"[c]]
        rows.append([v if j == 3 or rng.random() > 0.2 else "" for j, v in enumerate(row)])
    path = tmp_path / "d.csv"
    path.write_text("a,b,d,class\n" + "".join(",".join(r) + "\n" for r in rows))
    model = fit(algo, load(str(path)), **params)
    assert model.validate() is model
    assert [v.name for v in model.variables] == ["a", "b", "d", "class"]
    if algo != "nb":
        assert max(len(n.parents) for n in model.networks[0].nodes) >= 2  # a family of three counted

    expected = laplace_by_hand(model, rows)
    as_state_0 = laplace_by_hand(model, rows, missing_as_first_state=True)
    for node in model.networks[0].nodes:
        assert node.cpt.shape == expected[node.name].shape, node.name
        np.testing.assert_allclose(node.cpt, expected[node.name], rtol=1e-12, atol=0, err_msg=node.name)
        if node.name != "class":  # the class is never missing here; every feature is
            assert np.abs(as_state_0[node.name] - expected[node.name]).max() > 0.01, node.name

    proba = compile_model(model).predict_proba(np.array([[-1, -1, -1], [0, -1, 1], [1, 1, -1]], dtype=np.int32))
    assert np.allclose(proba.sum(axis=1), 1.0)


def test_bad_arguments(chess):
    with pytest.raises(InvalidInput, match="unknown algorithm 'xyz'"):
        fit("xyz", chess)
    with pytest.raises(InvalidInput, match="non-negative"):
        fit("kdb", chess, k=-1)
    with pytest.raises(InvalidInput, match="non-negative"):
        fit("fkdb", chess, k=1.5)
    with pytest.raises(InvalidInput, match="takes no k"):
        fit("nb", chess, k=2)


@pytest.mark.parametrize(
    "source, name",
    [
        ("/home/alice/projects/secret/adult.csv", "adult.csv"),
        ("data/part-*.parquet", "part-*.parquet"),
        ("s3://bucket/dir/train.csv.gz?X-Amz-Signature=abc", "train.csv.gz"),
        ("https://user:password@internal.example/exports/rows.tsv#top", "rows.tsv"),
        ("builtin:chess", "builtin:chess"),
    ],
)
def test_the_metadata_names_the_data_file_alone(source, name):
    assert source_name(source) == name


def test_a_served_model_shows_the_training_file_name_not_its_path(tmp_path):
    """GetModelMetadata answers any token holder: the directory of the training file is none
    of their business (issue 17)."""
    import grpc

    from bnserve.server.api import predictor_pb2 as pb
    from bnserve.server.api import predictor_pb2_grpc
    from tests.data_helpers import write_led7
    from tests.in_process_server import running_app

    folder = tmp_path / "home" / "alice" / "private"
    folder.mkdir(parents=True)
    model = fit("nb", load(write_led7(folder, rows=200)))
    with running_app(tmp_path, {"led": model}) as app, grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        meta = predictor_pb2_grpc.PredictorStub(channel).GetModelMetadata(pb.GetModelMetadataRequest(model="led"))
    assert json.loads(meta.metadata_json)["training"]["source"] == "led7.csv"
    assert "alice" not in meta.SerializeToString().decode("utf-8", "replace")
