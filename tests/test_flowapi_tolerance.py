"""The parsing edge of the Flow API client: what a service that reads the spec differently may send."""

import time
from datetime import datetime, timezone

import pytest

from portal.flowapi import UpstreamProtocolError
from portal.flowapi.problems import read_problem
from portal.flowapi.records import (
    CreatedFlow,
    FlowData,
    FlowDetail,
    FlowPage,
    Incident,
    flow_id_from_path,
    parse_timestamp,
    read_flag,
)
from portal.flowapi.retrying import retry_after_seconds
from portal.flowapi.text import safe_reason
from portal.flowindex.observations import from_event

MOMENT = datetime(2026, 11, 22, 12, 5, 0, 123000, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-22T12:05:00.123Z",
        "2026-11-22T13:05:00.123+01:00",
        "2026-11-22T12:05:00.123z",
        "2026-11-22T12:05:00.123",  # no offset: UTC, as every time the spec gives
        1795349100.123,
        1795349100123,
        "1795349100123",
    ],
)
def test_timestamps_in_every_style_read_as_the_same_moment(value):
    assert parse_timestamp(value) == MOMENT


@pytest.mark.parametrize("value", ["Sun, 22 Nov 2026 12:05:00 GMT", "Sun, 22 Nov 2026 13:05:00 +0100"])
def test_a_time_in_http_s_date_form_is_read(value):
    """RFC 1123 / RFC 2822 dates, as some services write times, showed as "—" (found by a stand-in service)."""
    assert parse_timestamp(value) == MOMENT.replace(microsecond=0)


def test_a_time_without_an_offset_is_utc_whatever_the_servers_zone(monkeypatch):
    monkeypatch.setenv("TZ", "Europe/Oslo")
    time.tzset()
    try:
        assert parse_timestamp("2026-11-22T12:05:00.123") == MOMENT
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize(
    "value",
    [
        "9999-12-31T23:59:59-23:59",
        "not a date",
        "",
        None,
        True,
        float("nan"),
        -5,
        10**30,
        [1],
        "1e400",
        "Sun, 22 Nov 2026",  # a day alone is no moment
        "Sun, 32 Nov 2026 12:05:00 GMT",
        "Sun, 22 Nov 99999 12:05:00 GMT",
    ],
)
def test_unreadable_or_out_of_range_timestamps_are_none_never_an_error(value):
    assert parse_timestamp(value) is None


def test_the_last_moment_of_the_calendar_is_still_a_moment():
    assert parse_timestamp("9999-12-31T23:59:59Z").year == 9999


def test_unix_time_is_seconds_up_to_1e11_and_milliseconds_beyond():
    assert parse_timestamp(10**11) == datetime(5138, 11, 16, 9, 46, 40, tzinfo=timezone.utc)
    assert parse_timestamp(10**11 + 1000) == datetime(1973, 3, 3, 9, 46, 41, tzinfo=timezone.utc)
    assert parse_timestamp(10**11 + 0.5).year == 1973, "anything past 1e11 is milliseconds"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/api/flows/3f2c9a1e-7b4d-4c1a-9e2f-0a1b2c3d4e5f", "3f2c9a1e-7b4d-4c1a-9e2f-0a1b2c3d4e5f"),
        (" https://flow.example/api/flows/abc-123/ ", "abc-123"),
        ("/api/flows/LOAN-X//", "LOAN-X"),  # only slashes are trimmed
        ("/api/flows/not an id!", None),
        (42, None),
        ("/api/applications/f-9", "f-9"),  # the retrieve path
        ("/api/operations/op-77", None),  # something else the service made: a job to poll
        ("/api/tasks/f-9", None),
        ("f-9", None),
    ],
)
def test_a_flow_id_is_read_from_the_end_of_its_path_only_when_it_is_one(path, expected):
    assert flow_id_from_path(path) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        ("true", True),
        ("False", False),
        (1, True),
        (0, False),
        ("yes", True),
        (" No", False),
        ("1", True),
        ("maybe", None),
        (None, None),
        (2, None),
    ],
)
def test_flags(value, expected):
    assert read_flag(value) is expected


