"""Search, filters, counts, keyset pages and CSV export of the flow index, against a live sandbox."""

import re
import time
from dataclasses import dataclass
from datetime import date, datetime, timezone
from html import unescape
from urllib.parse import parse_qs, urlencode, urlsplit
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import update
from support import PASSWORD, add_user, set_account_language, sign_in, spreadsheet_rows
from test_views import FLOW_ROW, links

from portal.csvexport import csv_chunks
from portal.extensions import db
from portal.flowapi.records import FlowSummary
from portal.flowindex.keys import read_national_id
from portal.flowindex.observations import LIST, SYNC, Observation, from_summary
from portal.flowindex.store import apply_observations
from portal.models import AccessEntry, AuditEntry, FlowRecord
from portal.staff_sessions import SEARCHED_PERSON

KEY = b"test-index-key-0123456789"
# (national id as the flow was created with it, last name, what happens to it in the sandbox)
PEOPLE = (
    ("15108695088", "Bjørnstad", ("open", "accept")),
    ("811218-9876", "Åkesson", ("open",)),
    ("121212+1212", "Lindqvist", ("reject",)),
    ("131052-308T", "Virtanen", ("cancel",)),
    ("010203A1008", "Ødegård", ("archive",)),
    ("24058600160", "Bjørklund", ()),
    ("15108695088", "Bjørnstad", ()),  # the same person again, a second application
)


def ids(page) -> list[str]:
    assert page.status_code == 200, (page.status_code, page.headers.get("Location"))
    return FLOW_ROW.findall(page.text)


def flashes(page) -> list[str]:
    return [unescape(text) for text in re.findall(r'class="alert alert-warning" role="alert">([^<]+)<', page.text)]


def field_errors(page) -> dict[str, str]:
    """Each filter's error as the page says it under the filter."""
    found = re.findall(r'<span class="d-block" data-field-error="([^"]+)">([^<]+)<', page.text)
    return {name: unescape(text) for name, text in found}


@dataclass
class World:
    """A sandbox with flows in every state, a portal whose index has seen them all, a signed-in viewer."""

    app: object
    sandbox: object
    staff: object
    flows: list[dict]  # as created, in creation order

    def get(self, url: str):
        return self.staff.get(url)

    def service_flows(self) -> dict[str, dict]:
        """The sandbox's own state of every flow: consent status, archived, lifecycle, incidents, created."""
        state = {}
        for archived in (False, True):
            listed = self.sandbox.api("GET", f"/api/flows?limit=100&archived={str(archived).lower()}").json()["data"]
            for item in listed:
                flow = self.sandbox.api("GET", f"/api/applications/{item['id']}").json()["flow"]
                state[item["id"]] = {
                    "status": item["status"],
                    "archived": archived,
                    "lifecycle": flow["status"],
                    "incidents": flow["hasIncidents"],
                    "created": flow["createdAt"],
                    "reference": flow["referenceId"],
                }
        return state

    def index_everything(self) -> None:
        """What the portal sees when staff page through both lists and open every flow."""
        for archived in ("false", "true"):
            url = f"/flows?limit=100&archived={archived}"
            while url:
                page = self.get(url)
                assert page.status_code == 200
                url = links(page, "next")
        for flow_id in self.service_flows():
            assert self.get(f"/flows/{flow_id}").status_code == 200
        self.flush()

    def flush(self) -> None:
        assert self.app.extensions["flow_index"].flush(10), "the index writer did not finish"


def client_for(app, role: str = "viewer"):
    client = app.test_client()
    assert sign_in(client, add_user(app, role=role)).status_code == 302
    return client


@pytest.fixture
def empty_index(make_app, database_url):
    """A signed-in viewer of a portal whose index is empty."""
    return client_for(make_app(database=database_url, WTF_CSRF_ENABLED=False))


@pytest.fixture
def world(make_sandbox, make_app, database_url) -> World:
    sandbox = make_sandbox(SANDBOX_WEBHOOK_BACKOFF="0.001")
    app = make_app(database=database_url, sandbox_url=sandbox.url, WTF_CSRF_ENABLED=False)
    flows = []
    for national_id, last_name, actions in PEOPLE:
        flow = sandbox.create(national_id=national_id, last_name=last_name)
        for action in actions:
            assert sandbox.control(flow["flowId"], action).status_code == 200
        flows.append(flow)
    troubled = sandbox.create(national_id="30079200049", last_name="Østby", webhookUrl="http://127.0.0.1:9/down")
    deadline = time.monotonic() + 10
    while not sandbox.api("GET", f"/api/applications/{troubled['flowId']}").json()["flow"]["hasIncidents"]:
        assert time.monotonic() < deadline, "the sandbox never recorded the failed webhook as an incident"
        time.sleep(0.02)
    flows.append(troubled)
    built = World(app, sandbox, client_for(app), flows)
    built.index_everything()
    return built


# -- the search box ----------------------------------------------------------------------------


def test_a_reference_or_flow_id_goes_straight_to_the_flow(world):
    flow = world.flows[1]
    reference, flow_id = flow["referenceId"], flow["flowId"]
    for written in (reference, reference.lower(), f"  {reference} ", flow_id, flow_id.upper()):
        answer = world.staff.get("/flows", query_string={"q": written})
        assert answer.status_code == 302 and answer.headers["Location"] == f"/flows/{flow_id}", written


def test_the_start_of_a_flow_id_as_the_list_shows_it_finds_the_flow(world):
    flow_id = world.flows[2]["flowId"]
    for written in (flow_id[:8], flow_id[:8].upper(), flow_id[:13], f" {flow_id[:10]} "):
        answer = world.staff.get("/flows", query_string={"q": written})
        assert answer.status_code == 302 and answer.headers["Location"] == f"/flows/{flow_id}", written
    assert ids(world.staff.get("/flows", query_string={"q": flow_id[:7]}, follow_redirects=True)) == [], "8 or more"
    assert world.staff.get(f"/flows/{flow_id[:8]}").headers["Location"] == f"/flows/{flow_id}", "typed in the address"


@pytest.mark.parametrize("flow_id", ["11595624-8854-4ef2-8365-ed47bb2ae2c2", "19121212-1213-4ef2-8365-ed47bb2ae2c2"])
def test_the_start_of_a_flow_id_that_has_a_national_id_s_shape_finds_the_flow(empty_index, flow_id):
    """About one random flow id in 40 begins with eight digits: its start as the list shows it ("11595624-8854")
    has a Swedish personnummer's shape, and read as a mistyped one it found nothing (a run of CI). The flow wins;
    the same shape that starts no flow is still a mistyped id, kept out of the address."""
    now = datetime.now(timezone.utc)
    with empty_index.application.app_context():
        apply_observations([Observation(flow_id, LIST, now, now, reference_id="LA-42", archived=False)], KEY)
    for written in (flow_id[:13], f" {flow_id[:13]} ", flow_id[:16]):
        answer = empty_index.get("/flows", query_string={"q": written})
        assert answer.status_code == 302 and answer.headers["Location"] == f"/flows/{flow_id}", written
    unknown = empty_index.get("/flows", query_string={"q": "19121212-1214"}, follow_redirects=True)
    assert "not a valid one" in field_errors(unknown)["q"]


def test_the_start_of_a_national_id_s_shape_that_two_flows_share_lists_both(empty_index):
    """Two flow ids may share their first 13 characters: a start of a personnummer's shape lists both flows (an
    attack: it was taken for a mistyped national id and found nothing)."""
    now = datetime.now(timezone.utc)
    shared = ["11595624-8854-4ef2-8365-ed47bb2ae2c2", "11595624-8854-4aaa-8365-ed47bb2ae2c3"]
    with empty_index.application.app_context():
        observations = [
            Observation(flow_id, LIST, now, now, reference_id=f"LA-{n}", archived=False)
            for n, flow_id in enumerate(shared)
        ]
        apply_observations(observations, KEY)
    listed = empty_index.get("/flows", query_string={"q": "11595624-8854"}, follow_redirects=True)
    assert sorted(ids(listed)) == sorted(shared)
    assert not any("not a valid one" in message for message in [*flashes(listed), *field_errors(listed).values()])


