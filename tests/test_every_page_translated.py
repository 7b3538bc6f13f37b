"""Every page, in every language but English, shows no English message: the catalogues are complete *and* used.

test_i18n checks that each message in the code has a translation; this renders every page the portal has
(every GET route, with data behind it) in Norwegian, Swedish and Finnish and looks for the English text of
any message whose translation differs, in what a person reads: text, titles, labels, placeholders.
"""

import re
import uuid
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path

import pytest
from babel.messages.pofile import read_po
from support import deliver_signed, form_data, set_account_language, sign_in

TRANSLATIONS = Path(__file__).resolve().parents[1] / "portal/translations"
LANGUAGES = ("nb", "sv", "fi")
PLACEHOLDER = re.compile(r"%\(\w+\)[sd]|%[sd]|\{\w*\}")
READ_ATTRIBUTES = ("title", "aria-label", "placeholder", "alt")
NOT_READ_AS_TEXT = {"script", "style", "code", "pre", "kbd", "samp"}  # data, JSON and commands stay as they are
# Routes that are not pages: machine endpoints, downloads and redirects.
NOT_PAGES = re.compile(r"^/(static|webhooks|api|health|metrics|ready|live|sandbox)|/export|/logout|/language|/sso")


class ReadText(HTMLParser):
    """The text a person reads on a page, as separate pieces: text nodes and readable attributes."""

    def __init__(self):
        super().__init__()
        self.pieces: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag, attrs):
        if tag in NOT_READ_AS_TEXT:
            self.skipping += 1
        for name, value in attrs:
            if name in READ_ATTRIBUTES and value:
                self.pieces.append(value)

    def handle_endtag(self, tag):
        if tag in NOT_READ_AS_TEXT and self.skipping:
            self.skipping -= 1

    def handle_data(self, data):
        if not self.skipping and data.strip():
            self.pieces.append(" ".join(data.split()))


def english_left(page: str, phrases: set[str], words: set[str]) -> set[str]:
    reader = ReadText()
    reader.feed(page)
    found = set()
    for piece in reader.pieces:
        if piece in words:
            found.add(piece)
        found.update(phrase for phrase in phrases if phrase in piece)
    return found


def english_of(language: str) -> tuple[set[str], set[str]]:
    """The English a page in `language` must not show: phrases (several words) and whole one-word pieces."""
    with (TRANSLATIONS / language / "LC_MESSAGES/messages.po").open("rb") as handle:
        catalog = read_po(handle)
    phrases, words = set(), set()
    for message in catalog:
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        if not message.id or set(ids) & set(strings):
            continue  # a message written the same in both languages (CSV, E-mail) says nothing
        for text in ids:
            for fragment in PLACEHOLDER.split(text):
                fragment = " ".join(fragment.split()).strip(" .,:;()")
                if " " in fragment and len(fragment) >= 12:
                    phrases.add(fragment)
                elif fragment and " " not in text.strip() and fragment[0].isalpha():
                    words.add(fragment)
    return phrases, words


@pytest.fixture
def full_portal(app, sandbox, make_user):
    """A portal with something on every page: flows in each state, events, rejected deliveries, an audit trail."""
    admin = make_user("admin")
    client = app.test_client()
    sign_in(client, admin)
    hook = "http://127.0.0.1:9/down"  # its deliveries fail: an incident
    flows = [sandbox.create(webhookUrl=hook)["flowId"] for _ in range(3)]
    sandbox.control(flows[0], "accept")
    sandbox.control(flows[1], "cancel")
    for flow_id, status in ((flows[0], "Accepted"), (flows[2], "Opened")):
        deliver_signed(app, event(flow_id, status))
        deliver_signed(app, event(flow_id, status))
    client.post("/webhooks/flow", data=b"{}", headers={"content-type": "application/json"})  # a rejected delivery
    client.post("/flows/new", data=form_data(client, last_name=""))  # a form with errors
    client.get("/flows")
    client.get(f"/flows/{flows[0]}")
    assert app.extensions["flow_index"].flush(10)
    return client, flows


def event(flow_id: str, status: str) -> dict:
    return {
        "id": str(uuid.uuid4()),
        "type": "flow.status_changed",
        "timestamp": datetime.now(timezone.utc).isoformat(),
        "data": {"flowId": flow_id, "status": status},
    }


def every_page(app, client, flows) -> dict[str, str]:
    """Each GET page with no part to fill in, and those with one, filled from the data above."""
    paths = {
        rule.rule: rule.rule
        for rule in app.url_map.iter_rules()
        if "GET" in rule.methods and not rule.arguments and not NOT_PAGES.search(rule.rule)
    }
    event_row = re.search(r'href="/events/(\d+)"', client.get("/events").text)[1]
    group = re.search(r'href="(/insights/incidents/[^"]+)"', client.get("/insights/incidents").text)
    paths |= {
        "accepted flow": f"/flows/{flows[0]}",
        "cancelled flow": f"/flows/{flows[1]}",
        "opened flow": f"/flows/{flows[2]}",
        "event": f"/events/{event_row}",
        "search": "/flows?archived=all&status=Accepted",
        "archived": "/flows?archived=true",
        "insights 30 days": "/insights?range=30d",
        "stuck": "/insights/stuck?hours=1",
        "not found": "/flows/00000000-0000-4000-8000-000000000000",
        "bad query": "/flows?limit=abc&archived=maybe",
    }
    if group:
        paths["incident group"] = group[1].replace("&amp;", "&")
    return paths


def test_every_page_in_every_language_shows_no_english(app, full_portal):
    client, flows = full_portal
    pages = every_page(app, client, flows)
    assert len(pages) >= 20, sorted(pages)
    left: dict[str, set[str]] = {}
    client.post("/language", data={"language": "en"})
    for path in pages.values():  # English first: a template worked out once, in its first reader's language, shows
        client.get(path)
    client.get("/flows")  # shows what the last English page flashed
    for language in LANGUAGES:
        phrases, words = english_of(language)
        client.post("/language", data={"language": language})
        for name, path in pages.items():
            answer = client.get(path)
            assert answer.status_code < 500, (language, path)
            if found := english_left(answer.text, phrases, words):
                left[f"{name} ({language})"] = found
        login = app.test_client().get("/login", headers={"Accept-Language": language})
        if found := english_left(login.text, phrases, words):
            left[f"login ({language})"] = found
    assert left == {}


def test_the_search_for_english_finds_it(app, full_portal):
    """The check above can fail: an English page is full of what it looks for."""
    client, flows = full_portal
    phrases, words = english_of("nb")
    client.post("/language", data={"language": "en"})
    found = english_left(client.get(f"/flows/{flows[0]}").text, phrases, words)
    assert {"Technical details", "Accepted", "What happened"} <= found


def test_an_account_with_a_language_gets_its_pages_in_it(app, make_user):
    username = make_user("viewer")
    set_account_language(app, username, "fi")
    client = app.test_client()
    sign_in(client, username)
    assert '<html lang="fi">' in client.get("/flows").text
