"""Flow index benchmarks (issue 9), each against a reference measured in the same run.

1. Write-behind overhead: median latency of the plain list page (`/flows`, 100 flows a page) under
   gunicorn with wrk (one connection), the portal as shipped against the same portal whose index writer
   drops its work. Rounds alternate between the two so drift on a shared machine hits both.
2. The request path's own share, exactly: the time of the `saw_page()` call a list page makes, against
   rendering the same page's template, in one process.

Run: .venv/bin/python tests/benchmarks/bench_index.py   (needs wrk: apt-get install wrk)
"""

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.servers import BIN, ROOT, gunicorn, sandbox  # noqa: E402

ROUNDS = 5
WRK_SECONDS = 5
USER, PASSWORD = "bench", "bench-password-0000"
_LATENCY = re.compile(r"50%\s+([\d.]+)(us|ms|s)\b")


def portal_env(sandbox_url: str, database_url: str) -> dict:
    return {
        "FLOW_API_URL": sandbox_url,
        "FLOW_OIDC_URL": sandbox_url,
        "FLOW_REALM": "sandbox",
        "FLOW_CLIENT_ID": "demo-client",
        "FLOW_CLIENT_SECRET": "demo-secret",
        "FLOW_SCOPES": "loan-application:create:no",
        "FLOW_WEBHOOK_SECRETS": "whsec_Zmxvdy1zYW5kYm94LWRlbW8td2ViaG9vay1zZWNyZXQ=",
        "PORTAL_SECRET_KEY": "benchmark-secret-key-0000",
        "PORTAL_INDEX_KEY": "benchmark-index-key-0000",
        "PORTAL_DATABASE_URL": database_url,
        "PYTHONPATH": str(ROOT / "tests" / "benchmarks"),
    }


def flask(env: dict, *args: str) -> None:
    subprocess.run(
        [str(BIN / "flask"), "--app", "portal", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        check=True,
        capture_output=True,
    )


def session_cookie(url: str) -> str:
    browser = requests.Session()
    form = browser.get(f"{url}/login", timeout=10).text
    token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', form)[1]
    answer = browser.post(
        f"{url}/login", data={"csrf_token": token, "username": USER, "password": PASSWORD}, timeout=10
    )
    answer.raise_for_status()
    return "; ".join(f"{name}={value}" for name, value in browser.cookies.items())


def median_latency_ms(url: str, cookie: str) -> float:
    output = subprocess.run(
        # One connection: the latency a person sees, not a saturated machine's queueing.
        ["wrk", "-t1", "-c1", f"-d{WRK_SECONDS}s", "--latency", "-H", f"Cookie: {cookie}", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if "Non-2xx" in output:
        raise RuntimeError(f"wrk saw failed requests:\n{output}")
    value, unit = _LATENCY.search(output).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def write_behind_overhead() -> dict:
    shipped, reference = [], []
    with sandbox(SANDBOX_SEED="300") as sandbox_url, tempfile.TemporaryDirectory() as folder:
        env = portal_env(sandbox_url, f"sqlite:///{folder}/bench.db")
        flask(env, "db", "upgrade")
        flask(env, "users", "create", USER, "--role", "viewer", "--password", PASSWORD)
        apps = {"shipped": ("wsgi:app", shipped), "reference": ("no_index_app:app", reference)}
        for _ in range(ROUNDS):
            for app, results in apps.values():
                with gunicorn(app, env, workers=1) as url:
                    cookie = session_cookie(url)
                    page = f"{url}/flows?limit=100"
                    median_latency_ms(page, cookie)  # warm-up: token, connections, imports
                    results.append(median_latency_ms(page, cookie))
    shipped_ms, reference_ms = statistics.median(shipped), statistics.median(reference)
    print(
        f"plain list page, median of {ROUNDS} wrk medians: shipped {shipped_ms:.2f} ms, "
        f"index writer dropped {reference_ms:.2f} ms, overhead {shipped_ms - reference_ms:+.2f} ms "
        f"(x{shipped_ms / reference_ms:.3f}); rounds {shipped} vs {reference}",
        file=sys.stderr,
    )
    return {"list_page_ms": shipped_ms, "reference_ms": reference_ms, "overhead_ms": shipped_ms - reference_ms}


def request_path_cost() -> dict:
    """Microseconds `saw_page` adds to a request (handing over the page), median of many calls."""
    sys.path.insert(0, str(ROOT / "tests"))
    from support import migrated, portal_config

    from portal import create_app
    from portal.flowapi import FlowPage
    from portal.flowindex.feed import saw_page

    items = [
        {"id": f"flow-{n}", "nationalId": "15108695088", "status": "Opened", "referenceId": f"LA-{n}"}
        for n in range(100)
    ]
    page = FlowPage.from_json({"has_more": True, "data": items})
    with tempfile.TemporaryDirectory() as folder:
        app = migrated(create_app(portal_config("http://127.0.0.1:9", f"sqlite:///{folder}/cost.db")))
        with app.test_request_context("/flows"):
            timings = []
            for _ in range(2000):
                started = time.perf_counter()
                saw_page(page, False)
                timings.append(time.perf_counter() - started)
            app.extensions["flow_index"].close()
    median_us = statistics.median(timings) * 1e6
    print(
        f"saw_page() on the request path: median {median_us:.1f} us, p95 "
        f"{statistics.quantiles(timings, n=20)[-1] * 1e6:.1f} us",
        file=sys.stderr,
    )
    return {"saw_page_median_us": median_us}


def main() -> dict:
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk)")
    return {"request_path": request_path_cost(), "write_behind": write_behind_overhead()}


if __name__ == "__main__":
    print(main())
