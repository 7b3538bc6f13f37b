"""The sandbox flow API over real HTTP: listing and paging, creating, retrieving, every error."""

import json
import re
from datetime import datetime

import pytest
import requests
from support import run_in_threads

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
MILLIS_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def walk(sandbox, token, archived=False, limit=3, backwards_from=None):
    """Follow the cursors to the end; return the ids in list order (newest first)."""
    pages, params = [], {"limit": limit}
    if archived:
        params["archived"] = "true"
    if backwards_from:
        params["ending_before"] = backwards_from
    while True:
        page = sandbox.api("GET", "/api/flows", token, params=params).json()
        assert len(page["data"]) <= limit
        pages.append([item["id"] for item in page["data"]])
        if not page["has_more"]:
            break
        if backwards_from:
            params["ending_before"] = page["data"][0]["id"]
        else:
            params["starting_after"] = page["data"][-1]["id"]
    ordered = reversed(pages) if backwards_from else pages
    return [flow_id for page in ordered for flow_id in page]


def test_list_defaults_to_ten_newest_first_with_flow_model_fields(make_sandbox):
    sandbox = make_sandbox(SANDBOX_SEED="20")
    body = sandbox.api("GET", "/api/flows").json()
    assert body["has_more"] is True
    assert len(body["data"]) == 10
    numbers = [int(item["referenceId"].split("-")[1]) for item in body["data"]]
    assert numbers == sorted(numbers, reverse=True)
    first = body["data"][0]
    assert set(first) >= {"id", "nationalId", "organizationId", "status"}
    assert first["organizationId"] == "demo-org"
    assert first["status"] in ("Unopened", "Opened", "Accepted", "Rejected")


def test_cursor_walk_forwards_and_backwards_yields_every_flow_once(make_sandbox):
    sandbox = make_sandbox(SANDBOX_SEED="23")
    token = sandbox.token()
    for archived in (False, True):
        forwards = walk(sandbox, token, archived=archived)
        assert len(forwards) == len(set(forwards))
        everything = sandbox.api(
            "GET", "/api/flows", token, params={"limit": 100, "archived": str(archived).lower()}
        ).json()
        assert forwards == [item["id"] for item in everything["data"]]
        backwards = walk(sandbox, token, archived=archived, backwards_from=forwards[-1])
        assert backwards == forwards[:-1]
    current, archived_ids = walk(sandbox, token), walk(sandbox, token, archived=True)
    assert len(current) + len(archived_ids) == 23
    assert not set(current) & set(archived_ids)


def test_backward_pages_are_newest_first_and_adjacent(make_sandbox):
    sandbox = make_sandbox(SANDBOX_SEED="12")
    token = sandbox.token()
    everything = [item["id"] for item in sandbox.api("GET", "/api/flows", token, params={"limit": 100}).json()["data"]]
    page = sandbox.api("GET", "/api/flows", token, params={"limit": 2, "ending_before": everything[5]}).json()
    assert [item["id"] for item in page["data"]] == everything[3:5]
    assert page["has_more"] is True
    top = sandbox.api("GET", "/api/flows", token, params={"limit": 5, "ending_before": everything[2]}).json()
    assert [item["id"] for item in top["data"]] == everything[0:2]
    assert top["has_more"] is False


def test_archived_lists_only_archived_flows(sandbox):
    token = sandbox.token()
    kept = sandbox.create(token=token)["flowId"]
    archived = sandbox.create(token=token)["flowId"]
    cancelled = sandbox.create(token=token)["flowId"]
    sandbox.control(archived, "archive")
    sandbox.control(cancelled, "cancel")
    current = [item["id"] for item in sandbox.api("GET", "/api/flows", token).json()["data"]]
    only_archived = sandbox.api("GET", "/api/flows?archived=true", token).json()["data"]
    assert current == [kept]
    assert [item["id"] for item in only_archived] == [cancelled, archived]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=abc", "limit"),
        ("limit=-1", "limit"),
        ("limit=%C2%B2", "limit"),
        ("archived=yes", "archived"),
        ("starting_after=nope", "starting_after"),
        ("ending_before=nope", "ending_before"),
        ("starting_after=a&ending_before=b", "starting_after"),
    ],
)
def test_list_parameters_are_validated(sandbox, query, field):
    answer = sandbox.api("GET", f"/api/flows?{query}")
    assert answer.status_code == 400
    body = answer.json()
    assert body["error"] == "validation_error"
    assert body["details"][0]["field"] == field


