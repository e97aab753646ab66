"""The web console: static files (HTML, JS, CSS) shipped in the package and served at /ui.

The page itself needs no token: it holds nothing but code. Everything it shows comes from
/v1 calls the browser makes with the token the operator gives it (none in `nexus dev`)."""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

STATIC = files(__name__) / "static"
# The browser asks again rather than keep a console older than the server it talks to;
# the page may load and call only this server, and no other site may frame it.
PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
}

router = APIRouter(include_in_schema=False)


@router.get("/ui")
def console() -> HTMLResponse:
    """The console's one page; its routes are the URL's hash (#/sessions, #/turn/ID, …)."""
    return HTMLResponse((STATIC / "index.html").read_text(encoding="utf-8"), headers=PAGE_HEADERS)


@router.get("/ui/")
def console_slash() -> RedirectResponse:
    return RedirectResponse("/ui", status_code=307)


def mount(app: FastAPI) -> None:
    """/ui and its assets under /ui/static/."""
    app.include_router(router)
    app.mount("/ui/static", StaticFiles(directory=str(STATIC)), name="console-static")
