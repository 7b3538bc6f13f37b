"""Typed results of the Flow Service (seed §2), tolerant of unknown, missing and oddly typed fields.

The sandbox is one reading of the spec; a real service may send numbers as strings, epoch
timestamps, incidents as a list, list items without ids. Each reader here takes what can be read
and leaves the rest as None, never raising for a field's content. Every object keeps the JSON it
came from in `raw`, for the portal's raw view.
"""

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ..masking import MASK, NUMBER_MASK_LENGTH
from .errors import UpstreamProtocolError

MAX_TEXT = 1000
# The consent status of a list item and a webhook event, and the lifecycle of a retrieved flow (spec §2, DESIGN).
CONSENT_STATUSES = ("Unopened", "Opened", "Accepted", "Rejected")
LIFECYCLES = ("active", "completed", "cancelled")
_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")
_EPOCH = re.compile(r"[0-9]{9,14}(\.[0-9]+)?")
_WITH_TIME = re.compile(r"[0-9][Tt ][0-9]")  # ISO 8601: the date, then T (or a space), then the time
# A flow id the portal can put in a path and a link: what the spec's UUIDs and every id seen so far look like.
FLOW_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")
# Continuation styles seen in list APIs: the key that names the next page, and the query parameter that asks for it.
NEXT_TOKENS = {
    "next_cursor": "cursor",
    "nextCursor": "cursor",
    "next_page_token": "page_token",
    "nextPageToken": "pageToken",
}
MAX_POSITION_PARAMS = 4
LIST_KEYS = ("data", "items", "flows", "results")  # the spec's `data` first
FLOW_PATHS = ("flows", "applications")  # /api/flows/<id> (seed §2.3), /api/applications/<id> (§4.3)
FLOW_ONLY_FIELDS = frozenset({"referenceId", "flowNumber", "nationalId", "lastName", "createdAt", "redirectUrl"})


def _national_id(source: dict[str, Any]) -> str | None:
    """`nationalId` as text. Sent as a JSON number it may have lost a leading zero (a Norwegian id born on the 1st to
    9th): its digits would mask to another birth date, or read as a Swedish id, so it stands fully masked, as a value
    the service did send (shown "—", it read as none)."""
    value = source.get("nationalId")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return MASK * NUMBER_MASK_LENGTH
    return _text(source, "nationalId")


def _text(source: dict[str, Any], name: str) -> str | None:
    value = source.get(name)
    return (value if len(value) <= MAX_TEXT else _cut(value)) if isinstance(value, str) else None


def _cut(text: str) -> str:
    """A text over `MAX_TEXT` characters cut to them, ending in "…" (cut without a mark, it read as whole: a
    stand-in)."""
    return text[: MAX_TEXT - 1] + "…"


def known_spelling(value: str | None, known: tuple[str, ...]) -> str | None:
    """`value` as spelt in `known` when it is one of them in another letter case (ACCEPTED, Active); else as it is."""
    if value is None or value in known:  # as spelt: every item of a list, almost always
        return value
    return _SPELLINGS[known].get(value.strip().casefold(), value)


_SPELLINGS: dict[tuple[str, ...], dict[str, str]] = {
    known: {spelling.casefold(): spelling for spelling in known} for known in (CONSENT_STATUSES, LIFECYCLES)
}
# A lifecycle in other words of the same meaning: American "canceled", "complete", "finished".
_SPELLINGS[LIFECYCLES] |= {"canceled": "cancelled", "complete": "completed", "finished": "completed"}


def _identifier(source: dict[str, Any], *names: str) -> str | None:
    """An id given as text or as a number (a `flowNumber` or a numeric id)."""
    for name in names:
        value = source.get(name)
        if isinstance(value, str) and value.strip():
            value = value.strip()
            return value if len(value) <= MAX_TEXT else _cut(value)  # every row's ids: no call for a short one
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.ASCII | re.IGNORECASE)


def flow_id_spellings(flow_id: str) -> tuple[str, ...]:
    """The ways a service may write this flow id: a UUID in either letter case too (RFC 9562 §4)."""
    if not _UUID.fullmatch(flow_id):
        return (flow_id,)
    return tuple(dict.fromkeys((flow_id, flow_id.lower(), flow_id.upper())))


def same_flow_id(one: str, other: str) -> bool:
    """Two spellings of one flow id: the same text, or the same UUID in another letter case (RFC 9562 §4)."""
    return one == other or (one.lower() == other.lower() and bool(_UUID.fullmatch(one)))


def _integer(source: dict[str, Any], name: str) -> int | None:
    value = source.get(name)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        return int(value)
    return None