def test_a_quirky_retrieve_response_is_read_whole():
    detail = FlowDetail.from_json(
        {
            "flow": {
                "flowId": "f-1",
                "flowNumber": "42",
                "version": "3",
                "createdAt": 1795349100,
                "updatedAt": "9999-12-31T23:59:59-23:59",
                "incidents": [
                    {
                        "id": "inc-7",
                        "message": "webhook failed",
                        "taskType": "send-initiate-webhook",
                        "taskCategory": "incident",
                    },
                    "plain words",
                ],
                "hasIncidents": "true",
                "versionTag": "v3-2026",
            }
        }
    )
    assert detail.flow_number == 42 and detail.version == 3 and detail.has_incidents is True
    assert detail.created_at == datetime(2026, 11, 22, 12, 5, tzinfo=timezone.utc) and detail.created_unread is None
    assert detail.updated_at is None and detail.updated_unread == "9999-12-31T23:59:59-23:59", "kept to show as sent"
    assert [incident.message for incident in detail.incidents] == ["webhook failed", "plain words"]
    assert [incident.id for incident in detail.incidents] == ["inc-7", "2"], "an incident's own id, else its place"
    assert detail.version_tag == "v3-2026"
    kinds = [(incident.task_type, incident.task_category) for incident in detail.incidents]
    assert kinds == [("send-initiate-webhook", "incident"), (None, None)]


SPEC_RETRIEVE_ANSWER = {
    "_links": {"self": "/api/flows/f-8", "tasks": {"href": "/api/tasks?flowId=f-8"}},
    "flow": {
        "flowId": "f-8",
        "version": 4,
        "hasErrors": False,
        "hasIncidents": True,
        "incidents": {"inc-1": {"id": "inc-1", "message": "webhook failed", "taskType": "send-initiate-webhook"}},
        "status": "active",
        "createdAt": "2026-11-22T12:05:00.123Z",
        "updatedAt": "2026-11-22T13:05:00.123+01:00",
        "numAttachments": 2,
        "_meta": {"processDefinitionId": "pd-1", "processInstanceId": "pi-1", "processVersion": "7"},
        "flowDefinitionId": "loan-application-consent",
        "flowNumber": 10040,
        "referenceId": "LA-10040",
        "referenceName": "Car loan",
        "versionTag": "v7",
        "sandbox": True,
        "sandboxConfig": {"autoDecision": "Accepted"},
        "data": {
            "nationalId": "01010112345",
            "lastName": "Nordmann",
            "redirectUrl": "https://lender.example/done",
            "webhookUrl": "https://lender.example/hook",
            "organizationNumber": "912345678",
        },
        "actions": ["read", "cancel", 3],
    },
}


def test_every_field_of_the_spec_retrieve_answer_is_read():
    """Field by field (a field read under a wrong name, or not at all, is seen here), the time exact to the ms."""
    assert FlowDetail.from_json(SPEC_RETRIEVE_ANSWER) == FlowDetail(
        flow_id="f-8",
        status="active",
        version=4,
        flow_number=10040,
        reference_id="LA-10040",
        reference_name="Car loan",
        has_errors=False,
        has_incidents=True,
        incidents=[Incident("inc-1", "webhook failed", "send-initiate-webhook", None)],
        created_at=MOMENT,
        updated_at=MOMENT,
        created_unread=None,
        updated_unread=None,
        num_attachments=2,
        process_definition_id="pd-1",
        process_instance_id="pi-1",
        process_version="7",
        flow_definition_id="loan-application-consent",
        version_tag="v7",
        sandbox=True,
        sandbox_config={"autoDecision": "Accepted"},
        data=FlowData(
            national_id="01010112345",
            last_name="Nordmann",
            redirect_url="https://lender.example/done",
            webhook_url="https://lender.example/hook",
            organization_number="912345678",
        ),
        actions=["read", "cancel"],
        self_link="/api/flows/f-8",
        tasks_link="/api/tasks?flowId=f-8",
        raw={},
        unread=("actions",),  # the 3 among them, named on the page
    )


def test_the_spec_links_and_definition_are_read():
    detail = FlowDetail.from_json(
        {
            "_links": {"self": "/api/flows/f-6", "tasks": {"href": "/api/tasks?flowId=f-6"}},
            "flow": {"flowId": "f-6", "flowDefinitionId": "loan-application-consent"},
        }
    )
    assert (detail.self_link, detail.tasks_link) == ("/api/flows/f-6", "/api/tasks?flowId=f-6")
    assert detail.flow_definition_id == "loan-application-consent"


