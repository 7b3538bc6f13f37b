"""Serving: gunicorn.conf.py as gunicorn reads it, the production command run for real, the container and proxy files.

Docker and nginx are not on the test machines: the Dockerfile, compose.yaml and docs/nginx.conf are checked
for what they say and for agreeing with each other, the README and gunicorn.conf.py.
"""

import gc
import inspect
import json
import os
import re
import runpy
import shlex
import socket
import subprocess
import sys
import time
from fnmatch import fnmatch
from pathlib import Path
from types import SimpleNamespace

import pytest
import requests
import yaml
from gunicorn.app.base import Application
from gunicorn.config import Config
from support import portal_config, production_settings

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "gunicorn.conf.py"
# The environment gunicorn.conf.py reads, and gunicorn's own (GUNICORN_CMD_ARGS would override the file).
SERVING_VARIABLES = (
    "WEB_CONCURRENCY",
    "PORTAL_THREADS",
    "PORTAL_BIND",
    "PORTAL_TRUSTED_PROXIES",
    "FORWARDED_ALLOW_IPS",
    "GUNICORN_CMD_ARGS",
)
# What the image copies and runs from /app (the rest is left out by .dockerignore).
IMAGE_FILES = ("portal", "templates", "static", "wsgi.py", "gunicorn.conf.py", "pyproject.toml", "README.md")


class _ConfigFile(Application):
    """gunicorn's own reading of a configuration file, without a command line or an app."""

    def init(self, parser, opts, args):
        return None

    def load_config(self):
        return None

    def load(self):
        return None


@pytest.fixture
def read_config(monkeypatch, tmp_path):
    """gunicorn.conf.py as gunicorn reads it, under a CPU count and environment: `read_config(cpus=8, ...)`."""
    # The file would otherwise make a metrics folder and export it to this whole test process.
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))

    def read(cpus: int | None = 2, **env: str) -> Config:
        for name in SERVING_VARIABLES:
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(os, "cpu_count", lambda: cpus)
        reader = _ConfigFile()
        reader.load_config_from_file(str(CONFIG))
        return reader.cfg

    return read


# -- gunicorn.conf.py ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cpus", "workers", "threads"),
    [(None, 1, 4), (1, 1, 4), (2, 2, 4), (4, 4, 4), (6, 4, 6), (8, 4, 8), (16, 4, 12), (64, 4, 12)],
)
def test_gthread_workers_and_threads_follow_the_cpu_count(read_config, cpus, workers, threads):
    config = read_config(cpus=cpus)
    assert (config.worker_class_str, config.workers, config.threads) == ("gthread", workers, threads)


def test_the_environment_overrides_workers_threads_and_address(read_config):
    defaults = read_config()
    assert defaults.bind == ["127.0.0.1:8000"]
    assert defaults.forwarded_allow_ips == []  # nobody's X-Forwarded-Proto: the portal's PORTAL_TRUSTED_PROXIES decides

    config = read_config(
        WEB_CONCURRENCY="3", PORTAL_THREADS="6", PORTAL_BIND="unix:/run/portal.sock", FORWARDED_ALLOW_IPS="10.0.0.2"
    )
    assert (config.workers, config.threads, config.bind) == (3, 6, ["unix:/run/portal.sock"])
    assert config.forwarded_allow_ips == ["10.0.0.2"]


@pytest.mark.parametrize(
    ("name", "value"),
    [("WEB_CONCURRENCY", "0"), ("WEB_CONCURRENCY", "two"), ("PORTAL_THREADS", "-4"), ("PORTAL_THREADS", "65")],
)
def test_a_malformed_number_stops_start_up_naming_it(read_config, name, value):
    with pytest.raises(SystemExit, match=f"{name} must be a whole number from 1 to 64, not '{value}'"):
        read_config(**{name: value})


def test_request_limits_timeouts_and_no_control_socket(read_config):
    config = read_config()
    limits = (config.limit_request_line, config.limit_request_fields, config.limit_request_field_size)
    assert limits == (4094, 64, 8190)  # the figures the README gives
    assert (config.timeout, config.graceful_timeout, config.keepalive) == (30, 25, 5)
    assert config.control_socket_disable


def test_the_access_log_format_names_no_query_header_or_cookie(read_config):
    config = read_config()
    assert config.accesslog == "-"
    assert "%(U)s" in config.access_log_format
    for atom in ("%(q)s", "%(r)s", "%(f)s", "}i)s", "}e)s"):  # query, request line, referer, headers, environ
        assert atom not in config.access_log_format


