"""The reference for the write-behind benchmark: the portal with its index writer replaced by one that drops work."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from wsgi import app  # noqa: E402


class DroppingWriter:
    def submit(self, job) -> None:
        pass

    def flush(self, timeout: float = 0) -> bool:
        return True

    def close(self, timeout: float = 0) -> None:
        pass


app.extensions["flow_index"] = DroppingWriter()