def test_a_reference_in_the_address_goes_to_its_flow(world):
    flow = world.flows[2]
    for written in (flow["referenceId"], flow["referenceId"].lower()):
        answer = world.get(f"/flows/{written}")
        assert answer.status_code == 302 and answer.headers["Location"] == f"/flows/{flow['flowId']}"
    assert world.get(f"/flows/{flow['flowId']}").status_code == 200
    assert world.get("/flows/LA-999999").status_code == 404


def test_a_repeated_reference_lists_its_flows_instead_of_choosing_one(world):
    now = datetime.now(timezone.utc)
    with world.app.app_context():
        apply_observations(
            [Observation(f"other-{n}", LIST, now, now, reference_id="XR-7", archived=False) for n in (1, 2)], KEY
        )
    listed = world.get("/flows?q=xr-7")
    assert sorted(ids(listed)) == ["other-1", "other-2"]
    shared = world.get("/flows/XR-7")  # a reference several flows share: the list of them, not a 404
    assert shared.status_code == 302 and shared.headers["Location"].endswith("/flows?q=XR-7")


EXTRA = (("C-10038", "f-c2"), ("D-10038", "f-d-now"))


def test_a_bare_number_suggests_the_references_it_ends(make_app, database_url):
    app = make_app(database=database_url, WTF_CSRF_ENABLED=False)
    now = datetime.now(timezone.utc)
    references = {"LA-10038": "f-la", "B10038": "f-b", "LA-110038": "f-longer", "LA-10039": "f-other"}
    references |= {"C-10038": "f-c1", "D-10038": "f-d-gone"}
    seen = [Observation(flow, LIST, now, now, reference_id=ref, archived=False) for ref, flow in references.items()]
    seen += [Observation(flow, LIST, now, now, reference_id=ref, archived=False) for ref, flow in EXTRA]
    with app.app_context():
        apply_observations(seen, KEY)
        db.session.execute(update(FlowRecord).where(FlowRecord.flow_id == "f-d-gone").values(gone_at=now))
        db.session.commit()
    staff = client_for(app)
    page = staff.get("/flows?q=10038").text
    assert "No flows in the index match this search." in page
    meant = re.search(r'data-testid="meant">(.*?)</p>', page, re.DOTALL)[1]
    assert re.findall(r'<a href="([^"]+)">([^<]+)</a>', meant) == [
        ("/flows/f-b", "B10038"),
        ("/flows?q=C-10038", "C-10038"),  # two current flows share it: the list of them
        ("/flows/f-d-now", "D-10038"),  # the one the service still lists, not the gone one beside it
        ("/flows/f-la", "LA-10038"),
    ], "each reference once"
    assert 'data-testid="meant"' not in staff.get("/flows?q=LA-10").text, "only a bare number of three digits up"
    assert 'data-testid="meant"' not in staff.get("/flows?q=38").text


def test_a_reference_typed_as_people_say_it_finds_its_flow(make_app, database_url):
    """q=la10040 and q=LA 10040 found nothing and offered no "Did you mean", while LA-10040 opened the flow."""
    app = make_app(database=database_url, WTF_CSRF_ENABLED=False)
    now = datetime.now(timezone.utc)
    references = {"LA-10040": "f-la", "B10038": "f-b", "LA-100401": "f-longer"}
    seen = [Observation(flow, LIST, now, now, reference_id=ref, archived=False) for ref, flow in references.items()]
    with app.app_context():
        apply_observations(seen, KEY)
    staff = client_for(app)
    for typed, flow_id in [
        ("la10040", "f-la"),
        ("LA 10040", "f-la"),
        ("La_10040", "f-la"),
        (" la-10040 ", "f-la"),
        ("b-10038", "f-b"),
        ("B 10038", "f-b"),
    ]:
        answer = staff.get("/flows", query_string={"q": typed})
        while answer.status_code == 302 and not answer.headers["Location"].startswith("/flows/"):
            answer = staff.get(answer.headers["Location"])  # a tidier address first
        assert answer.status_code == 302 and answer.headers["Location"] == f"/flows/{flow_id}", typed
    assert staff.get("/flows/la10040").headers["Location"] == "/flows/f-la"
    assert "No flows in the index match" in staff.get("/flows?q=la1004").text, "the whole number, not its start"


# Each person's number as created (PEOPLE) and written otherwise: with and without separators, 10 or 12
# digits and + for a Swede past 100, the Finnish century sign in either case.
WRITTEN_FORMS = {
    0: ("15108695088", "151086 95088", "151086-95088"),
    1: ("811218-9876", "8112189876", "19811218-9876", "198112189876"),
    2: ("121212+1212", "191212121212", "19121212-1212"),
    3: ("131052-308T", "131052-308t", " 131052-308T "),
    4: ("010203A1008", "010203a1008"),
}


def test_a_national_id_in_any_written_form_finds_the_person(world):
    for person, forms in WRITTEN_FORMS.items():
        number = PEOPLE[person][0]
        expected = read_national_id(number).keyed_hash(KEY)
        same_person = [
            flow["flowId"] for (known, *_), flow in zip(PEOPLE, world.flows, strict=False) if known == number
        ]
        for written in forms:
            answer = world.staff.get("/flows", query_string={"q": written})
            assert answer.status_code == 302 and answer.headers["Location"] == f"/flows?person={expected}", written
            page = world.get(answer.headers["Location"])
            assert sorted(ids(page)) == sorted(same_person), written
            assert re.sub(r"\W", "", written) not in page.text and 'data-testid="person-search"' in page.text


def test_the_search_box_is_sent_by_post_so_no_address_ever_holds_the_national_id(world):
    """As a GET form the box put the id typed in the first address (a proxy's log keeps it) before the list took it
    out (a new user's walk): sent by POST, it is sealed before any address holds it, and the person is found."""
    number = PEOPLE[0][0]
    expected = read_national_id(number).keyed_hash(KEY)
    for typed, fields in ((number, {}), ("151086 95088", {"born": "", "status": "", "sort": "created"})):
        answer = world.staff.post("/flows/search", data={"q": typed, "archived": "all"} | fields)
        addresses = []
        while answer.status_code == 302:
            addresses.append(answer.headers["Location"])
            answer = world.staff.get(addresses[-1])
        assert addresses[-1] == f"/flows?archived=all&person={expected}", addresses
        assert not any(digits in address for address in addresses for digits in ("151086", "95088")), addresses
        assert len(ids(answer)) == 2 and 'data-testid="person-search"' in answer.text
    text = world.staff.post("/flows/search", data={"q": " bjorn ", "born": "", "status": "", "sort": "created"})
    assert text.status_code == 302 and text.headers["Location"] == "/flows?q=bjorn", (
        "empty fields and defaults left out"
    )
    mistyped = world.staff.post("/flows/search", data={"q": "15108695089"})
    assert "15108695089" not in mistyped.headers["Location"] and "q=~" in mistyped.headers["Location"]


def test_a_search_box_sent_too_long_or_with_fields_it_lacks_leads_to_an_address_the_server_reads(world):
    """5,000 characters typed in the box made an address past gunicorn's request line, answered by its own bare 414
    page (an attack); a crafted form's other names and repeated fields went into the address as well. The address
    holds the box's own fields once each, cut to what an address holds, and the list says the text is too long."""
    sent = {"q": "ø" * 5000, "status": ["Accepted", "Rejected"], "sort": "x" * 5000, "extra": "1", "csrf_token": "t"}
    answer = world.staff.post("/flows/search", data=sent)
    address = answer.headers["Location"]
    assert answer.status_code == 302 and len(address) < 2000, len(address)
    assert "extra" not in address and "csrf_token" not in address and "Rejected" not in address, address
    page = world.staff.get(address, follow_redirects=True)
    assert page.status_code == 200 and "longer than 100 characters" in page.text
    fitting = "Ølsen-Åberg " * 8  # 96 characters: kept whole
    answer = world.staff.post("/flows/search", data={"q": fitting})
    assert answer.headers["Location"] == "/flows?" + urlencode({"q": fitting.strip()})


