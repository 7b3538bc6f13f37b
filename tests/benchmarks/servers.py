"""Servers for the benchmarks, each in its own process so the load generator does not share its GIL."""

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SECRET = "whsec_Zmxvdy1zYW5kYm94LWRlbW8td2ViaG9vay1zZWNyZXQ="  # the sandbox's demo webhook secret


def portal_env(api_url: str, database_url: str, client: tuple[str, str] = ("bench", "bench"), **extra: str) -> dict:
    """The environment a benchmarked portal starts with: the Flow Service (or a stand-in) at `api_url`."""
    return {
        "FLOW_API_URL": api_url,
        "FLOW_OIDC_URL": api_url,
        "FLOW_REALM": "sandbox",
        "FLOW_CLIENT_ID": client[0],
        "FLOW_CLIENT_SECRET": client[1],
        "FLOW_SCOPES": "loan-application:create:no",
        "FLOW_WEBHOOK_SECRETS": SECRET,
        "PORTAL_SECRET_KEY": "benchmark-secret-key-0000",
        "PORTAL_INDEX_KEY": "benchmark-index-key-0000",
        "PORTAL_DATABASE_URL": database_url,
        **extra,
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running(command: list[str], ready_url: str, env: dict | None = None):
    process = subprocess.Popen(
        command, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                requests.get(ready_url, timeout=1)
                break
            except requests.RequestException:
                time.sleep(0.1)
        else:
            raise RuntimeError(f"{command} did not start")
        yield
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextmanager
def sandbox(**settings):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        str(BIN / "flask"),
        "--app",
        "flow_sandbox",
        "run",
        "--host",
        "127.0.0.1",
        "-p",
        str(port),
        "--no-reload",
        "--with-threads",
    ]
    with running(command, f"{url}/.well-known/openid-configuration", settings):
        yield url


@contextmanager
def gunicorn(app: str, env: dict, ready_path: str = "/healthz", workers: int = 2):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        str(BIN / "gunicorn"),
        "--workers",
        str(workers),
        "--threads",
        "4",
        "--bind",
        f"127.0.0.1:{port}",
        "--log-level",
        "warning",
        "--no-control-socket",  # gunicorn 25+: one shared socket path, taken by whichever started first
        app,
    ]
    with running(command, url + ready_path, env):
        yield url
