"""Shared fixtures for the trainer tests."""

import pytest

from trainer.data import EncodedData, load


@pytest.fixture(scope="session")
def chess() -> EncodedData:
    return load("builtin:chess")
