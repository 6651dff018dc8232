"""bnserve.Client against a hostile server: a Predictor in the test process, on loopback,
that answers with crafted bytes (gzip bombs, counts that do not match the rows sent, labels
and probabilities out of range, absurd class counts, wrong types, JSON nested too deep). The
client raises its own InvalidReply, naming what was wrong, and its memory stays bounded. And
a token is not sent in plaintext beyond loopback unless asked."""

from __future__ import annotations

import gzip
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import grpc
import pytest

from bnserve.client import Client, InvalidReply
from bnserve.server.api import predictor_pb2 as pb

SERVICE = pb.DESCRIPTOR.services_by_name["Predictor"].full_name
ROWS = [{"a": "x"}, {"a": "y"}]
MIB = 1024 * 1024


def _metadata(**fields: Any) -> pb.ModelMetadata:
    reply = pb.ModelMetadata(
        name="m",
        version=1,
        variables=[
            pb.Variable(name="a", role="feature", kind="nominal", states=["x", "y"]),
            pb.Variable(name="c", role="class", kind="nominal", states=["A", "B"]),
        ],
        arcs=[pb.Arc(parent="c", child="a")],
        cpts=[pb.Cpt(node="c", shape=[2], values=[0.5, 0.5])],
        parameters_json="{}",
    )
    for name, value in fields.items():
        if isinstance(value, list):
            del getattr(reply, name)[:]
            getattr(reply, name).extend(value)
        else:
            setattr(reply, name, value)
    return reply


def _predict(**fields: Any) -> pb.PredictResponse:
    dense = pb.DensePredictions(
        labels=fields.pop("labels", [0, 1]), probabilities=fields.pop("proba", [0.75, 0.25, 0.5, 0.5])
    )
    reply = pb.PredictResponse(model="m", version=1, classes=["A", "B"], dense=dense)
    for name, value in fields.items():
        if isinstance(value, list):
            del getattr(reply, name)[:]
            getattr(reply, name).extend(value)
        else:
            setattr(reply, name, value)
    return reply


@contextmanager
def hostile(**replies: bytes | pb.PredictResponse | pb.ModelMetadata | pb.ListModelsResponse) -> Iterator[str]:
    """A Predictor on loopback answering each method (by name) with what ``replies`` gives,
    gzip-compressed; by default, good answers about model "m" (features a; classes A, B)."""
    replies = {"Predict": _predict(), "GetModelMetadata": _metadata(), "ListModels": pb.ListModelsResponse()} | replies

    def answer(name: str) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(
            lambda request, context: replies[name],
            response_serializer=lambda r: r if isinstance(r, bytes) else r.SerializeToString(),
        )

    server = grpc.server(ThreadPoolExecutor(2), compression=grpc.Compression.Gzip)
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {m: answer(m) for m in replies})])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(None)


def test_good_replies_are_read():
    with hostile() as target, Client(target, retries=0) as client:
        answer = client.predict("m", ROWS)
        assert answer.labels.tolist() == ["A", "B"] and answer.probabilities.shape == (2, 2)
        assert client.metadata("m", include_parameters=True)["classes"] == ["A", "B"]


PREDICT_REPLIES = {
    "too few labels": (_predict(labels=[0]), "1 labels for 2 rows"),
    "too many probabilities": (_predict(proba=[0.5] * 6), "6 probabilities for 2 rows of 2 classes"),
    "label out of range": (_predict(labels=[0, 7]), "label code 7 >= 2"),
    "probability out of range": (_predict(proba=[1.5, -0.5, 0.5, 0.5]), r"not in \[0, 1\]"),
    "probability NaN": (_predict(proba=[float("nan"), 0.5, 0.5, 0.5]), r"not in \[0, 1\]"),
    "rows not summing to 1": (_predict(proba=[0.2, 0.2, 0.5, 0.5]), "do not sum to 1"),
    "other classes": (_predict(classes=["A", "C"]), "are not the version's"),
    "three classes": (_predict(classes=["A", "B", "C"], proba=[0.2] * 6), "3 classes, not 2"),
    "other model": (_predict(model="n"), "names model 'n', not 'm'"),
    "other version": (_predict(version=9), "version 9, asked 1"),
    "no dense answer": (pb.PredictResponse(model="m", version=1, classes=["A", "B"]), "0 labels for 2 rows"),
    "a metadata message": (_metadata().SerializeToString(), "invalid PredictResponse reply: wire type 3"),
    "a classes field as a number": (b"\x0a\x01m\x10\x01\x18\x05", "0 classes"),
    "invalid UTF-8": (b"\x0a\x01\xff", "not a valid message"),
    "a group": (b"\x0b\x0c", "wire type 3"),
    "a truncated field": (b"\x1a\x05AB", "runs past the end"),
    "a truncated varint": (b"\x10\xff", "varint"),
}


