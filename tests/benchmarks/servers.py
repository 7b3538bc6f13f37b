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
        "portal.sandbox",
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
