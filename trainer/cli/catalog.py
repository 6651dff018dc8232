"""``trainer list`` and ``trainer show``: what the store holds."""

from __future__ import annotations

import argparse
import json
import shutil
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from bnserve.store.model.names import check_model_name, shown
from bnserve.trainer.cli.flags import (
    _check_flag,
    _open_store,
    _parse_ref,
    _store_flag,
)

if TYPE_CHECKING:
    from bnserve.store.model import Model


def add_list(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list the model versions in the store, one row each")
    p.add_argument("name", nargs="?", metavar="NAME", help="only this model's versions")
    _store_flag(p)
    p.add_argument("--json", action="store_true", help="print a JSON list, one object per version")
    p.set_defaults(run=_list)


def add_show(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="show one model version")
    p.add_argument("ref", metavar="NAME[:VERSION|@ALIAS]")
    _store_flag(p)
    how = p.add_mutually_exclusive_group()
    how.add_argument("--json", action="store_true", help="print JSON")
    how.add_argument("--dot", action="store_true", help="print the DAG as Graphviz DOT")
    p.add_argument(
        "--verify-key",
        metavar="FILE",
        help="check the version's signature against these PEM public keys (server serve --verify-key): "
        "an unsigned, forged or other-key version is an error",
    )
    p.set_defaults(run=_show)


def _list(args: argparse.Namespace) -> int:
    """One row per version, from the catalogue's light columns (no CPT is read); the
    description is cut to fit the terminal's width (100 columns when not a terminal)."""
    if args.name is not None:
        _check_flag(check_model_name, args.name, "NAME")
    with _open_store(args) as store:
        versions = store.list_versions(args.name)
    if args.json:
        doc = [
            {
                "name": v.name,
                "version": v.version,
                "created": _utc(v.created_at_ms),
                "created_at_ms": v.created_at_ms,
                "algorithm": v.algorithm,
                "aliases": list(v.aliases),
                "description": v.description,
                "tags": dict(v.tags),
            }
            for v in versions
        ]
        print(json.dumps(doc, indent=2))
        return 0
    if not versions:
        print("no models")
        return 0
    rows = [("NAME", "VERSION", "CREATED", "ALGORITHM", "ALIASES")]
    rows += [
        (shown(v.name), str(v.version), _utc(v.created_at_ms), shown(v.algorithm), shown(",".join(v.aliases)) or "-")
        for v in versions
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    room = max(shutil.get_terminal_size((100, 24)).columns - sum(widths) - 2 * len(widths), 20)
    descriptions = [
        "DESCRIPTION",
        *(_one_line(v.description and shown(v.description, keep="\n\t"), room) for v in versions),
    ]
    for row, description in zip(rows, descriptions):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + description)
    return 0


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _one_line(text: str | None, room: int) -> str:
    """``text`` on one line of at most ``room`` characters ("-" for none)."""
    flat = " ".join((text or "").split()) or "-"
    return flat if len(flat) <= room else flat[: room - 1].rstrip() + "…"


def _show(args: argparse.Namespace) -> int:
    name, version, alias = _parse_ref(args.ref)
    ring = None
    if args.verify_key is not None:
        from bnserve.store.signing import KeyRing

        ring = KeyRing.read(args.verify_key)
    with _open_store(args, verify=ring) as store:
        mv = store.load(name, version=version, alias=alias)
    model = mv.model
    signature = None if mv.signature is None else mv.signature.key_id
    if args.dot:
        from bnserve.trainer.formats import write_model

        print(shown(write_model(model, "dot", mv.name), keep="\n\t"), end="")
        return 0
    reproduce = _reproducing_command(model, mv.name)
    created = datetime.fromtimestamp(mv.created_at_ms / 1000, tz=UTC).isoformat(timespec="seconds")
    aliases = sorted(mv.aliases)
    if args.json:
        from bnserve.store.model.serialization import structure_dict  # numpy: not on the parser's path

        doc = {
            "name": mv.name,
            "version": mv.version,
            "created_at_ms": mv.created_at_ms,
            "checksum": mv.checksum,
            "aliases": aliases,
            "description": mv.description,
            "tags": dict(mv.tags),
            "signature": None if signature is None else {"key_id": signature, "verified": ring is not None},
            **structure_dict(model),
            "arcs": [[[p, c] for p, c in net.arcs] for net in model.networks],
            **({"reproduce": reproduce} if reproduce is not None else {}),
        }
        print(json.dumps(doc, indent=2, sort_keys=True))
        return 0
    lines = [
        f"{mv.name} version {mv.version}  created {created}  checksum {mv.checksum}",
        f"aliases: {', '.join(aliases) if aliases else 'none'}",
    ]
    if mv.description is not None:
        first, *more = mv.description.split("\n")
        lines += ["description: " + first, *("  " + line for line in more)]
    if mv.tags:
        lines.append(f"tags: {', '.join(f'{k}={v}' for k, v in mv.tags.items())}")
    if signature is None:
        lines.append("signature: none (unsigned)")
    else:
        checked = f"verified with {args.verify_key}" if ring is not None else "not verified: give --verify-key"
        lines.append(f"signature: key {signature} ({checked})")
    lines.append(f"algorithm: {model.algorithm}  combination: {model.combination}")
    lines.append(f"parameters: {json.dumps(dict(model.params), sort_keys=True)}")
    if reproduce is not None:
        lines.append(f"reproduce: {reproduce}")
    lines.append("variables:")
    width = max(len(shown(v.name)) for v in model.variables)
    for v in model.variables:
        kind = ""
        if v.kind == "numeric":
            kind = f"numeric, cut at {', '.join(map(repr, v.cuts))}: " if v.cuts else "numeric, not cut: "
        lines.append(f"  {shown(v.name).ljust(width)}  {v.role.ljust(7)}  {kind}{', '.join(v.states)}")
        if v.projection is not None:
            terms = " + ".join(
                f"{w!r} * ({shown(n)} - {c!r})"
                for n, c, w in zip(v.projection.inputs, v.projection.centres, v.projection.weights)
            )
            lines.append(f"  {''.ljust(width)}  {''.ljust(7)}  derived: {terms}")
    for i, net in enumerate(model.networks):
        lines.append("arcs:" if len(model.networks) == 1 else f"arcs of network {i}:")
        lines += [f"  {parent} -> {child}" for parent, child in net.arcs]
    lines.append("metadata:")
    lines += [f"  {key}: {json.dumps(value, sort_keys=True)}" for key, value in sorted(model.metadata.items())]
    for line in lines:  # names, labels, description and tags come from the store: shown, never raw
        print(shown(line, keep="\t"))
    return 0


def _reproducing_command(model: Model, name: str) -> str | None:
    """The ``trainer fit`` line that makes ``model`` again from its training file (by the name
    the metadata keeps), from the spec it records; None for a model made before specs were
    recorded, or imported."""
    from bnserve.trainer.plan import command, spec_of

    spec = spec_of(model)
    if spec is None:
        return None
    source = model.metadata.get("training", {}).get("source") or "DATA"
    return command(spec, data=str(source), name=name)
