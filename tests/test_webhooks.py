"""The webhook endpoint and its store, on SQLite and PostgreSQL.

Signatures come from the `standardwebhooks` package (or plain hmac for the alternative scheme),
never from the code under test.
"""

import base64
import hashlib
import hmac
import html
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import requests
from sqlalchemy import text
from standardwebhooks import Webhook
from support import portal_config, signed_in_as

from portal import create_app
from portal.extensions import db
from portal.models import FlowRecord, RejectedDelivery, RejectionTally, WebhookEvent
from portal.webhooks.shape import EventFields, EventShape, parse_fields, read_event
from portal.webhooks.signing import standard_headers
from portal.webhooks.store import (
    SAMPLES_PER_SOURCE,
    event_document,
    events_for_flow,
    iter_events,
    iter_matching_events,
    left_out_by_reference,
    record_rejection,
    rejection_summary,
    rejection_tallies,
    storable_moment,
    tally_rejection,
)

SECRET = "whsec_" + base64.b64encode(b"first-webhook-secret-0123456789").decode()
SECOND = "whsec_" + base64.b64encode(b"second-webhook-secret-987654321").decode()
PATH = "/webhooks/flow"


@pytest.fixture
def hook_app(make_app, database_url):
    return make_app(database=database_url, FLOW_WEBHOOK_SECRETS=f"{SECRET},{SECOND}", FLOW_WEBHOOK_MAX_BYTES="4096")


@pytest.fixture
def hook_client(hook_app):
    return hook_app.test_client()


def event(event_type="flow.status_changed", flow_id=None, status="Opened", **extra) -> dict:
    return {
        "id": str(uuid.uuid4()),
        "type": event_type,
        "timestamp": datetime.now(timezone.utc).isoformat(),
        "data": {
            "flowId": flow_id or str(uuid.uuid4()),
            "referenceId": "LA-10001",
            "status": status,
            "previousStatus": "Unopened",
        },
    } | extra


def signed(body: bytes, secret=SECRET, message_id=None, moment=None) -> dict:
    moment = moment or datetime.now(timezone.utc)
    message_id = message_id or f"msg_{uuid.uuid4().hex}"
    return standard_headers(secret, message_id, moment, body.decode()) | {"content-type": "application/json"}


def deliver(client, payload=None, *, body=None, headers=None, **sign_options):
    body = body if body is not None else json.dumps(payload or event()).encode()
    return client.post(PATH, data=body, headers=headers if headers is not None else signed(body, **sign_options))


def stored(app) -> list[WebhookEvent]:
    with app.app_context():
        rows = db.session.query(WebhookEvent).order_by(WebhookEvent.id).all()
        db.session.expunge_all()
        return rows


def rejected(app) -> list[RejectedDelivery]:
    with app.app_context():
        rows = db.session.query(RejectedDelivery).order_by(RejectedDelivery.id).all()
        db.session.expunge_all()
        return rows


def test_a_verified_event_is_stored_with_what_staff_need(hook_app, hook_client):
    payload = event(flow_id="flow-1")
    body = json.dumps(payload).encode()
    headers = signed(body, message_id="msg_1")
    answer = hook_client.post(PATH, data=body, headers=headers)
    assert answer.status_code == 200 and answer.json == {"status": "stored", "id": "msg_1"}
    [row] = stored(hook_app)
    assert (row.event_id, row.event_type, row.flow_id, row.reference_id, row.status) == (
        "msg_1",
        "flow.status_changed",
        "flow-1",
        "LA-10001",
        "Opened",
    )
    assert row.body == body.decode() and row.scheme == "standard-webhooks" and row.secret_index == 0
    assert row.received_at.tzinfo is not None and row.occurred_at is not None
    assert json.loads(row.headers)["webhook-id"] == "msg_1"
    assert SECRET not in row.headers


def test_the_second_secret_of_a_rotation_is_accepted(hook_app, hook_client):
    assert deliver(hook_client, secret=SECOND).status_code == 200
    assert stored(hook_app)[0].secret_index == 1


def test_a_duplicate_is_answered_2xx_and_stored_once(hook_app, hook_client):
    body = json.dumps(event()).encode()
    first = hook_client.post(PATH, data=body, headers=signed(body, message_id="msg_dup"))
    again = hook_client.post(PATH, data=body, headers=signed(body, message_id="msg_dup"))
    assert first.status_code == again.status_code == 200
    assert again.json["status"] == "duplicate"
    assert len(stored(hook_app)) == 1


# The reasons kept for admins that name nothing of the delivery, in full.
FIXED_REASONS = {
    "malformed-json": "body is not valid UTF-8 JSON",
    "json-array": "body is not a JSON object",
    "no-signature": "missing header webhook-signature",
    "no-id-nor-timestamp": "missing header webhook-id, webhook-timestamp",
}


@pytest.mark.parametrize(
    ("tamper", "status", "reason", "kind"),
    [
        ("body", 401, "no secret matches", "signature"),
        ("wrong-secret", 401, "no secret matches", "signature"),
        ("stale", 401, "too old", "stale_timestamp"),
        ("future", 401, "too new", "stale_timestamp"),
        ("no-signature", 401, "missing header webhook-signature", "missing_header"),
        ("no-id", 401, "missing header webhook-id", "missing_header"),
        ("no-timestamp", 401, "missing header webhook-timestamp", "missing_header"),
        ("no-id-nor-timestamp", 401, "missing header webhook-id, webhook-timestamp", "missing_header"),
        ("garbage-signature", 401, "no well-formed entry", "malformed_signature"),
        ("bad-base64", 401, "no v1 entry of 32 bytes", "malformed_signature"),
        ("content-type", 415, "content type", "content_type"),
        ("malformed-json", 400, "not valid UTF-8 JSON", "malformed"),
        ("json-array", 400, "not a JSON object", "not_object"),
        ("oversize", 413, "over the limit", "too_large"),
        ("not-utf8", 401, "UTF-8", "malformed"),
    ],
)
def test_rejections_store_nothing_and_are_recorded(hook_app, hook_client, tamper, status, reason, kind):
    body = json.dumps(event()).encode()
    headers = signed(body)
    now = datetime.now(timezone.utc)
    if tamper == "body":
        body = body.replace(b"Opened", b"Accepted")
    elif tamper == "wrong-secret":
        headers = signed(body, secret="whsec_" + base64.b64encode(b"someone-else-entirely-000").decode())
    elif tamper == "stale":
        headers = signed(body, moment=now - timedelta(minutes=6))
    elif tamper == "future":
        headers = signed(body, moment=now + timedelta(minutes=6))
    elif tamper == "no-id-nor-timestamp":
        del headers["webhook-id"], headers["webhook-timestamp"]
    elif tamper.startswith("no-"):
        del headers[
            {"no-signature": "webhook-signature", "no-id": "webhook-id", "no-timestamp": "webhook-timestamp"}[tamper]
        ]
    elif tamper == "garbage-signature":
        headers["webhook-signature"] = "nonsense"
    elif tamper == "bad-base64":
        headers["webhook-signature"] = "v1,AAAA"
    elif tamper == "content-type":
        headers["content-type"] = "text/plain"
    elif tamper == "malformed-json":
        body = b'{"id": "x", '
        headers = signed(body)
    elif tamper == "json-array":
        body = b"[1, 2, 3]"
        headers = signed(body)
    elif tamper == "oversize":
        body = json.dumps(event(padding="x" * 5000)).encode()
        headers = signed(body)
    elif tamper == "not-utf8":
        body = b'{"id": "\xff\xfe"}'
    answer = hook_client.post(PATH, data=body, headers=headers)
    assert answer.status_code == status
    public = {401: "invalid signature", 413: "payload too large", 415: "content type must be application/json"}
    public |= {400: {"malformed": "malformed JSON", "not_object": "the event must be a JSON object"}.get(kind, "")}
    assert answer.json == {"error": public[status]}, "the sender's words: never the reason kept for admins"
    assert stored(hook_app) == []
    [record] = rejected(hook_app)
    assert reason in record.reason
    assert record.reason == FIXED_REASONS.get(tamper, record.reason)
    assert len(record.body_head) <= 4096
    with hook_app.app_context():
        [tally] = db.session.query(RejectionTally).all()
    assert (tally.kind, tally.count, tally.last_reason) == (kind, 1, record.reason)
    assert record.network == tally.source_ip == "127.0.0.0/24"  # counted by network, IPv4 /24


