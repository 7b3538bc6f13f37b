"""Consent simulation and the control API: statuses, versions, archiving, conflicts."""

import re
from datetime import datetime, timedelta, timezone

import pytest
import requests


def flow(sandbox, flow_id):
    return sandbox.api("GET", f"/api/applications/{flow_id}").json()["flow"]


def listed_status(sandbox, flow_id, archived=False):
    items = sandbox.api("GET", f"/api/flows?limit=100&archived={str(archived).lower()}").json()["data"]
    return next(item["status"] for item in items if item["id"] == flow_id)


@pytest.mark.parametrize(("button", "status"), [("accept", "Accepted"), ("reject", "Rejected")])
def test_the_consent_page_opens_then_answers_and_redirects(sandbox, button, status):
    flow_id = sandbox.create()["flowId"]
    browser = requests.Session()
    page = browser.get(f"{sandbox.url}/consent/{flow_id}", timeout=5)
    assert page.status_code == 200
    assert "Nordmann" in page.text and "15108695088" not in page.text
    assert listed_status(sandbox, flow_id) == "Opened"
    assert flow(sandbox, flow_id)["version"] == 2
    csrf = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page.text)[1]
    answer = browser.post(
        f"{sandbox.url}/consent/{flow_id}", data={"csrf_token": csrf, button: "x"}, allow_redirects=False, timeout=5
    )
    assert answer.status_code == 303
    assert answer.headers["Location"] == "https://lender.example/done"
    assert listed_status(sandbox, flow_id) == status
    detail = flow(sandbox, flow_id)
    assert detail["status"] == "completed" and detail["version"] == 3 and detail["actions"] == ["read"]
    closed = browser.get(f"{sandbox.url}/consent/{flow_id}", timeout=5)
    assert "closed" in closed.text


def test_the_consent_form_needs_its_csrf_token(sandbox):
    flow_id = sandbox.create()["flowId"]
    requests.get(f"{sandbox.url}/consent/{flow_id}", timeout=5)
    forged = requests.post(f"{sandbox.url}/consent/{flow_id}", data={"accept": "x"}, allow_redirects=False, timeout=5)
    assert forged.status_code == 200
    assert listed_status(sandbox, flow_id) == "Opened"


def test_unknown_consent_page_is_404(sandbox):
    assert requests.get(f"{sandbox.url}/consent/nope", timeout=5).status_code == 404


def test_control_transitions(sandbox):
    flow_id = sandbox.create()["flowId"]
    assert sandbox.control(flow_id, "open").json()["flow"]["version"] == 2
    accepted = sandbox.control(flow_id, "accept").json()["flow"]
    assert accepted["status"] == "completed" and accepted["version"] == 3
    conflict = sandbox.control(flow_id, "reject")
    assert conflict.status_code == 409 and conflict.json()["error"] == "conflict"
    assert sandbox.control(flow_id, "archive").status_code == 200
    assert listed_status(sandbox, flow_id, archived=True) == "Accepted"
    assert sandbox.control(flow_id, "archive").status_code == 409


def test_cancel_archives_and_marks_cancelled(sandbox):
    flow_id = sandbox.create()["flowId"]
    cancelled = sandbox.control(flow_id, "cancel").json()["flow"]
    assert cancelled["status"] == "cancelled" and cancelled["actions"] == ["read"]
    assert listed_status(sandbox, flow_id, archived=True) == "Unopened"


def test_control_errors(sandbox):
    flow_id = sandbox.create()["flowId"]
    assert sandbox.control(flow_id, "explode").status_code == 404
    assert sandbox.control("missing", "open").status_code == 404
    assert requests.get(f"{sandbox.url}/sandbox/flows/{flow_id}/open", timeout=5).status_code == 405


def test_seeded_flows_cover_every_status_archive_and_incident(make_sandbox):
    sandbox = make_sandbox(SANDBOX_SEED="40")
    current = sandbox.api("GET", "/api/flows?limit=100").json()["data"]
    archived = sandbox.api("GET", "/api/flows?limit=100&archived=true").json()["data"]
    assert len(current) + len(archived) == 40 and archived
    assert {item["status"] for item in current} == {"Unopened", "Opened", "Accepted", "Rejected"}
    details = [flow(sandbox, item["id"]) for item in current + archived]
    assert any(detail["hasIncidents"] for detail in details)
    assert {detail["status"] for detail in details} == {"active", "completed", "cancelled"}


def test_seeded_flows_have_a_past_of_thirty_days(make_sandbox):
    """A first look at insights and stuck flows needs days of history, each change after its flow's creation."""
    sandbox = make_sandbox(SANDBOX_SEED="40")
    items = [
        *sandbox.api("GET", "/api/flows?limit=100").json()["data"],
        *sandbox.api("GET", "/api/flows?limit=100&archived=true").json()["data"],
    ]
    created = {item["referenceId"]: item["createdAt"] for item in items}
    in_number_order = [created[reference] for reference in sorted(created)]
    assert in_number_order == sorted(in_number_order), "older numbers were created earlier"
    now = datetime.now(timezone.utc)
    oldest = datetime.fromisoformat(in_number_order[0].replace("Z", "+00:00"))
    assert timedelta(days=29) < now - oldest <= timedelta(days=30, minutes=1)
    for item in items:
        assert item["createdAt"] <= item["updatedAt"] <= now.isoformat()
    unchanged = [item for item in items if item["status"] == "Unopened" and item["createdAt"] == item["updatedAt"]]
    assert unchanged, "some flows have waited for days without a change"


def test_the_home_page_links_active_flows_to_their_consent_pages(sandbox):
    active = sandbox.create()["flowId"]
    done = sandbox.create(last_name="<b>Bold</b>")["flowId"]
    sandbox.control(done, "accept")
    page = requests.get(sandbox.url + "/", timeout=5)
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert f'href="/consent/{active}"' in page.text and f'href="/consent/{done}"' not in page.text
    assert "demo-client" in page.text


def test_the_sandbox_s_pages_name_an_icon_it_serves(sandbox):
    """A browser asks every page's icon: without one, the consent page's console showed a 404."""
    flow_id = sandbox.create()["flowId"]
    for path in ("/", f"/consent/{flow_id}"):
        page = requests.get(sandbox.url + path, timeout=5)
        icon = re.search(r'<link rel="icon" href="([^"]+)" type="image/svg\+xml">', page.text)
        assert icon, path
        served = requests.get(sandbox.url + icon[1], timeout=5)
        assert served.status_code == 200 and served.headers["Content-Type"].startswith("image/svg+xml")