def test_create_and_retrieve_every_field(sandbox):
    created = sandbox.create(national_id="151086 95088", webhookUrl="https://lender.example/hooks")
    flow_id = created["flowId"]
    assert UUID.fullmatch(flow_id)
    assert created["_links"]["self"]["href"] == f"/api/flows/{flow_id}"
    assert re.fullmatch(r"LA-\d+", created["referenceId"])
    for path in (f"/api/applications/{flow_id}", f"/api/flows/{flow_id}"):
        body = sandbox.api("GET", path).json()
        assert body["_links"]["self"] == f"/api/flows/{flow_id}"
        assert body["_links"]["tasks"]["href"] == f"/api/tasks?flowId={flow_id}"
        flow = body["flow"]
        assert flow["flowId"] == flow_id
        assert flow["version"] == 1
        assert flow["hasErrors"] is False and flow["hasIncidents"] is False and flow["incidents"] == {}
        assert flow["status"] == "active"
        assert MILLIS_UTC.fullmatch(flow["createdAt"]) and MILLIS_UTC.fullmatch(flow["updatedAt"])
        assert flow["numAttachments"] == 0
        assert UUID.fullmatch(flow["_meta"]["processInstanceId"])
        assert flow["_meta"]["processDefinitionId"] and flow["_meta"]["processVersion"]
        assert flow["flowDefinitionId"]
        assert flow["referenceId"] == created["referenceId"] == f"LA-{flow['flowNumber']}"
        assert flow["referenceName"] is None and flow["versionTag"] is None
        assert flow["sandbox"] is True and isinstance(flow["sandboxConfig"], dict)
        assert flow["data"] == {
            "nationalId": "15108695088",
            "lastName": "Nordmann",
            "redirectUrl": "https://lender.example/done",
            "webhookUrl": "https://lender.example/hooks",
            "organizationNumber": "914387825",
        }
        assert flow["actions"] == ["read", "assign", "cancel"]
    tasks = sandbox.api("GET", f"/api/tasks?flowId={flow_id}").json()["data"]
    assert tasks == [{"flowId": flow_id, "taskType": "consent", "status": "pending"}]


@pytest.mark.parametrize(
    ("national_id", "scope"),
    [("15108695088", "no"), ("811218-9876", "se"), ("19701231-9872", "se"), ("131052-308T", "fi")],
)
def test_create_needs_the_scope_of_the_ids_country(sandbox, national_id, scope):
    other = {"no": "se", "se": "fi", "fi": "no"}[scope]
    without = sandbox.token(scope=f"loan-application:create:{other}")
    answer = sandbox.api(
        "POST",
        "/api/flows",
        without,
        json={"nationalId": national_id, "lastName": "X", "redirectUrl": "https://a.example/"},
    )
    assert answer.status_code == 403
    assert answer.json()["error"] == "insufficient_scope"
    sandbox.create(national_id=national_id, token=sandbox.token(scope=f"loan-application:create:{scope}"))


