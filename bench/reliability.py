"""Run the fault tests and the load test, and write docs/reliability.md from their figures.

    python bench/reliability.py [--quick] [--out docs/reliability.md]

1. The fault tests (the ones listed in ``FAULT_TESTS``, as CI runs them, on SQLite and
   PostgreSQL with ``BNSERVE_REQUIRE_POSTGRES=1``) through pytest, with
   ``BNSERVE_RELIABILITY_JSON`` set: each appends its counts (``tests/reliability.py``).
2. ``bench/load.py``: 8 and 32 streams, 3 minutes each (``--quick``: 10 s each).
3. ``docs/reliability.md`` (and ``docs/reliability.json``, every figure): the command, the
   machine, when, and per test what was injected, sent, failed and lost.

Exit code 1 when a test failed or the load test did not hold; the document is written
either way and says so. About 9 minutes on 2 cores (``--quick``: about 3).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

if __package__ in (None, ""):  # run as a script: make the repository importable as ``bench``
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from bench import load

ROOT = pathlib.Path(__file__).resolve().parents[1]
FAULT_TESTS = (
    "tests/e2e/test_store_outage.py",
    "tests/e2e/test_refused_versions.py",
    "tests/store/test_kill_publish.py",
    "tests/store/test_concurrency.py",
    "tests/e2e/test_alias_under_load.py",
    "tests/e2e/test_drain_under_load.py",
    "tests/bench/test_load.py",
    "tests/server/test_hostile_clients.py",
    "tests/e2e/test_missing_patterns_memory.py",
    "tests/server/test_infer_shapes.py",
    "tests/e2e/test_isolated_refusals.py",
    "tests/e2e/test_loop_never_stops.py",
    "tests/e2e/test_forged_versions.py",
    "tests/e2e/test_store_loads_isolated.py",
    "tests/server/test_admission.py",
    "tests/e2e/test_memory_budget.py",
)
HOSTILE = "hostile: "  # the prefix of the hostile section's records
WHAT = {  # what each test injects and proves, by the name it records under
    "store outage while serving (PostgreSQL behind a cut TCP proxy)": "the proxy between server and PostgreSQL closes every connection and refuses new ones while 2 threads "
    "call Predict; version 2 is published meanwhile; then restored. No call fails, polls fail and are "
    "counted and logged (no password), version 2 is served after the restore",
    "server started against a dead store address": "`server serve` against a port nobody listens on: exits 1 at once, naming the store (password hidden)",
    "versions refused at load (checksum, validation) while serving": "a version with a flipped CPT byte (aliased production in its transaction) and one whose CPT does not "
    "sum to 1, written while 2 threads call by alias: both refused, counted and logged; production keeps "
    "answering from version 1; a good version 4 then serves",
    "publisher SIGKILLed at a random moment": "a process publishing a 1,000-feature model, SIGKILLed after a random delay (0 to 2x the publish time); "
    "after each kill every version has all its rows, loads, passes its checksums and compiles",
    "concurrent publishers (processes) of one model": "4 processes publish 2 versions each at once: distinct, gap-free numbers, each version complete",
    "alias moves under load (4 client threads by alias production)": "versions 2..7 published and production moved among them (and rolled back) while 4 threads call by "
    "alias: no failure; every answer from a version aliased production, with that version's probabilities",
    "SIGTERM under load (--workers 1, 8 threads of 20,000-row batches)": "SIGTERM with 8 large calls in flight and a health Watch holding the drain to the 5 s grace: every "
    "call the server began is answered OK and reaches its client, the rest refused, health NOT_SERVING, exit 0",
    "SIGTERM under load, nothing holding the drain (--workers 1, 8 threads of 20,000-row batches)": "the same with no stream holding the drain: the process exits 0 as its last call ends, before "
    "the grace; that call's answer may be lost as the connections close (counted: answers_lost_at_close)",
    "SIGTERM under load, nothing holding the drain (--workers 2, 8 threads of 20,000-row batches)": "the same with 2 worker processes",
    "SIGTERM under load, grace 0.1 s run out (--workers 1, 8 threads of 100,000-row batches)": "a grace shorter than the calls: those still at work end UNAVAILABLE ('Cancelling all calls'), "
    "the others are answered, exit 0 within the grace + 2 s (handlers that linger are not waited for)",
    "SIGTERM under load, grace 0.1 s run out (--workers 2, 8 threads of 100,000-row batches)": "the same with 2 worker processes",
    "load, CI size (8 streams x 10 s)": "the CI-sized load test: no error, RSS growth under the bound",
    "hostile: 64 Health.Watch streams and 64 bodiless calls without a token": "a server with a token file and "
    "--threads 2; 4 connections hold 64 open Health.Watch streams and send 64 Predict calls with headers and "
    "never a body (refused UNAUTHENTICATED at their headers); meanwhile 200 authorised Predicts and 200 Health "
    "Checks are each answered within a 5 s deadline (the thread-pool server before grpc.aio froze at --threads "
    "held calls)",
    "hostile: store hangs while serving (PostgreSQL behind a stalled TCP proxy)": "the proxy forwards nothing "
    "(a network partition) while a call waits for a version not in memory, with --store-connect-timeout 2 and "
    "--store-statement-timeout 2: that call ends UNAVAILABLE within the timeouts; meanwhile calls for loaded "
    "versions (one held on demand) and health answer, the poll that hangs is warned about and counted "
    "(bnserve_store_poll_stalls_total); after the restore the version and a new one are served (before: every "
    "call and health waited behind the load's lock for as long as the store hung)",
    "hostile: store hangs while 8 clients ask for 4 versions not in memory (--threads 4)": "the proxy to "
    "PostgreSQL forwards nothing (--store-connect-timeout 3, --store-statement-timeout 3) while 8 client threads "
    "call for 4 versions not in memory, over and over, and one client calls for the resident production version "
    "with 64 rows (more than the loop answers itself: the --threads pool's work) for 6 s: each of those answers "
    "within 1 s (one late forgiven, at least 5 answered) and health says SERVING; the old versions end "
    "UNAVAILABLE at the timeouts and load after the restore. Loads run on --store-threads, their callers wait "
    "on the event loop holding no thread (before: the waiting calls took all 4 threads, and the production "
    "calls took 3.0 and 5.6 s, 2 answered in the 6 s; issue 27 measured 9 to 10 s with the defaults)",
    "hostile: calls beyond --max-load-waiters 2 and beyond 4 pending loads (--store-threads 1), store hung": "with "
    "the proxy stalled, a call for version 1 whose 0.5 s deadline passes while it waits frees its place "
    "(bnserve_version_load_waiters); 2 calls wait for version 1 and one each for versions 2, 3 and 4; a third call for "
    "version 1 and a call for version 5 are refused UNAVAILABLE, naming the flag, while those 5 still wait "
    "(counted in bnserve_version_calls_shed_total); after the restore the 5 are answered from 4 loads (before: "
    "no bound, each waiting call held a --threads thread)",
    "hostile: round-robin over 20 versions not in memory (10 rounds, one client)": "21 versions of one model "
    "on SQLite, versions 1 to 20 asked for in turn, 10 rounds: each read from the store once "
    '(bnserve_model_load_seconds_count and bnserve_version_loads_total{result="loaded"}), kept within the '
    "default --version-cache-bytes (before: the cache held 16 versions, so every call read the store: 200 "
    "reads for 200 calls, 257 calls/s against 415 now; issue 27 measured 907 to 239 calls/s)",
    "hostile: one bad version among good ones (JSON nested 200,000 deep; passes validation, fails to compile)": "a "
    "running server follows a store where model a gains a version whose params_json is nested 200,000 deep "
    "(production moved to it) and one that fails to compile, while model b gains a good version: both refused "
    "alone (logged, counted, FAILED_PRECONDITION), production stays at the last good version, b serves its new "
    "version, a fresh server becomes SERVING, `trainer show` prints one line (before: every model stopped "
    "following the store and a fresh server never became SERVING)",
    "hostile: 1,000 distinct missing patterns (KDB k=3, 20 x 12 states)": "`server serve --plan-cache-bytes 16 MiB`; "
    "1,000 single-row Predicts, each with its own random 30 % of features missing, then one 1,000-row request of "
    "such rows: every one answered OK; RSS growth under the budget + 32 MiB (76 MiB without the budget) "
    "(before: 150 such rows took the server from 114 MB to 1.35 GB, the 1,000-row request failed INTERNAL)",
    "hostile: ModelInfer BYTES tensor of shape [300,000] against --max-rows 1000": "rows counted from the "
    "whole shape: RESOURCE_EXHAUSTED before any element is decoded, peak traced memory under 4x the message "
    "(issue 17: shape [1, 300,000] was counted from shape[0] = 1, every element decoded, then INVALID_ARGUMENT; "
    "that shape is now refused as one no model takes)",
    "hostile: ModelInfer BYTES input of shape [1] with 4,000,000 empty raw elements": "a 16 MB raw entry for one "
    "element, sent while another connection polls Health.Check with a 250 ms deadline: INVALID_ARGUMENT after "
    "reading one element, health checks in time, at most one late on a loaded machine (before: every element split on the event loop, 16M of them "
    "5.5 s, health waiting as long)",
    "hostile: ModelInfer with 300,000 one-element inputs": "INVALID_ARGUMENT naming the cap (one input per "
    "feature, plus one) before any input is read, 250 ms health checks in time, at most one late (before: each input decoded "
    "on the loop, 2.7 s)",
    "hostile: dense Predict with 2,000,000 feature names": "a dense batch naming the model's 3 features over and "
    "over: INVALID_ARGUMENT before any name is looked up, 250 ms health checks in time, at most one late (before: every name "
    "looked up on the loop; 7M took 3 s). Parsing the message is still on the loop: about 80 ms per million names",
    "hostile: versions forged by writing the store (a CPT with checksums recomputed, description, tags, replay, "
    "unsigned, another key)": "`trainer keygen` and `trainer fit --signing-key` publish version 1; six versions are "
    "written straight into the tables, production moved to each: a CPT changed with every checksum recomputed and "
    "version 1's signature, a signed version with its description changed, one with a tag added, version 1 replayed "
    "as a new number, one unsigned, one signed by another key. `server serve --verify-key` refuses all six (logged "
    "naming the version and why, counted, FAILED_PRECONDITION), production keeps answering from version 1 to a "
    "client calling by alias, a new signed version then serves; `trainer show --verify-key` fails in one line on a "
    "forgery. Before (and still without --verify-key: served_without_key): a server serves all six",
    "hostile: calls with 6 KiB and 1 MiB of metadata against --max-metadata-bytes 4096": "RESOURCE_EXHAUSTED on "
    "the headers, every time; 1 KiB answered (before: no limit of bnserve's own; grpc's default 8 KiB soft limit "
    "refuses only some calls up to its 16 KiB hard limit)",
    "hostile: 8 concurrent 3.8 MiB packed-integer Predicts against --max-inflight-bytes 200 MiB": "8 connections "
    "send at once a valid 100,000-row dense Predict of 4 million one-byte codes (about 40 MB once parsed), while "
    "another calls single-row Predicts: the server's peak RSS (VmHWM) grows by less than the budget + 96 MiB, the "
    "calls past the budget are RESOURCE_EXHAUSTED before they are parsed, every small call is answered, and RSS "
    "is back within 64 MiB of its level before the burst within 10 s (before: 498 MiB growth, every call parsed "
    "at once; 152 MiB still held after the burst without malloc_trim)",
    "hostile: 32 bodiless calls without a token": "a server with a token file; 32 Predict calls send headers "
    "without a token and never a body: all UNAUTHENTICATED at their headers, an authorised call answered (before: "
    "each held until its body came, for as long as the client liked, its headers with it)",
    "hostile: 32 bodiless calls against --body-seconds 1": "32 Predict calls send headers and never a body: all "
    "end DEADLINE_EXCEEDED, naming --body-seconds, between 1 and 5 s after they began; a Predict on the same "
    "connection is answered (before: held for as long as the client liked)",
    "hostile: 4 connections holding 32 bodiless calls against --max-connections 4": "4 connections hold 8 "
    "bodiless calls each; 20 Predicts from a fifth connection are RESOURCE_EXHAUSTED at their headers, naming "
    "--max-connections, while a Health.Check from it answers SERVING; once the held calls end, the fifth is "
    "answered (before: no cap on connections)",
    "hostile: 32 connections x 100 bodiless calls with 14 KiB of headers against --max-connections 4": "a "
    "`server serve --max-connections 4 --body-seconds 10`; 3,200 calls send 14 KiB of headers and never a body: "
    "the calls of 4 connections are held and end DEADLINE_EXCEEDED at 5 s, the rest RESOURCE_EXHAUSTED at their "
    "headers; RSS grows by less than 4 x 100 x 39 KiB + 32 MiB (before: 121 MiB, every call held, ~39 KiB each, "
    "for as long as the client liked)",
}


def run_fault_tests(json_path: pathlib.Path) -> tuple[int, float, str]:
    env = {**os.environ, "BNSERVE_RELIABILITY_JSON": str(json_path), "BNSERVE_REQUIRE_POSTGRES": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *FAULT_TESTS]
    t0 = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    summary = (done.stdout.strip().splitlines() or [""])[-1]
    if done.returncode != 0:
        print(done.stdout[-5000:], done.stderr[-2000:], file=sys.stderr)
    return done.returncode, time.monotonic() - t0, summary


def rows(tests: list[dict]) -> list[str]:
    """One table row per recorded test: its counts, then its other figures."""
    common = {"test", "backend", "at", "faults", "requests", "errors", "versions", "lost"}
    out = []
    for t in tests:
        other = "; ".join(f"{k}: {cell(v)}" for k, v in sorted(t.items()) if k not in common)
        out.append(
            f"| {t['test']} | {t['backend']} | {WHAT.get(t['test'], '')} | {cell(t.get('faults'))} | "
            f"{cell(t.get('requests'))} | {cell(t.get('errors'))} | {cell(t.get('versions'))} | "
            f"{cell(t.get('lost'))} | {other} |"
        )
    return out


def cell(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "—"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int):
        return f"{value:,}"
    return "—" if value is None else str(value)


def render(
    command: str,
    tests: list[dict],
    tests_rc: int,
    tests_seconds: float,
    tests_summary: str,
    result: dict,
    load_seconds: float,
) -> str:
    faults = sum(t.get("faults", 0) for t in tests)
    requests = sum(t.get("requests", 0) for t in tests) + result["requests"]
    versions = sum(t.get("versions", 0) for t in tests)
    lost = sum(t.get("lost", 0) for t in tests)
    held = tests_rc == 0 and result["ok"]
    out = [
        "# Reliability",
        "",
        f"Written by `{command}` on {time.strftime('%Y-%m-%d %H:%M %Z')}, on {platform.node() or 'this machine'} "
        f"({os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}). "
        "Rerun it to refresh every figure below; nothing here is typed by hand.",
        "",
        f"**{'Every check held' if held else 'NOT every check held: see below'}.** "
        f"Faults injected: {faults:,}; requests sent: {requests:,}; versions published: {versions:,}; "
        f"data lost: {lost} (answers lost, wrong or from a version not asked for, versions incomplete or "
        "corrupt; every test asserts zero).",
        "",
        "## Fault tests",
        "",
        f"`pytest {' '.join(FAULT_TESTS)}` with `BNSERVE_RELIABILITY_JSON` set and PostgreSQL required: "
        f"{tests_summary} ({tests_seconds:.0f} s). Each row is one test on one backend; `requests` counts every "
        "call sent, and `errors` the calls that failed where the test says none may.",
        "",
        "| test | backend | what is injected and asserted | faults | requests | errors | versions | lost | other figures |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    out += rows([t for t in tests if not t["test"].startswith(HOSTILE)])
    out += [
        "",
        "## Hostile clients, models and files",
        "",
        "Each attack of issues 17 and 27, bounded and on loopback, from the same run: the row names it and its figure.",
        "",
        "| test | backend | what is injected and asserted | faults | requests | errors | versions | lost | other figures |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    out += rows([t for t in tests if t["test"].startswith(HOSTILE)])
    phases = result["phases"]
    out += [
        "",
        "## Load",
        "",
        f"`bench/load.py` ({load_seconds:.0f} s): one `server serve` process (KDB k = 2, 50 features, 3 classes, "
        f"SQLite store), one client process per phase with N threads on their own TCP connections calling "
        f"Predict back to back: {100 - 100 * result['batch_share']:.0f} % single rows, "
        f"{100 * result['batch_share']:.0f} % batches of {result['batch_rows']} rows, every answer checked. "
        f"{result['seconds']:.0f} s per phase after a {result['warmup']:.0f} s warm-up. Latency is the client's, "
        "with client and server sharing the machine's cores: reported, not judged.",
        "",
        load.table(result),
        "",
        f"Server RSS: {result['rss_at_start_mib']:.1f} MiB once serving, {result['rss_after_warmup_mib']:.1f} MiB "
        f"after the warm-up, {result['rss_end_mib']:.1f} MiB at the end: growth "
        f"**{result['rss_growth_mib']:+.1f} MiB** over {sum(p['requests'] for p in phases):,} requests "
        f"(bound: {result['rss_bound_mib']:.0f} MiB). Errors: **{result['errors']}**. "
        f"{'Held' if result['ok'] else '**Did not hold**'}.",
        "",
        "## What the tests prove, and what they do not",
        "",
        "- A store outage never fails a call: the loaded models keep answering, the failed polls show in "
        "`bnserve_store_poll_errors_total` and a WARNING per poll, and the server catches up on the first "
        "poll after the store is back. A server started while the store is unreachable exits 1 (it does not "
        "start NOT_SERVING and wait); a supervisor restarts it.",
        "- The cut proxy closes connections (a database that is down or restarting); the stalled one forwards "
        "nothing (a network partition). While the store hangs, only the calls that need it (a version not in "
        "memory) wait, and the store timeouts (`--store-connect-timeout`, `--store-statement-timeout`) end "
        "that wait with UNAVAILABLE; no lock is held across a store call, so the others and health answer, "
        "and a poll running longer than `--poll-stall-seconds` is logged and counted. Loads run on threads "
        "of their own (`--store-threads`) and their callers wait holding no thread, so a hung store never "
        "takes the `--threads` pool from calls for versions in memory; the calls that may wait are bounded "
        "(`--max-load-waiters` per version, 4 loads per store thread), beyond them UNAVAILABLE at once.",
        "- A refused version is never served; an alias moved to it stays at the version it named before "
        "while the server holds that one. A server started after the bad publish has nothing to fall back "
        "on for that alias and answers FAILED_PRECONDITION for it.",
        "- Publishing is one transaction: a publisher killed at any moment leaves the version either complete "
        "or absent, never partial, on both backends.",
        "- On SIGTERM every call the server began is answered; calls it had not begun are refused "
        "(UNAVAILABLE) or, for calls its transport had taken but the Python server had not yet picked up, "
        "reset by grpc (CANCELLED). Clients should retry both. The exit comes after in-flight calls end, "
        "or at the grace when a stream (e.g. a health Watch) stays open.",
        "",
    ]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the load test's quick form (10 s per phase)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "reliability.md"))
    args = parser.parse_args()
    command = "python bench/reliability.py" + (" --quick" if args.quick else "")
    with tempfile.TemporaryDirectory(prefix="bnserve-reliability-") as tmp:
        json_path = pathlib.Path(tmp) / "figures.jsonl"
        json_path.touch()
        tests_rc, tests_seconds, summary = run_fault_tests(json_path)
        tests = [json.loads(line) for line in json_path.read_text().splitlines() if line.strip()]
    print(f"fault tests: {summary} ({tests_seconds:.0f} s)")
    form = load.QUICK if args.quick else load.FULL
    t0 = time.monotonic()
    result = load.run(**form)
    load_seconds = time.monotonic() - t0
    print(load.table(result))
    out = pathlib.Path(args.out)
    out.write_text(render(command, tests, tests_rc, tests_seconds, summary, result, load_seconds))
    out.with_suffix(".json").write_text(
        json.dumps(
            {"command": command, "fault_tests": tests, "fault_tests_exit_code": tests_rc, "load": result}, indent=2
        )
        + "\n"
    )
    print(f"wrote {out} and {out.with_suffix('.json')}")
    return 0 if tests_rc == 0 and result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