def test_a_born_date_that_contradicts_the_national_id_searched_is_left_out_with_a_word(world):
    """A person searched by national id with a Born date that is not the id's birth date found nothing, without a
    hint (a walk): Born is left out, and the page says so."""
    number = PEOPLE[0][0]  # born 1986-10-15
    hashed = read_national_id(number).keyed_hash(KEY)
    answer = world.staff.get("/flows", query_string={"q": number, "born": "1990-01-01", "archived": "all"})
    assert answer.status_code == 302 and answer.headers["Location"] == f"/flows?archived=all&person={hashed}"
    page = world.get(answer.headers["Location"])
    assert "Born was left out: it is not the birth date in the national id searched for." in page.text
    assert len(ids(page)) == 2
    agreeing = world.staff.get("/flows", query_string={"q": number, "born": "1986-10-15", "archived": "all"})
    assert "born=1986-10-15" in agreeing.headers["Location"]
    assert len(ids(world.get(agreeing.headers["Location"]))) == 2


def signed_in_with_csrf(app):
    client, username = app.test_client(), add_user(app, role="viewer")
    token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', client.get("/login").text)[1]
    assert (
        client.post("/login", data={"username": username, "password": PASSWORD, "csrf_token": token}).status_code == 302
    )
    return client


def test_a_text_typed_on_a_person_s_results_leaves_the_person_out_of_the_address(world):
    """The box on a person's results carries the person; a text typed there is a new search, as the page showed,
    but the address kept the person beside it (a walk: a bookmark or Apply then carried the old person along)."""
    person = read_national_id(PEOPLE[0][0]).keyed_hash(KEY)
    sent = world.staff.post("/flows/search", data={"q": "Virtanen", "person": person, "status": ""})
    assert sent.status_code == 302 and sent.headers["Location"] == "/flows?q=Virtanen"
    applied = world.staff.post("/flows/search", data={"q": "", "person": person, "status": "Accepted"})
    assert applied.headers["Location"] == f"/flows?person={person}&status=Accepted", "Apply keeps the person"


def test_the_search_box_form_carries_its_csrf_token_outside_the_form_made_once(make_app):
    app = make_app()
    staff = signed_in_with_csrf(app)
    for address in ("/flows", "/flows?q=bjorn"):
        page = staff.get(address, follow_redirects=True)
        assert '<form method="post" action="/flows/search" id="flow-search-form"' in page.text, address
        token = re.search(r'<input type="hidden" name="csrf_token" value="([^"]+)" form="flow-search-form">', page.text)
        assert token, address
        sent = staff.post("/flows/search", data={"q": "bjorn", "csrf_token": token[1]})
        assert sent.status_code == 302 and sent.headers["Location"] == "/flows?q=bjorn"
    # A token gone stale (the list open past its hour, a sign-in in another tab) still searches (a re-check: "Your
    # session expired" lost what was typed): the POST only leads to the search's address, whose checks apply there.
    stale = staff.post("/flows/search", data={"q": "bjorn", "csrf_token": "stale"})
    assert stale.status_code == 302 and stale.headers["Location"] == "/flows?q=bjorn"
    from_elsewhere = staff.post("/flows/search", data={"q": "15108695088"}, headers={"Sec-Fetch-Site": "cross-site"})
    asked = staff.get(from_elsewhere.headers["Location"], headers={"Sec-Fetch-Site": "cross-site"})
    assert asked.status_code == 200 and 'data-testid="asked-to-continue"' in asked.text, "another site's: asked"
    signed_out = app.test_client().post("/flows/search", data={"q": "bjorn"})
    assert signed_out.status_code in (302, 400) and "q=" not in signed_out.headers.get("Location", ""), "no one's"
    other = signed_in_with_csrf(app)  # the list's search box is made once for everyone: each its own session's token
    other_page = other.get("/flows")
    theirs = re.search(r'name="csrf_token" value="([^"]+)" form="flow-search-form"', other_page.text)[1]
    assert other.post("/flows/search", data={"q": "x", "csrf_token": theirs}).status_code == 302


def test_filters_applied_to_a_persons_results_keep_the_person(world):
    """The box is empty on a person's results (the id is never shown): the form carries the person's hash, so
    Apply narrows that person's flows; a text typed into the box is a new search and replaces the person."""
    number = PEOPLE[0][0]
    person = read_national_id(number).keyed_hash(KEY)
    theirs = [flow["flowId"] for (known, *_), flow in zip(PEOPLE, world.flows, strict=False) if known == number]
    page = world.get(f"/flows?person={person}")
    assert f'<input type="hidden" name="person" value="{person}">' in page.text
    applied = world.get(f"/flows?person={person}&q=&born=&status=Accepted&sort=created&order=newest")
    assert applied.status_code == 302 and applied.headers["Location"] == f"/flows?status=Accepted&person={person}"
    accepted = [flow_id for flow_id, state in world.service_flows().items() if state["status"] == "Accepted"]
    narrowed = ids(world.get(applied.headers["Location"]))
    assert len(theirs) == 2 and narrowed == [flow_id for flow_id in theirs if flow_id in accepted] != []
    assert ids(world.get(f"/flows?person={person}&q=lindq")) == ids(world.get("/flows?q=lindq")) != []


def test_a_flow_made_with_a_synthetic_id_is_found_by_it(world):
    """The create form offers synthetic test ids (Tenor, Finnish 900-999): search finds their flows, masked."""
    flow = world.sandbox.create(national_id="16822548834", last_name="Tenorsen")
    world.index_everything()
    answer = world.get("/flows?q=16822548834")
    assert answer.status_code == 302 and "person=" in answer.headers["Location"]
    page = world.get(answer.headers["Location"])
    assert ids(page) == [flow["flowId"]] and "168225•••••" in page.text and "16822548834" not in page.text


@pytest.mark.parametrize("pasted", ["Bjørnstad 15108695088", "15108695088 Bjørnstad", "Bjørnstad, 151086 95088"])
def test_a_national_id_pasted_with_the_name_finds_the_person(world, pasted):
    alone = world.staff.get("/flows?q=15108695088").headers["Location"]
    answer = world.staff.get("/flows", query_string={"q": pasted})
    assert answer.status_code == 302 and answer.headers["Location"] == alone, "the id decides; the name adds nothing"


def test_a_national_id_search_a_filter_leaves_empty_is_audited_with_the_mask(world):
    """Searched, then filtered to a tab holding none of the person's flows: the audit log said "national id ?"
    (found by a new user)."""
    hashed = read_national_id("15108695088").keyed_hash(KEY)
    world.staff.get(f"/flows?archived=all&person={hashed}&status=Unopened&country=se", follow_redirects=True)
    nobody = read_national_id("02029010075").keyed_hash(KEY)  # nobody in this index
    world.staff.get(f"/flows?archived=all&person={nobody}", follow_redirects=True)
    with world.app.app_context():
        targets = [entry.target for entry in db.session.query(AuditEntry).filter_by(action="search_national_id")]
    assert targets == [
        f"national id 151086••••• hash:{hashed[:12]}",
        f"national id (no flow indexed) hash:{nobody[:12]}",
    ]


def test_two_ids_or_none_among_words_are_searched_as_text(world):
    for typed in ("15108695088 24058600160", "Bjørnstad 151086"):
        answer = world.staff.get("/flows", query_string={"q": typed})
        assert "person=" not in answer.headers.get("Location", ""), typed


def test_a_national_id_search_is_audited_without_the_number(world):
    page = world.staff.get("/flows?q=151086 95088", follow_redirects=True)
    assert len(ids(page)) == 2
    world.get("/flows?q=19811218-9876")  # only turned into its hash: nothing shown, nothing to audit yet
    with world.app.app_context():
        entries = db.session.query(AuditEntry).filter_by(action="search_national_id").all()
        stored = " ".join(f"{entry.target} {entry.username}" for entry in db.session.query(AuditEntry))
        searched = [entry.target for entry in db.session.query(AccessEntry).filter_by(kind="search")]
    assert len(entries) == 1
    assert searched == ["flow search"], "the person's own access log: found by a search of the flow list"
    hashed = read_national_id("15108695088").keyed_hash(KEY)
    assert entries[0].target == f"national id 151086••••• hash:{hashed[:12]}"
    for digits in ("15108695088", "95088", "8112189876"):
        assert digits not in stored


