"""Where a signed-in /flows page spends its time in-process: pyinstrument over N requests (test client,
stand-in upstream), printed as a call tree. The README's before/after breakdown comes from here.

Run: .venv/bin/python tests/benchmarks/profile_page.py [N]   (pip install pyinstrument)
"""

import os
import sys
import tempfile
import time
from pathlib import Path

from pyinstrument import Profiler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_table import HERE, process, recorded_list  # noqa: E402
from benchmarks.servers import (
    free_port,  # noqa: E402
    portal_env,  # noqa: E402
)


def main(count: int) -> None:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        port = free_port()
        upstream = f"http://127.0.0.1:{port}"
        command = [sys.executable, str(HERE / "fast_upstream.py"), str(port), str(recorded_list(folder))]
        with process(command, f"{upstream}/stats"):
            os.environ.update(portal_env(upstream, f"sqlite:///{folder}/profile.db"))
            from flask_migrate import upgrade

            from portal import create_app
            from portal.extensions import db
            from portal.models import User

            app = create_app()
            with app.app_context():
                upgrade()
                user = User(username="bench", role="viewer")
                user.set_password("bench-password-123")
                db.session.add(user)
                db.session.commit()
            app.config["WTF_CSRF_ENABLED"] = False
            client = app.test_client()
            client.post("/login", data={"username": "bench", "password": "bench-password-123"})
            for _ in range(50):
                assert client.get("/flows").status_code == 200
            profiler = Profiler(interval=0.0002)
            started = time.perf_counter()
            profiler.start()
            for _ in range(count):
                client.get("/flows")
            profiler.stop()
            spent = (time.perf_counter() - started) / count * 1000
            print(f"{spent:.2f} ms a page in-process (with the profiler's overhead)")
            print(profiler.output_text(unicode=True, color=False, show_all=False))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
