"""Which store URL is used, and what an unusable one does (without leaking its password)."""

from __future__ import annotations

import logging
import re

import pytest

from bnserve.store.db import (
    DEFAULT_STORE_URL,
    STORE_URL_ENV,
    STORE_URL_FILE_ENV,
    ModelStore,
    redacted,
    resolve_store_url,
)
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


@pytest.mark.parametrize(
    "url",
    [
        "not a url",
        "nosuchdb://u:hunter2@host/x",
        "u:hunter2@host",
        "host=h password=hunter2",
        "postgresql://u:hunter2@h:x/d",
    ],
)
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


@pytest.mark.parametrize(
    ("store", "shown"),
    [
        ("postgresql+psycopg://u:hunter2@h:5432/db", "postgresql+psycopg://u:***@h:5432/db"),
        ("postgresql+psycopg://u:hun%40ter2@h/db", "postgresql+psycopg://u:***@h/db"),
        ("postgresql+psycopg://u:hun@ter2@h/db", "postgresql+psycopg://u:***@h/db"),  # the tail is hidden too
        ("postgresql+psycopg://u:a/b?c@h/db", "postgresql+psycopg://u:***@h/db"),
        ("u:hunter2@h/db", "u:***@h/db"),  # no scheme
        ("host=h user=u password=hunter2 dbname=db", "host=h user=u password=*** dbname=db"),
        ("host=h password = 'hun ter2' dbname=db", "host=h password = *** dbname=db"),
        (
            "postgresql+psycopg://u@h/db?password=hun&ter2&sslmode=require",
            "postgresql+psycopg://u@h/db?password=***&sslmode=require",
        ),
        ("postgresql+psycopg://u@h/db?sslpassword=hunter2", "postgresql+psycopg://u@h/db?sslpassword=***"),
        ("postgresql+psycopg://u@h:5432/db", "postgresql+psycopg://u@h:5432/db"),
        ("sqlite:///bnserve.db", "sqlite:///bnserve.db"),
        ("not a url", "not a url"),
    ],
)
def test_any_store_string_is_shown_without_its_secrets(store, shown):
    assert redacted(store) == shown


def test_an_error_about_a_store_is_shown_without_the_store_secrets():
    store = "postgresql+psycopg://u:hun%40ter2@h/db?password=other"
    message = f"cannot use {store}: the server refused hun@ter2 (and other)"
    assert (
        redacted(store, message)
        == "cannot use postgresql+psycopg://u:***@h/db?password=***: the server refused *** (and ***)"
    )


def test_a_password_with_an_unencoded_at_is_refused_before_any_connection(caplog):
    with caplog.at_level(logging.DEBUG), pytest.raises(InvalidInput, match="%40") as raised:
        ModelStore("postgresql+psycopg://u:hun@ter2@127.0.0.1:1/db")
    assert "ter2" not in raised.value.message and "ter2" not in caplog.text
    assert "u:***@127.0.0.1:1/db" in raised.value.message
