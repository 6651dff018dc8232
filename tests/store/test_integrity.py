"""What the store refuses: altered bytes at load, invalid models at publish, half-written versions."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import create_engine, text

from bnserve.store.errors import IntegrityError, InvalidModel, StoreRefused
from bnserve.store.model import CLASS, Model, Network, Node, Variable
from tests.model_factory import random_model

TABLES = ("models", "model_versions", "model_aliases", "variables", "cpts", "arcs")


@pytest.fixture
def raw(store_url):
    """A plain SQLAlchemy engine on the same database, bypassing the store."""
    engine = create_engine(store_url)
    yield engine
    engine.dispose()


def row_counts(raw) -> dict[str, int]:
    with raw.connect() as conn:
        return {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in TABLES}


def node_with_parents(model: Model, at_least: int) -> tuple[int, Node] | None:
    """(network index, node) of the first node with ``at_least`` parents, if any."""
    return next(((k, n) for k, net in enumerate(model.networks) for n in net.nodes if len(n.parents) >= at_least), None)


def model_with_a_node_having(at_least: int) -> tuple[Model, int, Node]:
    for seed in range(100):
        model = random_model(np.random.default_rng(seed), n_features=5)
        if (found := node_with_parents(model, at_least)) is not None:
            return (model, *found)
    raise AssertionError(f"no seed gives a node with {at_least} parents")


def test_a_flipped_cpt_byte_is_refused_naming_the_node(model_store, raw, rng):
    model, network, node = model_with_a_node_having(1)
    model_store.publish("m", model)
    v2 = model_store.publish("m", model)
    key = {"node": node.name, "net": network, "v": v2}
    where = "model_id = (SELECT id FROM models WHERE name = 'm') AND version = :v AND network = :net AND node = :node"
    with raw.begin() as conn:
        data = bytearray(conn.execute(text(f"SELECT data FROM cpts WHERE {where}"), key).scalar_one())
        data[len(data) // 2] ^= 0x01
        conn.execute(text(f"UPDATE cpts SET data = :data WHERE {where}"), {**key, "data": bytes(data)})

    with pytest.raises(IntegrityError, match=rf"model 'm' version 2: CPT of node '{node.name}' in network {network}"):
        model_store.load("m", version=2)
    assert model_store.load("m", version=1).checksum == model.checksum()  # the damage stays local


def test_altered_structure_fails_the_version_checksum(model_store, raw, rng):
    model, network, node = model_with_a_node_having(2)
    model_store.publish("m", model)
    where = "network = :net AND child = :child"
    with raw.begin() as conn:  # swap the first two parents: same CPT bytes, different axis order
        args = {"net": network, "child": node.name}
        conn.execute(text(f"UPDATE arcs SET position = -1 WHERE {where} AND position = 0"), args)
        conn.execute(text(f"UPDATE arcs SET position = 0 WHERE {where} AND position = 1"), args)
        conn.execute(text(f"UPDATE arcs SET position = 1 WHERE {where} AND position = -1"), args)

    with pytest.raises(IntegrityError, match=r"model 'm' version 1: checksum mismatch"):
        model_store.load("m")


def test_an_altered_state_label_fails_the_version_checksum(model_store, raw, rng):
    model_store.publish("m", random_model(rng))
    with raw.begin() as conn:
        conn.execute(text("""UPDATE variables SET states_json = '["a","b"]' WHERE position = 0"""))
    with pytest.raises(IntegrityError, match="checksum mismatch"):
        model_store.load("m")


def invalid_models() -> dict[str, Model]:
    c = Variable("c", ("a", "b"), CLASS)
    x = Variable("x", ("u", "v"))
    good_c, good_x = np.array([0.5, 0.5]), np.full((2, 2), 0.5)

    def model(*nodes: Node) -> Model:
        return Model((c, x), (Network(nodes),), "nb")

    return {
        "cycle": model(Node("c", ("x",), good_x), Node("x", ("c",), good_x)),
        "not normalised": model(Node("c", (), np.array([0.5, 0.6])), Node("x", ("c",), good_x)),
        "wrong shape": model(Node("c", (), good_c), Node("x", ("c",), np.full((2, 3), 0.5))),
        "no class node": model(Node("x", (), good_c)),
    }


DEEP = 200_000  # levels: deeper than the interpreter's recursion limit


@pytest.mark.parametrize("column", ["params_json", "metadata_json"])
def test_json_nested_too_deeply_is_refused_like_altered_bytes(model_store, raw, rng, column):
    """Issue 17: a params_json nested 200,000 deep raised a RecursionError out of load (a
    traceback from `trainer show`, a server that stopped updating every model)."""
    model_store.publish("m", random_model(rng))
    model_store.publish("m", random_model(rng))
    with raw.begin() as conn:
        conn.execute(
            text(f"UPDATE model_versions SET {column} = :deep WHERE version = 2"), {"deep": "[" * DEEP + "]" * DEEP}
        )
    with pytest.raises(
        IntegrityError, match="model 'm' version 2: stored rows cannot be decoded: JSON nested too deeply"
    ):
        model_store.load("m", version=2)
    assert model_store.load("m", version=1).version == 1


@pytest.mark.parametrize("fault", invalid_models())
def test_an_invalid_model_is_refused_at_publish_and_nothing_is_written(model_store, raw, fault):
    with pytest.raises(InvalidModel):
        model_store.publish("bad", invalid_models()[fault], aliases=["production"])
    assert model_store.list_models() == []
    assert set(row_counts(raw).values()) == {0}


def test_a_publish_failing_midway_leaves_nothing(model_store, raw, rng):
    """The last insert of a publish fails (a trigger refuses new aliases): every earlier row goes too."""
    first = random_model(rng)
    model_store.publish("m", first, aliases=["production"])
    before = row_counts(raw)
    refuse_new_aliases(raw)

    with pytest.raises(StoreRefused, match="injected failure"):
        # moves 'production' (an UPDATE, done), then inserts 'staging' (refused)
        model_store.publish("m", random_model(rng), aliases=["production", "staging"])
    with pytest.raises(StoreRefused, match="injected failure"):
        model_store.publish("fresh", random_model(rng), aliases=["staging"])

    assert row_counts(raw) == before
    [summary] = model_store.list_models()
    assert (summary.name, summary.versions, dict(summary.aliases)) == ("m", (1,), {"production": 1})
    assert model_store.load("m").checksum == first.checksum()
    assert model_store.publish("m", random_model(rng)) == 2  # the store still works


def refuse_new_aliases(raw) -> None:
    with raw.begin() as conn:
        if raw.dialect.name == "sqlite":
            conn.execute(
                text(
                    "CREATE TRIGGER refuse_alias BEFORE INSERT ON model_aliases "
                    "BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
                )
            )
        else:
            conn.execute(
                text(
                    "CREATE FUNCTION refuse_alias() RETURNS trigger LANGUAGE plpgsql "
                    "AS $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$"
                )
            )
            conn.execute(
                text(
                    "CREATE TRIGGER refuse_alias BEFORE INSERT ON model_aliases "
                    "FOR EACH ROW EXECUTE FUNCTION refuse_alias()"
                )
            )


@pytest.mark.parametrize("dtype", ["|O", "<i8", ">f8", "<U4", "|V8"])
def test_a_blob_is_only_ever_little_endian_floats_never_objects(dtype):
    """Nothing read from the store becomes code or Python objects: a CPT blob is raw
    little-endian floats, and any other dtype (objects, which would need pickle) is refused."""
    from bnserve.store.model.serialization import blob_to_array

    with pytest.raises(InvalidModel, match="not a little-endian float type"):
        blob_to_array(dtype, (1,), b"\0" * 8)


def test_no_module_deserialises_code():
    """No pickle, marshal, shelve, eval or exec anywhere in the packages that read the store."""
    import ast
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    banned_modules, banned_calls = {"pickle", "marshal", "shelve", "dill", "cloudpickle"}, {"eval", "exec"}
    for package in ("store", "server", "trainer"):
        for path in (root / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                    assert not {n.split(".")[0] for n in names} & banned_modules, f"{path}: imports {names}"
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    assert node.func.id not in banned_calls, f"{path}:{node.lineno}: calls {node.func.id}"
