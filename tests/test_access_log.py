"""The per-person access log: every look at a person's data, found again from their national id."""

import re

import pytest
from support import deliver_signed

from portal.access_log import subject_key_of
from portal.extensions import db
from portal.models import AccessEntry, AuditEntry, WebhookEvent
from portal.views.admin import ACCESS_ROWS

PERSON = "15108695088"
OTHER_PERSON = "811218-9876"


def accesses(app, national_id: str = PERSON) -> list[tuple[str, str, str | None]]:
    with app.app_context():
        key = subject_key_of(national_id)
        rows = db.session.query(AccessEntry).filter_by(subject_key=key).order_by(AccessEntry.id)
        return [(row.username, row.kind, row.purpose) for row in rows]


@pytest.fixture
def flow_id(sandbox):
    return sandbox.create(national_id=PERSON)["flowId"]


def test_a_flow_page_and_a_reveal_are_each_recorded_once(app, signed_in, flow_id):
    operator = signed_in("operator")
    assert operator.get(f"/flows/{flow_id}").status_code == 200
    operator.post(f"/flows/{flow_id}/reveal", data={"purpose": "Identity check"})
    for _ in range(3):  # the first GET shows the revealed page; the others reload it  # reloads within the window
        assert PERSON in operator.get(f"/flows/{flow_id}/reveal").text
    assert accesses(app) == [
        ("operator-user", "flow_detail", None),
        ("operator-user", "reveal", "Identity check"),
    ]


def test_a_search_by_national_id_and_an_export_row_are_recorded(app, signed_in, flow_id):
    viewer = signed_in("viewer")
    viewer.get(f"/flows/{flow_id}")  # the index learns the flow
    app.extensions["flow_index"].flush()
    found = viewer.get(f"/flows?q={PERSON}", follow_redirects=True)
    assert found.status_code == 200
    export = viewer.get("/flows/export.csv?archived=all")
    assert export.status_code == 200 and flow_id in export.get_data(as_text=True)
    kinds = [kind for _, kind, _ in accesses(app)]
    assert kinds.count("search") == 1 and kinds.count("export_row") == 1


def test_an_event_payload_is_recorded_against_the_person_it_names(app, signed_in):
    payload = {"type": "flow.status_changed", "data": {"flowId": "f-unknown", "ssn": PERSON}}
    assert deliver_signed(app, payload).status_code == 200
    viewer = signed_in("viewer")
    with app.app_context():
        row = db.session.query(WebhookEvent).one().id
    assert viewer.get(f"/events/{row}").status_code == 200
    assert accesses(app) == [("viewer-user", "event_payload", None)]


def test_the_admin_page_answers_who_looked_and_records_the_look_up(app, signed_in, flow_id):
    signed_in("operator").post(
        f"/flows/{flow_id}/reveal", data={"purpose": "Complaint handling"}, follow_redirects=True
    )
    admin = signed_in("admin")
    page = admin.post("/admin/access", data={"national_id": "151086 95088"})
    assert page.status_code == 200
    assert "Complaint handling" in page.text and "operator-user" in page.text and "reveal" in page.text
    assert PERSON not in page.text and "151086•••••" in page.text
    assert accesses(app, OTHER_PERSON) == [], "other people's entries are not touched"
    assert ("admin-user", "subject_lookup", None) in accesses(app)
    with app.app_context():
        lookups = db.session.query(AuditEntry).filter_by(action="access_log_lookup").all()
        assert [entry.target for entry in lookups] == ["national id 151086•••••"]
    assert admin.post("/admin/access", data={"national_id": "12345"}).status_code == 400
    assert signed_in("operator").get("/admin/access").status_code == 403


def test_each_person_has_only_their_own_entries(app, signed_in, sandbox):
    mine, theirs = sandbox.create(national_id=PERSON)["flowId"], sandbox.create(national_id=OTHER_PERSON)["flowId"]
    viewer = signed_in("viewer")
    viewer.get(f"/flows/{mine}")
    viewer.get(f"/flows/{theirs}")
    viewer.get(f"/flows/{theirs}")
    assert accesses(app) == [("viewer-user", "flow_detail", None)]
    assert accesses(app, OTHER_PERSON) == [("viewer-user", "flow_detail", None)] * 2