@pytest.mark.parametrize("malformed", ["garbage", "v1,abc", "v1,a", "v1,====", "v1,"])
def test_one_malformed_signature_entry_does_not_hide_a_valid_one(hook_app, hook_client, malformed):
    body = json.dumps(event()).encode()
    headers = signed(body)
    headers["webhook-signature"] = f"{malformed} " + headers["webhook-signature"]
    assert hook_client.post(PATH, data=body, headers=headers).status_code == 200


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ("9999-12-30T00:00:00Z", datetime(9999, 12, 30, tzinfo=timezone.utc)),
        ("9999-12-30T00:00:00.000001Z", None),
        ("0001-01-02T00:00:00Z", datetime(1, 1, 2, tzinfo=timezone.utc)),
        ("0001-01-01T23:59:59.999999Z", None),
        ("0001-01-02T00:00:00+01:00", None),
    ],
)
def test_an_event_time_is_kept_up_to_a_day_from_either_end_of_the_calendar(sent, stored):
    """Inside that, every time zone can still show the moment; beyond it the time is kept as it was sent."""
    assert storable_moment(sent) == stored


def test_the_reference_test_vector_verifies():
    # The vector every Standard Webhooks library tests against (PROTOCOLS.md); the timestamp is old,
    # so this checks the signature the package computes, which our endpoint relies on.
    signature = Webhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").sign(
        "msg_p5jXN8AQM9LWM0D4loKWxJek", datetime.fromtimestamp(1614265330, timezone.utc), '{"test": 2432232314}'
    )
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_rejections_are_kept_bounded(make_app, database_url):
    app = make_app(database=database_url, FLOW_WEBHOOK_SECRETS=SECRET, PORTAL_REJECTED_KEEP="10")
    client = app.test_client()
    for index in range(15):
        client.post(PATH, data=f'{{"n": {index}}}', headers={"content-type": "application/json"})
    rows = rejected(app)
    assert len(rows) == 10 and '"n": 14' in rows[-1].body_head


def test_past_the_limit_the_address_with_the_most_samples_gives_up_its_oldest(make_app, database_url):
    app = make_app(database=database_url, FLOW_WEBHOOK_SECRETS=SECRET, PORTAL_REJECTED_KEEP="10")
    # The busiest address neither sends first nor sorts first: it is chosen by its count.
    senders = (("203.0.1.1", 1), ("203.0.9.1", 6), ("203.0.5.1", 3), ("203.0.7.1", 1))
    for address, count in senders:
        sender = app.test_client()
        sender.environ_base["REMOTE_ADDR"] = address
        for number in range(count):
            sender.post(PATH, data=f'{{"n": {number}}}', headers={"content-type": "application/json"})
    kept = [(row.source_ip, json.loads(row.body_head)["n"]) for row in rejected(app)]
    assert kept == [("203.0.1.1", 0)] + [("203.0.9.1", n) for n in range(1, 6)] + [
        ("203.0.5.1", n) for n in range(3)
    ] + [("203.0.7.1", 0)]


def test_each_address_keeps_only_its_own_newest_samples(make_app, database_url, caplog):
    app = make_app(database=database_url, FLOW_WEBHOOK_SECRETS=SECRET, PORTAL_REJECTED_KEEP="100")
    for address, count in (("203.0.113.5", 2), ("203.0.113.9", SAMPLES_PER_SOURCE + 3)):
        sender = app.test_client()
        sender.environ_base["REMOTE_ADDR"] = address
        for number in range(count):
            sender.post(PATH, data=f'{{"n": {number}}}', headers={"content-type": "application/json"})
    kept = [(row.source_ip, json.loads(row.body_head)["n"]) for row in rejected(app)]
    assert kept == [("203.0.113.5", 0), ("203.0.113.5", 1)] + [
        ("203.0.113.9", number) for number in range(3, SAMPLES_PER_SOURCE + 3)
    ], "a flood from one address replaces its own oldest samples, never another address's"
    assert "webhook rejected from '203.0.113.9'" in caplog.text


def test_a_server_that_gives_no_client_address_stores_it_as_unknown_as_refusals_do(hook_app):
    sender = hook_app.test_client()
    sender.environ_base["REMOTE_ADDR"] = ""  # a Unix socket, or a server that leaves it out
    assert deliver(sender, event(flow_id="flow-no-address")).status_code == 200
    assert sender.post(PATH, data=b"junk").status_code == 401
    [stored_event], [refusal] = stored(hook_app), rejected(hook_app)
    assert stored_event.source_ip == refusal.source_ip == "unknown"


def test_a_stored_delivery_has_a_debug_access_line_naming_its_sender(hook_app, caplog):
    caplog.set_level(logging.DEBUG, logger="portal.access")
    sender = hook_app.test_client()
    sender.environ_base["REMOTE_ADDR"] = "203.0.113.7"
    assert deliver(sender, event(flow_id="flow-logged")).status_code == 200
    [line] = [record for record in caplog.records if record.name == "portal.access"]
    assert (line.levelno, line.path, line.endpoint, line.status) == (logging.DEBUG, PATH, "webhooks.receive", 200)
    assert line.remote_addr == "203.0.113.7" and line.user_id is None


def test_a_database_that_refuses_the_row_is_a_500_in_json_never_a_2xx(hook_app, hook_client, database_url):
    with hook_app.app_context():  # a fault of the database itself: a trigger that refuses every new event
        if database_url.startswith("sqlite"):
            db.session.execute(
                text("CREATE TRIGGER refuse BEFORE INSERT ON webhook_events BEGIN SELECT RAISE(ABORT, 'no'); END")
            )
        else:
            refusal = "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN RAISE 'no'; END $$ LANGUAGE plpgsql"
            db.session.execute(text(refusal))
            db.session.execute(text("CREATE TRIGGER refuse BEFORE INSERT ON webhook_events EXECUTE FUNCTION refuse()"))
        db.session.commit()
    answer = deliver(hook_client, event(flow_id="flow-refused"))
    assert (answer.status_code, answer.json) == (500, {"error": "internal error"})
    assert "Retry-After" not in answer.headers, "not the database being away: nothing says when to try again"
    assert stored(hook_app) == []


