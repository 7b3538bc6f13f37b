"""No page, export or log line shows a full national id unless an operator revealed it."""

import logging
import re
from collections import deque
from html import unescape

from support import create_form, deliver_signed

NORWEGIAN, SWEDISH = "15108695088", "811218-9876"
LINK = re.compile(r'href="(/[^"#]*)"')
SKIPPED = ("/logout", "/static/", "/flows/new")  # signing out, files, and the form the id is typed into


def crawl(client, start: str, limit: int = 400) -> dict[str, str]:
    """Every page reachable from `start` by GET links inside the portal, with its text."""
    seen, queue = {}, deque([start])
    while queue and len(seen) < limit:
        path = queue.popleft()
        if path in seen or path.startswith(SKIPPED) or "/reveal" in path:
            continue
        answer = client.get(path)
        seen[path] = answer.get_data(as_text=True)
        if answer.mimetype == "text/html":
            queue.extend(unescape(link) for link in LINK.findall(seen[path]))
    return seen


def test_no_page_export_or_log_line_holds_a_full_id_without_a_reveal(app, signed_in, sandbox, caplog):
    caplog.set_level(logging.DEBUG)
    operator = signed_in("operator")
    assert create_form(operator, national_id=NORWEGIAN).status_code == 302
    flow = sandbox.create(national_id=SWEDISH)
    payload = {"type": "flow.incident", "data": {"flowId": flow["flowId"], "ssn": SWEDISH, "note": f"id {NORWEGIAN}"}}
    assert deliver_signed(app, payload).status_code == 200
    admin = signed_in("admin")
    admin.get(f"/flows?q={NORWEGIAN}", follow_redirects=True)
    pages = crawl(admin, "/flows?archived=all")
    pages |= crawl(admin, "/events")
    for path in (
        "/admin/audit",
        "/admin/rejected",
        "/admin/access",
        "/admin/subjects",
        "/flows/export.csv?archived=all",
    ):
        pages[path] = admin.get(path).get_data(as_text=True)
    assert len(pages) > 15, sorted(pages)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for number in (NORWEGIAN, SWEDISH, SWEDISH.replace("-", "")):
        assert [path for path, text in pages.items() if number in text] == [], number
        assert number not in logged
    revealed = operator.post(
        f"/flows/{flow['flowId']}/reveal", data={"purpose": "Identity check"}, follow_redirects=True
    )
    assert SWEDISH in revealed.get_data(as_text=True), "only a reveal shows it"
