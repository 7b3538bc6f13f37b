"""Why a delivery was refused: each diagnosis from a crafted delivery, on SQLite and PostgreSQL, never a secret.

Signatures come from the `standardwebhooks` package or plain hmac, never from the code under test. The portal's
clock is pinned so that "how far off" is exact; the library's own clock is the wall clock, which a pinned moment
taken at the start of the test is within milliseconds of.
"""

import base64
import hashlib
import hmac
import json
import secrets
import time
import uuid
from datetime import datetime, timezone

import pytest
from support import portal_config, production_settings, signed_in_as
from werkzeug.datastructures import Headers

from portal.extensions import db
from portal.masking import mask_text
from portal.models import RejectedDelivery
from portal.settings import SettingsError, load_settings
from portal.webhooks import signing
from portal.webhooks.diagnosis import (
    MAX_HEADERS_LOOKED_AT,
    MAX_VARIANT_BYTES,
    MAX_VARIANTS,
    Delivery,
    body_variants,
    diagnose,
    duration,
)

PATH = "/webhooks/flow"


def whsec() -> str:
    # Generated per run: a secret written in the repository is refused in production (test_security scans for them).
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


LIVE, OTHER_LIVE, RETIRED, STRANGER = whsec(), whsec(), whsec(), whsec()
PLAIN_LIVE, PLAIN_RETIRED, PLAIN_STRANGER = (secrets.token_urlsafe(32) for _ in range(3))


def payload(**data) -> dict:
    return {
        "id": str(uuid.uuid4()),
        "type": "flow.status_changed",
        "timestamp": "2026-01-05T10:00:00+00:00",
        "data": {"flowId": str(uuid.uuid4()), "referenceId": "LÅN-10001", "status": "Opened"} | data,
    }


def standard_headers(body: bytes, secret: str, at: int, message_id: str | None = None) -> dict:
    message_id = message_id or f"msg_{uuid.uuid4().hex}"
    moment = datetime.fromtimestamp(at, timezone.utc)
    return signing.standard_headers(secret, message_id, moment, body.decode("utf-8")) | {
        "content-type": "application/json"
    }


def hex_hmac(key: bytes, body: bytes) -> str:
    """Any key's digest, also a key that is no text (a whsec secret's decoded bytes, used by mistake)."""
    return hmac.new(key, body, hashlib.sha256).hexdigest()


@pytest.fixture
def pinned_now() -> int:
    return int(time.time())


@pytest.fixture
def standard_app(make_app, database_url, pinned_now):
    app = make_app(
        database=database_url,
        FLOW_WEBHOOK_SECRETS=f"{LIVE},{OTHER_LIVE}",
        FLOW_WEBHOOK_RETIRED_SECRETS=RETIRED,
        WTF_CSRF_ENABLED=False,
    )
    app.extensions["portal.clock"] = lambda: pinned_now
    return app


@pytest.fixture
def hmac_app(make_app, database_url, pinned_now):
    app = make_app(
        database=database_url,
        FLOW_WEBHOOK_SCHEME="hmac-sha256",
        FLOW_WEBHOOK_SECRETS=PLAIN_LIVE,
        FLOW_WEBHOOK_RETIRED_SECRETS=PLAIN_RETIRED,
    )
    app.extensions["portal.clock"] = lambda: pinned_now
    return app


def refused(app, body: bytes, headers: dict, status: int = 401) -> RejectedDelivery:
    """Post the delivery, check it is refused, and return the sample kept for it."""
    answer = app.test_client().post(PATH, data=body, headers=headers)
    assert answer.status_code == status, answer.text
    row = latest(app)
    assert row is not None and row.diagnosis and row.diagnosis_detail
    return row


def latest(app) -> RejectedDelivery | None:
    with app.app_context():
        row = db.session.query(RejectedDelivery).order_by(RejectedDelivery.id.desc()).first()
        db.session.expunge_all()
    return row


# -- Standard Webhooks ----------------------------------------------------------------------------


def test_a_stale_timestamp_says_how_far_off_and_that_the_secret_is_right(standard_app, pinned_now):
    body = json.dumps(payload()).encode()
    row = refused(standard_app, body, standard_headers(body, OTHER_LIVE, pinned_now - 432))
    assert row.diagnosis == "stale_timestamp"
    assert "signed 7 min 12 s before it arrived; the tolerance is 5 minutes" in row.diagnosis_detail
    assert "queue holding deliveries" in row.diagnosis_detail
    assert "secret #2 of FLOW_WEBHOOK_SECRETS: the secret is right" in row.diagnosis_detail


def test_a_timestamp_from_the_future_says_the_senders_clock_is_ahead(standard_app, pinned_now):
    body = json.dumps(payload()).encode()
    row = refused(standard_app, body, standard_headers(body, STRANGER, pinned_now + 3 * 3600 + 60))
    assert row.diagnosis == "stale_timestamp"
    assert "signed 3 h 1 min after it arrived (the sender's clock is ahead)" in row.diagnosis_detail
    assert "No configured or retired secret matches either" in row.diagnosis_detail


def test_a_stale_delivery_signed_with_a_retired_secret_says_so(standard_app, pinned_now):
    body = json.dumps(payload()).encode()
    row = refused(standard_app, body, standard_headers(body, RETIRED, pinned_now - 86_400 - 7200))
    assert row.diagnosis == "stale_timestamp"
    assert "signed 1 d 2 h before it arrived" in row.diagnosis_detail
    assert "retired secret #1 of FLOW_WEBHOOK_RETIRED_SECRETS" in row.diagnosis_detail


def test_a_retired_secret_is_named_by_its_number(standard_app, pinned_now):
    body = json.dumps(payload()).encode()
    row = refused(standard_app, body, standard_headers(body, RETIRED, pinned_now))
    assert row.diagnosis == "retired_secret"
    assert "retired secret #1 of FLOW_WEBHOOK_RETIRED_SECRETS" in row.diagnosis_detail
    assert "finish the rotation at the Flow Service" in row.diagnosis_detail
    kept = json.loads(row.signature_headers)  # the headers that decide, by their lower-case names
    assert set(kept) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert kept["webhook-signature"].startswith("v1,")