NAME_SEARCHES = {
    "bjor": {"Bjørnstad", "Bjørklund"},
    "BJØR": {"Bjørnstad", "Bjørklund"},
    "bjorn": {"Bjørnstad"},
    "Bjørns": {"Bjørnstad"},
    "bjornstad": {"Bjørnstad"},
    "odeg": {"Ødegård"},
    "akes": {"Åkesson"},
    "ostby": {"Østby"},
    "zz": set(),
}


def test_a_last_name_prefix_ignores_case_and_nordic_letters(world):
    named = {flow["flowId"]: name for (_, name, _), flow in zip(PEOPLE, world.flows, strict=False)}
    named[world.flows[-1]["flowId"]] = "Østby"
    for text, names in NAME_SEARCHES.items():
        page = world.staff.get("/flows", query_string={"q": text})
        assert sorted(ids(page)) == sorted(flow_id for flow_id, name in named.items() if name in names), text
        assert all(name in page.text for name in names)


def test_names_in_other_scripts_and_with_any_apostrophe_are_found(world):
    names = ("O'Brien", "O’Brien", "Иванова", "إبراهيم")
    created = {world.sandbox.create(national_id="30079200049", last_name=name)["flowId"]: name for name in names}
    world.index_everything()
    for text, wanted in (
        ("obrien", {"O'Brien", "O’Brien"}),
        ("o'brien", {"O'Brien", "O’Brien"}),
        ("O’B", {"O'Brien", "O’Brien"}),
        ("иван", {"Иванова"}),
        ("إبراهيم", {"إبراهيم"}),
    ):
        found = {created[flow_id] for flow_id in ids(world.staff.get("/flows", query_string={"q": text}))}
        assert found == wanted, text


def test_born_narrows_a_name(world):
    other = world.sandbox.create(national_id="30079200049", last_name="Bjørnsen")
    world.get(f"/flows/{other['flowId']}")
    world.flush()
    everyone = world.get("/flows?q=bjorn")
    assert other["flowId"] in ids(everyone) and len(ids(everyone)) == 3
    narrowed = world.get("/flows?q=bjorn&born=1986-10-15")
    assert sorted(ids(narrowed)) == sorted([world.flows[0]["flowId"], world.flows[6]["flowId"]])
    assert ids(world.get("/flows?born=1992-07-30")) == [other["flowId"], world.flows[-1]["flowId"]]


# -- filters and counts ------------------------------------------------------------------------


def _expected(state: dict, **wanted) -> set[str]:
    return {flow_id for flow_id, flow in state.items() if all(flow[key] == value for key, value in wanted.items())}


FILTERS = {
    "archived=all": {},
    "archived=false&status=Opened": {"archived": False, "status": "Opened"},
    "archived=all&status=Accepted": {"status": "Accepted"},
    "archived=all&status=Rejected": {"status": "Rejected"},
    "archived=true&sort=changed": {"archived": True},
    "archived=all&lifecycle=cancelled": {"lifecycle": "cancelled"},
    "lifecycle=completed": {"archived": False, "lifecycle": "completed"},
    "archived=all&lifecycle=active": {"lifecycle": "active"},
    "archived=all&incidents=yes": {"incidents": True},
    "archived=all&incidents=no": {"incidents": False},
}


def test_filters_agree_with_the_sandbox(world):
    state = world.service_flows()
    for query, wanted in FILTERS.items():
        assert set(ids(world.get(f"/flows?{query}&limit=100"))) == _expected(state, **wanted), query


def test_each_result_shows_the_status_the_service_gave_it(world):
    state = world.service_flows()
    page = world.get("/flows?archived=all&limit=100")
    rows = re.findall(r'<tr[^>]*\bdata-flow-id="([^"]+)"(.*?)</tr>', page.text, re.DOTALL)
    shown = {flow_id: re.search(r'data-consent="([^"]+)"', cells)[1] for flow_id, cells in rows}
    assert shown == {flow_id: flow["status"] for flow_id, flow in state.items()}


def test_country_filter(world):
    countries = {"no": {0, 5, 6, 7}, "se": {1, 2}, "fi": {3, 4}}
    for country, positions in countries.items():
        page = world.get(f"/flows?archived=all&country={country}")
        assert set(ids(page)) == {world.flows[n]["flowId"] for n in positions}


def test_counts_per_status_agree_with_the_sandbox(world):
    state = world.service_flows()
    for archived, wanted in (("all", {}), ("false", {"archived": False}), ("true", {"archived": True})):
        page = world.get(f"/flows?archived={archived}&sort=changed")  # sorted by change: from the index
        for status in ("Unopened", "Opened", "Accepted", "Rejected"):
            shown = re.search(rf'data-status="{status}"[^>]*>.*?<span class="count">(\d+)</span>', page.text, re.S)
            assert int(shown[1]) == len(_expected(state, status=status, **wanted)), (archived, status)
    # a status filter keeps every status's count (the filter is on the other facets) and says how many match
    unopened = len(_expected(state, status="Unopened"))
    narrowed = world.get("/flows?archived=all&status=Unopened")
    assert f"{unopened} flows match" in narrowed.text and len(ids(narrowed)) == unopened


def test_created_dates_are_days_in_the_portal_time_zone(world):
    # 23:30 UTC on 1 November is 00:30 on 2 November in Oslo
    late = datetime(2020, 11, 1, 23, 30, tzinfo=timezone.utc)
    assert late.astimezone(ZoneInfo("Europe/Oslo")).date() == date(2020, 11, 2)
    with world.app.app_context():
        apply_observations([Observation("late-1", SYNC, late, late, created_at=late, archived=False)], KEY)
    assert ids(world.get("/flows?from=2020-11-02&to=2020-11-02")) == ["late-1"]
    assert ids(world.get("/flows?from=2020-11-01&to=2020-11-01")) == []
    assert ids(world.get("/flows?to=2020-11-02")) == ["late-1"]
    today = datetime.now(ZoneInfo("Europe/Oslo")).date().isoformat()
    assert len(ids(world.get(f"/flows?archived=all&from={today}&limit=100"))) == len(world.flows)


# -- order and pages ---------------------------------------------------------------------------


def test_sort_by_created_both_ways(world):
    state = world.service_flows()
    newest = ids(world.get("/flows?archived=all&limit=100"))
    assert set(newest) == set(state)
    created = [state[flow_id]["created"] for flow_id in newest]
    assert created == sorted(created, reverse=True)
    assert ids(world.get("/flows?archived=all&limit=100&order=oldest")) == newest[::-1]


def test_sort_by_last_change_puts_a_changed_flow_first(world):
    changed = world.flows[5]  # Unopened until now
    assert world.sandbox.control(changed["flowId"], "open").status_code == 200
    assert world.get("/flows?limit=100").status_code == 200  # the live list sees the change
    world.flush()
    page = world.get("/flows?archived=all&sort=changed&limit=100")
    assert ids(page)[0] == changed["flowId"]
    oldest = ids(world.get("/flows?archived=all&sort=changed&order=oldest&limit=100"))
    assert oldest == ids(page)[::-1]


def test_sort_by_last_change_follows_the_services_changes_not_when_the_portal_saw_them(world):
    """Every flow was opened in the portal just now, newest first: the order the portal saw them says nothing of
    when the service last changed them, which `updatedAt` does."""
    updated = {
        flow_id: world.sandbox.api("GET", f"/api/applications/{flow_id}").json()["flow"]["updatedAt"]
        for flow_id in world.service_flows()
    }
    oldest_first = ids(world.get("/flows?archived=all&sort=changed&order=oldest&limit=100"))
    assert oldest_first == sorted(updated, key=lambda flow_id: (updated[flow_id], oldest_first.index(flow_id)))
    assert [updated[flow_id] for flow_id in oldest_first] == sorted(updated.values())


