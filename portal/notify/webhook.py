"""The webhook channel: the notice's JSON posted to PORTAL_NOTIFY_URL, signed per Standard Webhooks."""

from datetime import datetime

import requests

from ..webhooks.signing import standard_headers
from .outcome import Outcome

CONNECT_TIMEOUT, READ_TIMEOUT = 5, 10  # seconds
GONE = 410  # the receiver asks the sender to stop


def signed_headers(secret: str, message_id: str, now: datetime, body: str) -> dict:
    """The three Standard Webhooks headers; the id is the notice's own, so a receiver can drop a retry."""
    return {"content-type": "application/json"} | standard_headers(secret, message_id, now, body)


def post_notice(settings, message_id: str, body: str, now: datetime) -> Outcome:
    """Post once, without following redirects: 2xx is delivered, 410 stops the retries, anything else is retried."""
    headers = signed_headers(settings.notify_secret, message_id, now, body)
    try:
        answer = requests.post(
            settings.notify_url,
            data=body.encode(),
            headers=headers,
            timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
            allow_redirects=False,
        )
    except requests.Timeout:
        return Outcome.retry("no answer in time")
    except requests.ConnectionError as error:
        return Outcome.retry(_connection_problem(error))
    except requests.RequestException as error:
        return Outcome.retry(f"request failed ({type(error).__name__})")
    answer.close()
    if 200 <= answer.status_code < 300:
        return Outcome.delivered(f"HTTP {answer.status_code}")
    if answer.status_code == GONE:
        return Outcome.stop("HTTP 410 Gone: the receiver asked not to be sent more")
    return Outcome.retry(f"HTTP {answer.status_code} {answer.reason or ''}".strip())


def _connection_problem(error: requests.ConnectionError) -> str:
    """In words, without the URL (which may carry a token in its query)."""
    text = str(error).lower()
    if "refused" in text:
        return "connection refused"
    if "name or service not known" in text or "nodename nor servname" in text or "resolve" in text:
        return "host name not found"
    if "ssl" in text or "certificate" in text:
        return "TLS handshake failed"
    return "connection failed"