def test_a_long_log_is_read_page_by_page_and_says_how_long_it_is(app, signed_in, sandbox):
    flow_id = sandbox.create(national_id=PERSON)["flowId"]
    signed_in("operator").get(f"/flows/{flow_id}")  # the index learns the person's masked id
    app.extensions["flow_index"].flush()
    with app.app_context():
        key = subject_key_of(PERSON)
        db.session.add_all(
            AccessEntry(subject_key=key, username="exporter", kind="export_row", target=f"export {n}")
            for n in range(ACCESS_ROWS + 5)
        )
        db.session.commit()
    admin = signed_in("admin")
    first = admin.post("/admin/access", data={"national_id": PERSON}).text
    assert f"{ACCESS_ROWS + 6} entries in all." in first, "the flow page and the exports"
    assert ">export 0<" not in first and f"These are the newest {ACCESS_ROWS}." in first
    older = re.search(
        r'<form method="post" action="/admin/access" data-testid="older-accesses">(.*?)</form>', first, re.S
    )
    fields = dict(re.findall(r'name="(subject|before)" type="hidden" value="([^"]*)"', older[1]))
    assert fields["subject"] == key and PERSON not in older[1], "the next page carries the key, never the number"
    second = admin.post("/admin/access", data=fields).text
    assert (
        ">export 0<" in second
        and "Opened the flow&#39;s page" in second
        and "151086•••••" in second
        and "These are older entries" in second
    )
    assert 'data-testid="older-accesses"' not in second, "the last page"
    assert 'data-testid="newest-accesses"' not in first, "already the newest"
    back = re.search(r'data-testid="newest-accesses">(.*?)</form>', second, re.S)
    back_fields = dict(re.findall(r'name="(subject|before)" type="hidden" value="([^"]*)"', back[1]))
    assert back_fields == {"subject": key, "before": ""}
    again = admin.post("/admin/access", data=back_fields).text
    assert f"These are the newest {ACCESS_ROWS}." in again and ">export 0<" not in again
    assert len(re.findall(r"<tr><td>", first)) == ACCESS_ROWS and len(re.findall(r"<tr><td>", second)) == 6
    with app.app_context():
        lookups = [entry.target for entry in db.session.query(AuditEntry).filter_by(action="access_log_lookup")]
    assert lookups[0] == "national id 151086•••••" and lookups[1].startswith("national id 151086••••• (entries before")
    assert lookups[2] == "national id 151086•••••", "back to the newest: a look-up like the first"


@pytest.mark.parametrize("fields", [{"subject": "not-a-key", "before": "5"}, {"subject": "a" * 64, "before": "x"}])
def test_a_page_of_accesses_that_cannot_be_read_sends_back_to_the_look_up(app, signed_in, fields):
    answer = signed_in("admin").post("/admin/access", data=fields, follow_redirects=True)
    assert answer.status_code == 200 and "look the person up again" in answer.text


def test_the_fixed_places_of_an_access_are_said_in_the_readers_language(app, signed_in, sandbox):
    flow_id = sandbox.create(national_id=PERSON)["flowId"]
    admin = signed_in("admin")
    admin.get(f"/flows/{flow_id}")
    admin.get("/flows", query_string={"q": PERSON}, follow_redirects=True)
    app.extensions["flow_index"].flush()
    admin.post("/admin/access", data={"national_id": PERSON})  # a look-up, itself an entry
    assert admin.post("/language", data={"language": "sv", "next": "/flows"}).status_code == 302
    page = admin.post("/admin/access", data={"national_id": PERSON}).text
    assert "uppslag i åtkomstloggen" in page and "flödessökning" in page and flow_id in page
    assert "access log look-up" not in page and "flow search" not in page, "the stored English stays in the data"
