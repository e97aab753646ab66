"""What routes take as parameters: the app's services and the caller, as FastAPI dependencies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from nexus.api.auth import Caller, TokenCheck
from nexus.api.errors import error_responses
from nexus.bootstrap import Nexus
from nexus.db import Database
from nexus.doorbell import Doorbell
from nexus.queueing.coordination import Coordination
from nexus.settings import Settings


@dataclass(frozen=True)
class ApiState:
    """What `create_app` leaves on the app: the process's object graph and the tokens."""

    nexus: Nexus
    tokens: TokenCheck


def attach(app: FastAPI, state: ApiState) -> None:
    """Leave the app's state where `api_state` finds it (this module owns the place)."""
    app.state.nexus = state


async def api_state(request: Request) -> ApiState:
    # The one place a route's services come from: everything else asks for them by type.
    # (These are `async` only so FastAPI calls them inline rather than in a thread.)
    state: ApiState = request.app.state.nexus
    return state


async def nexus(state: Annotated[ApiState, Depends(api_state)]) -> Nexus:
    return state.nexus


NexusDep = Annotated[Nexus, Depends(nexus)]


async def database(graph: NexusDep) -> Database:
    return graph.database


async def doorbell(graph: NexusDep) -> Doorbell:
    return graph.doorbell


async def coordination(graph: NexusDep) -> Coordination:
    return graph.coordination


async def settings(graph: NexusDep) -> Settings:
    return graph.settings


# Declares the bearer scheme in OpenAPI (so /docs' "Authorize" sends the token); it
# checks nothing itself (`auto_error=False`): the request guard and `caller` do.
BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="An API token from NEXUS_API_TOKENS (or NEXUS_API_ADMIN_TOKENS)",
)


async def caller(
    request: Request,
    state: Annotated[ApiState, Depends(api_state)],
    _bearer: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)],
) -> Caller:
    """The authenticated caller of a /v1 route (401 otherwise): the request guard checked
    the token before the body was read and left the caller in the request's state."""
    checked = request.scope.get("state", {}).get("caller")
    if isinstance(checked, Caller):
        return checked
    client = request.client.host if request.client else None
    return state.tokens.verify(request.headers.get("authorization"), client)


DatabaseDep = Annotated[Database, Depends(database)]
DoorbellDep = Annotated[Doorbell, Depends(doorbell)]
CoordinationDep = Annotated[Coordination, Depends(coordination)]
SettingsDep = Annotated[Settings, Depends(settings)]
CallerDep = Annotated[Caller, Depends(caller)]
# For routers whose every route needs a caller but not its identity.
AUTHENTICATED = [Depends(caller)]


def v1_router(prefix: str, tag: str, *statuses: int) -> APIRouter:
    """A router of /v1 routes under `prefix` (none: ""), under the OpenAPI tag `tag`: each
    route needs a caller and may answer the common errors and `statuses`."""
    return APIRouter(
        prefix=prefix, tags=[tag], dependencies=AUTHENTICATED, responses=error_responses(*statuses)
    )
