"""The Open Inference Protocol's tensors: what a model takes and returns, decoding and encoding.

Inputs come in one of two forms: one tensor per feature, named as the feature, or one
``codes`` tensor holding every feature's state code. An input's data is in its typed
``contents``, or, one entry per input, in the request's ``raw_input_contents`` (what
tritonclient sends): little-endian elements in row-major order, a BYTES element being a
4-byte little-endian length and then its bytes. Outputs go in ``raw_output_contents``,
as KServe and Triton send them. The values themselves are checked and coded by
``bnserve.server.requests``, as Predict's are.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bnserve.server.limits import INLINE_BYTES, INLINE_ELEMENTS, Work
from bnserve.server.requests import codes_from_columns, codes_from_dense, derived_work, value_column
from bnserve.store.errors import InvalidInput
from bnserve.store.model import DEFAULT_UNKNOWN, UNKNOWN_POLICIES, unknown_policy
from bnserve.store.predictor import CompiledModel

CODES = "codes"
UNKNOWN = "unknown"  # the request parameter naming the policy for values unseen in training
LABEL = "label"
PROBABILITIES = "probabilities"
OUTPUTS = (LABEL, PROBABILITIES)
BYTES = "BYTES"
NUMBER_TYPES = {"FP32": "<f4", "FP64": "<f8", "INT32": "<i4", "INT64": "<i8"}
CODE_TYPES = ("INT32", "INT64")
CONTENTS_FIELD = {
    BYTES: "bytes_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
}
VARIABLE = -1  # a dimension of any size, in metadata
LENGTH = struct.Struct("<I")


@dataclass(frozen=True)
class Tensor:
    """One decoded input: its elements flat in row-major order, ``texts`` of a BYTES tensor,
    else ``numbers``."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    texts: list[str] = field(default_factory=list)
    numbers: np.ndarray = field(default_factory=lambda: np.empty(0))


def input_metadata(compiled: CompiledModel) -> list[tuple[str, str, list[int]]]:
    """(name, datatype, shape) of every input a model takes: one per feature but the derived
    ones (computed from their inputs, never sent), then ``codes``, one column per feature,
    derived ones included (unless a feature has that name, which then wins)."""
    inputs = [(v.name, BYTES, [VARIABLE]) for v in compiled.features if v.projection is None]
    if CODES not in compiled.feature_index:
        inputs.append((CODES, "INT32", [VARIABLE, len(compiled.features)]))
    return inputs


def output_metadata(compiled: CompiledModel) -> list[tuple[str, str, list[int]]]:
    """(name, datatype, shape) of every output: the winning class, and the class probabilities."""
    return [(LABEL, BYTES, [VARIABLE]), (PROBABILITIES, "FP32", [VARIABLE, len(compiled.classes)])]