def test_the_rejection_summary_counts_each_kind_its_networks_and_when_last(hook_app):
    with hook_app.app_context():
        tally_rejection("signature", "192.0.2.0/24", "no secret matches")
        tally_rejection("signature", "192.0.2.0/24", "no secret matches")
        tally_rejection("signature", "198.51.100.0/24", "no secret matches")
        tally_rejection("content_type", "192.0.2.0/24", "content type 'text/plain'")
        last = {tally.kind: tally.last_at for tally in db.session.query(RejectionTally)}
        summary = [(row.kind, row.count, row.sources, row.last_at) for row in rejection_summary()]
    assert summary == [("content_type", 1, 1, last["content_type"]), ("signature", 3, 2, last["signature"])]


def test_a_rejection_tallied_and_sampled_without_an_address(hook_app):
    with hook_app.app_context():
        record_rejection("bad signature", None, None, {}, b"{}", keep=10)
        tally_rejection("signature", None, "bad signature")
        tally_rejection("content_type", "192.0.2.0/24", "content type 'text/plain'")
        [tally] = rejection_tallies("signature", None, 10)
        assert (tally.kind, tally.source_ip, tally.count) == ("signature", "", 1)
        assert tally.last_at == tally.first_at, "a first rejection was last seen when first seen"
        assert [row.kind for row in rejection_tallies(None, "192.0.2.0/24", 10)] == ["content_type"]
        assert len(rejection_tallies(None, None, 10)) == 2
    [record] = rejected(hook_app)
    assert (record.source_ip, record.network) == (None, None)


def test_rejections_without_an_address_keep_their_own_newest_samples(hook_app):
    with hook_app.app_context():
        record_rejection("from an address", "192.0.2.1", "192.0.2.0/24", {}, b"{}", keep=100)
        for number in range(SAMPLES_PER_SOURCE + 3):
            record_rejection(f"without an address {number}", None, None, {}, b"{}", keep=100)
    kept = [record.reason for record in rejected(hook_app) if record.source_ip is None]
    assert sorted(kept) == sorted(f"without an address {n}" for n in range(3, SAMPLES_PER_SOURCE + 3))
    assert [record.reason for record in rejected(hook_app) if record.source_ip] == ["from an address"]


def test_a_refusal_from_an_address_longer_than_its_column_is_kept_cut_to_it(make_app, database_url):
    app = make_app(database=database_url, FLOW_WEBHOOK_SECRETS=SECRET)
    address = "proxy-forwarded-" + "x" * 80  # not an IP: a proxy's own token for the client, kept as it is
    sender = app.test_client()
    sender.environ_base["REMOTE_ADDR"] = address
    assert sender.post(PATH, data=b"junk").status_code == 401
    [record] = rejected(app)
    with app.app_context():
        [tally] = db.session.query(RejectionTally).all()
    assert record.source_ip == record.network == tally.source_ip == address[:64]


def test_a_reason_quoting_a_long_header_is_kept_cut_to_its_column(hook_app, hook_client):
    body = json.dumps(event()).encode()
    content_type = "text/" + "x" * 300
    assert hook_client.post(PATH, data=body, headers=signed(body) | {"content-type": content_type}).status_code == 415
    [record] = rejected(hook_app)
    with hook_app.app_context():
        [tally] = db.session.query(RejectionTally).all()
    assert record.reason == tally.last_reason == f"content type {content_type!r}"[:255]


def test_a_reason_that_cleans_to_nothing_is_kept_as_unknown(hook_app):
    from portal.webhooks.store import record_rejection, tally_rejection

    with hook_app.app_context():
        tally_rejection("signature", "192.0.2.0/24", "\x00\x1f")
        record_rejection("\x00\x1f", "192.0.2.1", "192.0.2.0/24", {}, b"", keep=10)
        tally = db.session.query(RejectionTally).one()
    [record] = rejected(hook_app)
    assert (record.reason, tally.last_reason) == ("unknown", "unknown")


def test_no_secret_configured_rejects_everything(make_app, database_url):
    app = make_app(database=database_url, FLOW_WEBHOOK_SECRETS="")
    assert deliver(app.test_client()).status_code == 401
    [record] = rejected(app)
    assert record.reason == "no webhook secret is configured (FLOW_WEBHOOK_SECRETS)"


@pytest.mark.parametrize("signature", ["sha256={digest}", "{digest}"])
def test_hmac_sha256_scheme(make_app, database_url, signature):
    app = make_app(
        database=database_url,
        FLOW_WEBHOOK_SCHEME="hmac-sha256",
        FLOW_WEBHOOK_SECRETS="plain-one,plain-two",
        FLOW_WEBHOOK_HEADER="X-Flow-Signature",
    )
    client = app.test_client()
    payload = event()
    body = json.dumps(payload).encode()
    digest = hmac.new(b"plain-two", body, hashlib.sha256).hexdigest()
    headers = {"X-Flow-Signature": signature.format(digest=digest), "content-type": "application/json"}
    answer = client.post(PATH, data=body, headers=headers)
    assert answer.status_code == 200 and answer.json["id"] == payload["id"]
    assert stored(app)[0].secret_index == 1 and stored(app)[0].scheme == "hmac-sha256"
    tampered = client.post(PATH, data=body + b" ", headers=headers)
    assert tampered.status_code == 401
    missing = client.post(PATH, data=body, headers={"content-type": "application/json"})
    assert missing.status_code == 401
    assert len(stored(app)) == 1


def test_the_webhook_path_is_configurable(make_app, database_url):
    app = make_app(database=database_url, FLOW_WEBHOOK_SECRETS=SECRET, FLOW_WEBHOOK_PATH="/hooks/flow-service")
    client = app.test_client()
    body = json.dumps(event()).encode()
    assert client.post("/hooks/flow-service", data=body, headers=signed(body)).status_code == 200
    assert client.post(PATH, data=body, headers=signed(body)).status_code == 404


def test_only_the_webhook_endpoint_skips_csrf(make_app, database_url):
    app = make_app(database=database_url, FLOW_WEBHOOK_SECRETS=SECRET)  # CSRF on
    client = app.test_client()
    assert deliver(client).status_code == 200
    assert client.post("/login", data={"username": "a", "password": "b"}).status_code == 400