def test_a_flow_that_is_not_an_object_is_a_protocol_error_in_words():
    with pytest.raises(UpstreamProtocolError) as raised:
        FlowDetail.from_json({"_links": {"self": "/api/flows/f-7"}, "flow": ["f-7"]})
    assert str(raised.value) == "The flow object is not a JSON object"


@pytest.mark.parametrize(("sent", "read"), [(3, 3), (3.0, 3), ("3", 3), (" 3 ", 3), (3.5, None), (True, None)])
def test_a_whole_number_is_read_as_sent_in_any_form(sent, read):
    assert FlowDetail.from_json({"flowId": "f-9", "version": sent}).version == read


def test_a_bare_flow_object_is_read_as_the_flow():
    assert FlowDetail.from_json({"flowId": "f-2", "referenceId": 7}).reference_id == "7"


def test_a_wrapped_flow_is_read_from_its_flow_object_whatever_else_the_answer_names():
    detail = FlowDetail.from_json({"flowId": "outer", "flow": {"flowId": "f-8", "referenceId": "LA-8"}})
    assert (detail.flow_id, detail.reference_id) == ("f-8", "LA-8")


@pytest.mark.parametrize(
    ("problem_type", "code"),
    [
        ("https://example.com/probs/out-of-credit", "out-of-credit"),
        ("https://example.com/probs/out-of-credit/", "out-of-credit"),
        ("about:blank", "http_403"),
    ],
)
def test_a_problem_type_names_the_code_by_its_last_segment(problem_type, code):
    assert read_problem(403, {"type": problem_type, "title": "Forbidden"}).code == code


@pytest.mark.parametrize(
    "answer",
    [{"id": "f-6", "referenceId": "LA-6"}, {"flow": {"id": "f-6", "referenceId": "LA-6"}}],
    ids=["bare", "wrapped"],
)
def test_a_flow_named_by_id_alone_is_read_bare_or_wrapped(answer):
    detail = FlowDetail.from_json(answer, requested_id="asked-for")
    assert (detail.flow_id, detail.reference_id) == ("asked-for", "LA-6"), (
        "the flow asked for (spec 4.3: the path's id)"
    )
    assert detail.answered_as == "f-6", "and the id the answer gives itself, to say so"
    assert FlowDetail.from_json(answer).flow_id == "f-6", "asked for by no id: its own"


def test_one_incident_record_without_an_id_is_incident_1():
    detail = FlowDetail.from_json({"flowId": "f-4", "incidents": {"message": "webhook failed", "taskType": "x"}})
    assert [(incident.id, incident.message) for incident in detail.incidents] == [("1", "webhook failed")]


@pytest.mark.parametrize("record", [{"message": "webhook failed"}, {"taskType": "webhook"}])
def test_one_incident_record_with_either_of_its_fields_is_one_incident(record):
    """Not a map of incidents keyed by id: read as such, "message" would be an incident with no message."""
    detail = FlowDetail.from_json({"flowId": "f-4", "incidents": record})
    assert [incident.id for incident in detail.incidents] == ["1"]


@pytest.mark.parametrize("link", ["/api/flows/f-5", {"href": "/api/flows/f-5"}])
def test_the_self_link_is_read_as_text_or_as_an_href(link):
    assert FlowDetail.from_json({"_links": {"self": link}, "flow": {"flowId": "f-5"}}).self_link == "/api/flows/f-5"


def test_a_flow_list_without_its_array_is_a_protocol_error_in_words():
    with pytest.raises(UpstreamProtocolError) as raised:
        FlowPage.from_json({"flows": "none", "has_more": False})
    assert str(raised.value) == "The flow list has no data array"


def test_an_empty_time_is_absent_not_an_unreadable_one():
    detail = FlowDetail.from_json({"flowId": "f-3", "createdAt": "", "updatedAt": "soon"})
    assert (detail.created_at, detail.created_unread) == (None, None)
    assert (detail.updated_at, detail.updated_unread) == (None, "soon")


def test_a_flow_without_any_id_is_a_protocol_error_in_words():
    with pytest.raises(UpstreamProtocolError) as raised:
        FlowDetail.from_json({"flow": {"referenceId": "LA-1"}})
    assert str(raised.value) == "The flow has no flowId"


def test_a_created_flow_is_found_by_the_id_and_reference_of_its_flow_object():
    created = CreatedFlow.from_reply({"flow": {"id": "abc-1", "referenceId": "LA-2"}})
    assert (created.flow_id, created.reference_id) == ("abc-1", "LA-2")


