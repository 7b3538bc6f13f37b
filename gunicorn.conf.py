"""gunicorn settings for the portal in production: `gunicorn -c gunicorn.conf.py wsgi:app` (README, Run in production).

Every top-level name here is a gunicorn setting; helpers start with `_`. The environment may override:
`WEB_CONCURRENCY` (workers), `PORTAL_THREADS` (threads per worker), `PORTAL_BIND` (listen address) and
`FORWARDED_ALLOW_IPS` (addresses whose X-Forwarded-Proto gunicorn believes; none by default, the portal's
`PORTAL_TRUSTED_PROXIES` handles forwarded headers). Slow clients are the reverse proxy's job: gunicorn reads
a request body on a worker thread, so it must only ever see bodies that a buffering proxy has already read
(docs/nginx.conf).
"""

import atexit
import gc
import logging
import math
import os
import shutil
import sys
import tempfile

from gunicorn import glogging


def _whole_number(name: str, default: int, high: int = 64) -> int:
    """A whole number from the environment; a malformed one stops start-up with one line naming it."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= high:
        raise SystemExit(f"gunicorn.conf.py: {name} must be a whole number from 1 to {high}, not {raw!r}")
    return int(raw)


_CPUS = os.cpu_count() or 1

# The portal mostly waits (Flow Service, database), so concurrency is about four requests per CPU. Past
# four processes it grows by threads instead: every worker has its own database pool (15 connections),
# token cache and flow-index writer, so fewer, wider workers spare the database and the identity provider.
_DEFAULT_WORKERS = min(_CPUS, 4)
_DEFAULT_THREADS = min(max(math.ceil(4 * _CPUS / _DEFAULT_WORKERS), 4), 12)

worker_class = "gthread"
workers = _whole_number("WEB_CONCURRENCY", _DEFAULT_WORKERS)
threads = _whole_number("PORTAL_THREADS", _DEFAULT_THREADS)
bind = [os.environ.get("PORTAL_BIND", "127.0.0.1:8000")]  # behind a proxy on the same host; the image binds 0.0.0.0

# Requests: a request line of 4 KiB (long enough for a `next` link holding a search), at most 64 header
# fields of at most 8 KiB each (the session cookie is well under 1 KiB). Past them: 414 / 431.
limit_request_line = 4094
limit_request_fields = 64
limit_request_field_size = 8190

# Time: a gthread worker's heartbeat comes from its main loop, so `timeout` restarts a hung worker, not a
# slow request (those are bounded by FLOW_* and PORTAL_DB_* timeouts). On SIGTERM (docker stop, systemd)
# workers stop accepting and finish what they hold for up to `graceful_timeout`: the longest Flow Service
# call with its retries is about 20 s. Give the container more than that to stop (compose.yaml: 30 s).
timeout = 30
graceful_timeout = 25
keepalive = 5

forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "")
control_socket_disable = True  # gunicorn 25+ would otherwise open ~/.gunicorn/gunicorn.ctl
# The heartbeat file (mkstemp, unlinked at once) in memory: on a container's overlay disk it can stall workers.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None  # noqa: S108


class _AccessLogWithoutSecrets(glogging.Logger):
    """gunicorn's logger whose access lines hold only the atoms below.

    Query strings carry search terms (national ids, names), and so do the request line, the Referer and a
    redirect's Location; headers carry cookies and tokens. Those atoms print as `-` whatever the format
    says. The path is percent-decoded, so control characters in it are escaped: one request, one line.
    """

    KEPT = ("h", "t", "m", "U", "H", "s", "b", "B", "M", "D", "L", "T", "p")

    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        return {key: _printable(atoms[key]) for key in self.KEPT}


def _printable(value):
    if isinstance(value, str) and not value.isprintable():
        return value.encode("unicode_escape").decode("ascii")
    return value


logger_class = _AccessLogWithoutSecrets
accesslog = "-"
errorlog = "-"
access_log_format = '%(h)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(b)s %(M)sms'


def on_starting(server):
    """Refuse to start at all (one line naming the setting, exit status 2) with settings every worker would refuse.

    Checked here, in the arbiter, because a worker that exits with anything but 3 is simply started again.
    """
    os.environ["PORTAL_WORKERS"] = str(server.num_workers)
    from portal import check_settings

    check_settings()


def when_ready(server):
    """Say so when listening beyond this host with no proxy declared in front: gunicorn reads each request on the
    thread that serves it, so clients sending a byte at a time can hold every thread (README: Slow clients)."""
    exposed = [address for address in server.cfg.bind if not _on_this_host_only(address)]
    if exposed and os.environ.get("PORTAL_TRUSTED_PROXIES", "").strip() in ("", "0"):
        server.log.warning(
            "gunicorn.conf.py: listening on %s with no proxy in front (PORTAL_TRUSTED_PROXIES=0): clients that send "
            "slowly can hold every worker thread; put a buffering proxy in front (README: Slow clients)",
            ", ".join(exposed),
        )


def _on_this_host_only(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]") if ":" in address else address
    return address.startswith(("unix:", "fd://")) or host in ("localhost", "::1") or host.startswith("127.")


def on_reload(server):
    """A reload (HUP) with settings every worker would refuse stops gunicorn as a start does (one line, status 2),
    instead of new workers refusing them one after another while nothing answers. The .env file is read again."""
    from gunicorn.errors import HaltServer

    from portal import check_settings

    try:
        check_settings(reread_dotenv=True)
    except SystemExit as refused:
        raise HaltServer("a refused configuration", refused.code) from None


def post_fork(server, worker):
    """A worker started later (a reload, one that died) meets a setting changed since in its file (a *_FILE secret):
    refused, it exits with gunicorn's boot error, which stops gunicorn, not with 2, which gunicorn restarts for ever."""
    from portal import check_settings

    try:
        check_settings()
    except SystemExit:
        sys.exit(server.WORKER_BOOT_ERROR)