_FLAG_WORDS = {"true": True, "false": False, "yes": True, "no": False, "1": True, "0": False}


def read_flag(value: Any) -> bool | None:
    """True/False from a boolean, "true"/"false", "yes"/"no" or 1/0 (a number or a text); None when it cannot be
    read."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _FLAG_WORDS:
        return _FLAG_WORDS[value.strip().lower()]
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    return None


def _flag(source: dict[str, Any], name: str) -> bool | None:
    return read_flag(source.get(name))


def as_written(value: Any) -> str:
    """A value the service sent, as JSON writes it (`"maybe"`, `3`, `["Opened"]`), for a page to quote; at most
    MAX_TEXT characters, as its texts are (the page masks, then cuts it shorter: `presentation.quoted`)."""
    written = json.dumps(value, ensure_ascii=False)  # "kyllä", not "kyll\u00e4"; digits as sent, for masking
    return written if len(written) <= MAX_TEXT else _cut(written)


def sent_unread(source: dict[str, Any], name: str, read: Any) -> bool:
    """Whether the service sent `name` (not null, not empty) and its reading `read` is nothing."""
    return read is None and source.get(name) not in (None, "")


def _object(source: dict[str, Any], name: str) -> dict[str, Any]:
    value = source.get(name)
    return value if isinstance(value, dict) else {}


def parse_timestamp(value: Any) -> datetime | None:
    """ISO 8601 (`Z` or an offset) or Unix time (seconds or milliseconds) to an aware UTC datetime.

    None when absent, unreadable or outside what a datetime can hold in UTC (9999-12-31T23:59:59-05:00).
    """
    try:
        moment = _epoch(value) if not isinstance(value, str) or _EPOCH.fullmatch(value.strip()) else _iso(value)
        return moment.astimezone(timezone.utc) if moment else None
    except (ValueError, TypeError, OverflowError, OSError):
        return None


def _iso(value: str) -> datetime | None:
    # A day alone is no moment: shown as written, never taken for midnight. (2026-11-28T…, the usual form, at once.)
    if value[10:11] not in ("T", "t", " ") and not _WITH_TIME.search(value):
        return None
    try:
        moment = datetime.fromisoformat(value.strip().replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        moment = parsedate_to_datetime(value)  # HTTP's and e-mail's form: "Fri, 20 Nov 2026 00:07:00 GMT"
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _epoch(value: Any) -> datetime | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    number = float(value)
    if not math.isfinite(number) or number < 0:
        return None
    if number > 1e11:  # past the year 5138 in seconds: these are milliseconds
        number /= 1000
    return datetime.fromtimestamp(number, timezone.utc)


def _unread_time(value: Any) -> str | None:
    if value is None or value == "" or parse_timestamp(value) is not None:
        return None
    return str(value)[:64]


def _require_object(payload: Any, what: str) -> dict[str, Any]:
    if not isinstance(payload, dict):
        raise UpstreamProtocolError(f"The {what} is not a JSON object")
    return payload


def flow_id_from_path(path: Any) -> str | None:
    """The flow id at the end of `/api/flows/<id>` or the retrieve path `/api/applications/<id>` (or a full URL of
    either), when it is a usable id. Any other address names something else: an operation to poll, a task."""
    if not isinstance(path, str):
        return None
    *_, parent, last = ["", *urlsplit(path.strip()).path.rstrip("/").split("/")]
    return last if parent in FLOW_PATHS and FLOW_ID.fullmatch(last) else None


@dataclass(frozen=True)
class FlowSummary:
    """A list item: the flow model of seed §2.1, plus what the service may add."""

    id: str | None  # DESIGN gives list items an id; a service that sends none still gets its rows shown
    national_id: str | None
    status: str | None
    reference_id: str | None
    created_at: datetime | None
    raw: dict[str, Any] = field(repr=False, compare=False)
    # The service's value when it is not a time the portal can read: shown as it came ("—" said nothing; a stand-in)
    created_unread: str | None = None
    not_an_object: bool = False  # the list held null, a number or a text where a flow goes

    @classmethod
    def from_json(cls, item: Any) -> "FlowSummary":
        if not isinstance(item, dict):
            return cls(None, None, None, None, None, raw={}, not_an_object=True)
        # `flowId` first: the spec's name for a flow's id everywhere; an item may also carry a row number as `id`.
        flow_id = _identifier(item, "flowId", "id")
        created_at = parse_timestamp(item.get("createdAt"))
        return cls(
            id=flow_id if flow_id and FLOW_ID.fullmatch(flow_id) else None,
            national_id=_national_id(item),
            status=known_spelling(_text(item, "status"), CONSENT_STATUSES),
            reference_id=_identifier(item, "referenceId"),
            created_at=created_at,
            raw=item,
            # read once: each row of every list page comes here (callgrind: a second parse was 2 % of a page)
            created_unread=None if created_at is not None else _unread_time(item.get("createdAt")),
        )

    @property
    def has_details(self) -> bool:
        return bool(self.raw)


@dataclass(frozen=True)
class FlowPage:
    """One page of the list (seed §2.2), and what the service said about the next one.

    `has_more` is None when the service left it out or sent something unreadable: unknown, not
    "no". `next_position` holds the query parameters that fetch the next page when the service
    named them itself (a `next` link, `_links.next`, a `next_cursor`, an `offset`); None otherwise,
    and then DESIGN's `starting_after=<last id>` is the way on.
    """

    items: list[FlowSummary]
    has_more: bool | None
    next_position: dict[str, str] | None
    raw: dict[str, Any] = field(repr=False, compare=False)
    left_out: int = 0  # items the service sent that the portal left out (shown on the previous page already)
    has_more_unread: str | None = None  # what the service sent as `has_more` when it is no yes or no

    @classmethod
    def from_json(cls, payload: Any) -> "FlowPage":
        payload = _require_object(payload, "flow list")
        data = next((payload[key] for key in LIST_KEYS if isinstance(payload.get(key), list)), None)
        if data is None:
            raise UpstreamProtocolError("The flow list has no data array")
        items = [FlowSummary.from_json(item) for item in data]
        next_position, has_more = _continuation(payload, len(items)), _flag(payload, "has_more")
        if has_more is None and "next" in payload and payload["next"] is None:
            has_more = False  # an explicit "no next link"
        if has_more is None and next_position is None and _past_its_total(payload, len(items)):
            has_more = False
        unread = as_written(payload["has_more"]) if sent_unread(payload, "has_more", has_more) else None
        return cls(items, has_more, next_position, raw=payload, has_more_unread=unread)

    @property
    def names_a_next_page(self) -> bool:
        """Whether the service named a next page itself (a next link or a cursor): beside `has_more: false`, a
        contradiction (`listing.next_step`); the offset of this page said back is none."""
        return _continuation(self.raw, len(self.items), named=True) is not None

    @property
    def first_id(self) -> str | None:
        return self.items[0].id if self.items else None

    @property
    def last_id(self) -> str | None:
        return self.items[-1].id if self.items else None

    @property
    def items_without_id(self) -> int:
        return sum(1 for item in self.items if not item.id)


def _past_its_total(payload: dict[str, Any], count: int) -> bool:
    """Whether a service that pages by `offset` says by its `total` that this page is its last: going on by ids
    instead, a service that ignores them sends its first page again. (Without the offset a total cannot say.)"""
    offset, total = _integer(payload, "offset"), _integer(payload, "total")
    return offset is not None and total is not None and offset + count >= total


def _continuation(payload: dict[str, Any], count: int, named: bool = False) -> dict[str, str] | None:
    """The query parameters of the next page when the service says them itself; `named`: only a next link or a
    cursor, not the offset after this page the portal works out from the one it says."""
    # Whole, never cut at MAX_TEXT: a cut token names no page (the list says when one is too long to carry).
    links = _object(payload, "_links") or _object(payload, "links")
    link = payload.get("next")
    link = link if isinstance(link, str) else links.get("next")
    link = link.get("href") if isinstance(link, dict) else link
    if isinstance(link, str) and link.strip():
        return _link_position(link.strip())
    for key, parameter in NEXT_TOKENS.items():
        token = payload.get(key)
        if isinstance(token, int) and not isinstance(token, bool):
            token = str(token)
        if isinstance(token, str) and token.strip():
            return {parameter: token.strip()}
    if named:
        return None
    offset, total = _integer(payload, "offset"), _integer(payload, "total")
    if offset is not None and count and (total is None or offset + count < total):
        return {"offset": str(offset + count)}
    return None


def _link_position(link: str) -> dict[str, str] | None:
    """A next link's query parameters (never its host: the portal asks only its configured service)."""
    if "?" not in link and "/" not in link:
        return {"cursor": link}  # a bare token named `next`
    pairs = [(key, value) for key, value in parse_qsl(urlsplit(link).query) if key not in ("limit", "archived")]
    return dict(pairs[:MAX_POSITION_PARAMS]) or None