def test_a_secret_configured_nowhere_is_unknown(standard_app, pinned_now):
    body = json.dumps(payload()).encode()
    row = refused(standard_app, body, standard_headers(body, STRANGER, pinned_now))
    assert row.diagnosis == "unknown_secret"
    assert "signed with a secret not configured here" in row.diagnosis_detail


ORIGINAL = json.dumps(payload(), ensure_ascii=False).encode()


@pytest.mark.parametrize(
    ("received", "change"),
    [
        (json.dumps(json.loads(ORIGINAL), separators=(",", ":"), ensure_ascii=False).encode(), "re-serialised"),
        (json.dumps(json.loads(ORIGINAL), indent=1).encode(), "re-serialised"),
        (ORIGINAL + b"\n", "a trailing newline was added"),
        (b"\xef\xbb\xbf" + ORIGINAL, "a byte-order mark was added"),
        (ORIGINAL.decode().encode("latin-1"), "re-encoded from UTF-8 to Latin-1"),
    ],
    ids=["compact", "indented", "newline", "bom", "latin-1"],
)
def test_a_body_changed_on_the_way_is_recognised(standard_app, pinned_now, received, change):
    row = refused(standard_app, received, standard_headers(ORIGINAL, LIVE, pinned_now))
    assert row.diagnosis == "body_altered"
    assert change in row.diagnosis_detail and "the body was changed on the way" in row.diagnosis_detail


def test_line_ends_changed_to_crlf_are_recognised(standard_app, pinned_now):
    original = json.dumps(payload(), indent=2).encode()
    row = refused(standard_app, original.replace(b"\n", b"\r\n"), standard_headers(original, LIVE, pinned_now))
    assert row.diagnosis == "body_altered" and "CRLF" in row.diagnosis_detail


def test_a_stored_event_with_the_same_id_and_another_body_means_the_body_was_altered(standard_app, pinned_now):
    body = json.dumps(payload()).encode()
    headers = standard_headers(body, LIVE, pinned_now, message_id="msg_same")
    assert standard_app.test_client().post(PATH, data=body, headers=headers).status_code == 200
    changed = body.replace(b"Opened", b"Accepted")
    row = refused(standard_app, changed, headers)
    assert row.diagnosis == "body_altered"
    assert "same id (msg_same) is stored with a different body" in row.diagnosis_detail


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"X-Hub-Signature-256": "sha256=" + "ab" * 32}, "FLOW_WEBHOOK_HEADER=X-Hub-Signature-256"),
        ({"Stripe-Signature": f"t=1700000000,v1={'cd' * 32}"}, "Stripe"),
        ({"X-Flow-Signature": "ef" * 32}, "FLOW_WEBHOOK_SCHEME=hmac-sha256 and FLOW_WEBHOOK_HEADER=X-Flow-Signature"),
        ({"svix-id": "msg_1", "svix-timestamp": "1700000000", "svix-signature": "v1,AAAA"}, "Svix"),
    ],
    ids=["github", "stripe", "hmac-header", "svix"],
)
def test_another_schemes_headers_name_the_scheme_and_the_setting(standard_app, extra, named):
    body = json.dumps(payload()).encode()
    row = refused(standard_app, body, {"content-type": "application/json"} | extra)
    assert row.diagnosis == "wrong_scheme" and named in row.diagnosis_detail


def test_a_key_taken_as_text_instead_of_decoded_bytes_is_a_wrong_scheme(standard_app, pinned_now):
    body = json.dumps(payload()).encode()
    headers = standard_headers(body, LIVE, pinned_now)
    content = f"{headers['webhook-id']}.{pinned_now}.".encode() + body
    digest = hmac.new(LIVE.encode(), content, hashlib.sha256).digest()
    headers["webhook-signature"] = "v1," + base64.b64encode(digest).decode()
    row = refused(standard_app, body, headers)
    assert (row.diagnosis, row.diagnosis_detail) == (
        "wrong_scheme",
        "the sender keys the HMAC with the whsec_ secret's text, not its base64-decoded bytes as Standard Webhooks "
        "does: fix the sender's signing library",
    )


@pytest.mark.parametrize(
    ("change", "code", "words"),
    [
        ("no-headers", "missing_header", "no webhook-id, webhook-timestamp, webhook-signature header"),
        ("garbage-signature", "malformed_signature", "no v1,<base64> entry"),
        ("short-signature", "malformed_signature", "no HMAC-SHA256 (32 bytes, base64)"),
        ("milliseconds", "malformed_timestamp", "looks like milliseconds"),
        ("text-plain", "content_type", "the signature is right but the body is not sent as application/json"),
    ],
)
def test_the_other_reasons_have_words_to_act_on(standard_app, pinned_now, change, code, words):
    body = json.dumps(payload()).encode()
    headers = standard_headers(body, LIVE, pinned_now)
    status = 401
    if change == "no-headers":
        headers = {"content-type": "application/json"}
    elif change == "garbage-signature":
        headers["webhook-signature"] = "nonsense"
    elif change == "short-signature":
        headers["webhook-signature"] = "v1,AAAA"  # base64, but 3 bytes: garbled, not another secret's
    elif change == "milliseconds":
        headers["webhook-timestamp"] = str(pinned_now * 1000)
    else:
        headers["content-type"], status = "text/plain", 415
    row = refused(standard_app, body, headers, status)
    assert row.diagnosis == code and words in row.diagnosis_detail


def test_no_secret_configured_says_which_setting(make_app, database_url):
    app = make_app(database=database_url, FLOW_WEBHOOK_SECRETS="")
    body = json.dumps(payload()).encode()
    row = refused(app, body, standard_headers(body, STRANGER, int(time.time())))
    assert row.diagnosis == "no_secret" and "set FLOW_WEBHOOK_SECRETS" in row.diagnosis_detail