def check_inputs(request: Any, compiled: CompiledModel, class_name: str) -> Work:
    """Check a ModelInferRequest against the model before any of its data is decoded, and
    count the work decoding it implies; O(inputs), whatever its tensors hold.

    In order: the number of inputs (at most one per feature, or one ``codes``); every
    input's name (a feature, or ``codes``), datatype and shape. ``read_inputs`` then
    compares each input's data with its shape before decoding any.

    Rows, the most any input holds, count from its whole shape: a 2-D tensor of numbers
    (``codes``, one row of state codes per line) holds ``shape[0]``; any other tensor one
    row per element, as a feature's ``[batch]`` or ``[batch, 1]`` does. Feature tensors
    compute the derived features too (``requests.derived_work``); ``codes`` carries theirs."""
    inputs = request.inputs
    most = len(compiled.features) + (CODES not in compiled.feature_index)
    if len(inputs) > most:
        raise InvalidInput(
            f"the request has {len(inputs)} inputs; this model takes at most {most} inputs: "
            f"one per feature, or one {CODES!r}"
        )
    raw = request.raw_input_contents
    if raw and len(raw) != len(inputs):
        raise InvalidInput(
            f"raw_input_contents has {len(raw)} entries for {len(inputs)} inputs; "
            "send one per input, in the order of inputs"
        )
    seen: set[str] = set()
    for tensor in inputs:
        if tensor.name in seen:
            raise InvalidInput(f"input {tensor.name!r} is sent twice")
        seen.add(tensor.name)
        _check_form(tensor.name, tensor.datatype, tuple(tensor.shape))
        if tensor.name != CODES or CODES in compiled.feature_index:
            value_column(compiled, tensor.name, class_name)
    rows = elements = size = 0
    for i, tensor in enumerate(inputs):
        shape = tuple(tensor.shape)
        count = math.prod(shape)
        rows = max(rows, shape[0] if len(shape) == 2 and tensor.datatype != BYTES else count)
        elements += count
        if raw:
            size += len(raw[i])
        elif tensor.datatype == BYTES:  # text as long as a few elements: counted when they are few
            texts = tensor.contents.bytes_contents
            size += sum(map(len, texts)) if len(texts) <= INLINE_ELEMENTS else INLINE_BYTES + 1
    if not (CODES in seen and CODES not in compiled.feature_index):
        elements += derived_work(compiled, rows)
    return Work(rows, elements, size)


def read_inputs(request: Any) -> list[Tensor]:
    """Every input tensor of a ModelInferRequest, its data decoded; after ``check_inputs``.

    Every input's data is first compared with its declared shape by length alone (O(inputs)):
    ``contents`` must hold exactly as many elements, a raw entry exactly as many bytes, or
    for BYTES at least a 4-byte length prefix per element (``split_bytes`` then reads no
    more elements than the shape says); only then is any decoded."""
    raw = request.raw_input_contents
    for i, tensor in enumerate(request.inputs):
        name, datatype, count = tensor.name, tensor.datatype, math.prod(tensor.shape)
        if not raw:
            _check_contents(name, datatype, tensor.contents, count)
        elif tensor.contents.ListFields():
            raise InvalidInput(
                f"input {name!r} has contents, but the request sends raw_input_contents; send every input's data one way"
            )
        else:
            _check_raw(name, datatype, len(raw[i]), count)
    tensors: list[Tensor] = []
    for i, tensor in enumerate(request.inputs):
        name, datatype, shape = tensor.name, tensor.datatype, tuple(tensor.shape)
        count = math.prod(shape)
        data: list[bytes] | np.ndarray
        if raw and datatype == BYTES:
            data = split_bytes(name, raw[i], count)
        elif raw:
            data = np.frombuffer(raw[i], dtype=NUMBER_TYPES[datatype])
        elif datatype == BYTES:
            data = list(tensor.contents.bytes_contents)
        else:
            data = np.array(getattr(tensor.contents, CONTENTS_FIELD[datatype]), dtype=NUMBER_TYPES[datatype])
        if isinstance(data, np.ndarray):
            tensors.append(Tensor(name, datatype, shape, numbers=data))
        else:
            tensors.append(Tensor(name, datatype, shape, texts=[_text(name, k, item) for k, item in enumerate(data)]))
    return tensors


def _check_form(name: str, datatype: str, shape: tuple[int, ...]) -> None:
    """Refuse, before its data is read, an input no model takes: a datatype we do not read, a
    negative dimension, or a shape that is neither a feature's ([batch] or [batch, 1]) nor
    the ``codes`` tensor's ([batch, features] of INT32 or INT64)."""
    if datatype not in CONTENTS_FIELD:
        raise InvalidInput(f"input {name!r} has datatype {datatype!r}; bnserve takes BYTES, FP32, FP64, INT32 or INT64")
    if any(d < 0 for d in shape):
        raise InvalidInput(f"input {name!r} has shape {list(shape)}; a dimension cannot be negative")
    if len(shape) == 1 or (len(shape) == 2 and (shape[1] == 1 or (name == CODES and datatype in CODE_TYPES))):
        return
    raise InvalidInput(
        f"input {name!r} has shape {list(shape)}; a feature takes [batch] or [batch, 1], "
        f"and {CODES!r} [batch, features] of INT32 or INT64"
    )


