"""Secrets in data URLs never reach the terminal: the real ``trainer`` command, given URLs
that fail (an unreachable FTP server, a scheme with no package, a missing file, a pattern
matching nothing), names them with the password and the signature hidden."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bnserve.trainer.io import redacted_url, redacted_urls

TRAINER = str(Path(sys.executable).parent / "trainer")
SECRET = "S3cr3tVALUE"


def trainer(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([TRAINER, *argv], capture_output=True, text=True, timeout=120)


URLS = [
    f"ftp://reader:{SECRET}@127.0.0.1:1/data/train.csv",  # nothing listens on port 1
    f"https://example.invalid/train.csv?sv=2024&sig={SECRET}",  # no package for https here, or no host
    f"https://reader:{SECRET}@example.invalid/train.csv?X-Amz-Signature={SECRET}&X-Amz-Credential={SECRET}",
    f"nosuchscheme://reader:{SECRET}@host/train.csv?token={SECRET}",
    f"memory://reader:{SECRET}@/missing/train.csv?access_token={SECRET}",
    f"memory://reader:{SECRET}@/missing/*.csv?api_key={SECRET}",
]


@pytest.mark.parametrize("url", URLS)
def test_fit_on_a_url_that_fails_shows_no_secret(url, tmp_path):
    done = trainer(
        "fit", "--algo", "nb", "--data", url, "--class", "c", "--name", "m", "--store", f"sqlite:///{tmp_path}/m.db"
    )
    assert done.returncode == 1, done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert "***" in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr


def test_evaluate_and_predict_show_no_secret(tmp_path):
    url = URLS[0]
    done = trainer("evaluate", "--data", url, "--class", "c", "--algo", "nb")
    assert done.returncode == 1 and SECRET not in done.stdout + done.stderr, done.stderr
    store = f"sqlite:///{tmp_path}/m.db"
    assert (
        trainer(
            "fit", "--algo", "nb", "--data", "builtin:chess", "--class", "class", "--name", "m", "--store", store
        ).returncode
        == 0
    )
    done = trainer("predict", "m", "--data", url, "--store", store)
    assert done.returncode == 1 and SECRET not in done.stdout + done.stderr, done.stderr
    assert "ftp://reader:***@127.0.0.1:1/data/train.csv" in done.stderr


def test_the_rule_keeps_host_path_and_plain_parameters():
    assert redacted_url("s3://bucket/key.csv") == "s3://bucket/key.csv"
    assert redacted_url("data/train.csv") == "data/train.csv"
    assert (
        redacted_url("https://u:p@ss@h:8443/a.csv?v=1&sig=x&Key=y#f")
        == "https://u:***@h:8443/a.csv?v=1&sig=***&Key=***#f"
    )
    assert redacted_url("ftp://u:pa/ss@h/x.csv") == "ftp://u:***@h/x.csv"  # an unencoded '/' hides no tail
    assert redacted_urls("cannot open 'ftp://u:pw@h/x': refused.") == "cannot open 'ftp://u:***@h/x': refused."
