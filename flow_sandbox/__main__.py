"""`python -m flow_sandbox [--host 127.0.0.1] [--port 8081]`: serve the sandbox, on loopback unless allowed."""

import argparse
import sys

from werkzeug.serving import run_simple

from . import create_app, exit_on_settings_error
from .safety import bind_refusal
from .settings import load_sandbox_settings


def _port(text: str) -> int:
    """A TCP port, 0 for any free one (the OS would take 99999 modulo 65536 and listen elsewhere without a word)."""
    if not (text.isascii() and text.isdigit() and int(text) < 65536):
        raise argparse.ArgumentTypeError(f"a port is a number from 0 to 65535, not {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m flow_sandbox", description="Serve the Flow Service sandbox.")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback unless allowed)")
    parser.add_argument("-p", "--port", type=_port, default=8081)
    args = parser.parse_args(argv)
    with exit_on_settings_error():
        refusal = bind_refusal(args.host, load_sandbox_settings())
    if refusal:  # before anything is built: no seeded flows, no webhook worker, one line
        print(f"sandbox: {refusal}", file=sys.stderr)
        raise SystemExit(2)
    run_simple(args.host, args.port, create_app(), threaded=True)


if __name__ == "__main__":
    main()
