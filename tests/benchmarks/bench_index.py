"""Flow index benchmarks (issue 9), each against a reference measured in the same run.

1. Write-behind overhead: median latency of the plain list page (`/flows`, 100 flows a page) under
   gunicorn with wrk (one connection), the portal as shipped against the same portal whose index writer
   drops its work. Rounds alternate between the two so drift on a shared machine hits both.
2. The request path's own share, exactly: the time of the `saw_page()` call a list page makes.
4. Search at size: 1,000,000 flows seeded into PostgreSQL and 200,000 into SQLite (seed_index.py);
   p95 of search by reference, by national id, by last-name prefix, the counts per status and a filtered, sorted page,
   each with the EXPLAIN of its query, against the p95 of a primary-key lookup in the same run.
3. `flows sync` of 100,000 sandbox flows into an empty index (SQLite and PostgreSQL), against walking the
   same pages with the bare client and no writes, alternating, in one run: the ratio of their rates.

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
import uuid
from pathlib import Path

import requests
from sqlalchemy import make_url, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.servers import BIN, ROOT, gunicorn, portal_env, sandbox  # noqa: E402

from portal.extensions import db  # noqa: E402

ROUNDS = 5
WRK_SECONDS = 5
USER, PASSWORD = "bench", "bench-password-0000"
_LATENCY = re.compile(r"50%\s+([\d.]+)(us|ms|s)\b")


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
        env = portal_env(
            sandbox_url,
            f"sqlite:///{folder}/bench.db",
            ("demo-client", "demo-secret"),
            PYTHONPATH=str(ROOT / "tests" / "benchmarks"),
        )
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


SYNC_FLOWS = 100_000
SYNC_ROUNDS = 2


def sync_rate(postgres_url: str | None) -> dict:
    """Flows per second of `flows sync` into an empty index, and of a bare walk of the same pages."""
    sys.path.insert(0, str(ROOT / "tests"))
    from support import create_database_beside, drop_database, migrated, portal_config

    from portal import create_app

    results: dict[str, list[float]] = {"bare": [], "sqlite": [], "postgres": []}
    with sandbox(SANDBOX_SEED=str(SYNC_FLOWS)) as sandbox_url, tempfile.TemporaryDirectory() as folder:
        for round_number in range(SYNC_ROUNDS):
            stores = {"sqlite": f"sqlite:///{folder}/sync-{round_number}.db"}
            if postgres_url:
                stores["postgres"] = create_database_beside(postgres_url, f"portal_bench_{uuid.uuid4().hex[:10]}")
            for kind, url in stores.items():
                app = migrated(create_app(portal_config(sandbox_url, url)))
                results["bare"].append(_bare_walk(app))
                results[kind].append(_sync(app))
                app.extensions["flow_index"].close()
                with app.app_context():
                    db.engine.dispose()
                if kind == "postgres":
                    drop_database(postgres_url, make_url(url).database)
    bare = statistics.median(results["bare"])
    figures = {"bare_flows_per_s": bare}
    for kind in ("sqlite", "postgres"):
        if results[kind]:
            rate = statistics.median(results[kind])
            figures[f"{kind}_flows_per_s"], figures[f"{kind}_ratio"] = rate, rate / bare
            print(
                f"flows sync of {SYNC_FLOWS} flows, {kind}: {rate:.0f} flows/s against a bare walk's "
                f"{bare:.0f} flows/s (x{rate / bare:.2f}); rounds {results[kind]} vs bare {results['bare']}",
                file=sys.stderr,
            )
    return figures


def _bare_walk(app) -> float:
    """Walk every current page with the client, writing nothing; flows per second."""
    client, count, after = app.extensions["flow_client"], 0, None
    started = time.perf_counter()
    while True:
        page = client.list_flows(100, False, after, None)
        count += len(page.items)
        if not page.has_more or not page.last_id:
            break
        after = page.last_id
    return count / (time.perf_counter() - started)


def _sync(app) -> float:
    from portal.flowindex.sync import CURRENT, run_sync

    with app.app_context():
        report = run_sync(CURRENT)
    assert report.new == report.seen > 0, report.summary()
    return report.seen / report.seconds


SEARCH_SIZES = {"postgres": 1_000_000, "sqlite": 200_000}
SEARCH_REPEATS = 200


def search_at_size(postgres_url: str | None) -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    from seed_index import DEFAULT_KEY, national_id, seed
    from support import create_database_beside, drop_database, migrated, portal_config

    from portal import create_app

    figures = {}
    with tempfile.TemporaryDirectory() as folder:
        stores = {"sqlite": f"sqlite:///{folder}/search.db"}
        if postgres_url:
            stores["postgres"] = create_database_beside(postgres_url, f"portal_bench_{uuid.uuid4().hex[:10]}")
        for kind, url in stores.items():
            try:
                app = migrated(
                    create_app(portal_config("http://127.0.0.1:9", url, PORTAL_INDEX_KEY=DEFAULT_KEY.decode()))
                )
                seconds = seed(url, SEARCH_SIZES[kind])
                print(f"{kind}: seeded {SEARCH_SIZES[kind]} flows in {seconds:.0f} s", file=sys.stderr)
                with app.test_request_context("/flows"):
                    figures[kind] = _search_timings(kind, national_id)
                with app.app_context():
                    db.engine.dispose()
            finally:
                if kind == "postgres":
                    drop_database(postgres_url, make_url(url).database)
    return figures


def _search_timings(kind: str, national_id) -> dict:
    import random

    from sqlalchemy import select

    from portal.flowindex.keys import read_national_id
    from portal.flowindex.search import FlowSearch, _conditions, search_page, status_counts
    from portal.models import FlowRecord

    chooser, size = random.Random(7), SEARCH_SIZES[kind]
    key = current_app_key()
    people = [read_national_id(national_id(chooser)[0]).keyed_hash(key) for _ in range(SEARCH_REPEATS)]
    searches = {
        "primary key (reference)": lambda n: db.session.get(FlowRecord, chooser.randrange(1, size)),
        "reference": lambda n: search_page(FlowSearch(text=f"la-{10001 + chooser.randrange(size)}", archived=None), 50),
        "national id": lambda n: search_page(FlowSearch(person=people[n], archived=None), 50),
        "last-name prefix": lambda n: search_page(
            FlowSearch(text=chooser.choice(("bjorn", "lind", "hans", "kor", "ode", "mak")), archived=None), 50
        ),
        "counts, current flows (broad)": lambda n: status_counts(FlowSearch(archived=False)),
        "counts, country + incidents": lambda n: status_counts(
            FlowSearch(country=chooser.choice(("no", "se", "fi")), incidents=True, archived=None)
        ),
        "filtered sorted page": lambda n: search_page(
            FlowSearch(
                status=chooser.choice(("Accepted", "Opened")),
                country=chooser.choice(("no", "se", "fi")),
                archived=False,
                sort=chooser.choice(("created", "changed")),
            ),
            50,
        ),
    }
    results = {}
    for name, run in searches.items():
        timings = []
        for n in range(SEARCH_REPEATS):
            started = time.perf_counter()
            run(n)
            timings.append((time.perf_counter() - started) * 1000)
            db.session.expunge_all()
        p95 = statistics.quantiles(timings, n=20)[-1]
        results[name] = p95
        print(f"{kind} {name:<26} p95 {p95:6.2f} ms  median {statistics.median(timings):6.2f} ms", file=sys.stderr)
    for name, search in (
        ("reference", FlowSearch(text="la-500000", archived=None)),
        ("national id", FlowSearch(person=people[0], archived=None)),
        ("last-name prefix", FlowSearch(text="bjorn", archived=None)),
        ("filtered sorted page", FlowSearch(status="Accepted", country="no", archived=False)),
    ):
        query = select(FlowRecord.id).where(*_conditions(search)).order_by(FlowRecord.created_at.desc()).limit(51)
        compiled = query.compile(db.engine, compile_kwargs={"literal_binds": True})
        explain = "EXPLAIN QUERY PLAN " if kind == "sqlite" else "EXPLAIN "
        plan = [" ".join(str(part) for part in row) for row in db.session.execute(text(explain + str(compiled)))]
        print(f"  EXPLAIN {kind} {name}:\n    " + "\n    ".join(plan), file=sys.stderr)
    return results


def current_app_key() -> bytes:
    from flask import current_app

    return current_app.extensions["portal.settings"].index_key


def main() -> dict:
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk)")
    postgres = os.environ.get("PORTAL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    return {
        "request_path": request_path_cost(),
        "search": search_at_size(postgres),
        "sync": sync_rate(postgres),
        "write_behind": write_behind_overhead(),
    }


if __name__ == "__main__":
    print(main())
