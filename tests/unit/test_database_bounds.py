"""The server's side of the database bound (nexus/db/bounds.py): settings derived from the
timeout, sent in libpq's `options` ahead of the user's own."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import make_url

from nexus.db.bounds import (
    KEEPALIVE_PROBES,
    connect_args,
    given_options,
    later_settings,
    merge_options,
    named_settings,
    server_options,
    server_settings,
)


@pytest.mark.parametrize("timeout_s", [0.5, 2.0, 30.0, 45.5])
def test_the_server_gives_up_on_a_silent_client_within_the_bound(timeout_s: float) -> None:
    settings = server_settings(timeout_s)
    assert settings["idle_in_transaction_session_timeout"] == int(timeout_s * 1000)
    assert settings["tcp_keepalives_count"] == KEEPALIVE_PROBES
    probed_s = (
        settings["tcp_keepalives_idle"]
        + settings["tcp_keepalives_interval"] * (settings["tcp_keepalives_count"])
    )
    # Whole seconds, each rounded up: at most a second over for the idle time and each probe.
    assert probed_s <= timeout_s + 1 + KEEPALIVE_PROBES
    assert not any("statement" in name for name in settings)  # a long query is left alone


def test_the_default_bound_in_settings() -> None:
    assert server_settings(30) == {
        "idle_in_transaction_session_timeout": 30_000,
        "tcp_keepalives_idle": 15,
        "tcp_keepalives_interval": 5,
        "tcp_keepalives_count": 3,
    }
    assert server_options(30) == (
        "-c idle_in_transaction_session_timeout=30000 -c tcp_keepalives_idle=15 "
        "-c tcp_keepalives_interval=5 -c tcp_keepalives_count=3"
    )


def test_newer_settings_only_for_a_server_that_knows_them() -> None:
    assert later_settings(30, 110_022) == {}
    assert later_settings(30, 130_015) == {"tcp_user_timeout": 30_000}
    assert later_settings(30, 150_020) == {
        "tcp_user_timeout": 30_000,
        "client_connection_check_interval": 5_000,
    }


def test_the_users_options_come_after_ours_so_that_theirs_win() -> None:
    ours = server_options(2)
    assert merge_options(ours, None) == ours
    assert merge_options(ours, "  ") == ours
    theirs = "-c idle_in_transaction_session_timeout=0 -c search_path=nexus"
    assert merge_options(ours, theirs) == f"{ours} {theirs}"
    assert connect_args(2, options=theirs)["options"] == f"{ours} {theirs}"
    assert connect_args(2)["options"] == ours


def test_the_users_options_are_read_from_the_url_or_else_pgoptions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PGOPTIONS", "-c work_mem=64MB")
    url = make_url("postgresql+psycopg://u@h/db?options=-c%20search_path%3Dnexus")
    assert given_options(url.query) == "-c search_path=nexus"  # libpq ignores PGOPTIONS then
    twice = make_url("postgresql+psycopg://u@h/db?options=-c%20a%3D1&options=-c%20b%3D2")
    assert given_options(twice.query) == "-c a=1 -c b=2"
    assert given_options(make_url("postgresql+psycopg://u@h/db").query) == "-c work_mem=64MB"
    monkeypatch.delenv("PGOPTIONS")
    assert given_options(make_url("postgresql+psycopg://u@h/db").query) is None


def test_the_settings_the_users_options_name_are_not_set_after_connecting() -> None:
    options = "-c tcp_user_timeout=0 -cwork_mem=64MB --client-connection-check-interval=0 -c"
    assert named_settings(options) == {
        "tcp_user_timeout",
        "work_mem",
        "client_connection_check_interval",
    }
    assert named_settings(None) == set()
    assert named_settings("-c search_path") == set()  # no value: libpq would refuse it anyway