@dataclass(frozen=True)
class CreatedFlow:
    """The create response (seed §2.3); the id may come from the body, `_links.self` or `Location`."""

    flow_id: str | None  # None: the service accepted the flow but did not say which id it got
    reference_id: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)
    unusable_id: str | None = None  # an id it gave that no address can hold (a stand-in's "flows/42 of org")

    @classmethod
    def from_reply(cls, payload: Any, headers: dict[str, str] | None = None, status: int = 201) -> "CreatedFlow":
        payload = payload if isinstance(payload, dict) else {}
        body = _created_object(payload)
        flow = _object(body, "flow")
        self_link = _object(body, "_links").get("self")
        self_link = _text(self_link, "href") if isinstance(self_link, dict) else self_link
        candidates = (
            _identifier(body, "flowId"),
            # A bare `id` in an answer of 202 (accepted, not yet made) is as likely a job's to poll as the flow's:
            # the flow's only beside what only a flow has.
            _identifier(body, "id") if status != 202 or body.keys() & FLOW_ONLY_FIELDS else None,
            _identifier(flow, "flowId", "id"),
            flow_id_from_path(self_link),
            flow_id_from_path((headers or {}).get("Location") or (headers or {}).get("location")),
        )
        flow_id = next((found for found in candidates if found and FLOW_ID.fullmatch(found)), None)
        unusable = None if flow_id else next((found for found in candidates if found), None)
        reference_id = _identifier(body, "referenceId") or _identifier(flow, "referenceId")
        return cls(flow_id, reference_id, payload, unusable_id=unusable)