def test_keyset_pages_have_no_duplicates_or_gaps_while_flows_arrive(world):
    for n in range(14):
        world.sandbox.create(national_id="24058600160", last_name=f"Berg{n}")
    world.index_everything()
    everything = ids(world.get("/flows?archived=all&limit=100"))
    page = world.get("/flows?archived=all")  # 10 per page
    pages = [ids(page)]
    newcomer = world.sandbox.create(national_id="24058600160", last_name="Newcomer")  # arrives on page 1 meanwhile
    world.index_everything()
    while links(page, "next"):
        page = world.get(links(page, "next"))
        pages.append(ids(page))
    walked = [flow_id for ids_ in pages for flow_id in ids_]
    assert walked == everything and len(pages) == 3
    back = []
    while links(page, "prev"):
        page = world.staff.get(links(page, "prev"), follow_redirects=True)
        back.insert(0, ids(page))
    # Back from the end: the same pages, then the first page as it is now (the newcomer on top).
    assert back[-2:] == pages[:2] and back[0][0] == newcomer["flowId"] and len(back) == 3


def test_flows_without_a_creation_time_come_last_and_are_paged_too(world):
    now = datetime.now(timezone.utc)
    stubs = [Observation(f"stub-{n}", SYNC, now, now, archived=False, consent_status="Opened") for n in range(12)]
    with world.app.app_context():
        apply_observations(stubs, KEY)
    everything = ids(world.get("/flows?archived=all&limit=100"))
    assert everything[-12:] == [f"stub-{n}" for n in reversed(range(12))]
    walked, url = [], "/flows?archived=all"
    while url:
        page = world.get(url)
        walked += ids(page)
        url = links(page, "next")
    assert walked == everything
    oldest, url = [], "/flows?archived=all&order=oldest"
    while url:
        page = world.get(url)
        oldest += ids(page)
        url = links(page, "next")
    assert oldest == everything[::-1]


# -- what the page says ------------------------------------------------------------------------


def test_freshness_of_the_index_is_shown(world):
    page = world.get("/flows?archived=all")
    assert "Index last synced" in page.text and "ago" in page.text
    assert "Last seen" in page.text and "the flow&#39;s page" in page.text
    with world.app.app_context():
        db.session.query(FlowRecord).update({FlowRecord.listed_at: None})
        db.session.commit()
    assert "never synced" in world.get("/flows?archived=all").text
    assert "flask --app portal flows sync" in world.get("/flows?archived=all").text


def test_the_plain_list_stays_live(world):
    """No search and no filter: the service's own list, as before, with the search box above it."""
    page = world.get("/flows")
    live = world.sandbox.api("GET", "/api/flows").json()["data"]
    assert ids(page) == [item["id"] for item in live]
    assert 'data-testid="flow-search"' in page.text and "Index last synced" not in page.text
    submitted_empty = world.get("/flows?q=&born=&status=&sort=created&order=newest")  # the search box sent empty
    assert submitted_empty.status_code == 302 and submitted_empty.headers["Location"] == "/flows"


@pytest.mark.parametrize(
    ("sent", "tidy"),
    [
        # the search box sends every field, filled or not: the address keeps what was asked for
        (
            "/flows?q=bjorn&born=&status=&lifecycle=&country=&incidents=&from=&to=&sort=created&order=newest",
            "/flows?q=bjorn",
        ),
        ("/flows?q=&born=&status=Opened&sort=created&order=oldest&limit=10", "/flows?status=Opened&order=oldest"),
        ("/flows?archived=true&q=&sort=created&order=newest", "/flows?archived=true"),  # the live archived tab
        ("/flows?limit=10", "/flows"),  # the page-size form at its default
    ],
)
def test_a_submitted_form_leaves_a_tidy_address(world, sent, tidy):
    answer = world.get(sent)
    assert answer.status_code == 302 and answer.headers["Location"] == tidy
    assert world.get(tidy).status_code == 200


@pytest.mark.parametrize(
    ("language", "said"),
    [
        ("nb", "Samtykkestatus: Ikke et gyldig valg. "),
        ("sv", "Samtyckesstatus: Inte ett giltigt val. "),
        ("fi", "Virheellinen valinta. "),
    ],
)
def test_a_refused_value_is_said_in_whole_sentences_in_every_language(empty_index, language, said):
    """WTForms' Norwegian, Swedish and Finnish words end without a full stop: "Ikke et gyldig valg Den verdien ble
    utelatt." (found by a new user)."""
    empty_index.post("/language", data={"language": language})
    assert said in empty_index.get("/flows?status=Bogus", follow_redirects=True).text


def test_national_ids_are_masked_in_results(world):
    page = world.get("/flows?archived=all&limit=100")
    for number, *_ in PEOPLE:
        assert re.sub(r"\W", "", number) not in page.text.replace("-", "")
    assert "151086•••••" in page.text


@pytest.mark.parametrize(
    ("query", "location", "message"),
    [
        ("status=Bogus", "/flows", "Consent status: Not a valid choice"),
        ("status=Bogus&country=no", "/flows?country=no", "Consent status"),
        ("lifecycle=sleeping&archived=all", "/flows?archived=all", "Lifecycle"),
        ("country=dk&archived=all", "/flows?archived=all", "Country"),
        ("born=1986-13-45&q=bjorn", "/flows?q=bjorn", "Born"),
        ("from=yesterday&archived=all", "/flows?archived=all", "Created from"),
        ("from=2026-02-01&to=2026-01-01", "/flows?from=2026-02-01", "before its start"),
        ("incidents=maybe&archived=all", "/flows?archived=all", "Incidents"),
        ("sort=name&archived=all", "/flows?archived=all", "Sort by"),
        ("order=up&archived=all", "/flows?archived=all", "Order"),
        ("limit=7&archived=all", "/flows?archived=all", "Per page"),
        ("archived=maybe&status=Opened", "/flows?status=Opened", "Which flows"),
        ("person=1234&archived=all", "/flows?archived=all", "National id"),
        ("after=abc&archived=all", "/flows?archived=all", "page position is not valid"),
        ("after=1.1&before=1.2&archived=all", "/flows?archived=all", "page position is not valid"),
        ("after=99999999999999999999.1&archived=all", "/flows?archived=all", "page position is not valid"),
        ("q=" + "x" * 101, "/flows", "Search"),
        ("q=bj%00rn", "/flows", "invisible control characters"),
    ],
)
def test_unusable_values_are_named_and_dropped(empty_index, query, location, message):
    answer = empty_index.get(f"/flows?{query}")
    assert answer.status_code == 302 and answer.headers["Location"] == location
    shown = empty_index.get(location)
    said = [*flashes(shown), *field_errors(shown).values()]  # under its filter on a search's page, else at the top
    assert shown.status_code == 200 and any(message in text for text in said), said


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ("from=2026-02-01&to=2026-01-01", "to", "Created until: The end of the date range is before its start."),
        ("status=Bogus&country=no", "status", "Consent status: Not a valid choice."),
        ("limit=7&archived=all", "limit", "Per page: Not a valid choice."),
        ("from=yesterday&archived=all", "from", "Created from: Not a valid date value."),
    ],
)
def test_a_filter_s_value_left_out_is_said_under_the_filter(empty_index, query, field, message):
    """An accessibility review: a filter's unusable value was said in a banner over the page only, tied to nothing;
    the filters stayed folded. Now under the filter, which is marked invalid (the first one gets the focus), with
    the filters unfolded; not said twice."""
    shown = empty_index.get(f"/flows?{query}", follow_redirects=True)
    assert field_errors(shown) == {field: f"{message} That value was left out."}
    assert flashes(shown) == []
    control = re.search(rf'<(?:select|input)[^>]*name="{field}"[^>]*>', shown.text)[0]
    assert 'aria-invalid="true"' in control and f'aria-describedby="{field}-error' in control
    assert re.search(r"<details[^>]* open>\s*<summary>Filters and order", shown.text)


def test_a_value_left_out_of_a_search_that_ends_on_the_live_list_is_said_at_the_top(empty_index):
    shown = empty_index.get("/flows?status=Bogus", follow_redirects=True)  # the live list: no filters to tie it to
    assert any("Consent status: Not a valid choice" in text for text in flashes(shown))