def pre_fork(server, worker):
    """Tell the app how many workers share it: in production more than one requires Redis (PORTAL_WORKERS)."""
    os.environ["PORTAL_WORKERS"] = str(server.num_workers)  # the final count, after any --workers on the command line


def post_worker_init(worker):
    """Keep what the worker built to serve (the app, its ORM, templates' code, catalogues) out of the garbage
    collector's full passes, which would otherwise walk it all again while every thread of the worker waits.

    Measured under webhook load: each worker's first full collection took 100-114 ms, and a run's p99 was
    21-56 ms with it, 12-18 ms frozen. What is left of start-up's garbage goes first; what requests make later
    is collected as before."""
    gc.collect()
    gc.freeze()


# -- logging and metrics hooks -----------------------------------------------------------------------------
# (Observability.) Keep the guarantees above: no query string, header or cookie in any log line.


def _metrics_folder() -> None:
    """Prometheus multiprocess mode: every worker writes its metrics to files that a scrape adds up.

    Set before anything imports prometheus_client (the portal does), so the workers inherit it at fork.
    An operator's PROMETHEUS_MULTIPROC_DIR is kept (it must be emptied between runs); else a new folder,
    removed at exit.
    """
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return
    folder = os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="portal-metrics-")
    # Also when gunicorn never starts (`--check-config`, a refused setting, a taken port): no exit hook runs then.
    atexit.register(_remove_own_folder, folder, os.getpid())


def _remove_own_folder(folder: str, arbiter_pid: int) -> None:
    if os.getpid() == arbiter_pid:  # a worker leaving by sys.exit runs the handlers it inherited at fork
        shutil.rmtree(folder, ignore_errors=True)


def _logconfig() -> dict:
    from portal.logs import gunicorn_logconfig_dict  # after _metrics_folder(): it imports prometheus_client

    return gunicorn_logconfig_dict()


class _JsonAccessLog(_AccessLogWithoutSecrets):
    """The atoms above, plus the request id the portal answered with (its own, or a well-formed one it was sent).

    A request the portal marks quiet (a stored webhook delivery: the event row is its record; a page's answered
    question in the background) is logged only when the access log is at DEBUG.
    """

    def access(self, resp, req, environ, request_time):
        if environ.get(_QUIET) and not self.access_log.isEnabledFor(logging.DEBUG):
            return
        super().access(resp, req, environ, request_time)

    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        atoms.update(("{x-request-id}o", value) for name, value in resp.headers if name.lower() == "x-request-id")
        return atoms


_metrics_folder()
logconfig_dict = _logconfig()  # JSON lines (portal.logs): error log on stderr, access log on stdout
from portal.logs import QUIET_ACCESS as _QUIET  # noqa: E402 - after _metrics_folder(), like _logconfig

logger_class = _JsonAccessLog


def child_exit(server, worker):
    """A worker is gone: drop its live-gauge files (its counters stay counted)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