def test_the_workers_are_told_their_final_count(read_config, monkeypatch):
    monkeypatch.delenv("PORTAL_WORKERS", raising=False)
    config = read_config(WEB_CONCURRENCY="2")
    config.pre_fork(SimpleNamespace(num_workers=3), None)  # e.g. --workers 3 on the command line
    assert os.environ["PORTAL_WORKERS"] == "3"


@pytest.mark.parametrize(
    ("bind", "proxies", "warned"),
    [
        ("0.0.0.0:8000", None, True),
        ("[::]:8000", "0", True),
        ("0.0.0.0:8000", "1", False),
        ("127.0.0.1:8000", None, False),
        ("[::1]:8000", None, False),
        ("unix:/run/portal.sock", None, False),
    ],
)
def test_listening_beyond_this_host_with_no_proxy_declared_is_warned_of(read_config, bind, proxies, warned):
    """Slow clients hold every thread of a gunicorn no proxy buffers for (found by an attack on the demo's image)."""
    config = read_config(PORTAL_BIND=bind, **({"PORTAL_TRUSTED_PROXIES": proxies} if proxies else {}))
    said = []
    config.when_ready(SimpleNamespace(cfg=config, log=SimpleNamespace(warning=lambda *args: said.append(args))))
    assert bool(said) is warned
    assert not said or "put a buffering proxy in front" in said[0][0]


def test_a_worker_keeps_what_it_built_at_start_out_of_full_collections(read_config):
    """Frozen after the app is loaded, a worker's start-up objects are never walked again by a full collection
    (measured: 100-114 ms with every thread of the worker waiting, the webhook p99 doubled)."""
    assert gc.get_freeze_count() == 0
    try:
        read_config().post_worker_init(SimpleNamespace(pid=os.getpid()))
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


WORKER_START = """
import json, sys
from portal import create_app
from portal.extensions import db
create_app(json.loads(sys.argv[1]))
print(json.dumps(sorted(m.class_.__name__ for m in db.Model.registry.mappers if not m.configured)))
"""


def test_a_worker_sets_up_the_orm_at_start_not_in_its_first_request(tmp_path):
    config = portal_config("http://127.0.0.1:9", f"sqlite:///{tmp_path / 'portal.db'}")
    started = subprocess.run(
        [sys.executable, "-c", WORKER_START, json.dumps(config)], capture_output=True, text=True, timeout=60
    )
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout.splitlines()[-1]) == []  # no mapper left to configure


def test_every_public_name_in_the_config_is_a_gunicorn_setting(read_config):
    read_config()  # its environment
    names = runpy.run_path(str(CONFIG))
    settings = Config().settings
    unknown = [
        name
        for name, value in names.items()
        if not name.startswith("_") and not inspect.ismodule(value) and name not in settings
    ]
    assert unknown == []  # gunicorn ignores a misspelt setting without a word


# -- the production command, run -------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def code_lines(markdown: str) -> list[str]:
    """The lines inside the fenced code blocks of a Markdown text."""
    lines, inside = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            inside = not inside
        elif inside:
            lines.append(line)
    return lines


def production_command() -> list[str]:
    """The README's production command: every `gunicorn` line in its code blocks, which must agree."""
    readme = (ROOT / "README.md").read_text()
    commands = {line.split("#")[0].strip() for line in code_lines(readme) if line.startswith("gunicorn ")}
    assert len(commands) == 1, commands
    return shlex.split(commands.pop())


class ProductionServer:
    """The production command run from a folder laid out as the image's /app, with its log in a file."""

    def __init__(self, folder: Path, env: dict):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = folder / "gunicorn.log"
        command = production_command()
        assert command[0] == "gunicorn"
        env = env | {"PORTAL_BIND": f"127.0.0.1:{self.port}", "WEB_CONCURRENCY": "1", "PORTAL_THREADS": "2"}
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", *command], cwd=folder / "app", env=env, stdout=log, stderr=subprocess.STDOUT
            )

    def log(self) -> str:
        return self.log_path.read_text()

    def wait_until_serving(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                requests.get(self.url + "/healthz", timeout=5).raise_for_status()
                return
            except requests.RequestException:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("gunicorn did not start: " + self.log()[-3000:])
                time.sleep(0.1)

    def wait_for_log(self, text: str) -> str:
        deadline = time.monotonic() + 10
        while text not in self.log():
            assert time.monotonic() < deadline, f"{text!r} never logged: " + self.log()[-3000:]
            time.sleep(0.05)
        return self.log()

    def raw_status(self, request: bytes) -> str:
        """The status line gunicorn answers a raw request with."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as connection:
            connection.sendall(request)
            return connection.recv(200).split(b"\r\n")[0].decode()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


@pytest.fixture
def production_server(tmp_path):
    """gunicorn started with the README's production command, 1 worker × 2 threads on a free port, SQLite."""
    app_folder = tmp_path / "app"  # what the image copies, and no .env or instance/ of the checkout
    app_folder.mkdir()
    for name in IMAGE_FILES:
        (app_folder / name).symlink_to(ROOT / name)
    (tmp_path / "metrics").mkdir()
    config = portal_config("http://127.0.0.1:9", f"sqlite:///{tmp_path / 'portal.db'}")
    outside = ("FLOW_", "PORTAL_", "PROMETHEUS_", *SERVING_VARIABLES)
    env = {key: value for key, value in os.environ.items() if not key.startswith(outside)}
    env |= {key: value for key, value in config.items() if isinstance(value, str)}
    env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path / "metrics")
    server = ProductionServer(tmp_path, env)
    try:
        server.wait_until_serving()
        yield server
    finally:
        server.stop()


