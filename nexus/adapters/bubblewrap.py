"""The bubblewrap (`bwrap`) command line that jails one `run_python` program (pure).

What the jail gives the program: its own user, PID, IPC, UTS, cgroup and mount namespaces
and, unless the persona grants the network, its own empty network namespace (loopback
only, nothing listening); a fresh `/proc` showing its own processes only; read-only views
of the system directories and of the Python installation it runs on; two small private
tmpfs (`/tmp` and its working directory, where its program is bound read-only); an
environment of PATH, HOME and LANG only; no capabilities, as `nobody` inside. Nothing
else of the host is mounted: no project file, no ledger, no secrets file, no /home.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

BWRAP = "bwrap"
INSTALL_HINT = "apt-get install bubblewrap"
WORKDIR = "/sandbox"  # the program's working directory and HOME, inside the jail
PROGRAM = "program.py"
NOBODY = 65534
SCRATCH_BYTES = 16 * 1024 * 1024  # each tmpfs (/tmp, the working directory): RAM, not disk
# Bound read-only when present; the merged-/usr symlinks (/lib -> usr/lib) are followed,
# so the jail sees the same files either way.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_ALWAYS = ("/etc/localtime",)
# Name resolution and TLS roots: only a program that may use the network needs them.
ETC_NETWORK = (
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
)
ENVIRONMENT = (("PATH", "/usr/local/bin:/usr/bin:/bin"), ("HOME", WORKDIR), ("LANG", "C.UTF-8"))


@dataclass(frozen=True)
class Jail:
    """What one run may see: the interpreter, where it is installed, and the network grant."""

    interpreter: str  # absolute path, the same inside the jail as outside
    python_dirs: tuple[str, ...]  # the installation's prefixes, bound read-only
    network: bool = False
    scratch_bytes: int = SCRATCH_BYTES


def python_dirs(prefixes: Iterable[str]) -> tuple[str, ...]:
    """The prefixes to bind besides the system directories: each once, none already under
    a system directory (a Debian Python lives in /usr), never the whole filesystem."""
    chosen: list[str] = []
    for prefix in prefixes:
        path = posixpath.normpath(prefix)
        if not posixpath.isabs(path) or path == "/":
            raise ValueError(f"refusing to expose the Python prefix {prefix!r} to the sandbox")
        if _under(path, SYSTEM_DIRS) or path in chosen:
            continue
        chosen.append(path)
    return tuple(chosen)


def interpreter_candidates(base_exec_prefix: str, version: tuple[int, int]) -> tuple[str, ...]:
    """Where the installation's own interpreter is (not a virtualenv's, whose directory
    is the project's): `bin/python3.11`, then `bin/python3`."""
    major, minor = version
    bin_dir = posixpath.join(posixpath.normpath(base_exec_prefix), "bin")
    return (posixpath.join(bin_dir, f"python{major}.{minor}"), posixpath.join(bin_dir, "python3"))


def visible(path: str, jail: Jail) -> bool:
    """Whether `path` is inside what the jail binds (so the interpreter can run there)."""
    return _under(posixpath.normpath(path), (*SYSTEM_DIRS, *jail.python_dirs))


def bwrap_argv(
    bwrap: str, jail: Jail, program: str, status_fd: int, arguments: Iterable[str]
) -> list[str]:
    """The full command: bwrap's options, then the interpreter in isolated mode (`-I`: no
    PYTHON* variables, no user site, no script directory on the path) with `arguments`.

    `program` is the host file bound read-only as WORKDIR/program.py; bwrap reports on
    `status_fd` (a `child-pid` document once the jail is up: its absence means bwrap
    itself failed, not the program).
    """
    argv = [
        bwrap,
        "--unshare-all",  # user, pid, net, ipc, uts, cgroup namespaces
        "--unshare-user",  # -all only tries it; a jail without one must not start
        "--disable-userns",  # and no nested one to win capabilities back in
        "--uid",
        str(NOBODY),
        "--gid",
        str(NOBODY),
        "--cap-drop",
        "ALL",  # bwrap run as root would otherwise leave them to the program
        "--die-with-parent",
        "--new-session",  # no TIOCSTI into a terminal the worker holds
        "--json-status-fd",
        str(status_fd),
        "--clearenv",
    ]
    for name, value in ENVIRONMENT:
        argv += ["--setenv", name, value]
    if jail.network:
        argv.append("--share-net")
    for path in SYSTEM_DIRS:
        argv += ["--ro-bind-try", path, path]
    for path in jail.python_dirs:
        argv += ["--ro-bind", path, path]
    for path in (*ETC_ALWAYS, *(ETC_NETWORK if jail.network else ())):
        argv += ["--ro-bind-try", path, path]
    size = str(jail.scratch_bytes)
    argv += ["--proc", "/proc", "--dev", "/dev"]
    # The jail's own /tmp, a tmpfs in its mount namespace: not the host's.
    argv += ["--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", WORKDIR]  # noqa: S108
    argv += ["--ro-bind", program, posixpath.join(WORKDIR, PROGRAM), "--chdir", WORKDIR]
    argv += ["--", jail.interpreter, "-I", *arguments]
    return argv


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)
