"""Instructions per unit of work, counted by callgrind: deterministic, so a change can be judged on a shared machine
whose timings vary two- to fourfold within an hour. Two workloads, each counted only around the measured loop:

- `page`: an in-process signed-in `/flows` (10 rows, the fast stand-in upstream), after 50 warm-up pages;
- `deep`: the same for page DEEP_PAGE of a list of UPSTREAM_PAGES, reached by the portal's Next links;
- `index`: the flow-index writer's work for webhook events of new flows (building the observations, dropping
  those written lately, the batch's transaction on SQLite), in batches of BATCH (under wrk load it gathers ~7).

Run: .venv/bin/python tests/benchmarks/instructions.py page [N]            (default 200 pages)
     .venv/bin/python tests/benchmarks/instructions.py deep [N]            (default 200 pages)
     .venv/bin/python tests/benchmarks/instructions.py index [N] [BATCH]   (default 707 events, batches of 7)
Needs valgrind (apt-get install valgrind); about 20 s for the defaults.
"""

import os
import subprocess
import sys
import tempfile
import uuid
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
CHILD = "INSTRUCTIONS_COUNTED_CHILD"


def main(arguments: list[str]) -> None:
    workload, count = arguments[0], int(arguments[1]) if len(arguments) > 1 else None
    if os.environ.get(CHILD):
        WORKLOADS[workload](*(int(value) for value in arguments[1:]))
        return
    with tempfile.TemporaryDirectory() as folder:
        out, log = Path(folder) / "callgrind.out", Path(folder) / "valgrind.log"
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
        subprocess.run(
            [*command, f"--log-file={log}", sys.executable, __file__, *arguments],
            env={**os.environ, CHILD: "1"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
        )
        counted = total_instructions(out)
    units = count or DEFAULT_COUNT[workload]
    unit = "event" if workload == "index" else "page"
    print(f"{workload}: {counted:,} instructions, {counted // units:,} a {unit} ({' '.join(arguments)})")


def total_instructions(out: Path) -> int:
    """The run's instruction count: the callgrind file's `totals:` line (its `summary:` says 0 when counting was
    switched on and off)."""
    for line in out.read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {out}")


@contextmanager
def counting():
    """Callgrind counts in the `with` block only (the process runs under --instr-atstart=no)."""
    callgrind("on")
    try:
        yield
    finally:
        callgrind("off")


def callgrind(state: str) -> None:
    subprocess.run(["callgrind_control", "-i", state, str(os.getpid())], capture_output=True, check=True)


def pages(count: int = 200) -> None:
    from benchmarks.page_client import signed_in_page_client

    with signed_in_page_client() as (_app, client), counting():
        for _ in range(count):
            client.get("/flows")


def deep_pages(count: int = 200) -> None:
    from benchmarks.bench_table import DEEP_PAGE, UPSTREAM_PAGES, next_link
    from benchmarks.page_client import signed_in_page_client

    with signed_in_page_client(upstream_pages=UPSTREAM_PAGES) as (_app, client):
        url = "/flows"
        for _ in range(DEEP_PAGE - 1):
            url = next_link(url, client.get(url).text)
        for _ in range(50):
            client.get(url)
        with counting():
            for _ in range(count):
                client.get(url)


def index_events(count: int = 707, batch: int = 7) -> None:
    from benchmarks.servers import portal_env

    with tempfile.TemporaryDirectory() as folder:
        os.environ.update(portal_env("http://127.0.0.1:9", f"sqlite:///{folder}/index.db", FLOW_ENVIRONMENT="test"))
        from flask_migrate import upgrade

        from portal import create_app
        from portal.flowindex.feed import writer

        app = create_app()
        with app.app_context():
            upgrade()
            index_writer = writer()
            for jobs in batches(event_jobs(50, first=10**6), batch):  # warm up
                index_writer._write(jobs)
            measured = list(batches(event_jobs(count, first=0), batch))
            with counting():
                for jobs in measured:
                    index_writer._write(jobs)


def event_jobs(count: int, first: int) -> list:
    """Writer jobs as the webhook receiver hands them over: one status event each, every one for a new flow."""
    from portal.flowindex.observations import from_event

    start = datetime(2026, 11, 27, 12, tzinfo=timezone.utc)
    jobs = []
    for number in range(first, first + count):
        flow_id, seen_at = str(uuid.UUID(int=number)), start + timedelta(milliseconds=number % 10**6)
        payload = {
            "id": f"evt-{number}",
            "type": "flow.status.changed",
            "flowId": flow_id,
            "status": "Opened",
            "timestamp": "2026-11-27T12:00:00Z",
            "data": {"flowStatus": "Active", "version": 2},
        }
        jobs.append(lambda f=flow_id, p=payload, at=seen_at: (from_event(f, p["type"], "Opened", at, None, p, at),))
    return jobs


def batches(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]


WORKLOADS = {"page": pages, "deep": deep_pages, "index": index_events}
DEFAULT_COUNT = {"page": 200, "deep": 200, "index": 707}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in WORKLOADS:
        sys.exit(__doc__)
    main(sys.argv[1:])