@pytest.mark.parametrize(
    ("typed", "filters"),
    [
        ("15108695089", "&status=Opened"),
        ("131052-12345", ""),  # one digit wrong (found by a new user)
        ("811218-9875", ""),
        ("131052A308T", ""),  # born 13 Oct 2052 (found by a new user)
        ("205210130000", ""),
        ("1234561234", ""),  # a shape the mask leaves whole: sealed all the same
        ("15108695089", "&born=1986-13-45"),  # beside a refused value
    ],
)
def test_a_mistyped_national_id_stays_in_the_box_and_out_of_the_address(empty_index, typed, filters):
    """Kept where it can be corrected, not dropped with an empty box and the whole list (found by a new user)."""
    answer = empty_index.get(f"/flows?q={typed}{filters}")
    while answer.status_code == 302:
        location = answer.headers["Location"]
        assert typed not in location and typed[:6] not in location and "q=~" in location, location
        answer = empty_index.get(location)
    assert answer.status_code == 200
    assert "not a valid one" in field_errors(answer)["q"], field_errors(answer)
    assert re.search(rf'name="q"[^>]*value="{typed}"', answer.text), "the typed value is kept in the box"
    assert ("status=Opened" in location) == ("status" in filters), "the filters beside it are kept"
    assert empty_index.get(location).status_code == 200, "a reload shows it again, without a loop of redirects"
    export = re.search(r'href="([^"]+)" data-testid="export-csv"', answer.text)
    if export:  # its export, audited: the mistyped id is in no audit entry (a re-check: ten digits, unmasked)
        assert empty_index.get(unescape(export[1])).status_code == 200
        with empty_index.application.app_context():
            targets = [entry.target for entry in db.session.query(AuditEntry).filter_by(action="export_flows")]
        assert targets and not any(typed in target or typed[:6] in target for target in targets), targets


@pytest.mark.parametrize("typed", ["15108695088x", "8112189876B", "811218-9876A"])
def test_a_valid_national_id_with_a_character_more_is_not_shown_whole_in_the_box(empty_index, typed):
    """A valid id with a stray character after it has a national id's shape but is none, and was kept in the box as
    typed, as a mistyped id is: the id whole in the page, for anyone its sealed address is shared with (an attack).
    The mask reads the id in it: it is text that holds a national id, sealed in the box as such text is."""
    answer = empty_index.get("/flows", query_string={"q": typed})
    while answer.status_code == 302:
        assert typed[:6] not in answer.headers["Location"], answer.headers["Location"]
        answer = empty_index.get(answer.headers["Location"])
    assert answer.status_code == 200
    assert typed not in answer.text and typed[7:11] not in answer.text
    assert re.search(r'name="q"[^>]*value="~', answer.text), "the box shows it sealed"


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("15108695089", "as a Norwegian fødselsnummer, its check digit does not match — look for a mistyped digit."),
        ("131052A308T", "as a Finnish henkilötunnus, its date of birth or individual number is not possible."),
        ("1234561234", "as a Swedish personnummer, its date of birth or individual number is not possible."),
        ("131052 308T", "a Finnish henkilötunnus has its century sign where the space is"),
        ("131052-12345", "check its digits."),
    ],
)
def test_a_mistyped_national_id_is_told_what_to_fix(empty_index, typed, said):
    """ "Check its digits" for every mistake, where a space stood for the century sign (a new user's walk)."""
    answer = empty_index.get("/flows", query_string={"q": typed}, follow_redirects=True)
    told = field_errors(answer)["q"]
    assert told.startswith("That looks like a national id but is not a valid one: ") and said in told, told


def test_a_mistyped_national_id_is_said_under_the_search_box_and_tied_to_it(empty_index):
    """Said at the top of the page, the focus stayed there, away from the digit to fix, and a screen reader heard
    nothing of it at the box (a keyboard walk): the box is marked invalid and described by it, as a filter is."""
    answer = empty_index.get("/flows", query_string={"q": "15108695089"}, follow_redirects=True)
    box = re.search(r'<input[^>]*name="q"[^>]*>', answer.text)[0]
    assert 'aria-invalid="true"' in box and 'aria-describedby="q-error q-help"' in box and "is-invalid" in box, box
    assert re.search(r'<div id="q-error" class="invalid-feedback">', answer.text)
    assert flashes(answer) == [], "said once, under the box"
    assert "<title>Error: " in answer.text, "the title says so, as a form's errors do"
    assert '<details class="mt-2">' in answer.text, "the filters stay folded: none of them is wrong"
    fine = empty_index.get("/flows", query_string={"q": "Nordmann"}, follow_redirects=True)
    assert 'aria-invalid="false"' in re.search(r'<input[^>]*name="q"[^>]*>', fine.text)[0]


@pytest.mark.parametrize(
    "typed", ["151086.95088", "151086/95088", "15108695088,16822548834", "15108695088 16822548834"]
)
def test_a_national_id_search_cannot_read_says_so_and_leaves_the_box_empty(world, typed):
    """Two ids, or one written with a dot or a slash: no message, no flows, and the box showed the address's seal,
    a new code at every search (a new user's walk). It says why now, and the box is empty: never the id whole."""
    answer = world.staff.get("/flows", query_string={"q": typed})
    addresses = []
    while answer.status_code == 302:
        addresses.append(answer.headers["Location"])
        answer = world.staff.get(addresses[-1])
    assert not any("151086" in address for address in addresses), addresses
    assert "search one id at a time" in " ".join(flashes(answer))
    assert "Nothing was searched: search reads one national id at a time." in answer.text
    assert re.search(r'name="q"[^>]*value=""', answer.text) or not re.search(r'name="q"[^>]*value="', answer.text)
    assert "~" not in (re.search(r'<input[^>]*name="q"[^>]*>', answer.text)[0]), "not the seal"
    assert ids(answer) == [] and 'data-testid="export-csv"' not in answer.text
    assert "15108695088" not in answer.text


def test_a_national_id_in_a_flow_s_address_finds_the_person_without_asking_the_service(world):
    """/flows/15108695088 asked the service for a flow by the id, and its access log held it (a walk): a person the
    index holds flows of is searched for instead, as the box would, counted and audited."""
    answer = world.staff.get("/flows/15108695088")
    addresses = []
    while answer.status_code == 302:
        addresses.append(answer.headers["Location"])
        answer = world.staff.get(addresses[-1])
    expected = read_national_id(PEOPLE[0][0]).keyed_hash(KEY)
    assert addresses[0].startswith("/flows?q=~") and addresses[-1].endswith(f"person={expected}"), addresses
    assert len(ids(answer)) == 2
    with world.app.app_context():
        assert db.session.query(AuditEntry).filter_by(action="search_national_id").count() == 1


def test_a_mistyped_national_id_finds_nothing_rather_than_every_flow(world):
    """Under the warning came "30 flows" and the whole list, with no Clear search: someone skimming took them for
    the person's (a new user's walk). Nothing is searched now, and the page says so."""
    for typed in ("15108695089", "131052-308X"):
        shown = world.staff.get("/flows", query_string={"q": typed, "archived": "all"}, follow_redirects=True)
        assert ids(shown) == [], typed
        assert "Nothing was searched: the national id in the search box is not a valid one." in shown.text
        assert re.search(r'data-testid="match-count">\s*0 flows match', shown.text)
        assert "Clear search" in shown.text and 'data-testid="export-csv"' not in shown.text


def test_the_export_of_a_mistyped_national_id_holds_nothing_either(world):
    """The list finds nothing for a mistyped id and offers no export, but its export address (the list's before,
    a bookmark, typed) still exported every flow, each row written to that person's access log as read."""
    with world.app.app_context():
        accesses = db.session.query(AccessEntry).count()
    for typed in ("15108695089", "131052-308X"):
        answer = world.staff.get("/flows/export.csv", query_string={"q": typed, "archived": "all"})
        while answer.status_code == 302:
            assert typed not in answer.headers["Location"], answer.headers["Location"]
            answer = world.staff.get(answer.headers["Location"])
        assert answer.status_code == 200
        assert answer.mimetype != "text/csv" or read_csv(answer) == [], typed
        assert "not a valid one" in field_errors(answer)["q"], field_errors(answer)
    with world.app.app_context():
        assert db.session.query(AccessEntry).count() == accesses, "no person's access log names an export"
        assert db.session.query(AuditEntry).filter_by(action="export_flows").count() == 0


