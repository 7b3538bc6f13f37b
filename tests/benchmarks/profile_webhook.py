"""Where a verified webhook delivery spends its time in-process: pyinstrument over N deliveries (test client,
SQLite), printed as a call tree.

Run: .venv/bin/python tests/benchmarks/profile_webhook.py [N]   (pip install pyinstrument)
"""

import os
import sys
import tempfile
import time
from pathlib import Path

from pyinstrument import Profiler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_webhooks import signed_deliveries  # noqa: E402
from benchmarks.servers import portal_env  # noqa: E402


def main(count: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        os.environ.update(portal_env("http://127.0.0.1:9", f"sqlite:///{folder}/profile.db"))
        from flask_migrate import upgrade

        from portal import create_app

        app = create_app()
        with app.app_context():
            upgrade()
        client = app.test_client()
        for body, headers in signed_deliveries(50):
            assert client.post("/webhooks/flow", data=body, headers=headers).status_code == 200
        deliveries = signed_deliveries(count)
        profiler = Profiler(interval=0.0002)
        started = time.perf_counter()
        profiler.start()
        for body, headers in deliveries:
            client.post("/webhooks/flow", data=body, headers=headers)
        profiler.stop()
        print(f"{(time.perf_counter() - started) / count * 1000:.2f} ms a delivery in-process (profiler included)")
        print(profiler.output_text(unicode=True, color=False, show_all=bool(os.environ.get("PROFILE_ALL"))))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
