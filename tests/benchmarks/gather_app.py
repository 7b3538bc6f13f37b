import os, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import portal.flowindex.writer as w
w.GATHER_SECONDS = float(os.environ.get("GATHER", "0.2"))
w.MAX_BATCH = int(os.environ.get("MAXB", "500"))
from wsgi import app  # noqa
