"""A Flow Service stand-in fast enough not to be the benchmark's bottleneck (asyncio, keep-alive, no framework).

It answers the token endpoint, the flow list (a fixed response recorded from the sandbox) and `/stats`
(how many token and list requests it took; `token` counts the portal's, which carry client credentials, and
`token_reference` the minimal proxy's, which carry none). `UPSTREAM_LATENCY_MS`, or `POST /latency?ms=N`, delays every
answer without blocking.

Run: python fast_upstream.py PORT LIST_RESPONSE_FILE
"""

import asyncio
import json
import os
import sys

delay = {"seconds": float(os.environ.get("UPSTREAM_LATENCY_MS", "0")) / 1000}
TOKEN = json.dumps({"access_token": "bench-token", "token_type": "Bearer", "expires_in": 3600}).encode()
counts = {"token": 0, "token_reference": 0, "list": 0, "other": 0}


def answer(status: str, body: bytes, content_type: str = "application/json") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, flow_list: bytes) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            method, target, _version = request_line.split(" ", 2)
            length, credentials = 0, False
            for line in header_lines:
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
                credentials = credentials or line.lower().startswith("authorization:")
            body = await reader.readexactly(length) if length else b""
            credentials = credentials or b"client_id=" in body
            path, _, query = target.partition("?")
            if path == "/latency":  # POST /latency?ms=50: every later answer waits 50 ms
                delay["seconds"] = float(query.removeprefix("ms=")) / 1000
                writer.write(answer("204 No Content", b""))
                await writer.drain()
                continue
            if delay["seconds"]:
                await asyncio.sleep(delay["seconds"])
            if method == "POST" and path.endswith("/protocol/openid-connect/token"):
                counts["token" if credentials else "token_reference"] += 1
                writer.write(answer("200 OK", TOKEN))
            elif method == "GET" and path == "/api/flows":
                counts["list"] += 1
                writer.write(answer("200 OK", flow_list))
            elif path == "/stats":
                writer.write(answer("200 OK", json.dumps(counts).encode()))
            else:
                counts["other"] += 1
                writer.write(answer("404 Not Found", b'{"error": "not found"}'))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()


async def main(port: int, list_file: str) -> None:
    with open(list_file, "rb") as handle:
        flow_list = handle.read()
    server = await asyncio.start_server(lambda r, w: serve(r, w, flow_list), "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