def test_concurrent_deliveries_with_duplicates_store_each_event_once(make_app, database_url, serve):
    app = make_app(database=database_url, FLOW_WEBHOOK_SECRETS=SECRET)
    url = serve(app) + PATH
    unique = [json.dumps(event()).encode() for _ in range(1800)]
    deliveries = [(body, f"msg_{index}") for index, body in enumerate(unique)]
    deliveries += [(unique[index], f"msg_{index}") for index in range(0, 1800, 9)]  # 200 duplicates: a tenth
    batches = [deliveries[thread::8] for thread in range(8)]
    failures = []

    def send(batch):
        session = requests.Session()
        for body, message_id in batch:
            answer = session.post(url, data=body, headers=signed(body, message_id=message_id), timeout=30)
            if answer.status_code != 200:
                failures.append(answer.status_code)

    threads = [threading.Thread(target=send, args=(batch,)) for batch in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    with app.app_context():
        assert db.session.query(WebhookEvent).count() == 1800
        ids = {row[0] for row in db.session.query(WebhookEvent.event_id).all()}
    assert ids == {f"msg_{index}" for index in range(1800)}


def test_two_copies_at_the_same_moment_store_once(make_app, database_url, serve):
    app = make_app(database=database_url, FLOW_WEBHOOK_SECRETS=SECRET)
    url = serve(app) + PATH
    for round_number in range(20):
        body = json.dumps(event()).encode()
        headers = signed(body, message_id=f"msg_race_{round_number}")
        barrier, statuses = threading.Barrier(2), []

        def post(body=body, headers=headers, barrier=barrier, statuses=statuses):
            barrier.wait()
            statuses.append(requests.post(url, data=body, headers=headers, timeout=10).status_code)

        threads = [threading.Thread(target=post) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert statuses == [200, 200]
    assert len(stored(app)) == 20


# -- views and commands ------------------------------------------------------------------------


def admin_client(app):
    return signed_in_as(app, "admin", "admin")


@pytest.fixture
def plain_app(make_app, database_url):
    return make_app(database=database_url, FLOW_WEBHOOK_SECRETS=SECRET, WTF_CSRF_ENABLED=False)


def test_events_list_filters_and_pages(plain_app):
    client = plain_app.test_client()
    for index in range(60):
        deliver(
            client,
            event(
                event_type="flow.created" if index % 3 else "flow.incident",
                flow_id="flow-a" if index < 10 else f"flow-{index}",
            ),
        )
    staff = admin_client(plain_app)
    first = staff.get("/events")
    assert first.status_code == 200 and first.text.count("<tr>") == 51  # 50 rows + header
    next_link = __import__("re").search(r'rel="next" href="([^"]+)"', first.text)[1].replace("&amp;", "&")
    assert staff.get(next_link).text.count("<tr>") == 11
    by_type = staff.get("/events?type=flow.incident")
    assert by_type.text.count("<tr>") == 21
    by_flow = staff.get("/events?flow=flow-a")
    assert by_flow.text.count("<tr>") == 11
    by_reference = staff.get("/events?flow=LA-10001")
    assert by_reference.text.count("<tr>") == 51
    assert staff.get("/events?flow=%3Cscript%3E").status_code == 302


def test_the_start_of_a_flow_id_as_the_lists_show_it_filters_the_events(plain_app):
    """The lists cut flow ids to eight characters; typed into the flow filter, they matched no event and nothing said
    why (a new user's walk). The one flow they start is filtered by, its whole id in the address."""
    flow_id = "26028eb9-5a1c-4c1e-9d0b-0f5b2b7e8a11"
    deliver(plain_app.test_client(), event(flow_id=flow_id))
    plain_app.extensions["flow_index"].flush()
    staff = admin_client(plain_app)
    for typed in (flow_id[:8], flow_id[:13].upper()):
        answer = staff.get("/events", query_string={"flow": typed})
        assert answer.status_code == 302 and answer.headers["Location"] == f"/events?flow={flow_id}", typed
    assert staff.get(f"/events?flow={flow_id}").text.count("<tr>") == 2
    assert staff.get("/events?flow=26028eb").status_code == 200, "seven characters: no flow's start, as the search"


def test_a_flow_filter_that_finds_nothing_says_what_it_would_find(plain_app):
    """ "74749" matched no event and the page said only that (a new user's walk): the number a customer reads out
    suggests the references it ends, and fewer characters than a flow id is found by are said to be too few."""
    deliver(plain_app.test_client(), event(flow_id="26028eb9-5a1c-4c1e-9d0b-0f5b2b7e8a11"))
    plain_app.extensions["flow_index"].flush()
    staff = admin_client(plain_app)

    number = staff.get("/events", query_string={"flow": "10001"}).text
    assert 'data-testid="meant"' in number and '<a href="/events?flow=LA-10001">LA-10001</a>' in number
    assert 'data-testid="too-short"' in number
    assert staff.get("/events?flow=LA-10001").text.count("<tr>") == 2

    short = staff.get("/events", query_string={"flow": "74749"}).text
    assert 'data-testid="meant"' not in short
    assert "A flow id is found by its first 8 characters or more, as the lists show it" in short
    whole = staff.get("/events", query_string={"flow": "aaaaaaaa-5a1c-4c1e-9d0b-0f5b2b7e8a11"}).text
    assert "No events match these filters." in whole and 'data-testid="too-short"' not in whole


def test_the_events_filter_form_leaves_a_tidy_address(plain_app):
    """The form sends every field: the empty ones and the default are left out of the address, the rest kept."""
    deliver(plain_app.test_client(), event(event_type="flow.incident", flow_id="flow-a"))
    staff = admin_client(plain_app)
    for sent, tidy in (
        ("/events?type=&flow=flow-a", "/events?flow=flow-a"),
        ("/events?type=flow.incident&flow=&unlinked=0", "/events?type=flow.incident"),
        ("/events?type=&flow=%20", "/events"),
    ):
        answer = staff.get(sent)
        assert answer.status_code == 302 and answer.headers["Location"] == tidy, sent
        assert staff.get(tidy).status_code == 200
    assert staff.get("/events?type=flow.incident&flow=flow-a").status_code == 200  # tidy already: shown


def test_event_page_shows_body_and_headers(plain_app):
    deliver(plain_app.test_client(), event(extra={"nationalId": "15108695088"}), message_id="msg_show")
    staff = admin_client(plain_app)
    row_id = stored(plain_app)[0].id
    page = staff.get(f"/events/{row_id}").text
    assert "msg_show" in page and "webhook-timestamp" in page and "&#34;status&#34;: &#34;Opened&#34;" in page
    assert "15108695088" not in page
    assert staff.get("/events/999999").status_code == 404


@pytest.mark.parametrize("flow_id", ["legacy/42", "flow 42", "flow.42"])
def test_an_event_naming_a_flow_no_page_can_open_shows_the_id_without_a_link(plain_app, flow_id):
    deliver(plain_app.test_client(), event(flow_id=flow_id, referenceId="LA-42"), message_id="msg_odd")
    deliver(plain_app.test_client(), event(flow_id="flow-42"), message_id="msg_plain")
    staff = admin_client(plain_app)
    listed = staff.get("/events").text
    odd, plain = (row.id for row in stored(plain_app))
    detail = staff.get(f"/events/{odd}").text
    for page in (listed, detail):
        assert html.escape(flow_id) in page
        assert not re.search(r'href="/flows/(legacy|flow[ .%])', page), "no link that can only lead to not found"
    assert 'href="/flows/flow-42"' in listed and 'href="/flows/flow-42"' in staff.get(f"/events/{plain}").text


def test_rejected_deliveries_page_for_admins(plain_app):
    plain_app.test_client().post(
        PATH, data=b"{}", headers={"content-type": "application/json", "webhook-signature": "v1,forged"}
    )
    page = admin_client(plain_app).get("/admin/rejected").text
    assert "missing header" in page and "v1,forged" in page


def test_a_stranger_s_national_id_in_a_refused_delivery_is_masked_where_admins_read_it(plain_app):
    """Headers and reasons of a refused delivery were kept and shown whole (an event's headers are masked)."""
    person = "15108695088"
    headers = {"webhook-id": person, "webhook-timestamp": person, "webhook-signature": f"v1,{person}"}
    plain_app.test_client().post(PATH, data=b"{}", headers={"content-type": "application/json", **headers})
    plain_app.test_client().post(PATH, data=b"{}", headers={"content-type": f"application/{person}"})
    page = admin_client(plain_app).get("/admin/rejected").text
    assert person not in page and "151086•••••" in page
    with plain_app.app_context():
        kept = " ".join(f"{row.reason} {row.signature_headers}" for row in db.session.query(RejectedDelivery))
        tallied = " ".join(row.last_reason for row in db.session.query(RejectionTally))
    assert person not in kept and person not in tallied


def test_prune_removes_old_events(plain_app):
    deliver(plain_app.test_client())
    deliver(plain_app.test_client())
    with plain_app.app_context():
        first = db.session.query(WebhookEvent).order_by(WebhookEvent.id).first()
        first.received_at = datetime.now(timezone.utc) - timedelta(days=100)
        db.session.commit()
    result = plain_app.test_cli_runner().invoke(args=["events", "prune", "--older-than", "90d"])
    assert result.exit_code == 0 and "removed 1 event" in result.output
    assert len(stored(plain_app)) == 1
    bad = plain_app.test_cli_runner().invoke(args=["events", "prune", "--older-than", "soon"])
    assert bad.exit_code != 0


def test_export_jsonl_and_csv(plain_app):
    deliver(plain_app.test_client(), message_id="msg_a")
    deliver(plain_app.test_client(), message_id="msg_b")
    runner = plain_app.test_cli_runner()
    lines = runner.invoke(args=["events", "export"]).output.strip().splitlines()
    records = [json.loads(line) for line in lines]
    assert [record["event_id"] for record in records] == ["msg_a", "msg_b"]
    assert set(records[0]) == {"event_id", "type", "flow_id", "received_at", "body"}
    assert records[0]["body"]["type"] == "flow.status_changed"
    future = runner.invoke(args=["events", "export", "--since", "2999-01-01"]).output
    assert future == ""
    csv_text = runner.invoke(args=["events", "export", "--format", "csv"]).output
    assert csv_text.splitlines()[0] == "event_id,type,flow_id,received_at,body" and "msg_b" in csv_text
    assert runner.invoke(args=["events", "export", "--since", "yesterday"]).exit_code != 0


def test_events_are_read_for_export_in_batches_oldest_first_none_missed(plain_app):
    for number in range(5):
        deliver(plain_app.test_client(), message_id=f"msg_{number}")
    with plain_app.app_context():
        assert [event.event_id for event in iter_events(None, batch=2)] == [f"msg_{number}" for number in range(5)]
        later = stored(plain_app)[3].received_at
        assert [event.event_id for event in iter_events(later, batch=1)] == ["msg_3", "msg_4"]
        newest_first = iter_matching_events(event_type=None, flow=None, batch=2)
        assert [event.event_id for event in newest_first] == [f"msg_{number}" for number in reversed(range(5))]


def test_events_are_exported_in_the_order_they_were_stored_whatever_their_receipt_times(plain_app):
    for number in range(5):
        deliver(plain_app.test_client(), message_id=f"msg_{number}")
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with plain_app.app_context():
        # A clock set back between deliveries; updated newest first, so PostgreSQL keeps them in that order.
        for row in db.session.query(WebhookEvent).order_by(WebhookEvent.id.desc()):
            row.received_at = start + timedelta(minutes=10 - row.id)
            db.session.commit()
        exported = [event.event_id for event in iter_events(start, batch=2)]
    assert exported == [f"msg_{number}" for number in range(5)]


def test_a_flow_timeline_is_bounded_oldest_first(plain_app):
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with plain_app.app_context():
        db.session.add_all(
            WebhookEvent(
                event_id=f"msg_{number}",
                flow_id="flow-busy",
                occurred_at=start + timedelta(seconds=number),
                body="{}",
                scheme="standard-webhooks",
                secret_index=0,
            )
            for number in range(501)
        )
        db.session.commit()
        timeline = [event.event_id for event in events_for_flow("flow-busy", None)[0]]
    assert timeline == [f"msg_{number}" for number in range(500)]


def test_send_test_delivers_to_a_running_portal(plain_app, serve):
    url = serve(plain_app) + PATH
    result = plain_app.test_cli_runner().invoke(args=["events", "send-test", "--url", url])
    assert result.exit_code == 0, result.output
    assert stored(plain_app)[0].event_type == "portal.test"


def test_send_test_reports_a_refusal(sandbox, database_url, serve):
    receiving = create_app(portal_config(sandbox.url, database_url, FLOW_WEBHOOK_SECRETS=SECOND))
    from support import migrated

    url = serve(migrated(receiving)) + PATH
    sending = create_app(portal_config(sandbox.url, database_url, FLOW_WEBHOOK_SECRETS=SECRET))
    result = sending.test_cli_runner().invoke(args=["events", "send-test", "--url", url])
    assert result.exit_code != 0 and "401" in result.output
    assert "invalid signature" in result.output and len(result.output.strip().splitlines()) == 1
    nowhere = sending.test_cli_runner().invoke(args=["events", "send-test", "--url", url.replace(PATH, "/nope")])
    assert "answered 404 NOT FOUND" in nowhere.output and "<" not in nowhere.output, "no HTML page in one line"
    with receiving.app_context():
        db.engine.dispose()
    with sending.app_context():
        db.engine.dispose()


def test_migrations_match_the_models(plain_app):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    with plain_app.app_context(), db.engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), db.metadata)
    assert [d for d in differences if d[0] != "modify_type"] == []