# -- hmac-sha256 ----------------------------------------------------------------------------------


def test_hmac_standard_webhooks_headers_point_to_the_scheme_setting(hmac_app, pinned_now):
    body = json.dumps(payload()).encode()
    row = refused(hmac_app, body, standard_headers(body, STRANGER, pinned_now))
    assert row.diagnosis == "wrong_scheme" and "set FLOW_WEBHOOK_SCHEME=standard-webhooks" in row.diagnosis_detail


@pytest.mark.parametrize("name", ["X-Hub-Signature-256", "X-Request-Digest"])
def test_hmac_under_another_header_name_points_to_the_header_setting(hmac_app, name):
    body = json.dumps(payload()).encode()
    headers = {name: "sha256=" + hex_hmac(PLAIN_LIVE.encode(), body), "content-type": "application/json"}
    row = refused(hmac_app, body, headers)
    assert row.diagnosis == "wrong_scheme"
    assert f"set FLOW_WEBHOOK_HEADER={name}" in row.diagnosis_detail
    assert "a configured secret matches it" in row.diagnosis_detail


def test_hmac_a_base64_digest_is_a_wrong_scheme(hmac_app):
    body = json.dumps(payload()).encode()
    digest = base64.b64encode(hmac.new(PLAIN_LIVE.encode(), body, hashlib.sha256).digest()).decode()
    row = refused(hmac_app, body, {"X-Flow-Signature": digest, "content-type": "application/json"})
    assert (
        row.diagnosis == "wrong_scheme" and "as base64 where the hmac-sha256 scheme wants hex" in row.diagnosis_detail
    )


def test_hmac_a_whsec_secret_used_as_decoded_key_bytes_is_a_wrong_scheme(make_app, database_url):
    app = make_app(database=database_url, FLOW_WEBHOOK_SCHEME="hmac-sha256", FLOW_WEBHOOK_SECRETS=LIVE)
    body = json.dumps(payload()).encode()
    digest = hex_hmac(base64.b64decode(LIVE.removeprefix("whsec_")), body)
    row = refused(app, body, {"X-Flow-Signature": digest, "content-type": "application/json"})
    assert row.diagnosis == "wrong_scheme" and "base64-decoded bytes" in row.diagnosis_detail


@pytest.mark.parametrize(
    ("secret", "sent", "code"),
    [
        (PLAIN_RETIRED, "as-is", "retired_secret"),
        (PLAIN_STRANGER, "as-is", "unknown_secret"),
        (PLAIN_LIVE, "compact", "body_altered"),
    ],
    ids=["retired", "unknown", "altered"],  # never a secret in a test's name (and the same in every worker)
)
def test_hmac_retired_unknown_and_altered(hmac_app, secret, sent, code):
    body = json.dumps(payload()).encode()
    headers = {"X-Flow-Signature": "sha256=" + hex_hmac(secret.encode(), body), "content-type": "application/json"}
    received = body if sent == "as-is" else json.dumps(json.loads(body), separators=(",", ":")).encode()
    row = refused(hmac_app, received, headers)
    assert row.diagnosis == code
    # As kept: masked like anything a sender wrote (a run of hex digits can read as a valid national id: about one
    # signature in three thousand)
    assert json.loads(row.signature_headers) == {"x-flow-signature": mask_text(headers["X-Flow-Signature"])}


# -- the page, the row and the log never show a secret ----------------------------------------------


def admin(app):
    return signed_in_as(app, "diagnostics-admin", "admin")


def secret_forms(secret: str) -> list[str]:
    """A secret as it could leak: whole, its base64 key part, and its key bytes as hex and base64."""
    key = base64.b64decode(secret.removeprefix("whsec_")) if secret.startswith("whsec_") else secret.encode()
    return [secret, secret.removeprefix("whsec_"), key.hex(), base64.b64encode(key).decode()]


def test_the_page_shows_why_in_words_and_never_a_secret(standard_app, pinned_now, caplog):
    body = json.dumps(payload()).encode()
    refused(standard_app, body, standard_headers(body, LIVE, pinned_now - 432))
    refused(standard_app, body, standard_headers(body, RETIRED, pinned_now))
    refused(standard_app, body, standard_headers(body, RETIRED, pinned_now))
    refused(standard_app, body, standard_headers(body, STRANGER, pinned_now))
    refused(standard_app, body + b"\n", standard_headers(body, LIVE, pinned_now))
    refused(standard_app, body, {"X-Hub-Signature-256": "sha256=" + "ab" * 32})
    client = admin(standard_app)
    page = client.get("/admin/rejected").text
    for words in (
        "Timestamp outside the 5-minute tolerance",
        "signed 7 min 12 s before it arrived",
        "Signed with a retired secret",
        "finish the rotation at the Flow Service",
        "Signed with a secret not configured here",
        "Body changed on the way",
        "Another signature scheme",
        "FLOW_WEBHOOK_HEADER=X-Hub-Signature-256",
    ):
        assert words in page, words
    summary = page.split('data-testid="diagnosis-summary"')[1].split("</table>")[0]
    assert '<code>retired_secret</code></td><td class="text-end">2</td>' in summary
    assert '<code>stale_timestamp</code></td><td class="text-end">1</td>' in summary
    only = client.get("/admin/rejected?diagnosis=retired_secret").text
    samples = only.split('data-testid="diagnosis-summary"')[-1]
    assert samples.count('data-testid="diagnosis"') == 2 and "Body changed on the way</strong>" not in samples
    with standard_app.app_context():
        rows = db.session.query(RejectedDelivery).all()
        stored = " ".join(
            f"{row.reason} {row.diagnosis_detail} {row.signature_headers} {row.body_head}" for row in rows
        )
    logged = " ".join(record.getMessage() for record in caplog.records)
    assert "webhook rejected from" in logged and "(diagnosis retired_secret)" in logged
    for secret in (LIVE, OTHER_LIVE, RETIRED, STRANGER):
        for form in secret_forms(secret):
            assert form not in page and form not in only and form not in stored and form not in logged