@pytest.mark.parametrize("case", PREDICT_REPLIES)
def test_a_malformed_predict_reply_is_an_invalid_reply(case):
    reply, problem = PREDICT_REPLIES[case]
    with (
        hostile(Predict=reply) as target,
        Client(target, retries=0) as client,
        pytest.raises(InvalidReply, match=problem),
    ):
        client.predict("m", ROWS)


def test_an_absurd_class_count_is_refused_before_the_classes_are_read():
    """Without the metadata call (every column sent), the count is bounded by MAX_CLASSES."""
    reply = _predict(classes=[str(i) for i in range(70_000)], labels=[0], proba=[])
    with (
        hostile(Predict=reply) as target,
        Client(target, retries=0) as client,
        pytest.raises(InvalidReply, match="70000 classes, not 1 to 65536"),
    ):
        client.predict("m", ROWS[:1], extra_columns="error")


METADATA_REPLIES = {
    "deep JSON": (_metadata(parameters_json="[" * 100_000), "parameters_json is not JSON"),
    "not JSON": (_metadata(metadata_json="{"), "metadata_json is not JSON"),
    "JSON not an object": (_metadata(metadata_json="[1]"), "metadata_json is not a JSON object"),
    "CPT of the wrong size": (_metadata(cpts=[pb.Cpt(node="c", shape=[2, 3], values=[0.5])]), "1 values for shape"),
    "CPT shape absurd": (_metadata(cpts=[pb.Cpt(node="c", shape=[2**40, 2**40], values=[])]), "0 values for shape"),
    "CPT out of range": (_metadata(cpts=[pb.Cpt(node="c", shape=[1], values=[2.0])]), r"not in \[0, 1\]"),
    "no class variable": (_metadata(variables=[pb.Variable(name="a", role="feature")]), "not one class variable"),
    "a repeated variable": (
        _metadata(variables=[pb.Variable(name="c", role="class", states=["A"])] * 2),
        "empty or repeated",
    ),
    "an odd role": (_metadata(variables=[pb.Variable(name="c", role="target", states=["A"])]), "role 'target'"),
    "a repeated state": (_metadata(variables=[pb.Variable(name="c", role="class", states=["A", "A"])]), "repeats"),
    "unsorted cuts": (
        _metadata(variables=[*_metadata().variables, pb.Variable(name="n", role="feature", cuts=[2, 1])]),
        "bad cuts",
    ),
    "an arc to nowhere": (_metadata(arcs=[pb.Arc(parent="c", child="zzz")]), "unknown variable"),
    "other model": (_metadata(name="n"), "names model 'n'"),
}


@pytest.mark.parametrize("case", METADATA_REPLIES)
def test_a_malformed_metadata_reply_is_an_invalid_reply(case):
    reply, problem = METADATA_REPLIES[case]
    with hostile(GetModelMetadata=reply) as target, Client(target, retries=0) as client:
        with pytest.raises(InvalidReply, match=problem):
            client.metadata("m", include_parameters=True)
        with pytest.raises(InvalidReply, match=problem):  # predict reads the features from it
            client.predict("m", ROWS)


@pytest.mark.parametrize(
    "reply",
    [
        pb.ListModelsResponse(models=[pb.ModelSummary(name="m", versions=[0])]),
        pb.ListModelsResponse(models=[pb.ModelSummary(name="m", versions=[1])] * 2),
        pb.ListModelsResponse(models=[pb.ModelSummary(name="", versions=[1])]),
    ],
)
def test_a_malformed_model_list_is_an_invalid_reply(reply):
    with hostile(ListModels=reply) as target, Client(target, retries=0) as client:
        with pytest.raises(InvalidReply, match="invalid ListModels reply"):
            client.list_models()