def test_awkward_but_signed_input_never_fails_the_store(make_app, database_url):
    app = make_app(database=database_url, FLOW_WEBHOOK_SECRETS=SECRET, WTF_CSRF_ENABLED=False)
    client = app.test_client()
    nul_type = event(event_type="flow.\u0000created")
    assert deliver(client, nul_type).status_code == 200
    assert stored(app)[0].event_type == "flow.created"
    body = json.dumps(event()).encode()
    # An unusable webhook-id is kept as its hash: the event is stored and its redelivery still deduplicates.
    first = deliver(client, body=body, message_id="msg\u0007bell")
    again = deliver(client, body=body, message_id="msg\u0007bell")
    assert first.status_code == again.status_code == 200 and again.json["status"] == "duplicate"
    assert first.json["id"] == "id-sha256:" + hashlib.sha256(b"msg\x07bell").hexdigest()
    assert client.post(PATH, data=b'{"a": "\x00"}', headers={"content-type": "application/json"}).status_code == 401
    assert "\x00" not in rejected(app)[-1].body_head


def test_a_body_that_begins_with_a_byte_order_mark_is_stored_and_shown(hook_app, hook_client):
    """Refused as malformed JSON, though the portal's own client reads such answers (found by a stand-in service):
    the sender retried and gave up."""
    sent = event(status="Accepted")
    body = b"\xef\xbb\xbf" + json.dumps(sent).encode()
    assert deliver(hook_client, body=body).status_code == 200
    [row] = stored(hook_app)
    assert row.event_type == "flow.status_changed" and row.status == "Accepted"
    assert event_document(row) == sent, "shown as the JSON it is, not as text"


def test_hmac_scheme_refuses_a_body_that_is_not_utf8(make_app, database_url):
    app = make_app(database=database_url, FLOW_WEBHOOK_SCHEME="hmac-sha256", FLOW_WEBHOOK_SECRETS="plain")
    body = json.dumps(event()).encode("utf-16")
    signature = hmac.new(b"plain", body, hashlib.sha256).hexdigest()
    answer = app.test_client().post(
        PATH, data=body, headers={"X-Flow-Signature": signature, "content-type": "application/json"}
    )
    assert answer.status_code == 400 and stored(app) == []


def test_out_of_range_event_ids_are_not_found(plain_app):
    staff = admin_client(plain_app)
    assert staff.get("/events/99999999999999999999").status_code == 404
    assert staff.get("/events?before=99999999999999999999").status_code == 302
    assert staff.get("/events?before=2147483647").status_code == 200