def test_search_needs_sign_in(world):
    anonymous = world.app.test_client()
    for path in ("/flows?q=bjorn", "/flows?archived=all", "/flows/export.csv", "/flows/LA-10001"):
        answer = anonymous.get(path)
        assert answer.status_code == 302 and "/login" in answer.headers["Location"]


# -- export ------------------------------------------------------------------------------------


def read_csv(answer) -> list[dict]:
    assert answer.status_code == 200 and answer.mimetype == "text/csv"
    assert answer.headers["Content-Disposition"].startswith("attachment; filename=")
    return spreadsheet_rows(answer.get_data().decode("utf-8"))


def test_the_export_holds_the_rows_of_the_page(world):
    state = world.service_flows()
    for query in ("archived=all", "archived=all&status=Accepted", "q=bjorn", "archived=true&order=oldest"):
        page = world.get(f"/flows?{query}&limit=100")
        link_to_export = re.search(r'href="([^"]+)" data-testid="export-csv"', page.text)[1]
        rows = read_csv(world.get(unescape(link_to_export)))
        assert [row["flow_id"] for row in rows] == ids(page), query
        for row in rows:
            flow = state[row["flow_id"]]
            assert (row["consent_status"], row["lifecycle"]) == (flow["status"], flow["lifecycle"])
            assert row["archived"] == ("yes" if flow["archived"] else "no"), "a spreadsheet's yes or no"
            assert row["reference_id"] == flow["reference"]
            assert datetime.fromisoformat(row["created_at"]) == datetime.fromisoformat(flow["created"])
            assert re.fullmatch(r"[0-9]{6}[-+A]?•{4,5}", row["national_id_masked"]), row
            # the flow's last change, as the pages give it: not when the portal's index row last changed (every
            # seeded flow read "changed" at the moment the demo indexed it; found by a new user)
            with world.app.app_context():
                record = db.session.query(FlowRecord).filter_by(flow_id=row["flow_id"]).one()
            assert "changed_at" not in row and datetime.fromisoformat(row["last_change_at"]) == record.last_change_at


@pytest.mark.parametrize(("language", "delimiter"), [("sv", ";"), ("fi", ";"), ("nb", ";"), ("en", ",")])
def test_a_download_opens_in_the_reader_s_spreadsheet(world, language, delimiter):
    """Opened in Excel the export read "BjÃ¸rnstad" and "151086â€¢â€¢â€¢â€¢â€¢" (UTF-8 without a byte-order mark,
    read as the Windows code page), and in a Nordic Excel every row stood in column A (a comma, where a list there
    is separated by ";"). Found by a new user."""
    client = world.app.test_client()
    username = add_user(world.app, role="viewer")
    set_account_language(world.app, username, language)
    assert sign_in(client, username).status_code == 302
    answer = client.get("/flows/export.csv?q=bjorn")
    text = answer.get_data().decode("utf-8")
    assert text.startswith("\ufeffreference_id" + delimiter + "flow_id" + delimiter)
    rows = spreadsheet_rows(text, delimiter)
    assert {row["last_name"] for row in rows} == {"Bjørnstad"} and "151086•••••" in text


@pytest.mark.parametrize(
    ("language", "yes", "no"), [("en", "yes", "no"), ("nb", "ja", "nei"), ("sv", "ja", "nej"), ("fi", "kyllä", "ei")]
)
def test_a_downloads_yes_and_no_are_the_page_s_language_and_a_script_s_true_and_false(world, language, yes, no):
    """The archived and has_incidents columns read "True"/"False", Python's words, even in a Finnish spreadsheet."""
    client = world.app.test_client()
    username = add_user(world.app, role="viewer")
    set_account_language(world.app, username, language)
    assert sign_in(client, username).status_code == 302
    text = client.get("/flows/export.csv?archived=all").get_data().decode("utf-8")
    rows = spreadsheet_rows(text, "," if language == "en" else ";")
    archived = {row["archived"] for row in rows}
    assert archived == {yes, no} and {row["has_incidents"] for row in rows} <= {yes, no, ""}, language
    assert "True" not in text and "False" not in text
    plain = "".join(csv_chunks(("archived", "has_incidents", "note"), [(True, False, "True")]))
    assert plain == "archived,has_incidents,note\r\ntrue,false,True\r\n", "a script's: lowercase, in any language"


def test_the_export_is_utf8_masked_and_audited(world):
    answer = world.get("/flows/export.csv?q=bjorn")
    body = answer.get_data()
    assert body.startswith("\ufeffreference_id,flow_id,".encode()) and "Bjørnstad".encode() in body
    assert b"15108695088" not in body
    with world.app.app_context():
        entries = [(e.action, e.target) for e in db.session.query(AuditEntry).filter_by(action="export_flows")]
    assert entries == [("export_flows", "q=bjorn")]
    person = world.staff.get("/flows?q=15108695088").headers["Location"].split("person=")[1]
    rows = read_csv(world.get(f"/flows/export.csv?person={person}"))
    assert len(rows) == 2
    typed = world.staff.get("/flows/export.csv?q=15108695088&archived=all")  # out of the address, hashed
    assert typed.status_code == 302 and "15108695088" not in typed.headers["Location"]
    read_csv(world.get(typed.headers["Location"]))  # never audited whole
    with world.app.app_context():
        targets = [e.target for e in db.session.query(AuditEntry).filter_by(action="export_flows")]
    assert targets[1:] == [f"person=hash:{person[:12]}", f"archived=all person=hash:{person[:12]}"]


def test_a_large_export_is_read_in_chunks(world):
    now = datetime.now(timezone.utc)
    many = [
        from_summary(
            FlowSummary(f"bulk-{n:04d}", None, "Opened", f"BK-{n}", now, {"id": f"bulk-{n:04d}"}), False, now, SYNC
        )
        for n in range(2500)
    ]
    with world.app.app_context():
        apply_observations(many, KEY)
    rows = read_csv(world.get("/flows/export.csv?status=Opened"))
    bulk = [row["flow_id"] for row in rows if row["flow_id"].startswith("bulk-")]
    assert len(bulk) == 2500 and len(set(bulk)) == 2500
    assert f"{len(rows):,} flows match" in world.get("/flows?status=Opened").text  # grouped as English groups


LONG_AGO = datetime(1990, 6, 1, 12, 0, tzinfo=timezone.utc)


def test_counts_past_the_cap_say_more_than(world, monkeypatch):
    """Past COUNT_CAP flows a count is "more than" (each status counted by index up to the cap)."""
    from portal.flowindex import search

    now = datetime.now(timezone.utc)
    statuses = ["Accepted"] * 4 + ["Opened"] * 2 + [None]
    observations = [
        Observation(f"many-{n}", LIST, now, now, consent_status=status, archived=False, created_at=LONG_AGO)
        for n, status in enumerate(statuses)
    ]
    with world.app.app_context():
        apply_observations(observations, KEY)
    monkeypatch.setattr(search, "COUNT_CAP", 3)
    with world.app.test_request_context():
        day = LONG_AGO.date()
        counts = search.status_counts(search.FlowSearch(archived=None, created_from=day, created_to=day))
    assert counts == {"Accepted": 4, "Opened": 2, None: 1}
    monkeypatch.setattr("portal.views.flows.COUNT_CAP", 3)
    page = world.get("/flows?archived=all&from=1990-06-01&to=1990-06-01")
    assert "More than 3 flows match" in page.text and "more than 3" in page.text


