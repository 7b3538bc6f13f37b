"""`python -m flow_sandbox [--host 127.0.0.1] [--port 8081]`: serve the sandbox, on loopback unless allowed."""

import argparse
import sys

from werkzeug.serving import run_simple

from . import create_app, exit_on_settings_error
from .safety import bind_refusal
from .settings import load_sandbox_settings


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m flow_sandbox", description="Serve the Flow Service sandbox.")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback unless allowed)")
    parser.add_argument("-p", "--port", type=int, default=8081)
    args = parser.parse_args(argv)
    with exit_on_settings_error():
        refusal = bind_refusal(args.host, load_sandbox_settings())
    if refusal:  # before anything is built: no seeded flows, no webhook worker, one line
        print(f"sandbox: {refusal}", file=sys.stderr)
        raise SystemExit(2)
    run_simple(args.host, args.port, create_app(), threaded=True)


if __name__ == "__main__":
    main()