# -- other shapes, missing ids, hostile but signed content ----------------------------------------


def staff_client(app, role="viewer"):
    return signed_in_as(app, role, role)


def flat_event(**changes) -> dict:
    return {
        "event": "flow.status_changed",
        "flowId": "flow-flat",
        "referenceId": "LA-20002",
        "status": "Accepted",
        "timestamp": "2026-11-28T10:00:00Z",
    } | changes


@pytest.mark.parametrize(
    ("payload", "shape", "expected"),
    [
        (event(flow_id="f1"), "auto", ("flow.status_changed", "f1", "LA-10001", "Opened")),
        (event(flow_id="f1"), "design", ("flow.status_changed", "f1", "LA-10001", "Opened")),
        (event(flow_id="f1"), "flat", ("flow.status_changed", None, None, None)),
        (flat_event(), "auto", ("flow.status_changed", "flow-flat", "LA-20002", "Accepted")),
        (flat_event(), "flat", ("flow.status_changed", "flow-flat", "LA-20002", "Accepted")),
        (flat_event(), "design", ("flow.status_changed", None, None, None)),
        (flat_event(type="flow.created", flowId=4711), "auto", ("flow.created", "4711", "LA-20002", "Accepted")),
        ({"data": "not an object", "flowId": "f2", "status": True}, "auto", (None, "f2", None, None)),
        ({"event": {"nested": 1}, "flowId": [1], "status": None}, "auto", (None, None, None, None)),
    ],
)
def test_read_event_finds_the_fields_of_each_shape(payload, shape, expected):
    fields = read_event(payload, EventShape(shape))
    assert (fields.event_type, fields.flow_id, fields.reference_id, fields.status) == expected


def test_read_event_follows_field_overrides_and_other_time_names():
    shape = EventShape("auto", parse_fields("type=kind, flow_id=payload.flow.id,status=payload.states.1"))
    payload = {
        "kind": "x.y",
        "eventId": 7,
        "occurredAt": 1700000000,
        "payload": {"flow": {"id": "f9"}, "states": ["a", "b"]},
    }
    assert read_event(payload, shape) == EventFields("7", "x.y", "f9", None, "b", "1700000000")


@pytest.mark.parametrize("status_path", ["payload.states.first", "payload.states.2", "payload.states.-1"])
def test_a_field_path_into_a_list_by_no_usable_position_finds_nothing(status_path):
    shape = EventShape("auto", parse_fields(f"status={status_path}"))
    assert read_event({"payload": {"states": ["a", "b"]}}, shape).status is None


def test_a_one_character_event_id_is_kept_as_given(hook_app, hook_client):
    assert deliver(hook_client, event(), message_id="7").get_json() == {"status": "stored", "id": "7"}
    assert [row.event_id for row in stored(hook_app)] == ["7"]


def test_a_flat_event_is_linked_to_its_flow_and_shown(plain_app):
    assert deliver(plain_app.test_client(), flat_event(flowId=4711, id="evt-flat")).status_code == 200
    [row] = stored(plain_app)
    assert (row.event_type, row.flow_id, row.reference_id, row.status) == (
        "flow.status_changed",
        "4711",
        "LA-20002",
        "Accepted",
    )
    assert row.occurred_at == datetime(2026, 11, 28, 10, tzinfo=timezone.utc)
    with plain_app.app_context():
        assert [event.id for event in events_for_flow("4711", None)[0]] == [row.id]
        assert events_for_flow("other", "LA-20002")[0] == [], "another flow with the same reference does not get it"
    staff = staff_client(plain_app)
    listing = staff.get("/events?flow=4711").text
    assert "flow.status_changed" in listing and "/flows/4711" in listing and "Accepted" in listing
    page = staff.get(f"/events/{row.id}")
    assert page.status_code == 200 and "/flows/4711" in page.text and "Accepted" in page.text


def test_an_event_without_a_flow_id_joins_a_timeline_only_while_its_reference_names_one_flow(plain_app):
    client = plain_app.test_client()
    assert deliver(client, flat_event(flowId="4711", referenceId="LA-7", id="evt-own")).status_code == 200
    assert deliver(client, flat_event(flowId=None, referenceId="LA-7", id="evt-loose")).status_code == 200
    assert deliver(client, flat_event(flowId=None, referenceId="LA-8", id="evt-elsewhere")).status_code == 200
    own, loose, _elsewhere = stored(plain_app)
    with plain_app.app_context():
        assert [event.id for event in events_for_flow("4711", "LA-7")[0]] == [own.id, loose.id]
        assert left_out_by_reference("4711", "LA-7") == 0
        assert events_for_flow("4712", "LA-7")[0] == [], "an event names another flow with the reference"
        assert left_out_by_reference("4712", "LA-7") == 1


def test_an_event_naming_another_flow_keeps_a_loose_event_off_even_before_the_index_knows_it(plain_app):
    client = plain_app.test_client()
    assert deliver(client, flat_event(flowId="4711", referenceId="LA-7", id="evt-own")).status_code == 200
    assert deliver(client, flat_event(flowId=None, referenceId="LA-7", id="evt-loose")).status_code == 200
    own, loose = stored(plain_app)
    with plain_app.app_context():
        assert plain_app.extensions["flow_index"].flush(10)
        db.session.query(FlowRecord).delete()  # an index that has not heard of flow 4711 (lagging, or rebuilt)
        db.session.commit()
        assert events_for_flow("4712", "LA-7")[0] == [], "the event naming 4711 says the reference is not 4712's alone"
        # its own event is no other
        assert [event.id for event in events_for_flow("4711", "LA-7")[0]] == [own.id, loose.id]


def test_webhook_fields_override_a_path(make_app, database_url):
    app = make_app(
        database=database_url,
        FLOW_WEBHOOK_SECRETS=SECRET,
        FLOW_WEBHOOK_SHAPE="flat",
        FLOW_WEBHOOK_FIELDS="type=kind,flow_id=payload.flow.id,status=payload.state",
    )
    payload = {"kind": "loan.accepted", "payload": {"flow": {"id": "f-77"}, "state": "Accepted"}, "flowId": "not-this"}
    assert deliver(app.test_client(), payload).status_code == 200
    [row] = stored(app)
    assert (row.event_type, row.flow_id, row.status) == ("loan.accepted", "f-77", "Accepted")


@pytest.fixture
def hmac_app(make_app, database_url):
    return make_app(database=database_url, FLOW_WEBHOOK_SCHEME="hmac-sha256", FLOW_WEBHOOK_SECRETS="plain")


def hmac_post(client, body: bytes, **headers):
    signature = hmac.new(b"plain", body, hashlib.sha256).hexdigest()
    return client.post(
        PATH, data=body, headers={"X-Flow-Signature": signature, "content-type": "application/json"} | headers
    )


def test_hmac_event_without_an_id_is_stored_under_the_hash_of_its_body(hmac_app):
    client = hmac_app.test_client()
    body = json.dumps(flat_event()).encode()
    first = hmac_post(client, body)
    again = hmac_post(client, body)
    assert first.status_code == again.status_code == 200
    assert first.json == {"status": "stored", "id": "sha256:" + hashlib.sha256(body).hexdigest()}
    assert again.json["status"] == "duplicate"
    other = hmac_post(client, json.dumps(flat_event(status="Rejected")).encode())
    assert other.json["status"] == "stored"
    assert len(stored(hmac_app)) == 2