def _check_contents(name: str, datatype: str, contents: Any, count: int) -> None:
    field = CONTENTS_FIELD[datatype]
    wrong = [f.name for f, _ in contents.ListFields() if f.name != field]
    if wrong:
        raise InvalidInput(f"input {name!r} is {datatype}, but its contents have {wrong[0]}; send {field}")
    given = len(getattr(contents, field))
    if given != count:
        raise InvalidInput(f"input {name!r} has {given} elements in contents; its shape needs {count}")


def _check_raw(name: str, datatype: str, size: int, count: int) -> None:
    """Refuse a raw entry of ``size`` bytes that cannot hold its shape's ``count`` elements:
    exactly, for numbers; a 4-byte length prefix each at least, for BYTES."""
    if datatype == BYTES:
        if size < count * LENGTH.size:
            raise InvalidInput(
                f"input {name!r} has {size} raw bytes; its shape needs {count} BYTES elements, "
                f"a {LENGTH.size}-byte length prefix each at least"
            )
        return
    itemsize = np.dtype(NUMBER_TYPES[datatype]).itemsize
    if size != count * itemsize:
        raise InvalidInput(
            f"input {name!r} has {size} raw bytes; its shape needs {count} {datatype} elements, "
            f"{count * itemsize} bytes"
        )


def split_bytes(name: str, raw: bytes, count: int) -> list[bytes]:
    """The ``count`` elements of a raw BYTES tensor, each a 4-byte little-endian length, then
    the bytes; it reads no more than ``count``, so data past them costs nothing to refuse."""
    items: list[bytes] = []
    at = 0
    while len(items) < count:
        if at + LENGTH.size > len(raw):
            raise InvalidInput(
                f"input {name!r}: raw BYTES element {len(items)} has a truncated length prefix; "
                f"its shape needs {count} elements"
            )
        (size,) = LENGTH.unpack_from(raw, at)
        at += LENGTH.size
        if at + size > len(raw):
            raise InvalidInput(f"input {name!r}: raw BYTES element {len(items)} runs past the end of the data")
        items.append(raw[at : at + size])
        at += size
    if at != len(raw):
        raise InvalidInput(
            f"input {name!r} has {len(raw) - at} raw bytes past its {count} BYTES elements; its shape needs {count}"
        )
    return items


def join_bytes(items: list[bytes]) -> bytes:
    """A raw BYTES tensor from its elements (the inverse of ``split_bytes``)."""
    return b"".join(LENGTH.pack(len(item)) + item for item in items)


def _text(name: str, index: int, item: bytes) -> str:
    try:
        return item.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"input {name!r}: element {index} is not UTF-8 text") from None


def unknown_parameter(request: Any) -> str:
    """The request's ``unknown`` parameter (a string: missing or error; absent, the default):
    what a value unseen in training becomes (``bnserve.store.model.unseen``)."""
    if UNKNOWN not in request.parameters:
        return DEFAULT_UNKNOWN
    parameter = request.parameters[UNKNOWN]
    if parameter.WhichOneof("parameter_choice") != "string_param":
        raise InvalidInput(f"parameter {UNKNOWN!r} must be a string_param, one of {', '.join(UNKNOWN_POLICIES)}")
    return unknown_policy(parameter.string_param, f"parameter {UNKNOWN!r}")