def test_a_diagnosis_filter_that_is_not_one_is_a_clear_400(standard_app):
    answer = admin(standard_app).get("/admin/rejected?diagnosis=nonsense")
    assert answer.status_code == 400 and "Not a valid choice" in answer.text


# -- parts on their own ---------------------------------------------------------------------------


def test_durations_read_as_staff_say_them():
    assert [duration(seconds) for seconds in (0, 45, 432, 3600, 3 * 3600 + 59, 86_400 * 2 + 3600)] == [
        "0 s",
        "45 s",
        "7 min 12 s",
        "1 h",
        "3 h",
        "2 d 1 h",
    ]


def test_diagnoses_are_budgeted_per_minute_whatever_the_number_of_networks(standard_app, pinned_now):
    from portal.webhooks.receiver import _PerMinute

    minute = [600.0]
    standard_app.extensions["webhooks.diagnoses"] = _PerMinute(2, clock=lambda: minute[0])
    body = json.dumps(payload()).encode()
    rows = []
    for network in range(3):
        sender = standard_app.test_client()
        sender.environ_base["REMOTE_ADDR"] = f"198.18.{network}.1"
        assert sender.post(PATH, data=body, headers=standard_headers(body, RETIRED, pinned_now)).status_code == 401
        rows.append(latest(standard_app))
    minute[0] += 60
    rows.append(refused(standard_app, body, standard_headers(body, RETIRED, pinned_now)))
    assert [row.diagnosis for row in rows] == ["retired_secret", "retired_secret", "undiagnosed", "retired_secret"]
    assert "rejections this minute: not diagnosed" in rows[2].diagnosis_detail


def test_a_large_body_is_not_re_serialised():
    assert list(body_variants(b" " * (MAX_VARIANT_BYTES + 1))) == []


def test_body_variants_are_bounded_and_never_the_body_itself():
    body = json.dumps({"a": [1, 2, {"b": "ø\n"}], "c": "x"}, indent=2).encode()
    variants = list(body_variants(body))
    assert 0 < len(variants) <= MAX_VARIANTS
    assert body not in [original for _, original in variants]
    assert len({original for _, original in variants}) == len(variants)


# -- FLOW_WEBHOOK_RETIRED_SECRETS ----------------------------------------------------------------


def settings_with(**changes):
    config = portal_config("http://127.0.0.1:8081", "sqlite://") | changes
    return load_settings({key: value for key, value in config.items() if value is not None})


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("not-a-whsec", "FLOW_WEBHOOK_RETIRED_SECRETS: secret #1 must be whsec_ followed by base64"),
        (f"{RETIRED}, whsec_***", "FLOW_WEBHOOK_RETIRED_SECRETS: secret #2 must be whsec_ followed by base64"),
        (f"{RETIRED},{LIVE}", "FLOW_WEBHOOK_RETIRED_SECRETS: secret #2 is also in FLOW_WEBHOOK_SECRETS"),
    ],
    ids=["not-whsec", "second-bad", "also-live"],
)
def test_bad_retired_secrets_stop_start_up_with_one_line(value, words):
    with pytest.raises(SettingsError) as raised:
        settings_with(FLOW_WEBHOOK_SECRETS=LIVE, FLOW_WEBHOOK_RETIRED_SECRETS=value)
    message = str(raised.value)
    assert words in message and "\n" not in message
    assert RETIRED not in message and LIVE not in message


def test_retired_secrets_are_read_like_the_live_ones(tmp_path):
    settings = settings_with(FLOW_WEBHOOK_RETIRED_SECRETS=f" {RETIRED} , {STRANGER} ,")
    assert settings.webhook_retired_secrets == (RETIRED, STRANGER)
    assert RETIRED not in repr(settings)
    held = tmp_path / "retired"
    held.write_text(RETIRED + "\n")
    assert settings_with(FLOW_WEBHOOK_RETIRED_SECRETS_FILE=str(held)).webhook_retired_secrets == (RETIRED,)
    plain = settings_with(FLOW_WEBHOOK_SCHEME="hmac-sha256", FLOW_WEBHOOK_RETIRED_SECRETS="any text, at all")
    assert plain.webhook_retired_secrets == ("any text", "at all")
    assert settings_with().webhook_retired_secrets == ()


def production(**overrides) -> dict:
    return portal_config("http://127.0.0.1:9", "sqlite://", **production_settings(**overrides)) | {"TESTING": False}


def test_production_does_not_refuse_a_weak_retired_secret_it_never_accepts():
    weak = "whsec_" + base64.b64encode(b"x").decode()
    assert load_settings(production(FLOW_WEBHOOK_RETIRED_SECRETS=weak)).webhook_retired_secrets == (weak,)
    with pytest.raises(SettingsError) as raised:
        load_settings(production(FLOW_WEBHOOK_SECRETS=weak))
    assert "FLOW_WEBHOOK_SECRETS" in str(raised.value), "moved back to the live secrets, the same rules apply"


def test_a_header_name_holding_a_national_id_is_masked_in_the_diagnosis(hmac_app):
    body = json.dumps(payload()).encode()
    name = "X-Signature-15108695088"
    headers = {name: "sha256=" + hex_hmac(PLAIN_LIVE.encode(), body), "content-type": "application/json"}
    row = refused(hmac_app, body, headers)
    assert row.diagnosis == "wrong_scheme" and "15108695088" not in row.diagnosis_detail
    assert "151086•••••" in row.diagnosis_detail


def test_a_refused_body_with_a_lone_surrogate_escape_is_kept_not_a_500(standard_app, pinned_now):
    body = b'{"id": "\\ud800", "type": "flow.created"}'
    headers = {"webhook-id": "msg_x", "webhook-timestamp": str(pinned_now), "webhook-signature": "v1,AAAA"}
    refused(standard_app, body, headers | {"content-type": "application/json"})
    assert "\ufffd" in latest(standard_app).body_head


