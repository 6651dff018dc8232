"""Graphviz DOT of a model's DAG, for looking at it (writer only).

The class node is filled and drawn with a double border. An ensemble gets one
``cluster_I`` subgraph per network; node ids are then ``I:name`` (a node belongs to one
graph), labelled with the variable name. An arc is labelled with its conditional mutual
information (3 decimals, nats) when the model's metadata has ``arc_cmi``, a list of
``[parent, child, value]``; unlabelled otherwise. Every id and label is a quoted string.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bnserve.store.model import Model, Network

FORMAT = "dot"
CLASS_STYLE = 'style="filled", fillcolor="#ffd966", peripheries=2'


def write_dot(model: Model, name: str = "bnserve") -> str:
    """DOT text of every network of the model."""
    cmi = arc_cmi(model.metadata)
    class_name = model.class_variable.name
    out = [
        f"digraph {quote(name)} {{\n",
        '  node [shape=ellipse, fontname="Helvetica"];\n',
        '  edge [fontname="Helvetica", fontsize=10];\n',
    ]
    if len(model.networks) == 1:
        out.extend(_network(model.networks[0], class_name, cmi, prefix="", indent="  "))
    else:
        out.append(f"  label={quote(f'{model.algorithm}: {model.combination} of {len(model.networks)} networks')};\n")
        for i, net in enumerate(model.networks):
            out.append(f"  subgraph {quote(f'cluster_{i}')} {{\n    label={quote(f'network {i}')};\n")
            out.extend(_network(net, class_name, cmi, prefix=f"{i}:", indent="    "))
            out.append("  }\n")
    out.append("}\n")
    return "".join(out)


def arc_cmi(metadata: Any) -> dict[tuple[str, str], float]:
    """{(parent, child): I(parent; child | …)} from ``metadata["arc_cmi"]``; entries that are
    not ``[str, str, number]`` are ignored (the figure is decoration, not contract)."""
    found: dict[tuple[str, str], float] = {}
    entries = metadata.get("arc_cmi") if hasattr(metadata, "get") else None
    for entry in entries if isinstance(entries, list) else ():
        if (
            isinstance(entry, (list, tuple))
            and len(entry) == 3
            and isinstance(entry[0], str)
            and isinstance(entry[1], str)
            and isinstance(entry[2], (int, float))
            and not isinstance(entry[2], bool)
        ):
            found[(entry[0], entry[1])] = float(entry[2])
    return found


def quote(text: str) -> str:
    """A DOT quoted string: backslash and double quote escaped, line breaks as ``\\n``."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "").replace("\n", "\\n")
    return f'"{escaped}"'


def _network(
    net: Network, class_name: str, cmi: dict[tuple[str, str], float], prefix: str, indent: str
) -> Iterable[str]:
    for node in net.nodes:
        attributes = [f"label={quote(node.name)}"] if prefix else []
        if node.name == class_name:
            attributes.append(CLASS_STYLE)
        suffix = f" [{', '.join(attributes)}]" if attributes else ""
        yield f"{indent}{quote(prefix + node.name)}{suffix};\n"
    for parent, child in net.arcs:
        value = cmi.get((parent, child))
        label = f" [label={quote(f'{value:.3f}')}]" if value is not None else ""
        yield f"{indent}{quote(prefix + parent)} -> {quote(prefix + child)}{label};\n"