@pytest.mark.parametrize("key", ["details", "invalid-params", "invalid_params", "errors", "violations"])
def test_field_complaints_are_read_under_each_name_services_use(key):
    problem = read_problem(422, {key: [{"name": "lastName", "reason": "too long"}]})
    assert [(detail.field, detail.message) for detail in problem.details] == [("lastName", "too long")]


@pytest.mark.parametrize(
    "body",
    [
        {"errors": {"lastName": ["too long"]}},  # Rails
        {
            "error": {
                "code": 422,
                "message": "",
                "details": [{"fieldViolations": [{"field": "lastName", "description": "too long"}]}],
            }
        },
        {"detail": [{"loc": ["body", "lastName"], "msg": "too long", "type": "value_error"}]},  # FastAPI
        [{"field": "lastName", "message": "too long"}],  # a bare array
        {"lastName": ["too long"]},  # Rails' model.errors and Django REST framework, at the top level
    ],
    ids=["rails", "google", "fastapi", "bare_array", "by_field_at_the_top"],
)
def test_field_complaints_in_the_shapes_of_common_frameworks_are_read(body):
    problem = read_problem(422, body)
    assert [(detail.field, detail.message) for detail in problem.details] == [("lastName", "too long")]
    assert problem.reason == "lastName: too long"


@pytest.mark.parametrize("general", ["base", "non_field_errors"])
def test_rails_and_django_words_about_no_one_field_are_the_reason(general):
    problem = read_problem(409, {"errors": {general: ["A flow for this person is already in progress"]}})
    assert problem.reason == "A flow for this person is already in progress"


def test_an_error_given_as_words_is_the_reason_and_a_code_is_not():
    assert read_problem(422, {"error": "The last name is missing"}).reason == "The last name is missing"
    assert read_problem(422, {"error": "validation_error"}).reason is None


@pytest.mark.parametrize("words", ["message", "reason", "detail", "title"])
def test_a_field_complaint_is_read_under_each_name_for_its_words(words):
    problem = read_problem(422, {"errors": [{"field": "lastName", words: "too long"}]})
    assert [(detail.field, detail.message) for detail in problem.details] == [("lastName", "too long")]


@pytest.mark.parametrize("words", ["detail", "message", "error_description", "title"])
def test_the_reason_is_read_under_each_name_services_use(words):
    assert read_problem(503, {words: "down for maintenance"}).reason == "down for maintenance"


def test_the_detail_is_the_reason_before_the_title():
    assert read_problem(404, {"title": "Not Found", "detail": "No flow f-1"}).reason == "No flow f-1"


@pytest.mark.parametrize(
    "source",
    [{"pointer": "/data/attributes/lastName"}, {"parameter": "lastName"}, {"pointer": "", "parameter": "lastName"}],
)
def test_a_field_complaint_names_its_field_by_its_source(source):
    problem = read_problem(422, {"errors": [{"detail": "too long", "source": source}]})
    assert [(detail.field, detail.message) for detail in problem.details] == [("lastName", "too long")]


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"next": "/api/flows?cursor=abc&limit=10"}, {"cursor": "abc"}),
        ({"next": "https://elsewhere.example/api/flows?page=3&archived=false"}, {"page": "3"}),
        ({"_links": {"next": {"href": "/api/flows?starting_after=x9"}}}, {"starting_after": "x9"}),
        ({"links": {"next": "/api/flows?offset=20"}}, {"offset": "20"}),
        ({"next_cursor": "tok"}, {"cursor": "tok"}),
        ({"nextPageToken": "p2"}, {"pageToken": "p2"}),
        ({"next": "opaque-token"}, {"cursor": "opaque-token"}),
        ({"next": "?starting_after=x9&limit=10"}, {"starting_after": "x9"}),  # a link of its query alone
        ({"offset": 10, "total": 25}, {"offset": "12"}),
        ({"offset": 10, "total": 12}, None),
        ({}, None),
    ],
)
def test_the_service_may_name_its_next_page(payload, expected):
    page = FlowPage.from_json({"data": [{"id": "a"}, {"id": "b"}]} | payload)
    assert page.next_position == expected


@pytest.mark.parametrize(("has_more", "expected"), [(True, True), ("true", True), ("false", False), ("maybe", None)])
def test_has_more_is_read_or_unknown(has_more, expected):
    assert FlowPage.from_json({"data": [], "has_more": has_more}).has_more is expected