# -- diagnose() on its own: each branch and its whole sentence ------------------------------------

NOW = 1_800_000_000
NOBODY = whsec()  # configured nowhere, live or retired
EVENT = json.dumps(payload(), ensure_ascii=False).encode()


def diagnosed(scheme: str, headers: dict, body: bytes, kind: str, stored_body, secrets: tuple, retired: tuple):
    """What diagnose() says of a delivery refused with `kind`, the clock at NOW (signature header X-Flow-Signature,
    event id header X-Flow-Event-Id under hmac-sha256)."""
    delivery = Delivery(
        body=body,
        headers=headers,
        scheme=scheme,
        secrets=secrets,
        retired=retired,
        hmac_header="X-Flow-Signature",
        id_header="X-Flow-Event-Id",
        now=NOW,
        stored_body=stored_body,
    )
    return diagnose(delivery, kind)


def standard(headers: dict, body=EVENT, kind="signature", stored: dict | None = None, secrets=(LIVE, OTHER_LIVE)):
    return diagnosed("standard-webhooks", headers, body, kind, (stored or {}).get, secrets, (STRANGER, RETIRED))


def plain(headers: dict, body=EVENT, kind="signature", stored: dict | None = None, secrets=(PLAIN_LIVE, LIVE)):
    return diagnosed("hmac-sha256", headers, body, kind, (stored or {}).get, secrets, (PLAIN_STRANGER, PLAIN_RETIRED))


def signed(secret: str, at: int = NOW, body: bytes = EVENT, message_id: str = "msg_1") -> dict:
    return standard_headers(body, secret, at, message_id)


def test_each_missing_standard_header_is_named_alone():
    headers = signed(LIVE)
    del headers["webhook-signature"]
    assert standard(headers).detail == (
        "no webhook-signature header: the sender does not use Standard Webhooks, or a proxy drops these headers"
    )
    del headers["webhook-id"]
    assert standard(headers).detail.startswith("no webhook-id, webhook-signature header:")


def test_a_standard_delivery_missing_its_timestamp_is_not_read_as_a_signature_in_another_header():
    """Its own webhook-signature (named as HTTP stacks capitalise it) is no sign of another scheme."""
    headers = Headers([(name.title(), value) for name, value in signed(LIVE).items() if name != "webhook-timestamp"])
    assert standard(headers).detail == (
        "no webhook-timestamp header: the sender does not use Standard Webhooks, or a proxy drops these headers"
    )


@pytest.mark.parametrize(
    ("timestamp", "words"),
    [
        ("yesterday", "webhook-timestamp is not a Unix time in seconds: fix the sender"),
        ("nan", "webhook-timestamp is not a Unix time in seconds: fix the sender"),
        ("inf", "webhook-timestamp is not a Unix time in seconds: fix the sender"),
        ("32503680001", "webhook-timestamp is not a Unix time in seconds: fix the sender"),
        ("180000000000", "webhook-timestamp is not a Unix time in seconds: fix the sender"),
        (
            "1800000000000",
            "webhook-timestamp looks like milliseconds; Standard Webhooks wants Unix seconds: fix the sender",
        ),
        (
            "-1800000000000",
            "webhook-timestamp looks like milliseconds; Standard Webhooks wants Unix seconds: fix the sender",
        ),
    ],
    ids=["words", "nan", "inf", "past-year-3000", "12-digits", "milliseconds", "negative-milliseconds"],
)
def test_a_timestamp_that_is_not_seconds_says_what_it_looks_like(timestamp, words):
    diagnosis = standard(signed(LIVE) | {"webhook-timestamp": timestamp})
    assert (diagnosis.code, diagnosis.detail) == ("malformed_timestamp", words)


def test_the_last_second_before_year_3000_is_still_a_time():
    diagnosis = standard(signed(LIVE) | {"webhook-timestamp": "32503680000"})
    assert diagnosis.code == "stale_timestamp" and "after it arrived" in diagnosis.detail


def test_a_fractional_timestamp_is_read_in_whole_seconds_as_the_library_signs():
    headers = signed(LIVE, at=NOW - 433) | {"webhook-timestamp": f"{NOW - 433}.8"}
    assert standard(headers).detail == (
        "signed 7 min 13 s before it arrived; the tolerance is 5 minutes: check the sender's clock or a queue "
        "holding deliveries. The signature matches secret #1 of FLOW_WEBHOOK_SECRETS: the secret is right."
    )


def test_entries_that_are_not_v1_base64_are_skipped_not_the_end_of_the_header():
    good = signed(RETIRED)["webhook-signature"]
    headers = signed(RETIRED) | {"webhook-signature": f"v2,AAAA v1, v1,%%%% v1a,AAAA {good}"}
    assert standard(headers).detail == (
        "signed with retired secret #2 of FLOW_WEBHOOK_RETIRED_SECRETS: the sender still signs with the previous "
        "secret of a rotation: finish the rotation at the Flow Service, or put it back in FLOW_WEBHOOK_SECRETS "
        "until it has"
    )


def test_a_signature_header_with_no_v1_entry_is_malformed():
    diagnosis = standard(signed(LIVE) | {"webhook-signature": "v1, v2,AAAA v1,%%%%"})
    assert (diagnosis.code, diagnosis.detail) == (
        "malformed_signature",
        "webhook-signature holds no v1,<base64> entry: the sender's Standard Webhooks library is misconfigured",
    )


@pytest.mark.parametrize(
    ("offset", "code"),
    [(300, "unknown_secret"), (301, "stale_timestamp"), (-300, "unknown_secret"), (-301, "stale_timestamp")],
)
def test_the_tolerance_is_five_minutes_either_way_whatever_the_verifier_said(offset, code):
    assert standard(signed(NOBODY, at=NOW - offset)).code == code