def _created_object(payload: dict[str, Any]) -> dict[str, Any]:
    """The create answer's own object: the top level (seed §2.3), or what a `data` envelope holds."""
    inner = payload.get("data")
    if isinstance(inner, dict) and not payload.keys() & {"flowId", "id", "referenceId", "flow", "_links"}:
        return inner
    return payload


@dataclass(frozen=True)
class Incident:
    """An incident record (seed §2.5)."""

    id: str
    message: str | None
    task_type: str | None
    task_category: str | None

    @classmethod
    def from_json(cls, key: str, value: Any) -> "Incident":
        value = value if isinstance(value, dict) else {"message": value} if isinstance(value, str) else {}
        return cls(
            id=_identifier(value, "id") or key,
            message=_text(value, "message"),
            task_type=_text(value, "taskType"),
            task_category=_text(value, "taskCategory"),
        )


def read_incidents(value: Any) -> list[Incident]:
    """Incidents keyed by id (seed §2.5), or given as a list, or as one record."""
    if isinstance(value, list):
        return [Incident.from_json(str(index + 1), item) for index, item in enumerate(value)]
    if isinstance(value, dict) and ("message" in value or "taskType" in value):
        return [Incident.from_json("1", value)]
    if isinstance(value, dict):
        return [Incident.from_json(str(key), item) for key, item in value.items()]
    return []


@dataclass(frozen=True)
class FlowData:
    """The flow's input data (seed §2.6)."""

    national_id: str | None
    last_name: str | None
    redirect_url: str | None
    webhook_url: str | None
    organization_number: str | None

    @classmethod
    def from_json(cls, data: dict[str, Any], flow: dict[str, Any] | None = None) -> "FlowData":
        """`data` (§2.6); the national id also from the flow object itself, where the flow model (§2.1) has it."""
        return cls(
            national_id=_national_id(data) or _national_id(flow or {}),
            last_name=_text(data, "lastName"),
            redirect_url=_text(data, "redirectUrl"),
            webhook_url=_text(data, "webhookUrl"),
            organization_number=_text(data, "organizationNumber"),
        )


# A flow's fields that hold an object or a list, and which: another kind is read as none.
_FLOW_STRUCTURES: dict[str, type | tuple[type, ...]] = {
    "incidents": (dict, list),
    "sandboxConfig": dict,
    "data": dict,
    "actions": list,
    "_meta": dict,
}


def _unread_fields(flow: dict[str, Any], read: dict[str, Any]) -> tuple[str, ...]:
    """The names of the flow's fields sent in a form the portal cannot read: a value read as nothing, a structure
    of another kind, actions that are not texts."""
    unread = [name for name, value in read.items() if sent_unread(flow, name, value)]
    unread += [
        name
        for name, kinds in _FLOW_STRUCTURES.items()
        if flow.get(name) is not None and not isinstance(flow[name], kinds)
    ]
    actions = flow.get("actions")
    if isinstance(actions, list) and not all(isinstance(action, str) for action in actions):
        unread.append("actions")
    if _incidents_unread(flow.get("incidents")):
        unread.append("incidents")
    return tuple(unread)


