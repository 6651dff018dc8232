"""The ``trainer`` parser, one subparser per subcommand module, and ``main``."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from bnserve.process_exit import exit_with
from bnserve.store.errors import BnServeError
from bnserve.store.model.names import shown
from bnserve.store.version import VersionAction
from bnserve.trainer.cli import aliases, catalog, db, evaluate, fit, keys, predict, transfer
from bnserve.trainer.cli.flags import (
    PROG,
    UsageError,
    _Parser,
)
from bnserve.trainer.io import redacted_urls
from bnserve.trainer.progress import noting, reporting, terminal_bars


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Learn Bayesian network classifiers and publish them to the model store.")
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    fit.add_fit(sub)
    predict.add_predict(sub)
    evaluate.add_evaluate(sub)
    catalog.add_list(sub)
    catalog.add_show(sub)
    aliases.add_alias(sub)
    aliases.add_unalias(sub)
    aliases.add_delete(sub)
    transfer.add_import(sub)
    db.add_db(sub)
    transfer.add_export(sub)
    keys.add_keygen(sub)
    return parser


def _safe(text: str) -> str:
    """A message as the terminal may show it: data URLs without their secrets, control and
    bidirectional characters escaped (a value a message quotes comes from a file or the store)."""
    return shown(redacted_urls(text))


def _on_stderr(text: str) -> None:
    """A note (``progress.note``: auto skipping a candidate, a file read whole) on stderr."""
    print(f"{PROG}: note: {_safe(text)}", file=sys.stderr)


def _silent(text: str) -> None:
    """--quiet: no notes."""


class Terminated(BaseException):
    """SIGTERM, raised where the command is, so that what it was writing is cleaned up as on
    Ctrl-C (``trainer predict --out``'s partial file)."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated


def run() -> NoReturn:
    """The ``trainer`` console script: ``main``, then the process ends without the garbage
    collector's last passes (``bnserve.process_exit``)."""
    exit_with(main)


def main(argv: Sequence[str] | None = None) -> int:
    on_main_thread = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, _on_sigterm) if on_main_thread else None
    try:
        args = build_parser().parse_args(argv)
        quiet = getattr(args, "quiet", False)
        with reporting(None if quiet else terminal_bars()), noting(_silent if quiet else _on_stderr):
            return args.run(args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    except Terminated:
        print(f"{PROG}: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except UsageError as exc:
        print(f"{PROG}: usage error: {_safe(str(exc))}", file=sys.stderr)
        return 2
    except BnServeError as exc:
        print(f"{PROG}: error: {_safe(exc.message)}", file=sys.stderr)
        return 1
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    except BrokenPipeError:  # `trainer show … | head`: the reader left; not an error
        sys.stdout = open(os.devnull, "w")
        return 0
    except MemoryError:  # past a limit set to none, or a machine too small for the data
        print(f"{PROG}: error: out of memory; nothing was published", file=sys.stderr)
        return 1
    finally:
        if on_main_thread:
            signal.signal(signal.SIGTERM, before)
