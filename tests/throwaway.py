"""Throwaway Redis and PostgreSQL servers of a test's own, for scenarios that stop, restart
or flush them: the shared servers other runs use are never touched."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import free_port, port_open

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _wait_port(port: int, what: str, *, up: bool = True, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while port_open(port) != up:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} on port {port} did not {'start' if up else 'stop'}")
        time.sleep(0.05)


def _require(binary: Path | str) -> str:
    found = shutil.which(str(binary))
    if found is None:  # no silent skips: a missing server binary fails the scenario loudly
        raise RuntimeError(f"{binary} is not installed; the reliability suite needs it")
    return found


@dataclass
class ThrowawayRedis:
    """A Redis without persistence on a port of its own: a restart loses every key."""

    directory: Path
    port: int = field(default_factory=free_port)
    extra: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [_require("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(self.directory), *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait_port(self.port, "redis-server")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()  # abrupt, as a crash or an OOM kill would be
            self.process.wait(timeout=10)
        _wait_port(self.port, "redis-server", up=False)


@contextmanager
def throwaway_redis(directory: Path, *extra: str) -> Iterator[ThrowawayRedis]:
    server = ThrowawayRedis(directory, extra=extra)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@dataclass
class ThrowawayPostgres:
    """A PostgreSQL cluster of our own, owned by the postgres user, in a temporary dir."""

    root: Path
    port: int = field(default_factory=free_port)

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _as_postgres(self, *args: str) -> None:
        subprocess.run(
            [_require("runuser"), "-u", "postgres", "--", *args],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip

    def init(self) -> None:
        self._as_postgres(
            str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust",
            "--no-sync", "--no-instructions",
        )  # fmt: skip

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c full_page_writes=off -c max_connections=200"
        )
        self._as_postgres(
            str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-o", options,
            "-l", str(self.root / "server.log"), "-w", "start",
        )  # fmt: skip
        _wait_port(self.port, "postgres")

    def stop(self) -> None:
        self._as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        _wait_port(self.port, "postgres", up=False)

    def running(self) -> bool:
        return port_open(self.port)


@contextmanager
def throwaway_postgres() -> Iterator[ThrowawayPostgres]:
    """initdb + start; stopped and removed afterwards. The directory is created outside
    pytest's tmp_path, whose parents the postgres user may not enter."""
    _require(PG_BIN / "initdb")
    root = Path(tempfile.mkdtemp(prefix="nexus-pg-"))
    shutil.chown(root, "postgres", "postgres")
    server = ThrowawayPostgres(root)
    try:
        server.init()
        server.start()
        yield server
    finally:
        if server.running():
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
