"""Model files other tools read and write: BIF and XMLBIF both ways, Graphviz DOT out.

One module per format (``bif``, ``xmlbif``, ``dot``); ``interchange`` holds the import
rules and export helpers BIF and XMLBIF share. This module only picks the module, imported
when a file is read or written: ``trainer``'s flags read the names here without numpy.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from bnserve.store.errors import InvalidInput
from bnserve.trainer.learners.sizing import CPT_CELLS_FLAG, DEFAULT_MAX_CPT_CELLS

if TYPE_CHECKING:
    from bnserve.store.model import Model

__all__ = [
    "CPT_CELLS_FLAG",
    "DEFAULT_MAX_CPT_CELLS",
    "EXPORT_FORMATS",
    "IMPORT_FORMATS",
    "format_of",
    "read_model",
    "write_model",
]

IMPORT_FORMATS = ("bif", "xmlbif")
EXPORT_FORMATS = ("bif", "xmlbif", "dot")
EXTENSIONS = {".bif": "bif", ".xml": "xmlbif", ".xmlbif": "xmlbif", ".bifxml": "xmlbif", ".dot": "dot", ".gv": "dot"}


def format_of(path: str | Path) -> str | None:
    """The format a file name's extension stands for, or None."""
    return EXTENSIONS.get(Path(path).suffix.lower())


def read_model(
    path: str | Path, fmt: str, class_name: str | None, max_cpt_cells: int | None = DEFAULT_MAX_CPT_CELLS
) -> Model:
    """Import a BIF or XMLBIF file as a one-network model (see ``interchange.to_model``); a CPT
    of more than ``max_cpt_cells`` probabilities (None: any) is refused before it is built."""
    from bnserve.trainer.formats.bif import read_bif
    from bnserve.trainer.formats.xmlbif import read_xmlbif

    reader = {"bif": read_bif, "xmlbif": read_xmlbif}[fmt]
    return reader(path, class_name, max_cpt_cells)


def write_model(model: Model, fmt: str, name: str, network: int | None = None) -> str:
    """The model as text in ``fmt``; ``network`` picks one member of an ensemble."""
    from bnserve.store.model import SINGLE
    from bnserve.trainer.formats.bif import write_bif
    from bnserve.trainer.formats.dot import write_dot
    from bnserve.trainer.formats.interchange import single_network
    from bnserve.trainer.formats.xmlbif import write_xmlbif

    if fmt == "dot":
        if network is not None:
            _, net = single_network(model, network, fmt)
            model = dataclasses.replace(model, networks=(net,), combination=SINGLE)
        return write_dot(model, name)
    derived = [v for v in model.features if v.projection is not None]
    if derived:  # Weka and pgmpy, which read these files, would take its states with no way to compute them
        inputs = ", ".join(map(repr, derived[0].projection.inputs))  # type: ignore[union-attr]
        raise InvalidInput(
            f"feature {derived[0].name!r} is derived from {inputs} (--projections lda): {fmt} has no such "
            "variable, so the model cannot be exported to it; train it with --projections none, or draw it with --format dot"
        )
    writer = {"bif": write_bif, "xmlbif": write_xmlbif}[fmt]
    return writer(model, name, network)
