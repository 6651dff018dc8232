"""Which store URL is used, and what an unusable one does (without leaking its password)."""

from __future__ import annotations

import logging
import re

import pytest

from bnserve.store.db import DEFAULT_STORE_URL, STORE_URL_ENV, STORE_URL_FILE_ENV, ModelStore, resolve_store_url
from bnserve.store.errors import InvalidInput, StoreUnavailable


def test_the_flag_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv(STORE_URL_ENV, "sqlite:///from-env.db")
    assert resolve_store_url("sqlite:///from-flag.db") == "sqlite:///from-flag.db"


def test_the_environment_wins_over_the_default(monkeypatch):
    monkeypatch.setenv(STORE_URL_ENV, "sqlite:///from-env.db")
    assert resolve_store_url(None) == "sqlite:///from-env.db"


def test_the_default_is_a_sqlite_file_in_the_working_directory(monkeypatch):
    monkeypatch.delenv(STORE_URL_ENV, raising=False)
    assert resolve_store_url(None) == DEFAULT_STORE_URL == "sqlite:///bnserve.db"
    monkeypatch.setenv(STORE_URL_ENV, "")
    assert resolve_store_url("") == DEFAULT_STORE_URL


@pytest.mark.parametrize("url", ["not a url", "nosuchdb://u:hunter2@host/x"])
def test_an_unusable_url_is_invalid_input_without_its_password(url, caplog):
    with caplog.at_level(logging.DEBUG), pytest.raises(InvalidInput, match="store URL") as raised:
        ModelStore(url)
    assert "hunter2" not in raised.value.message and "hunter2" not in caplog.text


def test_an_unreachable_database_is_unavailable_without_its_password(caplog):
    url = "postgresql+psycopg://someone:hunter2@127.0.0.1:1/nowhere?connect_timeout=2"
    redacted = re.escape("someone:***@127.0.0.1:1")
    with caplog.at_level(logging.DEBUG), pytest.raises(StoreUnavailable, match=redacted) as raised:
        ModelStore(url)
    assert "hunter2" not in raised.value.message and "hunter2" not in caplog.text


def test_the_url_may_come_from_a_file_a_mounted_secret(monkeypatch, tmp_path):
    monkeypatch.delenv(STORE_URL_ENV, raising=False)
    path = tmp_path / "url"
    path.write_text("  sqlite:///from-file.db\n")
    monkeypatch.setenv(STORE_URL_FILE_ENV, str(path))
    assert resolve_store_url(None) == "sqlite:///from-file.db"
    monkeypatch.setenv(STORE_URL_ENV, "sqlite:///from-env.db")
    assert resolve_store_url(None) == "sqlite:///from-env.db"  # the variable wins over the file
    monkeypatch.delenv(STORE_URL_ENV)
    path.write_text("\n")
    with pytest.raises(InvalidInput, match="the file is empty"):
        resolve_store_url(None)
    monkeypatch.setenv(STORE_URL_FILE_ENV, str(tmp_path / "absent"))
    with pytest.raises(InvalidInput, match="cannot read the store URL"):
        resolve_store_url(None)


def test_a_password_on_the_command_line_is_used_with_a_warning_that_does_not_repeat_it(caplog):
    with caplog.at_level(logging.WARNING):
        assert resolve_store_url("postgresql+psycopg://u:hunter2@h/db") == "postgresql+psycopg://u:hunter2@h/db"
    assert "process list" in caplog.text and "hunter2" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        resolve_store_url("sqlite:///plain.db")
    assert caplog.text == ""