def test_max_receive_bytes_bounds_the_decompressed_reply():
    """A reply of 2 MiB (an unknown field of zeros) is 2 KB gzipped: refused at 1 MiB."""
    zeros = b"\x00" * (2 * MIB)
    reply = _predict().SerializeToString() + b"\x7a" + _varint(len(zeros)) + zeros  # field 15
    assert len(gzip.compress(reply)) < 10_000
    with hostile(Predict=reply) as target:
        with (
            Client(target, retries=0, max_receive_bytes=MIB) as client,
            pytest.raises(InvalidReply, match=r"Predict reply is larger than max_receive_bytes \(1048576 bytes\)"),
        ):
            client.predict("m", ROWS)
        with Client(target, retries=0, max_receive_bytes=4 * MIB) as client:  # below the limit, read
            assert client.predict("m", ROWS).probabilities.shape == (2, 2)


def test_many_small_fields_are_refused_before_they_are_parsed():
    """Under max_receive_bytes on the wire, but millions of empty messages once parsed."""
    with hostile(GetModelMetadata=b"\x32\x00" * 500_000) as target:
        with (
            Client(target, retries=0, max_receive_bytes=8 * MIB) as client,
            pytest.raises(InvalidReply, match="parsing it would take more than 8388608 bytes"),
        ):
            client.metadata("m")


# The child's own peak: VmHWM, not getrusage's ru_maxrss, which Linux carries over from the
# forking parent (this test process, which other tests may have grown past a gigabyte).
BOMB_CLIENT = """
import sys
from bnserve.client import Client, InvalidReply
try:
    with Client(sys.argv[1], retries=0) as client:
        getattr(client, sys.argv[2])("m", [{"a": "x"}]) if sys.argv[2] == "predict" else client.metadata("m")
except InvalidReply as exc:
    peak_kib = int(next(line for line in open("/proc/self/status") if line.startswith("VmHWM:")).split()[1])
    print("InvalidReply", peak_kib // 1024, exc)
"""


@pytest.mark.parametrize(
    ("method", "replies"),
    [
        ("predict", {"Predict": b"\x1a\x00" * (30 * MIB)}),  # 30 M empty classes in 60 MiB; 60 KB gzipped
        ("metadata", {"GetModelMetadata": b"\x32\x00" * (30 * MIB)}),  # 30 M empty variables
    ],
)
def test_a_gzip_bomb_under_the_limit_does_not_balloon_the_client(method, replies):
    """A real client process (the default max_receive_bytes, 64 MiB) against a 60 KB gzipped
    reply that parses into millions of objects: InvalidReply, and the peak RSS stays that of
    the reply's bytes and baseline (about 300 MiB; it was 1.5 GiB and 12.5 GiB)."""
    assert len(gzip.compress(next(iter(replies.values())))) < 100_000
    with hostile(**replies) as target:
        out = subprocess.run(
            [sys.executable, "-c", BOMB_CLIENT, target, method], capture_output=True, text=True, timeout=120
        )
    assert out.stdout.startswith("InvalidReply"), out.stdout + out.stderr
    peak_mib = int(out.stdout.split()[1])
    assert peak_mib < 600, out.stdout


@pytest.mark.parametrize(
    "target",
    [
        "127.0.0.1:50051",
        "127.8.9.10:1",
        "localhost:50051",
        "[::1]:50051",
        "ipv4:127.0.0.1:1",
        "dns:///localhost:50051",
        "unix:/tmp/bnserve.sock",
    ],
)
def test_a_token_goes_in_plaintext_to_loopback(target):
    Client(target, token="t").close()


@pytest.mark.parametrize(
    "target",
    ["10.0.0.1:50051", "example.com:443", "[2001:db8::1]:50051", "dns:///10.0.0.1:50051", "localhost.example.com:1"],
)
def test_a_token_in_plaintext_beyond_loopback_is_refused_unless_asked(target):
    with pytest.raises(ValueError, match="refusing to send the token in plaintext to .*insecure_token=True"):
        Client(target, token="t")
    Client(target, token="t", insecure_token=True).close()  # a service mesh, a VPN: the caller says so
    Client(target, token="t", tls=True).close()
    Client(target).close()  # no token, nothing to leak


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))