def test_hmac_event_id_comes_from_the_id_header_then_the_body(hmac_app):
    client = hmac_app.test_client()
    body = json.dumps(flat_event(id="body-id")).encode()
    assert hmac_post(client, body, **{"X-Flow-Event-Id": "header-id"}).json == {"status": "stored", "id": "header-id"}
    other = json.dumps(flat_event(id="body-id", status="Rejected")).encode()
    assert hmac_post(client, other).json == {"status": "stored", "id": "body-id"}
    assert hmac_post(client, other).json == {"status": "duplicate", "id": "body-id"}
    numbered = json.dumps(flat_event(eventId=12345)).encode()
    assert hmac_post(client, numbered).json["id"] == "12345"
    assert json.loads(stored(hmac_app)[0].headers)["x-flow-event-id"] == "header-id"


def test_an_hmac_delivery_replayed_with_another_id_header_is_a_duplicate(hmac_app):
    """The id header is not signed: the same signed bytes again are a replay, before and after pruning."""
    client = hmac_app.test_client()
    body = json.dumps(flat_event(id="body-id")).encode()
    assert hmac_post(client, body, **{"X-Flow-Event-Id": "first"}).json["status"] == "stored"
    assert hmac_post(client, body, **{"X-Flow-Event-Id": "replay-1"}).json["status"] == "duplicate"
    with hmac_app.app_context():
        from portal.webhooks.store import prune_events

        assert prune_events(datetime.now(timezone.utc) + timedelta(seconds=1)) == 1
    for header in ({"X-Flow-Event-Id": "replay-2"}, {}):
        assert hmac_post(client, body, **header).json["status"] == "duplicate"
    assert stored(hmac_app) == []


def test_the_id_header_is_configurable(make_app, database_url):
    app = make_app(
        database=database_url,
        FLOW_WEBHOOK_SCHEME="hmac-sha256",
        FLOW_WEBHOOK_SECRETS="plain",
        FLOW_WEBHOOK_ID_HEADER="X-GitHub-Delivery",
    )
    answer = hmac_post(app.test_client(), json.dumps(flat_event()).encode(), **{"X-GitHub-Delivery": "d-1"})
    assert answer.json == {"status": "stored", "id": "d-1"}


def test_lone_surrogates_and_control_characters_are_stored_cleaned(plain_app):
    payload = flat_event(event="flow.\ud800created", flowId="\udfffflow-9\u0000", status="Acc\x1bepted" + "x" * 100)
    body = json.dumps(payload).encode()  # ensure_ascii: the surrogate travels as the escape \ud800
    assert b"\\ud800" in body
    answer = deliver(plain_app.test_client(), body=body)
    assert answer.status_code == 200, answer.text
    [row] = stored(plain_app)
    assert (row.event_type, row.flow_id) == ("flow.\ufffdcreated", "\ufffdflow-9")
    assert row.status == ("Accepted" + "x" * 100)[:40]
    assert row.body == body.decode()
    staff = staff_client(plain_app)
    assert staff.get(f"/events/{row.id}").status_code == 200
    assert staff.get("/events").status_code == 200
    exported = plain_app.test_cli_runner().invoke(args=["events", "export"])
    assert exported.exit_code == 0, exported.output
    assert json.loads(exported.output)["body"]["event"] == "flow.\ufffdcreated"


def test_escaped_nul_and_huge_numbers_in_a_signed_body_are_stored(plain_app):
    body = b'{"type": "flow.created", "flowId": "f\\u0000", "count": ' + b"9" * 5000 + b"}"
    answer = deliver(plain_app.test_client(), body=body)
    assert answer.status_code == 200, answer.text
    [row] = stored(plain_app)
    assert row.flow_id == "f" and row.body == body.decode()
    assert staff_client(plain_app).get(f"/events/{row.id}").status_code == 200


def test_json_nested_5000_deep_is_a_clear_400(make_app, database_url):
    app = make_app(database=database_url, FLOW_WEBHOOK_SECRETS=SECRET)
    body = b'{"id": "deep", "note": "[[[[{{{{ in a string \\" ]]", "data": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    answer = deliver(app.test_client(), body=body)
    assert answer.status_code == 400 and answer.json == {"error": "JSON nested too deep"}
    assert stored(app) == []
    [record] = rejected(app)
    assert "nested deeper than 64" in record.reason
    with app.app_context():
        assert db.session.query(RejectionTally).one().kind == "too_deep"
    brackets_in_strings = json.dumps(event(note="[" * 5000)).encode()
    assert deliver(app.test_client(), body=brackets_in_strings).status_code == 200
    just_deep_enough = json.dumps(event(nested=json.loads("[" * 63 + "]" * 63))).encode()
    assert deliver(app.test_client(), body=just_deep_enough).status_code == 200
    # One level more, after the closed `data` object: the depth counted back down by one a bracket, not more.
    one_too_deep = json.dumps(event(nested=json.loads("[" * 64 + "]" * 64))).encode()
    assert deliver(app.test_client(), body=one_too_deep).json == {"error": "JSON nested too deep"}


@pytest.mark.parametrize(
    "timestamp",
    ["9999-12-31T23:59:59Z", "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59", 1e300, "99999999999999999999"],
)
def test_a_moment_past_the_ends_of_time_is_kept_as_text(plain_app, sandbox, timestamp):
    flow_id = sandbox.create()["flowId"]
    payload = event(flow_id=flow_id, timestamp=timestamp)
    answer = deliver(plain_app.test_client(), payload)
    assert answer.status_code == 200, answer.text
    [row] = stored(plain_app)
    assert row.occurred_at is None and row.occurred_at_raw == str(timestamp)
    staff = staff_client(plain_app)
    page = staff.get(f"/events/{row.id}")
    assert page.status_code == 200 and str(timestamp) in page.text
    assert staff.get(f"/flows/{flow_id}").status_code == 200
    assert staff.get(f"/events?flow={flow_id}").status_code == 200


def test_the_last_showable_moment_is_kept(plain_app):
    assert deliver(plain_app.test_client(), event(timestamp="9999-12-29T12:00:00+01:00")).status_code == 200
    [row] = stored(plain_app)
    assert row.occurred_at == datetime(9999, 12, 29, 11, tzinfo=timezone.utc) and row.occurred_at_raw is None
    assert staff_client(plain_app).get(f"/events/{row.id}").status_code == 200


def test_the_migration_moves_stored_moments_past_the_ends_of_time_to_text(plain_app):
    from flask_migrate import downgrade, upgrade
    from sqlalchemy import bindparam, text

    insert = text(
        "INSERT INTO webhook_events (event_id, occurred_at, received_at, body, headers, scheme, secret_index)"
        " VALUES (:id, :at, :at, '{}', '{}', 'standard-webhooks', 0)"
    ).bindparams(bindparam("at", type_=db.DateTime(timezone=True)))
    with plain_app.app_context():
        downgrade(revision="0001_initial")
        for number, moment in enumerate([datetime(9999, 12, 31, 23, 59, 59), datetime(2026, 1, 2, 3, 4, 5)]):
            db.session.execute(insert, {"id": f"old-{number}", "at": moment.replace(tzinfo=timezone.utc)})
        db.session.commit()
        upgrade()
    far, near = stored(plain_app)
    assert far.occurred_at is None and far.occurred_at_raw.startswith("9999-12-31")
    assert near.occurred_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc) and near.occurred_at_raw is None


