"""Settings: the public names, defaults for the embedded mode, clear errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from nexus.db import Database
from nexus.db.database import DatabaseDriverMissing, build_engine, normalize_database_url
from nexus.settings import DEFAULT_DATABASE_URL, Settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (
        "NEXUS_DATABASE_URL",
        "NEXUS_REDIS_URL",
        "NEXUS_BROKER_URL",
        "NEXUS_MODEL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no developer's .env leaks in


def test_embedded_defaults_need_nothing() -> None:
    settings = Settings()
    assert settings.database_url == DEFAULT_DATABASE_URL
    assert settings.redis_url is None
    assert settings.embedded
    assert settings.broker_url == "memory://"
    assert settings.default_model == "scripted"


def test_broker_follows_redis_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEXUS_REDIS_URL", "redis://cache:6379/0")
    assert Settings().broker_url == "redis://cache:6379/0"
    monkeypatch.setenv("NEXUS_BROKER_URL", "redis://broker:6379/1")
    assert Settings().broker_url == "redis://broker:6379/1"
    assert not Settings().embedded


def test_api_key_switches_the_default_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    settings = Settings()
    assert settings.default_model == "claude-sonnet-4-5"
    assert "sk-ant-test" not in repr(settings)  # secrets never print
    monkeypatch.setenv("NEXUS_MODEL", "claude-opus-4-1")
    assert Settings().default_model == "claude-opus-4-1"


def test_env_file_is_read(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("NEXUS_REDIS_URL=redis://from-dotenv:6379/0\n")
    assert Settings().redis_url == "redis://from-dotenv:6379/0"


def test_a_database_url_without_scheme_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEXUS_DATABASE_URL", "nexus.db")
    with pytest.raises(
        ValidationError, match="NEXUS_DATABASE_URL must be a SQLAlchemy URL"
    ) as raised:
        Settings()
    # The message names what was given, not a template placeholder.
    assert "got 'nexus.db'" in str(raised.value)
    assert "{value" not in str(raised.value)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        # No driver named: psycopg 3, the default.
        ("postgres://u@h/db", "postgresql+psycopg://u@h/db"),
        ("postgresql://u@h/db", "postgresql+psycopg://u@h/db"),
        # A driver named is the driver used.
        ("postgresql+psycopg2://u@h/db", "postgresql+psycopg2://u@h/db"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg://u@h/db"),
        ("sqlite:///./x.db", "sqlite:///./x.db"),
    ],
)
def test_a_postgres_url_keeps_the_driver_it_names(given: str, expected: str) -> None:
    assert normalize_database_url(given) == expected


@pytest.mark.parametrize(
    ("url", "package", "install"),
    [
        ("postgresql+psycopg2://u@h/db", "psycopg2", "nexus-broker[psycopg2]"),
        ("postgresql://u@h/db", "psycopg", "psycopg[binary]"),
    ],
)
def test_a_driver_that_is_not_installed_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, url: str, package: str, install: str
) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # as if it were not installed
    for build in (Database, build_engine):
        with pytest.raises(DatabaseDriverMissing) as raised:
            build(url)
        message = str(raised.value)
        assert f"the {package} driver" in message and install in message, message
