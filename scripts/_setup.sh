# Shared set-up steps for scripts/demo and scripts/test (sourced, not run).

find_python() {
  for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$candidate"
      return
    fi
  done
  echo "Python 3.11 or newer is needed" >&2
  exit 1
}

# setup_venv [extra]: a .venv with the project installed (editable: templates/ and static/ sit beside it).
setup_venv() {
  local extra=${1:-}
  if [ ! -x .venv/bin/python ]; then
    echo "== creating .venv"
    "$(find_python)" -m venv .venv
  fi
  echo "== installing the project${extra:+ with [$extra]} (log: .venv/install.log)"
  if ! .venv/bin/python -m pip install --disable-pip-version-check -e ".${extra:+[$extra]}" >.venv/install.log 2>&1; then
    tail -30 .venv/install.log
    echo "pip install failed; the whole log is in .venv/install.log" >&2
    exit 1
  fi
  echo "== compiling the translations (messages.mo is built here, not kept in git)"
  .venv/bin/pybabel compile -d portal/translations >/dev/null
}

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# Debian's Chromium for the browser tests; Playwright's own download cannot work here.
ensure_chromium() {
  if [ -x /usr/bin/chromium ]; then
    return
  fi
  echo "== installing Debian's chromium"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq chromium >/dev/null
}

# PostgreSQL for the store tests: use PORTAL_TEST_POSTGRES_URL, else the local server on 5432.
ensure_postgres() {
  if [ -n "${PORTAL_TEST_POSTGRES_URL:-}" ]; then
    return
  fi
  local url="postgresql+psycopg://postgres@127.0.0.1:5432/test"
  if ! pg_ready; then
    if [ -n "${CI:-}" ] && [ -d /etc/postgresql ]; then
      echo "== starting PostgreSQL"
      pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start || true
      sleep 2
    fi
  fi
  if pg_ready; then
    export PORTAL_TEST_POSTGRES_URL="$url"
    echo "== PostgreSQL store tests use $url"
  else
    echo "== PostgreSQL is not reachable on 127.0.0.1:5432; its tests are skipped (set PORTAL_TEST_POSTGRES_URL)"
  fi
}

pg_ready() {
  .venv/bin/python - <<'PY' 2>/dev/null
import psycopg
psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=test", connect_timeout=3).close()
PY
}

# Redis for the shared sign-in throttling test: start it in CI when it is not answering.
ensure_redis() {
  if redis_ready; then
    return
  fi
  if [ -n "${CI:-}" ] && command -v redis-server >/dev/null 2>&1; then
    echo "== starting Redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null || true
    sleep 1
  fi
  redis_ready || echo "== Redis is not reachable on 127.0.0.1:6379; its test is skipped (set PORTAL_TEST_REDIS_URL)"
}

redis_ready() {
  .venv/bin/python - <<'PY' 2>/dev/null
import redis
redis.Redis(host="127.0.0.1", port=6379, socket_connect_timeout=2).ping()
PY
}