@pytest.fixture
def gunicorn_portal(make_app, database_url, tmp_path):
    """gunicorn serving `wsgi.py` on a migrated store; yields its URL and an app on the same database."""
    app = make_app(database=database_url, FLOW_WEBHOOK_SECRETS=SECRET)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = portal_config("http://127.0.0.1:9", database_url, FLOW_WEBHOOK_SECRETS=SECRET)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("FLOW_", "PORTAL_"))}
    env |= {key: value for key, value in config.items() if isinstance(value, str)}
    root = Path(__file__).resolve().parents[1]
    command = [sys.executable, "-m", "gunicorn", "-w", "1", "--threads", "2", "-b", f"127.0.0.1:{port}"]
    command += ["--pythonpath", str(root), "--graceful-timeout", "1", "wsgi:app"]
    with (tmp_path / "gunicorn.log").open("w") as log:
        server = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 30
    try:
        while True:
            try:
                requests.get(url + "/healthz", timeout=5)
                break
            except requests.RequestException:
                assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "gunicorn.log").read_text()
                time.sleep(0.1)
        yield url, app
    finally:
        server.terminate()
        server.wait(10)


def test_hostile_signed_deliveries_through_gunicorn(gunicorn_portal):
    url, app = gunicorn_portal
    deliveries = {
        "surrogate": (json.dumps(flat_event(event="\ud800", flowId="\ud800", status="\ud800")).encode(), 200),
        "deep": (b'{"type": "x", "data": ' + b"[" * 5000 + b"]" * 5000 + b"}", 400),
        "end of time": (json.dumps(event(timestamp="9999-12-31T23:59:59Z")).encode(), 200),
        "past the end": (json.dumps(event(timestamp="9999-12-31T23:59:59-23:59")).encode(), 200),
    }
    answers = {
        name: requests.post(url + PATH, data=body, headers=signed(body), timeout=10).status_code
        for name, (body, _) in deliveries.items()
    }
    assert answers == {name: status for name, (_, status) in deliveries.items()}
    rows = stored(app)
    assert [(row.event_type, row.flow_id, row.status) for row in rows[:1]] == [("\ufffd", "\ufffd", "\ufffd")]
    assert [(row.occurred_at, row.occurred_at_raw) for row in rows[1:]] == [
        (None, "9999-12-31T23:59:59Z"),
        (None, "9999-12-31T23:59:59-23:59"),
    ]


def test_a_stored_delivery_is_answered_with_the_headers_every_answer_carries(hook_app, serve):
    """The lean lane (webhooks/intake.py) answers a good delivery without Flask: the answer is the view's."""
    body = json.dumps(event()).encode()
    headers = signed(body) | {"X-Request-Id": "delivery-7"}
    answer = requests.post(serve(hook_app) + PATH, data=body, headers=headers, timeout=10)
    assert answer.status_code == 200 and answer.json() == {"status": "stored", "id": headers["webhook-id"]}
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.headers["X-Request-Id"] == "delivery-7"
    assert answer.headers["X-Content-Type-Options"] == "nosniff" and "Content-Security-Policy" in answer.headers
    assert answer.headers["Cache-Control"] == "no-store", "as the view's JSON (an attack's note)"
    [row] = stored(hook_app)
    assert row.event_id == headers["webhook-id"] and row.source_ip == "127.0.0.1"
    assert json.loads(row.headers)["webhook-id"] == headers["webhook-id"]


def test_a_chunked_delivery_without_a_length_is_stored_by_the_view(hook_app, serve):
    body = json.dumps(event()).encode()
    headers = signed(body)
    chunks = (body[i : i + 100] for i in range(0, len(body), 100))  # requests sends a generator chunked
    answer = requests.post(serve(hook_app) + PATH, data=chunks, headers=headers, timeout=10)
    assert answer.status_code == 200 and answer.json() == {"status": "stored", "id": headers["webhook-id"]}
    assert [row.event_id for row in stored(hook_app)] == [headers["webhook-id"]]


def test_a_stored_delivery_writes_its_access_line_at_debug_and_a_refused_one_at_info(hook_client, caplog):
    caplog.set_level(logging.DEBUG, logger="portal.access")
    assert deliver(hook_client).status_code == 200
    assert hook_client.post(PATH, data=b"{}", headers={"content-type": "application/json"}).status_code == 401
    lines = [(record.levelname, record.getMessage()) for record in caplog.records if record.name == "portal.access"]
    expected = [("DEBUG", f"POST '{PATH}' 200"), ("INFO", f"POST '{PATH}' 401")]
    assert lines == expected, "the event row is a stored delivery's record"


def test_a_refused_delivery_the_lane_read_is_still_refused_and_kept_by_the_view(hook_app, hook_client):
    body = json.dumps(event()).encode()
    headers = signed(body) | {"content-type": "text/plain"}  # signed, then refused: the body was read once already
    answer = deliver(hook_client, body=body, headers=headers)
    assert answer.status_code == 415 and answer.json == {"error": "content type must be application/json"}
    [sample] = rejected(hook_app)
    assert sample.body_head == body.decode() and not stored(hook_app)


def test_a_content_type_in_capitals_is_json_for_the_lane_as_for_the_view(hook_app, hook_client):
    body = json.dumps(event()).encode()
    headers = signed(body) | {"content-type": "Application/JSON; charset=utf-8"}
    answer = deliver(hook_client, body=body, headers=headers)
    assert answer.status_code == 200 and answer.json["status"] == "stored"
    assert [row.event_id for row in stored(hook_app)] == [headers["webhook-id"]]


@pytest.mark.parametrize("length", ["²", "+12", " 12", "-1", "1e3"])
def test_a_malformed_content_length_is_never_a_traceback(hook_app, length):
    """Past gunicorn's own check, a WSGI server may hand over any text: the view decides, the lane never fails."""
    body = json.dumps(event()).encode()
    environ_headers = signed(body)
    answer = hook_app.test_client().open(
        PATH,
        method="POST",
        data=body,
        headers=environ_headers,
        environ_overrides={"CONTENT_LENGTH": length},
    )
    assert answer.status_code < 500


def test_a_body_cut_short_of_its_content_length_is_refused_as_incomplete(hook_app, serve):
    """Not "no secret matches": the sender stopped early (found by attacking the lane over a raw socket)."""
    url = serve(hook_app)
    body = json.dumps(event()).encode()
    headers = signed(body)
    host, port = url.removeprefix("http://").split(":")
    head = f"POST {PATH} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(head.encode() + b"\r\n" + body[:-20])
        connection.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 400") and b"incomplete body" in answer
    [sample] = rejected(hook_app)
    assert sample.reason == f"body ended after {len(body) - 20} of the {len(body)} bytes its Content-Length announced"
    assert sample.body_head == body[:-20].decode() and not stored(hook_app), "the view reads what the lane read"


def test_an_event_status_in_capitals_is_the_status_it_names(plain_app):
    """ACCEPTED showed as written, with a grey badge and untranslated, on the events page and the timeline."""
    deliver(plain_app.test_client(), event(status="ACCEPTED"))
    [row] = stored(plain_app)
    assert row.status == "Accepted" and '"ACCEPTED"' in row.body, "the body keeps what the service wrote"
    staff = admin_client(plain_app)
    staff.post("/language", data={"language": "nb", "next": "/events"})
    page = staff.get("/events").text
    assert "ACCEPTED" not in page and "Akseptert" in page
