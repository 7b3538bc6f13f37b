"""How long the portal takes to stop right after a webhook load: start it under gunicorn, send signed deliveries
with wrk, send SIGTERM to the master and time the exit. A stop that takes longer than `--slow` seconds gets a
`py-spy dump --locals --native` of every worker (py-spy installed by hand: it is no dependency).

Seen twice in about 230 rounds on 2026-11-27: a worker waited out `graceful_timeout` (25 s) with two requests
waiting for a group commit that never came; the cause was SimpleQueue's timed get under signals (`portal/batches.py`,
the README's notes on webhooks).

Run: .venv/bin/python tests/benchmarks/stop_under_load.py [--rounds N] [--seconds S] [--slow S]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks.bench_table as table  # noqa: E402
from benchmarks.bench_webhooks import migrate  # noqa: E402
from benchmarks.servers import BIN, ROOT, free_port, portal_env  # noqa: E402


def start_portal(env: dict, port: int, log: Path) -> subprocess.Popen:
    command = [str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", *table.GUNICORN, "--bind", f"127.0.0.1:{port}"]
    portal = subprocess.Popen(
        [*command, "--no-control-socket", "wsgi:app"],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return portal
        except requests.RequestException:
            if time.monotonic() > deadline:
                raise RuntimeError("the portal did not start") from None
            time.sleep(0.1)


def dump_workers(workers: list[str], folder: Path, round_number: int) -> None:
    spy = BIN / "py-spy" if (BIN / "py-spy").exists() else shutil.which("py-spy")
    if not spy:
        print("  (py-spy is not installed: no dump)")
        return
    for pid in workers:
        dump = subprocess.run([str(spy), "dump", "--locals", "--native", "--pid", pid], capture_output=True, text=True)
        path = folder / f"stop-{round_number}-{pid}.txt"
        path.write_text(dump.stdout + dump.stderr)
        print(f"  dump of worker {pid}: {path}")


def one_round(folder: Path, round_number: int, slow: float) -> float:
    # Signed afresh each round: Standard Webhooks refuses a timestamp over five minutes old, and a refused
    # delivery never reaches the group committer.
    deliveries = table.delivery_lines(folder / "deliveries.tsv", 2_000 * table.WRK_SECONDS)
    env = portal_env("http://127.0.0.1:9", f"sqlite:///{folder}/stop-{round_number}.db", FLOW_ENVIRONMENT="test")
    migrate(env)
    port = free_port()
    portal = start_portal(env, port, folder / f"stop-{round_number}.log")
    try:
        load = table.wrk(
            f"http://127.0.0.1:{port}/webhooks/flow",
            8,
            script=table.HERE / "webhook_load.lua",
            env={"DELIVERIES": str(deliveries)},
        )
        workers = subprocess.run(["pgrep", "-P", str(portal.pid)], capture_output=True, text=True).stdout.split()
        started, dumped = time.monotonic(), False
        portal.terminate()
        while portal.poll() is None:
            if not dumped and time.monotonic() - started > slow:
                dump_workers(workers, folder, round_number)
                dumped = True
            time.sleep(0.05)
        took = time.monotonic() - started
        answered = f"{load['rate']:.0f} deliveries/s ({load['errors']} not 2xx)"
        print(f"round {round_number + 1}: {answered}, stopped in {took:.2f} s", flush=True)
        return took
    finally:
        if portal.poll() is None:
            portal.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seconds", type=int, default=8, help="wrk's run in each round")
    parser.add_argument("--slow", type=float, default=6.0, help="a stop slower than this is dumped")
    options = parser.parse_args()
    table.WRK_SECONDS = options.seconds
    folder = Path(tempfile.mkdtemp(prefix="stop-under-load-"))
    times = [one_round(folder, number, options.slow) for number in range(options.rounds)]
    slow = [took for took in times if took > options.slow]
    print(f"{len(slow)} of {len(times)} stops took over {options.slow:.0f} s; dumps and logs in {folder}")


if __name__ == "__main__":
    main()
