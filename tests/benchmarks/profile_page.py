"""Where a signed-in /flows page spends its time in-process: pyinstrument over N requests (test client,
stand-in upstream), printed as a call tree. The README's before/after breakdown comes from here.

Run: .venv/bin/python tests/benchmarks/profile_page.py [N]   (pip install pyinstrument)
"""

import sys
import time
from pathlib import Path

from pyinstrument import Profiler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.page_client import signed_in_page_client  # noqa: E402


def main(count: int) -> None:
    with signed_in_page_client() as (_app, client):
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
