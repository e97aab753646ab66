"""Which databases a scenario used, checked by the invariant checker when it ends."""

from __future__ import annotations

from dataclasses import dataclass, field

from nexus.db import Database
from tests.fakes.platform_server import FakePlatforms
from tests.reliability.invariants import (
    Baseline,
    PlatformMessage,
    check_invariants,
    install_guards,
    remove_guards,
    take_baseline,
)


@dataclass
class _Watched:
    database: Database
    baseline: Baseline
    platforms: FakePlatforms | None
    checked: bool = False


@dataclass
class InvariantWatch:
    """The databases a scenario used; each is checked once the scenario is over."""

    watched: list[_Watched] = field(default_factory=list)

    def watch(self, database: Database, *, platforms: FakePlatforms | None = None) -> None:
        """Guard `database` from now on (call it before the scenario writes)."""
        with database.engine.begin() as connection:
            install_guards(connection)
            baseline = take_baseline(connection)
        self.watched.append(_Watched(database, baseline, platforms))

    def check(self, database: Database | None = None) -> None:
        """Check now (a scenario whose database goes away at its end calls this itself);
        otherwise every watched database is checked after the test."""
        for entry in self.watched:
            if database is not None and entry.database is not database:
                continue
            sent = None
            if entry.platforms is not None:
                sent = [
                    PlatformMessage(m.kind, str(m.body.get("text") or m.body.get("content", "")))
                    for m in entry.platforms.messages
                ]
            entry.checked = True
            try:
                problems = check_invariants(
                    entry.database, baseline=entry.baseline, platform_messages=sent
                )
            finally:
                with entry.database.engine.begin() as connection:
                    remove_guards(connection)
            assert problems == [], "ledger invariants violated:\n" + "\n".join(problems)
