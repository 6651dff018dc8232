"""Names, labels, descriptions and tags never reach a terminal raw: a model trained with the
real ``trainer`` on a crafted CSV (ESC, OSC, CR/LF, U+009B, U+202E, U+2066 in feature names,
class and state labels) is shown, listed, drawn and used to score with every control and
bidirectional character escaped; publishing a description or tag holding one is refused,
naming its code point."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bnserve.store.model.names import shown

TRAINER = str(Path(sys.executable).parent / "trainer")
RAW = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)  # \t, \n: the output's own
NAMES = ["\x1b]0;pwned\x07title", "a\r\nfake: line", "\x9b2J", "\u202ecls"]
STATES = ["\x1b[2Jclear", "x\u202eevil", "ok\rfake", "\x9bq"]


def trainer(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([TRAINER, *argv], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def crafted(tmp_path_factory) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("terminal")
    data = root / "crafted.csv"
    with open(data, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(NAMES)
        for i in range(60):
            w.writerow([STATES[i % 4], ["p", "q\u2066"][i % 2], str(i % 3), ["yes\x1b[31m", "no"][i % 5 == 0]])
    store = f"sqlite:///{root}/models.db"
    done = trainer("fit", "--algo", "tan", "--data", str(data), "--class", NAMES[3], "--name", "m", "--store", store)
    assert done.returncode == 0, done.stderr
    return store, data


@pytest.mark.parametrize(
    "argv",
    [["show", "m"], ["show", "m", "--dot"], ["show", "m", "--json"], ["list"], ["list", "--json"]],
    ids=" ".join,
)
def test_show_and_list_print_no_raw_control_character(crafted, argv):
    store, _ = crafted
    done = trainer(*argv, "--store", store)
    assert done.returncode == 0, done.stderr
    assert not RAW.search(done.stdout + done.stderr), ascii(done.stdout)
    if argv == ["show", "m"]:
        assert shown(NAMES[0]) in done.stdout and shown(STATES[1]) in done.stdout  # escaped, not dropped
        assert "\\x1b]0;pwned\\x07title" in done.stdout and "x\\u202eevil" in done.stdout


def test_predict_and_its_errors_print_no_raw_control_character(crafted, tmp_path):
    store, data = crafted
    done = trainer("predict", "m", "--data", str(data), "--out", str(tmp_path / "s.csv"), "--store", store)
    assert done.returncode == 0 and "scored 60 rows" in done.stderr, done.stderr
    assert not RAW.search(done.stdout + done.stderr)
    bad = tmp_path / "bad.csv"
    bad.write_text(",".join(f'"{n}"' for n in NAMES[:3]) + "\n\x1b[2Jnew\u202e,p,1\n")
    done = trainer("predict", "m", "--data", str(bad), "--unknown", "error", "--store", store)
    assert done.returncode == 1 and "unknown value" in done.stderr, done.stderr
    assert not RAW.search(done.stderr), ascii(done.stderr)


@pytest.mark.parametrize(
    "flag, value, named",
    [
        ("--description", "fine\n\tthen \u202eevil", "U+202E RIGHT-TO-LEFT OVERRIDE"),
        ("--description", "csi \x9b2J", "U+009B"),
        ("--description", "isolate \u2066x\u2069", "U+2066 LEFT-TO-RIGHT ISOLATE"),
        ("--tag", "k=v\u200f", "U+200F RIGHT-TO-LEFT MARK"),
        ("--tag", "k=\x1b]0;t\x07", "U+001B"),
    ],
)
def test_publishing_a_control_character_is_refused_naming_it(crafted, flag, value, named):
    store, _ = crafted
    done = trainer("fit", "--algo", "nb", "--data", "builtin:chess", "--class", "class", "--name", "n",
                   flag, value, "--store", store)  # fmt: skip
    assert done.returncode == 2 and f"the control character {named}" in done.stderr, done.stderr
    assert not RAW.search(done.stderr)


def test_a_description_keeps_its_newlines_and_tabs(crafted):
    store, _ = crafted
    done = trainer("fit", "--algo", "nb", "--data", "builtin:chess", "--class", "class", "--name", "d",
                   "--description", "first\n\tsecond", "--store", store)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "description: first\n  \tsecond\n" in trainer("show", "d", "--store", store).stdout


def test_an_imported_bif_file_is_shown_escaped(crafted, tmp_path):
    store, _ = crafted
    bif = tmp_path / "crafted.bif"
    bif.write_text(
        'network n {}\nvariable "\x1b]0;t\x07" { type discrete [ 2 ] { "a\x9b", "b\u202e" }; }\n'
        "variable cls { type discrete [ 2 ] { yes, no }; }\nprobability ( cls ) { table 0.5, 0.5; }\n"
        'probability ( "\x1b]0;t\x07" | cls ) { (yes) 0.5, 0.5; (no) 0.5, 0.5; }\n'
    )
    done = trainer("import", str(bif), "--class", "cls", "--name", "b", "--store", store)
    assert done.returncode == 0, done.stderr
    done = trainer("show", "b", "--store", store)
    assert done.returncode == 0 and "\\x1b]0;t\\x07  feature  a\\x9b, b\\u202e" in done.stdout, done.stdout
    assert not RAW.search(done.stdout + done.stderr)
