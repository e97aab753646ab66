"""Layer 1, the workspace: AGENTS.md and identity files from a directory, bounded and cached."""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from threading import Lock

import structlog

log = structlog.get_logger(__name__)

# Read in this order; any may be missing. AGENTS.md says how to work here, IDENTITY.md and
# SOUL.md who the agent is, USER.md who it works for.
WORKSPACE_FILES = ("AGENTS.md", "IDENTITY.md", "SOUL.md", "USER.md")
# Every turn's system prompt carries these, so they are capped: characters per file, and in
# all (a later file gets what the earlier ones left).
FILE_CAP_CHARS = 20_000
TOTAL_CAP_CHARS = 48_000
TRUNCATED_NOTE = "\n[… truncated: the file is longer than the workspace cap]"


@dataclass(frozen=True)
class WorkspaceFile:
    name: str
    text: str


def bounded(
    files: Sequence[WorkspaceFile], *, file_cap: int, total_cap: int
) -> list[WorkspaceFile]:
    """The files cut to `file_cap` characters each and `total_cap` in all; a cut file ends
    with TRUNCATED_NOTE, and a file with no room left is dropped."""
    kept: list[WorkspaceFile] = []
    room = total_cap
    for file in files:
        text = file.text.strip()
        cap = min(file_cap, room)
        if not text or cap <= 0:
            continue
        if len(text) > cap:
            text = text[:cap] + TRUNCATED_NOTE
        kept.append(WorkspaceFile(file.name, text))
        room -= min(len(file.text.strip()), cap)
    return kept


def render(files: Sequence[WorkspaceFile]) -> str:
    """The layer's text: each file under a heading that names it."""
    return "\n\n".join(f"[Workspace file {file.name}]\n{file.text}" for file in files)


def default_directory(configured: str | None) -> Path | None:
    """`NEXUS_WORKSPACE_DIR` if set (empty: none), else ./workspace if it exists."""
    if configured is not None:
        return Path(configured).expanduser().resolve() if configured.strip() else None
    fallback = Path("workspace").resolve()
    return fallback if fallback.is_dir() else None


PERSONAS_DIR = "personas"  # <workspace>/personas/<persona name>/AGENTS.md, ...
MAX_PERSONAS_KEPT = 64  # layers kept in memory at once (each at most TOTAL_CAP_CHARS)

_Stamp = tuple[tuple[str, str, int, int], ...]  # (name, path, mtime_ns, size) per file found


def persona_directory(directory: Path, persona: str | None) -> Path | None:
    """Where a persona's own copies of the files may be: a plain name only (no path)."""
    if not persona or persona in (".", "..") or "/" in persona or "\\" in persona:
        return None
    return directory / PERSONAS_DIR / persona


class Workspace:
    """Reads the workspace files when they change: a turn stats them, and reads them only
    when a file's modification time or size differs from the last read.

    A persona may have its own copy of any file in `personas/<name>/`; it replaces the
    shared one for that persona's sessions (workers included, as they share the persona).
    """

    def __init__(
        self,
        directory: Path | None,
        *,
        files: Sequence[str] = WORKSPACE_FILES,
        file_cap: int = FILE_CAP_CHARS,
        total_cap: int = TOTAL_CAP_CHARS,
    ) -> None:
        self.directory = directory
        self._names = tuple(files)
        self._file_cap = file_cap
        self._total_cap = total_cap
        # By persona, the most recently used first out: personas are few, but not bounded.
        self._read_for: OrderedDict[str | None, tuple[_Stamp, str]] = OrderedDict()
        self.reads = 0  # how many times the files were read (not just stat'ed)
        self._lock = Lock()  # `nexus dev` runs turns on several threads

    def layer(self, persona: str | None = None) -> str:
        """The workspace layer's text for `persona`; "" without a directory or files."""
        if self.directory is None:
            return ""
        stamp = self._stat(persona_directory(self.directory, persona))
        with self._lock:
            known = self._read_for.get(persona)
            if known is not None and known[0] == stamp:
                self._read_for.move_to_end(persona)
                return known[1]
        text = self._read(stamp)
        with self._lock:
            self._read_for[persona] = (stamp, text)
            self._read_for.move_to_end(persona)
            while len(self._read_for) > MAX_PERSONAS_KEPT:
                self._read_for.popitem(last=False)
        return text

    def _stat(self, own: Path | None) -> _Stamp:
        assert self.directory is not None
        found = []
        for name in self._names:
            for path in (own / name if own else None, self.directory / name):
                if path is None:
                    continue
                try:
                    info = os.stat(path)
                except OSError:
                    continue
                found.append((name, str(path), info.st_mtime_ns, info.st_size))
                break
        return tuple(found)

    def _read(self, stamp: _Stamp) -> str:
        self.reads += 1
        files, paths = [], {}
        for name, path, _, _ in stamp:
            try:
                text = Path(path).read_text(encoding="utf-8", errors="replace")
            except OSError as error:
                log.warning("workspace.file_unreadable", file=path, error=str(error))
                continue
            files.append(WorkspaceFile(name, text))
            paths[name] = path
        kept = {
            file.name: file
            for file in bounded(files, file_cap=self._file_cap, total_cap=self._total_cap)
        }
        for file in files:
            shown = kept.get(file.name)
            if file.text.strip() and (shown is None or shown.text.endswith(TRUNCATED_NOTE)):
                log.warning(
                    "workspace.file_truncated",
                    file=paths[file.name],
                    chars=len(file.text),
                    kept=len(shown.text) - len(TRUNCATED_NOTE) if shown else 0,
                    file_cap=self._file_cap,
                    total_cap=self._total_cap,
                )
        return render(list(kept.values()))