def _incidents_unread(incidents: Any) -> bool:
    """Whether the incidents hold entries that are neither a record nor a message (each shown without a message)."""
    if isinstance(incidents, dict) and ("message" in incidents or "taskType" in incidents):
        return False  # one record, as `read_incidents` reads it
    entries = incidents.values() if isinstance(incidents, dict) else incidents if isinstance(incidents, list) else ()
    return not all(isinstance(entry, (dict, str)) for entry in entries)


@dataclass(frozen=True)
class FlowDetail:
    """The retrieve response (seed §2.4)."""

    flow_id: str
    status: str | None
    version: int | None
    flow_number: int | None
    reference_id: str | None
    reference_name: str | None
    has_errors: bool | None
    has_incidents: bool | None
    incidents: list[Incident]
    created_at: datetime | None
    updated_at: datetime | None
    created_unread: str | None  # the service's value when it is not a time the portal can read
    updated_unread: str | None
    num_attachments: int | None
    process_definition_id: str | None
    process_instance_id: str | None
    process_version: str | None
    flow_definition_id: str | None
    version_tag: str | None
    sandbox: bool | None
    sandbox_config: dict[str, Any]
    data: FlowData
    actions: list[str]
    self_link: str | None
    tasks_link: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)
    answered_as: str | None = None  # the id the answer gives itself, when it is not the id asked for
    # The flow's fields the service sent in a form the portal cannot read (a status of 3, a version "two"): shown
    # as "—" like absent ones, so named on the page (a stand-in: they were dropped without a word).
    unread: tuple[str, ...] = ()

    @property
    def actions_elsewhere(self) -> list[str]:
        """The service's actions the portal offers no way to take: all but reading the flow, which its page is."""
        return [action for action in self.actions if action.strip().casefold() != "read"]

    @classmethod
    def from_json(cls, payload: Any, requested_id: str | None = None) -> "FlowDetail":
        payload = _require_object(payload, "flow")
        # The spec wraps the flow in `flow`; a service that sends the flow object bare is read too.
        bare = "flow" not in payload and ("flowId" in payload or "id" in payload)
        flow = payload if bare else _require_object(payload.get("flow"), "flow object")
        answered = _identifier(flow, "flowId", "id")
        flow_id = requested_id or answered  # the flow asked for: its page, its index row and its events stay its own
        if not flow_id:
            raise UpstreamProtocolError("The flow has no flowId")
        links, meta = _object(payload, "_links"), _object(flow, "_meta")
        self_link = links.get("self")
        actions = flow.get("actions")
        read: dict[str, Any] = {
            "status": known_spelling(_text(flow, "status"), LIFECYCLES),
            "version": _integer(flow, "version"),
            "flowNumber": _integer(flow, "flowNumber"),
            "referenceId": _identifier(flow, "referenceId"),
            "referenceName": _text(flow, "referenceName"),
            "hasErrors": _flag(flow, "hasErrors"),
            "hasIncidents": _flag(flow, "hasIncidents"),
            "numAttachments": _integer(flow, "numAttachments"),
            "flowDefinitionId": _text(flow, "flowDefinitionId"),
            "versionTag": _text(flow, "versionTag"),
            "sandbox": _flag(flow, "sandbox"),
        }
        return cls(
            flow_id=flow_id,
            status=read["status"],
            version=read["version"],
            flow_number=read["flowNumber"],
            reference_id=read["referenceId"],
            reference_name=read["referenceName"],
            has_errors=read["hasErrors"],
            has_incidents=read["hasIncidents"],
            incidents=read_incidents(flow.get("incidents")),
            created_at=parse_timestamp(flow.get("createdAt")),
            updated_at=parse_timestamp(flow.get("updatedAt")),
            created_unread=_unread_time(flow.get("createdAt")),
            updated_unread=_unread_time(flow.get("updatedAt")),
            num_attachments=read["numAttachments"],
            process_definition_id=_text(meta, "processDefinitionId"),
            process_instance_id=_text(meta, "processInstanceId"),
            process_version=_text(meta, "processVersion"),
            flow_definition_id=read["flowDefinitionId"],
            version_tag=read["versionTag"],
            sandbox=read["sandbox"],
            sandbox_config=_object(flow, "sandboxConfig"),
            data=FlowData.from_json(_object(flow, "data"), flow),
            actions=[action for action in actions if isinstance(action, str)] if isinstance(actions, list) else [],
            self_link=self_link if isinstance(self_link, str) else _text(_object(links, "self"), "href"),
            tasks_link=_text(_object(links, "tasks"), "href"),
            raw=payload,
            answered_as=answered if answered and not same_flow_id(answered, flow_id) else None,
            unread=_unread_fields(flow, read),
        )