def test_an_explicit_null_next_link_means_no_more():
    assert FlowPage.from_json({"data": [{"id": "a"}], "next": None}).has_more is False


def test_list_items_under_another_key_and_ids_of_other_shapes():
    page = FlowPage.from_json({"items": [{"flowId": 17}, {"id": "../etc"}, {}]})
    assert [item.id for item in page.items] == ["17", None, None]
    assert page.items_without_id == 2 and [item.has_details for item in page.items] == [True, True, False]


@pytest.mark.parametrize(
    ("payload", "headers", "expected"),
    [
        ({"flowId": "f-1", "referenceId": "LA-1"}, {}, "f-1"),
        (None, {"Location": "/api/flows/f-2"}, "f-2"),
        (None, {"Location": "https://flow.example/api/flows/f-3/"}, "f-3"),
        (None, {"location": "/api/flows/f-7"}, "f-7"),  # headers as a plain dict of lower-case names
        ({"_links": {"self": {"href": "/api/flows/f-4"}}}, {}, "f-4"),
        ({"_links": {"self": "/api/flows/f-5"}}, {}, "f-5"),
        ({"flow": {"flowId": "f-6"}}, {}, "f-6"),
        ({}, {"Location": "/api/flows/<script>"}, None),
        ({}, {}, None),
    ],
)
def test_a_created_flow_id_from_the_body_a_link_or_location(payload, headers, expected):
    assert CreatedFlow.from_reply(payload, headers).flow_id == expected


@pytest.mark.parametrize(
    ("payload", "status", "expected"),
    [
        ({"id": "task-55", "state": "queued"}, 202, None),  # accepted: the id of the job
        ({"id": "f-1", "referenceId": "LA-1"}, 202, "f-1"),  # accepted, and the flow named with its reference
        ({"id": "f-1", "status": "Unopened", "lastName": "Berg", "createdAt": "2026-11-28T12:00:00Z"}, 202, "f-1"),
        ({"id": "f-1"}, 201, "f-1"),  # created: the id of what was created
        ({"data": {"flowId": "f-2", "referenceId": "LA-2"}}, 201, "f-2"),
        ({"data": {"flowId": "f-2"}, "flowId": "f-3"}, 201, "f-3"),  # the top level first
    ],
)
def test_a_created_flow_s_id_is_not_a_job_s(payload, status, expected):
    assert CreatedFlow.from_reply(payload, {}, status).flow_id == expected


@pytest.mark.parametrize(
    ("status", "consent", "lifecycle"),
    [
        ("Accepted", "Accepted", None),
        ("completed", None, "completed"),
        ("ACTIVE", None, "active"),
        ("Odd", "Odd", None),
    ],
)
def test_a_webhook_status_that_is_the_flow_s_own_is_its_lifecycle_not_its_consent(status, consent, lifecycle):
    """A service that sends the flow object as `data` puts the lifecycle under `status`: it read as the consent
    status "completed", and the flow left the stuck and open-flow lists (found by a stand-in service)."""
    seen = from_event("f-1", "flow.updated", status, MOMENT, None, {"data": {"status": status}}, MOMENT)
    assert seen is not None and (seen.consent_status, seen.lifecycle) == (consent, lifecycle)


@pytest.mark.parametrize(
    ("body", "code", "reason", "details"),
    [
        (
            {"error": "validation_error", "message": "bad", "details": [{"field": "lastName", "message": "empty"}]},
            "validation_error",
            "bad",
            [("lastName", "empty")],
        ),
        (
            {
                "type": "https://flow.example/problems/invalid-input",
                "title": "Invalid input",
                "detail": "limit must be at most 10",
                "invalid-params": [{"name": "limit", "reason": "too large"}],
            },
            "invalid-input",
            "limit must be at most 10",
            [("limit", "too large")],
        ),
        (
            {"errors": [{"code": "E12", "detail": "required", "source": {"pointer": "/data/attributes/lastName"}}]},
            "E12",
            "lastName: required",  # no general words: the field complaints are the reason
            [("lastName", "required")],
        ),
        ({"errors": [{"message": "A flow for this person is in progress"}]}, "http_409", None, None),
        ({"error": "Bad Request", "message": "nope"}, "http_409", "nope", []),
    ],
)
def test_error_bodies_in_every_style(body, code, reason, details):
    problem = read_problem(409, body)
    assert problem.code == code
    if details is None:  # a complaint about no field is the reason itself
        assert problem.reason == "A flow for this person is in progress"
    else:
        assert problem.reason == reason
        assert [(detail.field, detail.message) for detail in problem.details] == details


