"""Why the page's overhead grows with the upstream's latency: the same work costs more when it last ran a while ago.

In this process, one after the other: the direct call (`requests` + JSON, as the table's reference), the minimal
Flask proxy's `/flows` and the portal's signed-in `/flows` (test clients; the fast stand-in answering at once), each
after a pause in which this thread busy-waits, so the CPU never idles (no sleep states, no frequency drop). With no
pause the three run back to back, as in the table's +0 ms rows; a 50 ms pause is what a page waiting 50 ms for its
upstream call leaves between one run of the portal's code and the next. Nothing the code does depends on the pause
(cProfile: the same calls either way), so what grows is the machine's cost of the same work.

Run: .venv/bin/python tests/benchmarks/cold_after_wait.py [N]   (N runs of each at each pause, default 100)
"""

import os
import statistics
import sys
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.page_client import signed_in_page_client  # noqa: E402

PAUSES_MS = (0, 2, 5, 10, 20, 50, 100)


def busy_wait(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def timed_after(pause_ms: int, work) -> float:
    busy_wait(pause_ms / 1000)
    started = time.perf_counter()
    work()
    return (time.perf_counter() - started) * 1000


def main(count: int) -> None:
    with signed_in_page_client() as (app, portal):
        upstream = app.extensions["portal.settings"].api_url
        os.environ["UPSTREAM_URL"] = upstream
        from benchmarks.proxy_app import app as proxy_app

        proxy, direct = proxy_app.test_client(), requests.Session()
        works = {
            "direct call": lambda: direct.get(
                f"{upstream}/api/flows?limit=10", headers={"Authorization": "Bearer b"}
            ).json(),
            "minimal proxy": lambda: proxy.get("/flows"),
            "portal": lambda: portal.get("/flows"),
        }
        for work in works.values():
            for _ in range(30):
                work()
        print("pause (busy) | " + " | ".join(f"{name}, median ms" for name in works) + " | portal − direct")
        for pause in PAUSES_MS:
            spent: dict[str, list[float]] = {name: [] for name in works}
            for _ in range(count):
                for name, work in works.items():
                    spent[name].append(timed_after(pause, work))
            medians = {name: statistics.median(values) for name, values in spent.items()}
            cells = " | ".join(f"{value:.2f}" for value in medians.values())
            print(f"{pause} ms | {cells} | +{medians['portal'] - medians['direct call']:.2f}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