def codes_from_inputs(
    compiled: CompiledModel,
    class_name: str,
    tensors: list[Tensor],
    unknown: str = DEFAULT_UNKNOWN,
    unseen: dict[int, int] | None = None,
) -> np.ndarray:
    """(rows, n_features) codes from the decoded inputs, in either form; ``unknown`` and
    ``unseen`` apply to feature tensors (``codes_from_columns``), not to state codes."""
    if not tensors:
        raise InvalidInput(f"the request has no inputs; send one tensor per feature, or one {CODES!r} tensor")
    if CODES not in compiled.feature_index and any(t.name == CODES for t in tensors):
        if len(tensors) > 1:
            other = next(t.name for t in tensors if t.name != CODES)
            raise InvalidInput(f"input {CODES!r} holds every feature; send it alone, not with input {other!r}")
        return _codes_tensor(compiled, class_name, tensors[0])
    first = tensors[0]
    texts: dict[str, list[str]] = {}
    numbers: dict[str, np.ndarray] = {}
    for t in tensors:
        if len(t.shape) not in (1, 2) or t.shape[1:] not in ((), (1,)):
            raise InvalidInput(f"input {t.name!r} has shape {list(t.shape)}; a feature takes [batch] or [batch, 1]")
        if t.shape[0] != first.shape[0]:
            raise InvalidInput(f"input {t.name!r} has {t.shape[0]} rows, but input {first.name!r} has {first.shape[0]}")
        if t.datatype == BYTES:
            texts[t.name] = t.texts
        else:
            numbers[t.name] = np.asarray(t.numbers, dtype=np.float64)
    return codes_from_columns(compiled, class_name, first.shape[0], texts, numbers, unknown, unseen)


def _codes_tensor(compiled: CompiledModel, class_name: str, tensor: Tensor) -> np.ndarray:
    n = len(compiled.features)
    if tensor.datatype not in CODE_TYPES:
        raise InvalidInput(f"input {CODES!r} has datatype {tensor.datatype!r}; state codes are INT32 or INT64")
    if len(tensor.shape) != 2 or tensor.shape[1] != n:
        raise InvalidInput(
            f"input {CODES!r} has shape {list(tensor.shape)}; it takes [batch, {n}], one column per "
            f"feature in {_order(compiled)}"
        )
    try:
        return codes_from_dense(compiled, class_name, [v.name for v in compiled.features], tensor.numbers)
    except InvalidInput as exc:
        raise InvalidInput(f"input {CODES!r}: {exc.message}") from None


def _order(compiled: CompiledModel) -> str:
    """Where the order of the ``codes`` tensor's columns is listed: ModelMetadata's inputs
    leave derived features out, GetModelMetadata's variables have every feature."""
    if any(v.projection is not None for v in compiled.features):
        return "the model's order, derived features included (the features among GetModelMetadata's variables)"
    return "the order of ModelMetadata's inputs"


def requested_outputs(request: Any) -> list[str]:
    """The outputs a ModelInferRequest asks for, in its order; none asked for is every output."""
    names: list[str] = []
    for output in request.outputs:
        if output.name not in OUTPUTS:
            raise InvalidInput(f"unknown output {output.name!r}; the outputs are {LABEL!r} and {PROBABILITIES!r}")
        if output.name in names:
            raise InvalidInput(f"output {output.name!r} is requested twice")
        if output.parameters:
            raise InvalidInput(
                f"output {output.name!r}: parameters are not supported ({', '.join(sorted(output.parameters))})"
            )
        names.append(output.name)
    return names or list(OUTPUTS)


def write_outputs(
    response: Any, names: list[str], classes: tuple[str, ...], proba: np.ndarray, winners: np.ndarray
) -> None:
    """Add the named outputs to a ModelInferResponse, their data in raw_output_contents;
    ``winners``: each row's most probable class."""
    for name in names:
        if name == LABEL:
            response.outputs.add(name=LABEL, datatype=BYTES, shape=[len(proba)])
            response.raw_output_contents.append(join_bytes([classes[w].encode("utf-8") for w in winners]))
        else:
            response.outputs.add(name=PROBABILITIES, datatype="FP32", shape=[len(proba), len(classes)])
            response.raw_output_contents.append(np.asarray(proba, dtype="<f4").tobytes())
