# Shared by scripts/dev and scripts/test: a virtualenv with Nexus installed, and the
# services the tests need. Sourced, not run.

NEXUS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${NEXUS_VENV:-$NEXUS_ROOT/.venv}"

say() { printf '\033[1m==>\033[0m %s\n' "$*"; }
die() { printf '\033[31merror:\033[0m %s\n' "$*" >&2; exit 1; }

# The lock file pinning every dependency of an install ("dev" or plain), with hashes
# (docs/operations.md, "Reproducible installs": how to update it).
lock_file() {
  if [ "${1:-}" = dev ]; then echo "$NEXUS_ROOT/requirements/dev.lock"; else echo "$NEXUS_ROOT/requirements/app.lock"; fi
}

# What an install depends on: pyproject.toml and the lock. The stamp holds it, so a change
# to either reinstalls.
install_digest() {
  cat "$NEXUS_ROOT/pyproject.toml" "$(lock_file "${1:-}")" | sha256sum | cut -d' ' -f1
}

# Create the virtualenv and install Nexus (with the given extra, e.g. "dev") into it: the
# locked versions first, then Nexus itself without resolving anything again. Reinstalls only
# when pyproject.toml or the lock changed, so a second run starts at once.
bootstrap_venv() {
  local extra="${1:-}"
  local python="${PYTHON:-python3}"
  command -v "$python" >/dev/null || die "$python not found: Nexus needs Python 3.11 or newer"
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "Nexus needs Python 3.11 or newer; $python is $("$python" --version 2>&1)"
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating the virtualenv in $VENV"
    "$python" -m venv "$VENV" || die "could not create a virtualenv (on Debian: apt-get install python3-venv)"
  fi
  local stamp="$VENV/.nexus-installed-$extra"
  local want lock
  want="$(install_digest "$extra")"
  lock="$(lock_file "$extra")"
  # The dev install is a superset of the plain one: no second install over it.
  if [ -z "$extra" ] && [ -f "$VENV/.nexus-installed-dev" ] \
      && [ "$(cat "$VENV/.nexus-installed-dev")" = "$(install_digest dev)" ]; then
    return 0
  fi
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    say "installing Nexus ${extra:+with [$extra] }into the virtualenv (versions from ${lock#"$NEXUS_ROOT"/})"
    local log="$VENV/pip-install.log"
    local pip=("$VENV/bin/python" -m pip)
    if ! (cd "$NEXUS_ROOT" && "${pip[@]}" install --upgrade pip \
          && "${pip[@]}" install --require-hashes -r "$lock" \
          && "${pip[@]}" install --no-deps -e .) >"$log" 2>&1; then
      # A plain install on an interpreter the lock has no wheels for still runs, on the
      # newest versions pyproject.toml allows; the test install (and so CI) never does.
      [ -n "$extra" ] && { tail -40 "$log" >&2; die "pip install failed (full log: $log)"; }
      printf '\033[33mwarning:\033[0m the locked versions did not install (log: %s); installing the newest ones pyproject.toml allows\n' "$log" >&2
      "${pip[@]}" install -e . >>"$log" 2>&1 || { tail -40 "$log" >&2; die "pip install failed (full log: $log)"; }
    fi
    echo "$want" > "$stamp"
  fi
}

# 0 when something accepts TCP connections on host:port.
port_open() {
  "$VENV/bin/python" - "$1" "$2" <<'PY'
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()
except OSError:
    sys.exit(1)
PY
}

wait_for_port() {
  local host="$1" port="$2" name="$3"
  for _ in $(seq 1 60); do
    port_open "$host" "$port" && return 0
    sleep 0.5
  done
  die "$name did not start listening on $host:$port within 30 s"
}

# Start PostgreSQL when it is installed but stopped; fail loudly when it is missing.
ensure_postgres() {
  port_open 127.0.0.1 5432 && return 0
  if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ] && [ -n "$(ls /etc/postgresql)" ]; then
    say "starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start \
      || die "PostgreSQL is installed but would not start"
    wait_for_port 127.0.0.1 5432 PostgreSQL
    return 0
  fi
  die "PostgreSQL is not running on 127.0.0.1:5432 and is not installed. Install it (apt-get install postgresql) or set NEXUS_TEST_POSTGRES_URL to a server the tests may create databases on."
}

# Start Redis when it is installed but stopped; fail loudly when it is missing.
ensure_redis() {
  port_open 127.0.0.1 6379 && return 0
  if command -v redis-server >/dev/null; then
    say "starting Redis"
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log || die "Redis is installed but would not start"
    wait_for_port 127.0.0.1 6379 Redis
    return 0
  fi
  die "Redis is not running on 127.0.0.1:6379 and is not installed. Install it (apt-get install redis-server) or set NEXUS_TEST_REDIS_URL."
}

# run_python's jail (bubblewrap): the tests run it for real, so it must be there and work.
# Installed with apt-get when missing and we are root; otherwise a loud failure, never a
# silent skip of the sandbox tests. `scripts/dev` does not need it (run_python is refused).
ensure_bubblewrap() {
  if ! command -v bwrap >/dev/null; then
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null \
      || die "bubblewrap (bwrap) is not installed and the run_python sandbox tests need it. Install it: sudo apt-get install bubblewrap"
    say "installing bubblewrap (run_python's sandbox)"
    local log="${TMPDIR:-/tmp}/nexus-apt-bubblewrap.log"
    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y bubblewrap; } >"$log" 2>&1 \
      || { tail -20 "$log" >&2; die "apt-get install bubblewrap failed (full log: $log)"; }
    command -v bwrap >/dev/null || die "bubblewrap was installed but bwrap is not on PATH"
  fi
  # The namespaces the jail uses (as nexus doctor checks them).
  bwrap --unshare-all --unshare-user --disable-userns --cap-drop ALL --die-with-parent \
      --new-session --ro-bind / / --proc /proc --dev /dev true \
    || die "bwrap is installed but cannot make a sandbox here (are user namespaces allowed? sysctl user.max_user_namespaces)"
}

# The web console's browser test (tests/browser) drives Debian's chromium through
# chromium-driver with Selenium: installed with apt-get when missing and we are root;
# otherwise a loud failure, never a silent skip of the browser test.
ensure_chromium() {
  if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null \
      || die "chromium and chromium-driver are not installed and the console's browser test needs them. Install them: sudo apt-get install chromium chromium-driver"
    say "installing chromium and chromium-driver (the console's browser test)"
    local log="${TMPDIR:-/tmp}/nexus-apt-chromium.log"
    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver; } >"$log" 2>&1 \
      || { tail -20 "$log" >&2; die "apt-get install chromium chromium-driver failed (full log: $log)"; }
    command -v chromedriver >/dev/null || die "chromium-driver was installed but chromedriver is not on PATH"
  fi
}
