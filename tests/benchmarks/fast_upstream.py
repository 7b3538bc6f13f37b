"""A Flow Service stand-in fast enough not to be the benchmark's bottleneck (asyncio, keep-alive, no framework).

It answers the token endpoint, the flow list (a response recorded from the sandbox) and `/stats` (how many
token and list requests it took; `token` counts the portal's, which carry client credentials, and
`token_reference` the minimal proxy's, which carry none). `UPSTREAM_LATENCY_MS`, or `POST /latency?ms=N`, delays every
answer without blocking.

With PAGES over 1 the list has that many pages of the recorded page's size, newest first: the first is the
recorded one, each later one its flows again under new ids (`page_flow_id`), a day older a page. DESIGN's
cursors move through them (`starting_after`, `ending_before`, each found in a dictionary: a deep page costs the
stand-in what the first does); an unknown cursor is answered 400.

Run: python fast_upstream.py PORT LIST_RESPONSE_FILE [PAGES]
"""

import asyncio
import json
import os
import sys
import uuid
from datetime import datetime, timedelta
from urllib.parse import parse_qs

delay = {"seconds": float(os.environ.get("UPSTREAM_LATENCY_MS", "0")) / 1000}
TOKEN = json.dumps({"access_token": "bench-token", "token_type": "Bearer", "expires_in": 3600}).encode()
counts = {"token": 0, "token_reference": 0, "list": 0, "other": 0}
UNKNOWN_CURSOR = json.dumps({"error": "validation_error", "message": "unknown cursor"}).encode()


def page_flow_id(page: int, row: int) -> str:
    """The id of the row-th flow (from 0) of a later page (from 2)."""
    return str(uuid.UUID(int=page * 1000 + row))


class FlowList:
    """The recorded page, alone or followed by copies of it; answers `GET /api/flows` for a query string."""

    def __init__(self, recorded: bytes, pages: int) -> None:
        self.recorded, self.pages = recorded, pages
        first = json.loads(recorded)["data"]
        self.size = len(first)
        self.flows = list(first)
        for page in range(2, pages + 1):
            self.flows += [_copy(flow, page, row) for row, flow in enumerate(first)]
        self.position = {flow["id"]: index for index, flow in enumerate(self.flows)}
        self.encoded: dict[str, bytes | None] = {}

    def answer(self, query: str) -> bytes | None:
        """The page a query asks for, as JSON; None for a cursor that names no flow."""
        if self.pages == 1:
            return self.recorded
        if query not in self.encoded:
            self.encoded[query] = self._page(parse_qs(query))
        return self.encoded[query]

    def _page(self, query: dict[str, list[str]]) -> bytes | None:
        after, before = query.get("starting_after", [None])[0], query.get("ending_before", [None])[0]
        cursor = after or before
        if cursor is not None and cursor not in self.position:
            return None
        if before:
            end = self.position[before]
            start = max(0, end - self.size)
            more = start > 0
        else:
            start = self.position[after] + 1 if after else 0
            end = start + self.size
            more = end < len(self.flows)
        return json.dumps({"data": self.flows[start:end], "has_more": more}).encode()


def _copy(flow: dict, page: int, row: int) -> dict:
    older = timedelta(days=page - 1)
    copy = dict(flow, id=page_flow_id(page, row))
    for name in ("createdAt", "updatedAt"):
        if isinstance(flow.get(name), str):
            moment = datetime.fromisoformat(flow[name].replace("Z", "+00:00")) - older
            copy[name] = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return copy


def answer(status: str, body: bytes, content_type: str = "application/json") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, flow_list: FlowList) -> None:
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
                page = flow_list.answer(query)
                if page is None:
                    writer.write(answer("400 Bad Request", UNKNOWN_CURSOR))
                else:
                    writer.write(answer("200 OK", page))
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


async def main(port: int, list_file: str, pages: int = 1) -> None:
    with open(list_file, "rb") as handle:
        flow_list = FlowList(handle.read(), pages)
    server = await asyncio.start_server(lambda r, w: serve(r, w, flow_list), "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], *(int(pages) for pages in sys.argv[3:4])))