@pytest.mark.parametrize(
    "text",
    [
        "java.lang.IllegalArgumentException: limit must be <= 10\n\tat com.flow.api.FlowController.list(Flow.java:88)",
        "NullPointerException",
        'Traceback (most recent call last):\n  File "app.py", line 3',
        "<!DOCTYPE html><html><body>Whitelabel Error Page</body></html>",
        "ERROR: duplicate key value violates unique constraint (SQLSTATE 23505)",
    ],
)
def test_upstream_internals_are_never_shown(text, caplog):
    assert safe_reason(text) is None
    assert read_problem(500, {"message": text}).reason is None
    assert read_problem(500, None, text).reason is None
    assert "withheld" in caplog.text, "logged for the operator instead"


def test_upstream_reasons_lose_national_ids_control_characters_and_length():
    reason = safe_reason("Person 15108695088 already\x00 has a flow " + "x" * 400)
    assert "15108695088" not in reason and "\x00" not in reason and len(reason) == 300


@pytest.mark.parametrize(
    ("value", "expected"),
    [("3", 3.0), ("0.5", 0.5), ("²", None), ("٣", None), ("-1", None), ("", None), ("1e9", None), ("99999999", None)],
)
def test_retry_after_reads_only_ascii_seconds(value, expected):
    assert retry_after_seconds(value) == expected


def test_retry_after_as_an_http_date():
    assert (
        retry_after_seconds("Sun, 22 Nov 2026 12:00:30 GMT", now=MOMENT.replace(minute=0, microsecond=0).timestamp())
        == 30
    )
    assert retry_after_seconds("Sun, 22 Nov 2026 12:00:30", now=0) is None, "a date without a zone is unreadable"


def test_a_national_id_sent_as_a_number_stands_fully_masked_not_as_none():
    """It showed as "—", as if the service had sent none (found by a stand-in service); its digits may have lost a
    leading zero, so they are not shown either."""
    page = FlowPage.from_json({"data": [{"id": "f-1", "nationalId": 1010150087}], "has_more": False})
    assert page.items[0].national_id == "•" * 11
    detail = FlowDetail.from_json({"flow": {"flowId": "f-1", "data": {"nationalId": 1010150087}}})
    assert detail.data.national_id == "•" * 11
    assert FlowDetail.from_json({"flow": {"flowId": "f-1", "data": {"nationalId": True}}}).data.national_id is None


@pytest.mark.parametrize(
    ("location", "said"),
    [
        ("https://idp.example:8443/realms/x/token", "https://idp.example:8443"),
        ("/realms/x/token/", "https://idp.example"),  # relative: from the address asked
        ("http://[", "an address no URL parser reads"),
        (None, "an address it did not name"),
    ],
)
def test_a_token_redirect_is_named_by_the_whole_origin_it_points_to(location, said):
    """The port was dropped, a relative Location was said to name no address, and "http://[" raised (a re-check)."""
    from portal.flowapi.tokens import origin_of

    assert origin_of(location, "https://idp.example/realms/x/protocol/openid-connect/token") == said


def test_a_status_in_another_spelling_is_badged_as_the_status_it_is(app):
    """A webhook's "canceled" was shown raw, untranslated and grey, beside the index's "cancelled" (a re-check)."""
    from portal.widgets import status_badge

    with app.test_request_context("/events"):
        assert ">cancelled<" in status_badge("canceled") and "tone-neutral" not in status_badge("ACCEPTED")


def test_a_text_too_long_to_keep_is_cut_with_a_mark():
    """A 5,000-character reference or status was cut at 1,000 characters without a mark, reading as whole (a
    stand-in): the cut ends in "…"."""
    from portal.flowapi.records import MAX_TEXT, FlowSummary

    item = FlowSummary.from_json({"id": "f-1", "referenceId": "R" * 5000, "status": "S" * 5000})
    assert len(item.reference_id) == len(item.status) == MAX_TEXT
    assert item.reference_id.endswith("R…") and item.status.endswith("S…")
    assert FlowSummary.from_json({"id": "f-1", "referenceId": "R" * MAX_TEXT}).reference_id == "R" * MAX_TEXT