def test_a_verifier_that_called_it_stale_is_believed_inside_the_tolerance():
    diagnosis = standard(signed(LIVE, at=NOW - 10), kind="stale_timestamp")
    assert diagnosis.code == "stale_timestamp" and diagnosis.detail.startswith("signed 10 s before it arrived")


def test_a_stale_delivery_names_the_first_live_secret_that_matches():
    diagnosis = standard(signed(OTHER_LIVE, at=NOW + 3600))
    assert diagnosis.detail == (
        "signed 1 h after it arrived (the sender's clock is ahead); the tolerance is 5 minutes: check the sender's "
        "clock. The signature matches secret #2 of FLOW_WEBHOOK_SECRETS: the secret is right."
    )
    assert standard(signed(RETIRED, at=NOW - 600)).detail.endswith(
        "The signature matches retired secret #2 of FLOW_WEBHOOK_RETIRED_SECRETS."
    )


@pytest.mark.parametrize("content", ["body", "signed-content"])
@pytest.mark.parametrize("key", ["decoded", "text"])
def test_a_hex_digest_in_webhook_signature_is_a_wrong_scheme(content, key):
    headers = signed(LIVE)
    signed_content = f"msg_1.{NOW}.".encode() + EVENT if content == "signed-content" else EVENT
    key_bytes = base64.b64decode(LIVE.removeprefix("whsec_")) if key == "decoded" else LIVE.encode()
    headers["webhook-signature"] = "v1," + hex_hmac(key_bytes, signed_content).upper()
    diagnosis = standard(headers)
    assert (diagnosis.code, diagnosis.detail) == (
        "wrong_scheme",
        "webhook-signature carries a hex digest where Standard Webhooks wants base64: fix the sender, or set "
        "FLOW_WEBHOOK_SCHEME=hmac-sha256 if it signs like that scheme",
    )


def test_a_hex_digest_under_no_configured_secret_is_not_called_a_scheme_mistake():
    headers = signed(LIVE) | {"webhook-signature": "v1," + hex_hmac(b"someone else", EVENT)}
    assert standard(headers).code == "unknown_secret"


def test_the_unknown_secret_sentence_is_whole():
    assert standard(signed(NOBODY)).detail == (
        "signed with a secret not configured here (neither in FLOW_WEBHOOK_SECRETS nor FLOW_WEBHOOK_RETIRED_SECRETS); "
        "the timestamp is fine and the body looks intact: copy the secret the Flow Service shows for this endpoint"
    )


def test_a_stored_event_with_the_webhook_id_and_another_body_it_was_signed_as_is_an_altered_body():
    long_id = "msg_" + "x" * 80
    stored = EVENT + b" "
    diagnosis = standard(signed(LIVE, message_id=long_id, body=stored), stored={long_id: stored})
    assert diagnosis.detail == (
        f"an event with the same id ({long_id[:60]}) is stored with a different body, and the signature matches the "
        "stored body: the body was changed on the way: a proxy re-serialising JSON?"
    )


def test_a_stored_event_s_id_under_a_signature_that_matches_neither_body_is_no_altered_body():
    """A forged delivery that reused a stored event's id (every viewer sees them) was called a body changed on the
    way: admins would chase a proxy instead of a forgery (found by an attack)."""
    diagnosis = standard(signed(NOBODY, message_id="msg_known"), stored={"msg_known": EVENT + b" "})
    assert diagnosis.code == "unknown_secret"
    assert diagnosis.detail == (
        "the id of a stored event (msg_known) with another body, and a signature that matches neither body with any "
        "configured secret: not signed with this endpoint's secret; if the Flow Service did not send it, someone who "
        "knows an event's id did"
    )


def test_a_stored_event_with_the_same_body_is_no_sign_of_a_change():
    assert standard(signed(NOBODY), stored={"msg_1": EVENT}).code == "unknown_secret"


def test_an_altered_body_names_the_change_in_a_whole_sentence():
    diagnosis = standard(signed(LIVE), body=EVENT + b"\r\n")
    assert diagnosis.detail == (
        "the body was changed on the way (a trailing newline was added); a configured secret matches the body "
        "before the change: a proxy re-serialising JSON or rewriting text?"
    )


@pytest.mark.parametrize(
    ("received", "original", "change"),
    [
        (EVENT, EVENT + b"\n", "a trailing newline was removed"),
        (b'{\n "a": 1\n}', b'{\r\n "a": 1\r\n}', "line ends were turned into LF"),
        (b'{\r\n "a": 1\r\n}', b'{\n "a": 1\n}', "line ends were turned into CRLF"),
        (EVENT, b"\xef\xbb\xbf" + EVENT, "a byte-order mark was removed"),
        (b'{"b": 1, "a": 2}', b'{"a":2,"b":1}', "the JSON was re-serialised"),
        (b'{"a": "\\u00f8"}', '{"a":"ø"}'.encode(), "the JSON was re-serialised"),
    ],
    ids=["newline-removed", "to-lf", "to-crlf", "bom-removed", "sorted-compact", "unescaped"],
)
def test_every_change_a_proxy_makes_is_named(received, original, change):
    diagnosis = standard(signed(LIVE, body=original), body=received)
    assert diagnosis.code == "body_altered" and f"({change})" in diagnosis.detail


def test_the_variants_of_a_compact_body_come_in_order_each_once():
    body = '{"b":1,"a":"ø"}'.encode()
    assert list(body_variants(body)) == [
        ("a trailing newline was removed", body + b"\n"),
        ("a byte-order mark was removed", b"\xef\xbb\xbf" + body),
        ("the JSON was re-serialised", b'{"b":1,"a":"\\u00f8"}'),
        ("the JSON was re-serialised", '{"b": 1, "a": "ø"}'.encode()),
        ("the JSON was re-serialised", b'{"b": 1, "a": "\\u00f8"}'),
        ("the JSON was re-serialised", '{"a":"ø","b":1}'.encode()),
        ("the JSON was re-serialised", b'{"a":"\\u00f8","b":1}'),
        ("the JSON was re-serialised", '{"a": "ø", "b": 1}'.encode()),
        ("the JSON was re-serialised", b'{"a": "\\u00f8", "b": 1}'),
        ("the JSON was re-serialised", '{\n  "b": 1,\n  "a": "ø"\n}'.encode()),
    ]