def test_a_search_for_a_person_the_portal_knows_no_flow_of_names_the_masked_id_not_a_dash(empty_index):
    """It read "Flows of the person with national id —" (found by a new user), then "the person whose national id
    was searched for", which did not say which (a walk): the id typed is named masked, here and in the audit log.
    An address of the person alone (a bookmark) cannot name it, and says so."""
    page = unescape(empty_index.get("/flows?q=811218-9876", follow_redirects=True).text)
    assert "Flows of the person with national id 811218-••••." in page and "No flows in the index match" in page
    assert "national id —" not in page and "9876" not in page
    with empty_index.application.app_context():
        target = db.session.query(AuditEntry).filter_by(action="search_national_id").one().target
    assert target.startswith("national id 811218-•••• hash:"), target
    bookmarked = empty_index.get(f"/flows?person={read_national_id('15108695088').keyed_hash(KEY)}")
    assert "Flows of the person whose national id was searched for" in unescape(bookmarked.text)
    with empty_index.session_transaction() as kept:
        assert kept[SEARCHED_PERSON][1] == "811218-••••"
    empty_index.post("/logout")
    with empty_index.session_transaction() as kept:
        assert SEARCHED_PERSON not in kept, "signed out, the cookie keeps nothing of the work"


def test_a_name_search_says_how_many_flows_it_cannot_find_by_name(world):
    """A flow created elsewhere is listed without a name, so a search by name missed it and said nothing (found by a
    new user)."""
    world.sandbox.create(national_id="131052-308T", last_name="Virtanen")
    assert world.get("/flows?limit=100").status_code == 200  # the list names no one
    assert world.app.extensions["flow_index"].flush(10)
    page = unescape(world.get("/flows?q=virtanen&archived=all").text)
    assert "1 flow of these filters has no last name known to the portal yet" in page
    named = unescape(world.get("/flows?q=bjorn&archived=false&status=Accepted").text)
    assert 'data-testid="unnamed"' not in named, "the filters leave out the unnamed flow"
    assert 'data-testid="unnamed"' not in world.get("/flows?q=LA-10001").text, "a reference: no name searched"


def test_the_index_listed_without_a_search_counts_its_flows_without_saying_they_match(world):
    """ "45 flows match" and Clear search, with nothing searched (found by a new user)."""
    page = world.get("/flows?archived=all").text
    count = re.search(r'data-testid="match-count">([^<]*)<', page)[1]
    assert re.fullmatch(r"\d+ flows", count), count
    assert "Clear search" not in page
    searched = world.get("/flows?archived=all&q=bjorn").text
    assert re.search(r'data-testid="match-count">\d+ flows? match', searched) and "Clear search" in searched


def test_where_the_portal_saw_a_flow_change_is_visible_without_a_mouse(world):
    """The page said to point at the Seen time for where the portal heard of a flow; the title said no source, and a
    title is out of reach of a keyboard."""
    page = world.get("/flows?archived=all").text
    assert "a row's Seen column says when the portal last heard of the flow" in page
    assert "point at a row" not in page
    cells = re.findall(r'data-testid="change-seen">(.*?)</span></td>', page, re.S)
    assert cells and len(cells) == page.count("<tr data-flow-id=")
    sources = {
        "created in the portal",
        "the flow list",
        "the flow's page",
        "a webhook event",
        "a sync with the Flow Service",
    }
    for cell in cells:
        shown = unescape(re.sub(r"<[^>]+>", "", cell))  # the text on the page, not in its attributes
        when, _, source = shown.partition(" · ")
        assert when.startswith("change seen ") and source in sources, shown


def test_the_lifecycle_filter_s_options_start_with_a_capital_in_every_language(signed_in):
    """Found in a new user's walk: "active", "completed", "cancelled" among capitalised options, the words being
    written for the middle of a sentence."""
    staff = signed_in("viewer")
    for language, expected in (("en", "Active"), ("nb", "Aktiv"), ("sv", "Aktivt"), ("fi", "Aktiivinen")):
        staff.post("/language", data={"language": language})
        page = staff.get("/flows?archived=all").text
        lifecycle = re.search(r'<select[^>]*name="lifecycle".*?</select>', page, re.DOTALL)[0]
        assert f'<option value="active">{expected}</option>' in lifecycle, language


def test_part_of_a_national_id_says_search_takes_the_whole_id(empty_index):
    """A new user's walk: 19121212 (a date of birth) found nothing, and nothing said why."""
    for typed in ("19121212", "121212"):
        page = empty_index.get("/flows", query_string={"q": typed}, follow_redirects=True).text
        assert 'data-testid="part-of-an-id"' in page, typed
        assert "type a last name and the date in Born" in page
    for typed in ("10038", "Nordmann", "LA-121212"):
        assert "part-of-an-id" not in empty_index.get("/flows", query_string={"q": typed}).text, typed


TWO_COUNTRIES = "010111-9907"  # a Finnish henkilötunnus of 1911-01-01 and a Swedish personnummer of 2001-01-11


@pytest.mark.parametrize(
    ("scopes", "indexed_as"),
    [
        ("no se fi", "fi"),  # created through the portal for Finland at a lender of both countries
        ("fi", "se"),  # indexed before the lender's countries came first (7fb43f2), or before a scope changed
        ("se", "fi"),
    ],
)
def test_a_number_valid_in_two_countries_finds_the_person_the_index_holds(make_app, scopes, indexed_as):
    """Found by a re-check: a search by 010111-9907 read it as one country's person only (the shape's, or since
    7fb43f2 the lender's first), so a Finn's flow created at a lender of Sweden and Finland, or a row indexed under
    the other country before, was not found by its own number ("No flows in the index match")."""
    app = make_app(
        WTF_CSRF_ENABLED=False, FLOW_SCOPES=" ".join(f"loan-application:create:{code}" for code in scopes.split())
    )
    key = app.extensions["portal.settings"].index_key
    now = datetime.now(timezone.utc)
    with app.app_context():
        created = Observation("flow-of-the-person", LIST, now, now, national_id=TWO_COUNTRIES, country=indexed_as)
        apply_observations([created], key)
        assert db.session.query(FlowRecord).one().country == indexed_as
    person = read_national_id(TWO_COUNTRIES, indexed_as).keyed_hash(key)
    staff = app.test_client()
    assert sign_in(staff, add_user(app)).status_code == 302
    answer = staff.get("/flows", query_string={"q": TWO_COUNTRIES, "archived": "all"})
    assert answer.status_code == 302 and f"person={person}" in answer.headers["Location"]
    assert "flow-of-the-person" in staff.get(answer.headers["Location"]).text


def test_a_number_valid_in_two_countries_held_for_both_is_the_lender_s_person(make_app):
    """Both people indexed: the reading the lender's countries and the number's shape put first, as before."""
    app = make_app(WTF_CSRF_ENABLED=False, FLOW_SCOPES="loan-application:create:fi")
    key = app.extensions["portal.settings"].index_key
    now = datetime.now(timezone.utc)
    with app.app_context():
        seen = [
            Observation(f"flow-in-{country}", LIST, now, now, national_id=TWO_COUNTRIES, country=country)
            for country in ("se", "fi")
        ]
        apply_observations(seen, key)
    staff = app.test_client()
    assert sign_in(staff, add_user(app)).status_code == 302
    answer = staff.get("/flows", query_string={"q": TWO_COUNTRIES, "archived": "all"})
    assert answer.headers["Location"].endswith(f"person={read_national_id(TWO_COUNTRIES, 'fi').keyed_hash(key)}")


def test_a_search_sent_as_the_session_ended_leads_back_to_the_list_not_to_a_flow_named_search(app):
    """Signed out elsewhere (or idle), the search box was sent: the sign-in page's way back was its own address,
    /flows/search, which a GET read as the flow "search": "Flow not found", after asking the service for it."""
    username = add_user(app, role="viewer")
    here, elsewhere = app.test_client(), app.test_client()
    for client in (here, elsewhere):
        assert sign_in(client, username).status_code == 302
    assert elsewhere.post("/logout").status_code == 302, "signed out in every browser"
    sent = here.post("/flows/search", data={"q": "bjorn"})
    assert sent.status_code == 302 and sent.headers["Location"].startswith("/login")
    back = parse_qs(urlsplit(sent.headers["Location"]).query)["next"][0]
    signed_in_again = sign_in(here, username, next_url=back)
    assert signed_in_again.status_code == 302, signed_in_again.text
    page = here.get(signed_in_again.headers["Location"])
    assert page.status_code == 302 and page.headers["Location"] == "/flows", page.status_code
