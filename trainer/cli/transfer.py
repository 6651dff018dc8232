"""``trainer import`` and ``trainer export``: networks to and from BIF, XMLBIF and DOT files."""

from __future__ import annotations

import argparse
import sys

from bnserve.argtypes import limit, whole_number
from bnserve.store.errors import InvalidInput
from bnserve.trainer.cli.flags import (
    UsageError,
    _alias_flag,
    _annotation_flags,
    _open_store,
    _parse_ref,
    _signing_flag,
    _store_flag,
)
from bnserve.trainer.cli.publishing import _check_publish_flags, _publish
from bnserve.trainer.formats import (
    CPT_CELLS_FLAG,
    DEFAULT_MAX_CPT_CELLS,
    EXPORT_FORMATS,
    IMPORT_FORMATS,
    format_of,
    read_model,
    write_model,
)


def add_import(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="publish a network from a BIF or XMLBIF file as a new version")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--format", choices=IMPORT_FORMATS, help="default: from the extension (.bif, .xml, .xmlbif)")
    p.add_argument(
        "--class",
        dest="class_name",
        metavar="NAME",
        help="the class variable (default: the one a bnserve export marked)",
    )
    p.add_argument(
        CPT_CELLS_FLAG,
        type=limit(int, "probabilities"),
        default=DEFAULT_MAX_CPT_CELLS,
        metavar="N",
        help=f"refuse a file with a CPT of more probabilities (default {DEFAULT_MAX_CPT_CELLS:,}; none: no limit)",
    )
    p.add_argument("--name", required=True, help="model name in the store")
    _store_flag(p)
    _alias_flag(p)
    _annotation_flags(p)
    _signing_flag(p)
    p.set_defaults(run=_import)


def add_export(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write one model version as BIF, XMLBIF or Graphviz DOT")
    p.add_argument("ref", metavar="NAME[:VERSION|@ALIAS]")
    p.add_argument("--format", choices=EXPORT_FORMATS, help="default: from the --out extension")
    p.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--network", type=whole_number(0), metavar="I", help="only member I of an ensemble (from 0)")
    _store_flag(p)
    p.set_defaults(run=_export)


def _import(args: argparse.Namespace) -> int:
    fmt = args.format or format_of(args.file)
    if fmt not in IMPORT_FORMATS:
        raise UsageError(f"cannot tell the format of {args.file!r} from its extension; give --format bif or xmlbif")
    _check_publish_flags(args)
    return _publish(args, read_model(args.file, fmt, args.class_name, args.max_cpt_cells))


def _export(args: argparse.Namespace) -> int:
    fmt = args.format or (format_of(args.out) if args.out else None)
    if fmt not in EXPORT_FORMATS:
        where = f"the extension of {args.out!r}" if args.out else "stdout"
        raise UsageError(f"give --format bif, xmlbif or dot (it cannot be told from {where})")
    name, version, alias = _parse_ref(args.ref)
    with _open_store(args) as store:
        mv = store.load(name, version=version, alias=alias)
    text = write_model(mv.model, fmt, mv.name, args.network)  # all of it before anything is written
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        raise InvalidInput(f"cannot write {args.out}: {exc.strerror or exc}") from None
    print(f"wrote {name} version {mv.version} as {fmt} to {args.out}")
    return 0