def test_a_body_with_every_kind_of_variant_gives_exactly_the_most_allowed():
    body = json.dumps({"b": 1, "a": "ø"}, indent=1, ensure_ascii=False).encode()
    variants = list(body_variants(body))
    assert len(variants) == MAX_VARIANTS == 12
    assert [change for change, _ in variants[:3]] == [
        "a trailing newline was removed",
        "line ends were turned into LF",
        "a byte-order mark was removed",
    ]


def test_a_body_that_is_not_utf8_may_have_been_latin1():
    original = '{"a": "ø"}'.encode()
    assert ("the text was re-encoded from UTF-8 to Latin-1", original) in list(
        body_variants(original.decode().encode("latin-1"))
    )
    assert not any("Latin-1" in change for change, _ in body_variants(original))


def test_a_body_at_the_variant_limit_is_still_tried():
    body = b"{}" + b" " * (MAX_VARIANT_BYTES - 2)
    assert list(body_variants(body))


# hmac-sha256 ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "code", "words"),
    [
        (
            "v1,AAAA",
            "wrong_scheme",
            "X-Flow-Signature holds a Standard Webhooks signature (v1,...): set FLOW_WEBHOOK_SCHEME=standard-webhooks",
        ),
        (
            "t=1700000000,v1=abcd",
            "wrong_scheme",
            "the delivery is signed with Stripe's Stripe-Signature scheme (t=...,v1=...), which the portal does not "
            "read: have the sender use Standard Webhooks (FLOW_WEBHOOK_SCHEME=standard-webhooks)",
        ),
        (
            "t=1700000000",
            "malformed_signature",
            "X-Flow-Signature is not a hex SHA-256 digest (64 hex digits, optionally after sha256=): fix the sender",
        ),
        (
            "sha256=" + "g" * 64,
            "malformed_signature",
            "X-Flow-Signature is not a hex SHA-256 digest (64 hex digits, optionally after sha256=): fix the sender",
        ),
    ],
    ids=["standard-entry", "stripe", "time-only", "not-hex"],
)
def test_an_hmac_header_that_is_no_hex_digest_says_what_it_is(value, code, words):
    diagnosis = plain({"X-Flow-Signature": value})
    assert (diagnosis.code, diagnosis.detail) == (code, words)


def body_whose_url_safe_digest_holds(wanted: set[str]) -> tuple[bytes, bytes]:
    """An event (by its padding) whose HMAC under PLAIN_LIVE, in base64url, holds of "-" and "_" just `wanted`."""
    for padding in range(10_000):
        body = json.dumps(payload() | {"padding": padding}).encode()
        digest = hmac.new(PLAIN_LIVE.encode(), body, hashlib.sha256).digest()
        if {"-", "_"} & set(base64.urlsafe_b64encode(digest).decode()) == wanted:
            return body, digest
    raise AssertionError(f"no body found for {wanted}")


@pytest.mark.parametrize(
    ("form", "url_characters"),
    [("standard", set()), ("url-safe-unpadded", {"-"}), ("url-safe-unpadded", {"_"}), ("url-safe", {"-", "_"})],
    ids=["standard", "url-safe-dash-only", "url-safe-underscore-only", "url-safe-both"],
)
def test_an_hmac_sent_as_base64_in_any_alphabet_is_a_wrong_scheme(form, url_characters):
    body, digest = body_whose_url_safe_digest_holds(url_characters)
    value = {
        "standard": base64.b64encode(digest).decode(),
        "url-safe-unpadded": base64.urlsafe_b64encode(digest).decode().rstrip("="),
        "url-safe": base64.urlsafe_b64encode(digest).decode(),
    }[form]
    assert plain({"X-Flow-Signature": value}, body=body).detail == (
        "X-Flow-Signature carries the HMAC-SHA256 as base64 where the hmac-sha256 scheme wants hex: have the "
        "sender send hex, or use FLOW_WEBHOOK_SCHEME=standard-webhooks"
    )


def test_an_hmac_retired_secret_is_named_by_its_number_whatever_the_hex_case():
    digest = hex_hmac(PLAIN_RETIRED.encode(), EVENT).upper()
    diagnosis = plain({"X-Flow-Signature": "sha256=" + digest})
    assert diagnosis.code == "retired_secret" and "retired secret #2 of" in diagnosis.detail


def test_an_hmac_keyed_with_decoded_whsec_bytes_says_so_in_full():
    digest = hex_hmac(base64.b64decode(LIVE.removeprefix("whsec_")), EVENT)
    assert plain({"X-Flow-Signature": digest}).detail == (
        "the sender keys the HMAC with the whsec_ secret's base64-decoded bytes, as Standard Webhooks does, not with "
        "its text: sign with the text, or use FLOW_WEBHOOK_SCHEME=standard-webhooks on both sides"
    )
    assert plain({"X-Flow-Signature": digest}, secrets=(PLAIN_LIVE,)).code == "unknown_secret"


@pytest.mark.parametrize("where", ["header", "body"])
def test_an_hmac_event_stored_with_another_body_is_found_by_its_id(where):
    event_id = json.loads(EVENT)["id"]
    headers = {"X-Flow-Signature": hex_hmac(PLAIN_LIVE.encode(), b"{}")}  # as the stored body was signed
    if where == "header":
        event_id = "evt-from-the-header"
        headers["X-Flow-Event-Id"] = event_id
    diagnosis = plain(headers, stored={event_id: b"{}"})
    assert diagnosis.code == "body_altered" and f"same id ({event_id})" in diagnosis.detail


