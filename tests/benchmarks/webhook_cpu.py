"""Where a verified webhook delivery's CPU goes: CPU seconds of the gunicorn workers (and of PostgreSQL) over a
wrk run, divided by the events stored, for the portal, the portal without its flow-index writer, and the portal
without the writer and with a commit that answers at once (the request alone). Same harness as bench_table.py.

Run: .venv/bin/python tests/benchmarks/webhook_cpu.py [sqlite|postgres]   (needs wrk)
"""

import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_table import HERE, delivery_lines, gunicorn, wrk  # noqa: E402
from benchmarks.bench_webhooks import fresh_postgres, migrate  # noqa: E402
from benchmarks.servers import portal_env  # noqa: E402

VARIANTS = (
    ("the portal", "wsgi:app"),
    ("without the flow-index writer", "no_index_app:app"),
    ("without the writer, commit answered at once", "instant_commit_app:app"),
)


def cpu_seconds() -> Counter:
    """CPU seconds so far of the gunicorn and PostgreSQL processes alive now."""
    spent, tick = Counter(), os.sysconf("SC_CLK_TCK")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        name = "gunicorn" if "gunicorn" in command else stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        if name == "gunicorn" or name.startswith("postgres"):
            spent[name.split(":")[0]] += (int(fields[11]) + int(fields[12])) / tick
    return spent


def main(store: str) -> None:
    with tempfile.TemporaryDirectory() as name:
        deliveries = delivery_lines(Path(name) / "deliveries.tsv", 60_000)
        for label, app in VARIANTS:
            database = f"sqlite:///{name}/{app.split(':')[0]}.db" if store == "sqlite" else fresh_postgres()
            env = portal_env("http://127.0.0.1:9", database, FLOW_ENVIRONMENT="test", PYTHONPATH=str(HERE))
            migrate(env)
            port, portal = gunicorn(app, env)
            with portal:
                before, started = cpu_seconds(), time.monotonic()
                result = wrk(
                    f"http://127.0.0.1:{port}/webhooks/flow",
                    8,
                    script=HERE / "webhook_load.lua",
                    env={"DELIVERIES": str(deliveries)},
                )
                after, seconds = cpu_seconds(), time.monotonic() - started
            events = result["rate"] * seconds
            per_event = ", ".join(
                f"{process} {(after[process] - before.get(process, 0)) / events * 1000:.3f} ms" for process in after
            )
            print(f"{label:<46} {result['rate']:7.0f}/s  p99 {result['p99_ms']:6.1f} ms  CPU a delivery: {per_event}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sqlite")