def test_the_production_command_serves_pages_and_logs_no_secret(production_server):
    url = production_server.url
    secrets_sent = {
        "Cookie": "flow_portal_session=hidden-cookie",
        "Authorization": "Bearer hidden-token",
        "Referer": f"{url}/flows/search?q=hidden-referer",
    }
    health = requests.get(url + "/healthz?q=hidden-query-15108695088", headers=secrets_sent, timeout=10)
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    search = requests.get(url + "/flows/search?q=hidden-search", allow_redirects=False, timeout=10)
    assert search.status_code == 302  # to the sign-in page, its Location holding the search
    missing = requests.get(url + "/no%0D%0Aforged-line?q=hidden-missing", timeout=10)
    assert missing.status_code == 404 and "<html" in missing.text  # templates/ found as the image finds it

    log = production_server.wait_for_log("forged-line")
    assert "/healthz" in log and "hidden" not in log
    assert not any(line.startswith("forged-line") for line in log.splitlines())  # one request, one line

    # A graceful stop: SIGTERM, as docker stop and systemd send, ends gunicorn with status 0.
    assert production_server.stop() == 0


def test_the_production_command_refuses_oversized_request_lines_and_headers(production_server):
    status = production_server.raw_status
    host = b"Host: 127.0.0.1\r\n"
    assert status(b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\n" + host + b"\r\n").split()[1] == "414"
    fields = b"".join(b"X-Field-%d: 1\r\n" % number for number in range(70))
    assert status(b"GET /healthz HTTP/1.1\r\n" + host + fields + b"\r\n").split()[1] == "431"
    assert status(b"GET /healthz HTTP/1.1\r\n" + host + b"X-Big: " + b"a" * 9000 + b"\r\n\r\n").split()[1] == "431"
    assert status(b"GET /healthz HTTP/1.1\r\n" + host + b"Connection: close\r\n\r\n").split()[1] == "200"


# -- the container -----------------------------------------------------------------------------------


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (KEYWORD, arguments), continuation lines joined, comments left out."""
    instructions, pending = [], ""
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line.strip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        keyword, _, arguments = pending.partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
        pending = ""
    return instructions


def instruction(keyword: str) -> str:
    """The arguments of the last such instruction (the one that counts)."""
    found = [arguments for name, arguments in dockerfile() if name == keyword]
    assert found, f"the Dockerfile has no {keyword}"
    return found[-1]


def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def test_the_image_runs_the_readme_production_command():
    assert json.loads(instruction("CMD")) == production_command()  # exec form: gunicorn is PID 1 and gets SIGTERM
    assert not [name for name, _ in dockerfile() if name == "ENTRYPOINT"]


def test_the_image_does_not_run_as_root():
    user = instruction("USER").split(":")[0]
    assert user not in ("", "root", "0")
    keywords = [name for name, _ in dockerfile()]
    assert keywords.index("USER") > max(index for index, name in enumerate(keywords) if name in ("RUN", "COPY"))


def test_the_image_listens_where_its_health_check_and_compose_look():
    exposed = instruction("EXPOSE")
    bind = re.search(r"PORTAL_BIND=(\S+)", instruction("ENV"))[1]
    health = instruction("HEALTHCHECK")
    assert bind == f"0.0.0.0:{exposed}"
    assert f"http://127.0.0.1:{exposed}/healthz" in health
    assert compose()["services"]["portal"]["ports"] == [f"127.0.0.1:{exposed}:{exposed}"]  # for nginx on the host


def test_the_image_holds_the_app_and_no_secret():
    patterns = [
        line.strip().rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for kept_out in (".env", "secrets", "keys", "instance", ".git", ".venv", "portal.env"):
        assert kept_out in patterns
    assert [name for name in IMAGE_FILES if any(fnmatch(name, pattern) for pattern in patterns)] == []


def test_compose_starts_the_portal_after_its_database_redis_and_migration(read_config):
    services = compose()["services"]
    assert services["db"]["image"].startswith("postgres:") and services["redis"]["image"].startswith("redis:")
    assert services["db"]["healthcheck"]["test"] and services["redis"]["healthcheck"]["test"]
    assert services["migrate"]["command"] == ["flask", "--app", "portal", "db", "upgrade"]
    assert services["migrate"]["depends_on"] == {"db": {"condition": "service_healthy"}}
    portal = services["portal"]
    assert "command" not in portal  # the image's command: the README's
    assert portal["depends_on"] == {
        "db": {"condition": "service_healthy"},
        "redis": {"condition": "service_healthy"},
        "migrate": {"condition": "service_completed_successfully"},
    }
    assert portal["environment"]["PORTAL_REDIS_URL"].startswith("redis://redis:")
    grace = int(portal["stop_grace_period"].removesuffix("s"))
    assert grace > read_config().graceful_timeout  # docker stop waits for gunicorn's graceful stop


def test_compose_hands_secrets_over_as_files():
    document = compose()
    for name in ("migrate", "portal", "db"):
        service = document["services"][name]
        for variable, value in service["environment"].items():
            if re.search("SECRET|KEY|PASSWORD", variable):
                assert variable.endswith("_FILE") and value.startswith("/run/secrets/"), variable
                assert value.removeprefix("/run/secrets/") in service["secrets"], variable
    assert all(secret["file"].startswith("./secrets/") for secret in document["secrets"].values())
    assert document["services"]["portal"]["env_file"] == "portal.env"


# -- the reverse proxy ------------------------------------------------------------------------------


def nginx_directives() -> dict[str, list[str]]:
    """docs/nginx.conf's simple directives: name -> the values it is given, in order."""
    directives: dict[str, list[str]] = {}
    text = re.sub(r"#[^\n]*", "", (ROOT / "docs" / "nginx.conf").read_text())
    for statement in re.findall(r"([a-z_0-9]+)\s+([^;{}]*);", text):
        directives.setdefault(statement[0], []).append(" ".join(statement[1].split()))
    return directives


def test_the_proxy_sample_buffers_requests_and_bounds_slow_clients(read_config):
    nginx = nginx_directives()
    assert nginx["proxy_request_buffering"] == ["on"] and nginx["proxy_buffering"] == ["on"]
    for timeout in ("client_header_timeout", "client_body_timeout", "proxy_read_timeout"):
        assert re.fullmatch(r"\d+s", nginx[timeout][0]), timeout
    assert nginx["client_max_body_size"] == ["1m"]
    forwarded = {value.split()[0] for value in nginx["proxy_set_header"]}
    assert {"X-Forwarded-For", "X-Forwarded-Proto", "Host"} <= forwarded
    # nginx lets go of an idle upstream connection before gunicorn closes it, never the other way round.
    upstream = re.search(r"upstream portal \{(.*?)\}", (ROOT / "docs" / "nginx.conf").read_text(), re.S)[1]
    assert int(re.search(r"keepalive_timeout (\d+)s;", upstream)[1]) < read_config().keepalive


def test_the_proxy_sample_keeps_metrics_private_and_queries_out_of_its_log():
    text = (ROOT / "docs" / "nginx.conf").read_text()
    metrics = re.search(r"location = /metrics \{(.*?)\}", text, re.S)[1]
    assert "allow " in metrics and "deny all;" in metrics
    log_format = re.search(r"log_format portal (.*?);", text, re.S)[1]
    for variable in ("$request ", "$request_uri", "$args", "$query_string", "$http_"):
        assert variable not in log_format


def run_production_command(tmp_path: Path, *extra: str, **settings: str) -> subprocess.CompletedProcess:
    """The production command run to its end from a folder laid out as the image's /app, temporary files in
    tmp_path/tmp (where gunicorn.conf.py makes its metrics folder)."""
    app_folder, temporary = tmp_path / "app", tmp_path / "tmp"
    app_folder.mkdir()
    temporary.mkdir()
    for name in IMAGE_FILES:
        (app_folder / name).symlink_to(ROOT / name)
    config = portal_config("http://127.0.0.1:9", f"sqlite:///{tmp_path / 'portal.db'}", **production_settings())
    outside = ("FLOW_", "PORTAL_", "PROMETHEUS_", *SERVING_VARIABLES)
    env = {key: value for key, value in os.environ.items() if not key.startswith(outside)}
    env |= {key: value for key, value in config.items() if isinstance(value, str) and key != "TESTING"}
    env |= {"PORTAL_BIND": f"127.0.0.1:{free_port()}", "TMPDIR": str(temporary), **settings}
    return subprocess.run(
        [sys.executable, "-m", *production_command(), *extra],
        cwd=app_folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_production_settings_every_worker_would_refuse_stop_gunicorn_itself(tmp_path):
    """Refused in the arbiter, with one line and status 2: a worker that exits is otherwise just restarted."""
    finished = run_production_command(tmp_path, WEB_CONCURRENCY="2")
    assert finished.returncode == 2
    refusals = [line for line in finished.stderr.splitlines() if "configuration error" in line]
    assert refusals == [
        "portal: configuration error: PORTAL_REDIS_URL is required with 2 workers (PORTAL_WORKERS): "
        "sign-in throttling must be shared by every worker"
    ]
    assert list((tmp_path / "tmp").iterdir()) == []  # the metrics folder made for the run is gone


def test_a_start_that_never_serves_leaves_no_metrics_folder_behind(tmp_path):
    finished = run_production_command(tmp_path, "--check-config", WEB_CONCURRENCY="1")
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_reload_reads_the_edited_env_and_one_every_worker_would_refuse_stops_gunicorn(tmp_path):
    """Found by an operator: after HUP the workers kept the .env read at start (a rotated webhook secret still
    refused), and a setting every worker refuses had them exit and restart 106 times in 15 s, nothing answering."""
    import base64
    import secrets
    import signal
    from datetime import UTC, datetime

    from support import migrated, standard_headers, wait_until

    from portal import create_app

    (tmp_path / "app").mkdir()
    for name in IMAGE_FILES:
        (tmp_path / "app" / name).symlink_to(ROOT / name)
    (tmp_path / "metrics").mkdir()
    config = portal_config("http://127.0.0.1:9", f"sqlite:///{tmp_path / 'portal.db'}")
    migrated(create_app(config))
    settings = {key: value for key, value in config.items() if isinstance(value, str)}

    def write_env(**changes: str) -> None:
        lines = [f"{key}='{value}'" for key, value in (settings | changes).items()]
        (tmp_path / "app" / ".env").write_text("\n".join(lines) + "\n")

    outside = ("FLOW_", "PORTAL_", "PROMETHEUS_", *SERVING_VARIABLES)
    env = {key: value for key, value in os.environ.items() if not key.startswith(outside)}
    env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path / "metrics")
    write_env()
    server = ProductionServer(tmp_path, env)
    rotated = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()

    def delivered(secret: str) -> int:
        body, message = json.dumps({"type": "note", "data": {"flowId": "f-1"}}), f"msg_{secrets.token_hex(8)}"
        headers = standard_headers(secret, message, datetime.now(UTC), body) | {"content-type": "application/json"}
        return requests.post(server.url + "/webhooks/flow", data=body, headers=headers, timeout=10).status_code

    try:
        server.wait_until_serving()
        assert delivered(rotated) == 401
        write_env(FLOW_WEBHOOK_SECRETS=rotated)
        # A worker started again before the reload (a crash, a timeout) keeps the settings of the others (a re-check)
        worker = int(re.search(r"Booting worker with pid: (\d+)", server.log())[1])
        os.kill(worker, signal.SIGKILL)
        booted = r"Booting worker with pid: (\d+)"
        wait_until(lambda: {int(pid) for pid in re.findall(booted, server.log())} - {worker}, "a worker started again")
        wait_until(lambda: delivered(settings["FLOW_WEBHOOK_SECRETS"]) == 200, "the restarted worker")
        assert delivered(rotated) == 401, "not the edit made since the last reload"
        server.process.send_signal(signal.SIGHUP)
        wait_until(lambda: delivered(rotated) == 200, "the rotated secret, from the edited .env, after the reload")
        write_env(PORTAL_SECRET_KEY="short")
        server.process.send_signal(signal.SIGHUP)
        assert server.process.wait(30) == 2
        assert "portal: configuration error: PORTAL_SECRET_KEY" in server.log()
        assert server.log().count("Booting worker") <= 3, "no worker started again and again"
    finally:
        server.stop()