@pytest.mark.parametrize("body", [b"[1]", b'{"id": 7}', b'{"id": ""}', b"{", b"[" * 100_000])
def test_a_body_without_a_usable_id_looks_up_nothing(body):
    looked_up: list[str] = []
    headers = {"X-Flow-Signature": "ab" * 32}
    diagnosis = diagnosed("hmac-sha256", headers, body, "signature", looked_up.append, (PLAIN_LIVE,), ())
    assert diagnosis.code == "unknown_secret" and looked_up == []


# another scheme's headers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "words"),
    [
        (
            {"Svix-Id": "msg_1", "Svix-Timestamp": "1", "Svix-Signature": "v1,AAAA"},
            "the delivery carries Svix's svix-id/-timestamp/-signature headers: Standard Webhooks under other names; "
            "have the sender send the webhook-* names",
        ),
        ({"Stripe-Signature": "t=1,v1=ab"}, "the delivery is signed with Stripe's Stripe-Signature scheme"),
        (
            {"webhook-id": "msg_1", "webhook-timestamp": "1", "webhook-signature": "v1,AAAA"},
            "the delivery carries Standard Webhooks headers (webhook-id, -timestamp, -signature) while "
            "FLOW_WEBHOOK_SCHEME=hmac-sha256: set FLOW_WEBHOOK_SCHEME=standard-webhooks and whsec_ secrets",
        ),
        (
            {"Webhook-Id": "msg_1", "Webhook-Timestamp": "1", "Webhook-Signature": "v1,AAAA"},
            "the delivery carries Standard Webhooks headers (webhook-id, -timestamp, -signature) while "
            "FLOW_WEBHOOK_SCHEME=hmac-sha256: set FLOW_WEBHOOK_SCHEME=standard-webhooks and whsec_ secrets",
        ),
        (
            {"X-Hub-Signature-256": "sha256=" + "ab" * 32},
            "the delivery carries GitHub's X-Hub-Signature-256 (hex HMAC of the body) where FLOW_WEBHOOK_HEADER names "
            "X-Flow-Signature: set FLOW_WEBHOOK_HEADER=X-Hub-Signature-256",
        ),
        (
            {"X-Body-HMAC": "ab" * 32},
            "the delivery carries a signature in X-Body-HMAC where FLOW_WEBHOOK_HEADER names X-Flow-Signature: set "
            "FLOW_WEBHOOK_HEADER=X-Body-HMAC",
        ),
    ],
    ids=["svix", "stripe", "standard", "standard-capitalised", "github-unconfirmed", "hmac-in-the-name"],
)
def test_an_hmac_delivery_signed_under_another_scheme_names_it(headers, words):
    diagnosis = plain(headers)
    assert diagnosis.code == "wrong_scheme" and diagnosis.detail.startswith(words)


def test_an_hmac_under_another_header_that_a_secret_confirms_says_so():
    headers = {"X-Request-Digest": hex_hmac(PLAIN_LIVE.encode(), EVENT)}
    assert plain(headers).detail == (
        "the delivery carries a signature in X-Request-Digest (a configured secret matches it) where "
        "FLOW_WEBHOOK_HEADER names X-Flow-Signature: set FLOW_WEBHOOK_HEADER=X-Request-Digest"
    )


def test_a_standard_delivery_with_an_hmac_header_points_to_both_settings():
    diagnosis = standard({"X-Hub-Signature-256": "sha256=" + "ab" * 32, "content-type": "application/json"})
    assert diagnosis.detail == (
        "the delivery carries GitHub's X-Hub-Signature-256 (hex HMAC of the body), not Standard Webhooks headers: if "
        "it is a hex HMAC-SHA256 of the body, set FLOW_WEBHOOK_SCHEME=hmac-sha256 and "
        "FLOW_WEBHOOK_HEADER=X-Hub-Signature-256"
    )


def test_a_standard_delivery_missing_its_headers_is_no_other_scheme_by_a_hex_value_alone():
    digest = hex_hmac(LIVE.encode(), EVENT)
    assert standard({"X-Checksum": digest}).code == "missing_header"


def test_only_the_first_headers_are_looked_at_for_another_scheme():
    filler = {f"X-Filler-{number}": "x" for number in range(MAX_HEADERS_LOOKED_AT - 1)}
    assert plain(filler | {"X-Hub-Signature-256": "ab" * 32}).code == "wrong_scheme"
    filler[f"X-Filler-{MAX_HEADERS_LOOKED_AT}"] = "x"
    assert plain(filler | {"X-Hub-Signature-256": "ab" * 32}).code == "missing_header"
    assert plain(filler | {"X-Hub-Signature-256": "ab" * 32}).detail == (
        "no X-Flow-Signature header (FLOW_WEBHOOK_HEADER): the sender signs elsewhere or not at all"
    )


# rejections the signature had nothing to do with ---------------------------------------------


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("too_large", "the body is over FLOW_WEBHOOK_MAX_BYTES: raise the limit"),
        ("malformed", "the signature is right but the body is not valid UTF-8 JSON"),
        ("too_deep", "the signature is right but the JSON nests deeper than the portal accepts"),
        ("not_object", "the signature is right but the JSON is not an object, as every event is"),
        ("stale_event", "hmac-sha256 signs no time and this event is older than the retention window"),
    ],
)
def test_a_rejection_after_the_signature_verified_says_it_in_plain_words(kind, words):
    diagnosis = plain({"X-Flow-Signature": hex_hmac(PLAIN_LIVE.encode(), EVENT)}, kind=kind)
    assert diagnosis.code == kind and diagnosis.detail.startswith(words)


def test_a_standard_body_that_is_not_utf8_is_checked_as_a_signature_not_called_broken_json():
    latin = EVENT.decode().encode("latin-1")
    assert standard(signed(LIVE), body=latin, kind="malformed").code == "body_altered"
    assert standard(signed(LIVE), body=EVENT, kind="malformed").code == "malformed"
    assert plain({"X-Flow-Signature": "ab" * 32}, body=latin, kind="malformed").code == "malformed"
