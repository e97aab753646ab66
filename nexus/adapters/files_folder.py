"""The watched folder (NEXUS_FILES_DIR) on disk: what it holds, and a file's bytes.

Symbolic links are not followed (a link could point anywhere on the machine), and hidden
directories are not entered. A file is read only if it is still exactly as listed (same
size and modification time, before and after the read).
"""

from __future__ import annotations

import mimetypes
import os
import stat
from pathlib import Path

from nexus.ingest.files import Listed

# A folder of more files than this is listed this far per scan (the rest on later scans,
# once these are recorded and moved away): a scan stays bounded.
MAX_LISTED = 10_000


class FolderFiles:
    """The Folder port over a local (or mounted) directory."""

    def __init__(self, root: str | Path, *, max_listed: int = MAX_LISTED) -> None:
        self.root = Path(root)
        self.max_listed = max_listed

    def listing(self) -> list[Listed]:
        found: list[Listed] = []
        for directory, subdirectories, names in os.walk(self.root, followlinks=False):
            subdirectories[:] = sorted(d for d in subdirectories if not d.startswith("."))
            for name in sorted(names):
                path = Path(directory, name)
                try:
                    info = path.lstat()
                except OSError:
                    continue  # gone since the directory was read
                if not stat.S_ISREG(info.st_mode):
                    continue  # a link, a pipe, a socket: never read
                relative = path.relative_to(self.root).as_posix()
                found.append(Listed(relative, info.st_size, info.st_mtime_ns))
                if len(found) >= self.max_listed:
                    return found
        return found

    def mime_type(self, listed: Listed) -> str | None:
        guessed, _ = mimetypes.guess_type(listed.path, strict=False)
        return guessed

    def read(self, listed: Listed) -> bytes | None:
        path = self.root / listed.path
        try:
            descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return None
        with os.fdopen(descriptor, "rb") as handle:
            if not _as_listed(os.fstat(handle.fileno()), listed):
                return None
            data = handle.read(listed.size + 1)
            if len(data) != listed.size or not _as_listed(os.fstat(handle.fileno()), listed):
                return None  # written to while we read: its next version is sighted anew
        return data


def _as_listed(info: os.stat_result, listed: Listed) -> bool:
    return info.st_size == listed.size and info.st_mtime_ns == listed.mtime_ns
