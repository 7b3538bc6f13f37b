"""Where an in-process signed-in /flows page (10 rows) spends its time, without a profiler's distortion: the
median page, and the mean of its timed parts (template, Flow Service call, row statuses from the index).

Run: .venv/bin/python tests/benchmarks/page_parts.py [N] [LATENCY_MS]   (the stand-in answering after LATENCY_MS)
"""

import statistics
import sys
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.page_client import signed_in_page_client  # noqa: E402


def timed(parts: dict, name: str, function):
    def measured(*args, **kwargs):
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            parts[name] += time.perf_counter() - started

    return measured


def main(count: int, latency_ms: int = 0) -> None:
    import flask.templating

    import portal.views.flows as flow_views

    with signed_in_page_client() as (app, client):
        requests.post(f"{app.extensions['portal.settings'].api_url}/latency?ms={latency_ms}")
        parts = {"template": 0.0, "Flow Service call": 0.0, "row statuses": 0.0}
        flask.templating._render = timed(parts, "template", flask.templating._render)
        flow_views._fetch_page = timed(parts, "Flow Service call", flow_views._fetch_page)
        flow_views.statuses_of_page = timed(parts, "row statuses", flow_views.statuses_of_page)
        pages = []
        for _ in range(count):
            started = time.perf_counter()
            client.get("/flows")
            pages.append(time.perf_counter() - started)
        print(f"median page {statistics.median(pages) * 1000:.2f} ms in-process (test client)")
        for part, seconds in parts.items():
            print(f"  {part:<18} {seconds / count * 1000:.2f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1500, int(sys.argv[2]) if len(sys.argv) > 2 else 0)
