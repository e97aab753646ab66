"""`merge_people`: an agent merges person entities, as `POST /v1/entities/merge` does.

The merge goes through the same service (`nexus.arrival.messages.merge_people`), so it is
recorded as an API merge is: the entities' `merged_into`, the aliases of the person's DM
sessions to one primary, the notice queued for it. It is an effect: it lands with the turn
that asked, or never (a fenced or failed turn leaves the people as they were). It needs
the persona's `permissions.people.merge` (Tool.permission), checked by the toolbox before
the tool runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import structlog

from nexus.arrival.messages import merge_people
from nexus.arrival.service import ArrivalSignals
from nexus.arrival.settings import QueuePolicy
from nexus.db import Database, UnitOfWork
from nexus.doorbell import Doorbell
from nexus.engine.model import ToolSpec
from nexus.engine.tools import Tool, ToolContext, ToolFailure
from nexus.ledger.repository import LedgerConflict, NotFound

log = structlog.get_logger(__name__)

MERGE_PEOPLE = "merge_people"
MERGE_PERMISSION = "people.merge"
MAX_MERGED = 20  # entities one call merges
MAX_ENTITY_ID = 64


class PeopleTools:
    def __init__(
        self,
        database: Database,
        doorbell: Doorbell,
        *,
        arrivals: ArrivalSignals | None = None,
        queueing: QueuePolicy | None = None,
    ) -> None:
        self._database = database
        self._doorbell = doorbell
        self._arrivals = arrivals
        self._queueing = queueing

    def tools(self) -> list[Tool]:
        return [
            Tool(
                ToolSpec(
                    MERGE_PEOPLE,
                    "Merge person entities that are the same person into one (`into`): their "
                    "direct conversations then continue in one session. Done when your turn "
                    "ends; ids look like ent_...",
                    {
                        "type": "object",
                        "properties": {
                            "into": {"type": "string", "description": "the entity kept"},
                            "merge": {
                                "type": "array",
                                "items": {"type": "string"},
                                "description": "the entities merged into it",
                            },
                        },
                        "required": ["into", "merge"],
                    },
                ),
                self.merge,
                permission=MERGE_PERMISSION,
            )
        ]

    def merge(self, arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        into = _entity_id(arguments["into"], "into")
        merged = [_entity_id(value, "merge") for value in arguments["merge"]]
        if not merged or len(merged) > MAX_MERGED:
            raise ToolFailure(f"merge names 1 to {MAX_MERGED} entities")
        if len(set(merged)) != len(merged) or into in merged:
            raise ToolFailure("name each entity once, and not `into` among those merged")
        self._check(into, merged)

        def effect(uow: UnitOfWork, turn_id: str) -> None:
            # A savepoint: should the people have changed since the call (a racing merge),
            # the merge is skipped and the turn still commits.
            try:
                with uow.connection.begin_nested():
                    result = merge_people(
                        uow,
                        into=into,
                        merged=merged,
                        doorbell=self._doorbell,
                        arrivals=self._arrivals,
                        queueing=self._queueing,
                    )
            except (NotFound, LedgerConflict) as error:
                log.warning("agent_merge_skipped", turn_id=turn_id, into=into, reason=str(error))
                return
            log.info(
                "agent_merged_people",
                turn_id=turn_id,
                session_id=context.session_id,
                into=into,
                merged=merged,
                primary_session=result.primary_session,
            )

        context.effects.append(effect)
        return {
            "status": "merging",
            "into": into,
            "merge": merged,
            "message": "The merge is recorded when this turn ends; the person's direct "
            "conversations then continue in one session.",
        }

    def _check(self, into: str, merged: Sequence[str]) -> None:
        """What the merge would refuse, said now (it is checked again when it lands)."""
        with self._database.reading() as uow:
            identity = uow.ledger.identity
            for entity_id in (into, *merged):
                if identity.get_entity(entity_id) is None:
                    raise ToolFailure(f"no entity {entity_id!r}")
            root = identity.canonical_entity(into)
            for entity_id in merged:
                entity = identity.get_entity(entity_id)
                assert entity is not None  # read just above
                if identity.canonical_entity(entity_id) == root:
                    raise ToolFailure(f"{entity_id!r} and {into!r} are already the same person")
                if entity.merged_into is not None:
                    raise ToolFailure(
                        f"{entity_id!r} was merged into {entity.merged_into!r} already: "
                        "merge that one"
                    )


def _entity_id(value: Any, where: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_ENTITY_ID:
        raise ToolFailure(f"{where} takes entity ids (strings of 1 to {MAX_ENTITY_ID} characters)")
    return value
