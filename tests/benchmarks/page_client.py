"""A signed-in test client of the portal in this process, its Flow Service the fast stand-in: for the page profilers."""

import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from benchmarks.bench_table import HERE, process, recorded_list
from benchmarks.servers import free_port, portal_env


@contextmanager
def signed_in_page_client(warm_up: int = 50, upstream_pages: int = 1):
    """Yields (app, client): a viewer signed in, `/flows` fetched `warm_up` times already; the stand-in's list has
    `upstream_pages` pages."""
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        port = free_port()
        upstream = f"http://127.0.0.1:{port}"
        command = [sys.executable, str(HERE / "fast_upstream.py"), str(port), str(recorded_list(folder))]
        with process([*command, str(upstream_pages)], f"{upstream}/stats"):
            os.environ.update(portal_env(upstream, f"sqlite:///{folder}/pages.db"))
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
            for _ in range(warm_up):
                assert client.get("/flows").status_code == 200
            yield app, client