GOOD = {"nationalId": "15108695088", "lastName": "Nordmann", "redirectUrl": "https://lender.example/done"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"nationalId": "15108695089"}, "nationalId"),
        ({"nationalId": "1234"}, "nationalId"),
        ({"nationalId": 15108695088}, "nationalId"),
        ({"nationalId": None}, "nationalId"),
        ({"lastName": ""}, "lastName"),
        ({"lastName": "   "}, "lastName"),
        ({"lastName": "x" * 101}, "lastName"),
        ({"lastName": "bad\u0000name"}, "lastName"),
        ({"lastName": ["list"]}, "lastName"),
        ({"redirectUrl": "/relative"}, "redirectUrl"),
        ({"redirectUrl": "javascript:alert(1)"}, "redirectUrl"),
        ({"redirectUrl": "https://"}, "redirectUrl"),
        ({"redirectUrl": "https://a.example/" + "x" * 2048}, "redirectUrl"),
        ({"webhookUrl": "ftp://a.example/"}, "webhookUrl"),
        ({"webhookUrl": 7}, "webhookUrl"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_create_validation_errors_name_the_field(sandbox, change, field):
    body = {key: value for key, value in (GOOD | change).items() if value is not None}
    answer = sandbox.api("POST", "/api/flows", json=body)
    assert answer.status_code == 400
    payload = answer.json()
    assert payload["error"] == "validation_error"
    assert field in [detail["field"] for detail in payload["details"]]


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b"", b'"text"'])
def test_create_needs_a_json_object(sandbox, body):
    answer = sandbox.api("POST", "/api/flows", data=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400
    assert answer.json()["error"] == "validation_error"


def test_create_with_form_content_type_is_rejected(sandbox):
    answer = sandbox.api("POST", "/api/flows", data=GOOD)
    assert answer.status_code == 400


def test_missing_and_bad_tokens_are_401(sandbox):
    missing = sandbox.api("GET", "/api/flows", token=False)
    assert missing.status_code == 401
    assert missing.json()["error"] == "unauthorized"
    assert missing.headers["WWW-Authenticate"].startswith("Bearer")
    for token in ("garbage", "a.b.c", sandbox.token() + "x"):
        answer = sandbox.api("GET", "/api/flows", token)
        assert answer.status_code == 401, token
        assert answer.json()["error"] == "unauthorized"


def test_another_organizations_flow_is_404(make_sandbox, tmp_path):
    clients = tmp_path / "clients.json"
    clients.write_text(
        json.dumps([{"client_id": "other", "client_secret": "other-secret", "organization": "other-org"}])
    )
    sandbox = make_sandbox(SANDBOX_CLIENTS=str(clients))
    flow_id = sandbox.create()["flowId"]
    other = sandbox.token(client=("other", "other-secret"))
    answer = sandbox.api("GET", f"/api/applications/{flow_id}", other)
    assert answer.status_code == 404
    assert answer.json()["error"] == "not_found"
    assert sandbox.api("GET", "/api/flows", other).json()["data"] == []
    cursor = sandbox.api("GET", f"/api/flows?starting_after={flow_id}", other)
    assert cursor.status_code == 400


def test_unknown_paths_and_methods_answer_json(sandbox):
    unknown = sandbox.api("GET", "/api/applications/does-not-exist")
    assert unknown.status_code == 404 and unknown.json()["error"] == "not_found"
    assert sandbox.api("GET", "/nowhere").json()["error"] == "not_found"
    wrong_method = sandbox.api("DELETE", "/api/flows")
    assert wrong_method.status_code == 405 and wrong_method.json()["error"] == "method_not_allowed"


def test_sixteen_parallel_creates_get_unique_flow_numbers(sandbox):
    token = sandbox.token()
    references = []

    def create_some():
        for _ in range(5):
            references.append(sandbox.create(token=token)["referenceId"])

    assert run_in_threads(create_some, 16) == []
    assert len(references) == 80 == len(set(references))
    listed = sandbox.api("GET", "/api/flows?limit=100", token).json()["data"]
    numbers = [int(item["referenceId"].split("-")[1]) for item in listed]
    assert numbers == sorted(numbers, reverse=True) and len(set(numbers)) == 80


def test_version_and_updated_at_move_on_every_change(sandbox):
    flow_id = sandbox.create()["flowId"]
    before = sandbox.api("GET", f"/api/applications/{flow_id}").json()["flow"]
    sandbox.control(flow_id, "open")
    after = sandbox.api("GET", f"/api/applications/{flow_id}").json()["flow"]
    assert after["version"] == before["version"] + 1
    assert datetime.fromisoformat(after["updatedAt"]) >= datetime.fromisoformat(before["updatedAt"])
    assert requests.get(f"{sandbox.url}/sandbox/stats", timeout=5).json()["flows"] == 1


def test_the_sandbox_answers_under_its_former_name_as_design_documents():
    """DESIGN §1: `flask --app portal.sandbox run` keeps working while anything documents it."""
    from flask.cli import ScriptInfo

    app = ScriptInfo(app_import_path="portal.sandbox").load_app()
    assert app.import_name == "flow_sandbox"
    assert "flow_sandbox.api_views" in {view.__module__ for view in app.view_functions.values()}
