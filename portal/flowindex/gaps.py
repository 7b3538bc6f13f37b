"""Gap detection: a change to a flow that the portal never heard about (a missed or refused webhook).

The rule is pure: what the service says of a flow against what the portal heard from its webhook
events, at a moment, with a grace for a change whose event may still be on its way. A gap is kept as
a short JSON reason (`Gap.stored`) and said in words at display time, in the reader's language and
time zone (`describe_gap`).
"""

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from flask_babel import gettext as _

from ..flowapi.records import parse_timestamp
from ..labels import status_label
from ..presentation import local_time

SILENT, VERSION, TIME, STATUS, LIFECYCLE = "silent", "version", "time", "status", "lifecycle"
# An event's time and the service's updatedAt come from the same change but not the same instant.
SKEW = timedelta(seconds=2)
FIRST_STATUS, FIRST_LIFECYCLE = "Unopened", "active"  # what a flow is before any change


@dataclass(frozen=True)
class ServiceSays:
    """What the Flow Service says of a flow: its retrieve response, and its list's consent status when known."""

    version: int | None = None
    updated_at: datetime | None = None
    consent_status: str | None = None
    status_at: datetime | None = None  # when the service said that consent status
    lifecycle: str | None = None
    webhook_url: str | None = None


@dataclass(frozen=True)
class Heard:
    """What the flow's webhook events told the portal (or a refresh from the service reconciled)."""

    received: bool = False
    version: int | None = None  # the highest version an event carried
    at: datetime | None = None  # the newest event's time
    status: str | None = None  # the newest event's consent status
    lifecycle: str | None = None


@dataclass(frozen=True)
class Gap:
    """A change the portal never heard about: what kind, what the service says, what was heard."""

    kind: str
    service: str | int | None = None
    heard: str | int | None = None
    changed_at: datetime | None = None

    @property
    def said(self) -> str:
        """The reason in words (`describe_gap`)."""
        return describe_gap(self)

    @property
    def stored(self) -> str:
        """The reason as kept in `flow_index.gap_reason`."""
        changed = self.changed_at.isoformat() if self.changed_at else None
        document = {"kind": self.kind, "service": self.service, "heard": self.heard, "changed_at": changed}
        return json.dumps({key: value for key, value in document.items() if value is not None})[:255]


def find_gap(service: ServiceSays, heard: Heard, *, portal_webhook_url: str, now: datetime, grace: int) -> Gap | None:
    """The change the portal missed, or None (also when webhooks go elsewhere or may still be on their way)."""
    if not sends_webhooks_here(service.webhook_url, heard, portal_webhook_url):
        return None
    changed = service.updated_at
    if changed is not None and now - changed < timedelta(seconds=grace):
        return None
    if not heard.received:
        return Gap(SILENT, changed_at=changed)
    if service.version is not None and heard.version is not None:  # the version decides, whatever the clocks
        return Gap(VERSION, service.version, heard.version, changed) if service.version > heard.version else None
    if changed is not None and heard.at is not None and changed > heard.at + SKEW:
        return Gap(TIME, changed_at=changed, heard=heard.at.isoformat())
    return _status_gap(service, heard, changed)


def sends_webhooks_here(webhook_url: str | None, heard: Heard, portal_webhook_url: str) -> bool:
    """The flow has a webhook address and its events come here: some were received, or it is ours."""
    if not webhook_url:
        return False
    return heard.received or same_address(webhook_url, portal_webhook_url)


def same_address(one: str, other: str) -> bool:
    """Two URLs naming the same endpoint (scheme and host in any case, a trailing slash or not)."""
    try:
        first, second = urlsplit(one.strip()), urlsplit(other.strip())
    except ValueError:  # a service's webhookUrl no URL parser reads ("http://[") names no endpoint of ours
        return False
    return (
        first.scheme.lower() == second.scheme.lower()
        and (first.hostname or "") == (second.hostname or "")
        and _port(first) == _port(second)
        and first.path.rstrip("/") == second.path.rstrip("/")
    )


def _port(parts) -> int | None:
    try:
        return parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    except ValueError:
        return None


def _status_gap(service: ServiceSays, heard: Heard, changed: datetime | None) -> Gap | None:
    """Without versions or times that tell: a status the service says and no event said."""
    said_later = service.status_at is None or heard.at is None or service.status_at >= heard.at
    if _differs(service.consent_status, heard.status, FIRST_STATUS) and said_later:
        return Gap(STATUS, service.consent_status, heard.status, changed)
    if heard.lifecycle and _differs(service.lifecycle, heard.lifecycle, FIRST_LIFECYCLE):
        return Gap(LIFECYCLE, service.lifecycle, heard.lifecycle, changed)
    return None


def _differs(said: str | None, heard: str | None, first: str) -> bool:
    """The service says a value no event said; a flow's first value needs no event to be believed."""
    return bool(said) and said != heard and not (heard is None and said == first)


# -- what was heard ----------------------------------------------------------------------------


@dataclass(frozen=True)
class EventHeard:
    """One stored event as the rule reads it."""

    at: datetime
    version: int | None
    status: str | None
    lifecycle: str | None


def heard_from(events: Iterable[EventHeard], kept: Heard) -> Heard:
    """What the events and the index's heard_* (which a refresh may have moved on) told together."""
    heard = kept
    for event in events:
        newest = heard.at is None or event.at >= heard.at
        heard = Heard(
            received=True,
            version=_highest(heard.version, event.version),
            at=event.at if newest else heard.at,
            status=(event.status or heard.status) if newest else heard.status,
            lifecycle=(event.lifecycle or heard.lifecycle) if newest else heard.lifecycle,
        )
    return heard


def _highest(*versions: int | None) -> int | None:
    known = [version for version in versions if version is not None]
    return max(known) if known else None


# -- said in words -----------------------------------------------------------------------------


def read_stored(reason: str | None) -> Gap | None:
    """A stored reason back as a Gap; None when there is none or it cannot be read."""
    try:
        document = json.loads(reason or "")
    except ValueError:
        return None
    if not isinstance(document, dict) or not isinstance(document.get("kind"), str):
        return None
    changed = document.get("changed_at")
    return Gap(
        document["kind"],
        document.get("service"),
        document.get("heard"),
        parse_timestamp(changed) if isinstance(changed, str) else None,
    )


def describe_gap(gap: Gap | str | None) -> str:
    """The reason as a person reads it, in the page's language and time zone."""
    if isinstance(gap, str) or gap is None:
        gap = read_stored(gap)
    if gap is None:
        return _("The service has a change no event told the portal about.")
    changed = local_time(gap.changed_at)
    if gap.kind == SILENT:
        return _("No event was received for this flow, which the service last changed at %(changed)s.", changed=changed)
    if gap.kind == VERSION:
        return _(
            "The service is at version %(service)s; the portal last heard of version %(heard)s.",
            service=gap.service,
            heard=gap.heard,
        )
    if gap.kind == TIME:
        heard = parse_timestamp(gap.heard) if isinstance(gap.heard, str) else None
        return _(
            "The service changed the flow at %(changed)s; the last event received is from %(heard)s.",
            changed=local_time(gap.changed_at, seconds=True),
            heard=local_time(heard, seconds=True),
        )
    if gap.heard:
        return _(
            "The service says %(service)s; the portal last heard %(heard)s.",
            service=status_label(str(gap.service)),
            heard=status_label(str(gap.heard)),
        )
    return _("The service says %(service)s; no event said so.", service=status_label(str(gap.service)))
