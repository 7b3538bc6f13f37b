"""The per-person access log: every look at a person's data, found again from their national id."""

import pytest
from support import deliver_signed

from portal.access_log import subject_key_of
from portal.extensions import db
from portal.models import AccessEntry, AuditEntry, WebhookEvent

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
