"""Typed results of the Flow Service (seed §2), tolerant of unknown and missing fields.

Every object keeps the JSON it came from in `raw`, for the portal's raw view.
"""

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .errors import UpstreamProtocolError


def _text(source: dict, name: str) -> str | None:
    value = source.get(name)
    return value if isinstance(value, str) else None


def _integer(source: dict, name: str) -> int | None:
    value = source.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _flag(source: dict, name: str) -> bool | None:
    value = source.get(name)
    return value if isinstance(value, bool) else None


def _object(source: dict, name: str) -> dict:
    value = source.get(name)
    return value if isinstance(value, dict) else {}


def parse_timestamp(value: Any) -> datetime | None:
    """ISO 8601 (with `Z` or an offset) to an aware datetime; None when absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _require_object(payload: Any, what: str) -> dict:
    if not isinstance(payload, dict):
        raise UpstreamProtocolError(f"The {what} is not a JSON object")
    return payload


@dataclass(frozen=True)
class FlowSummary:
    """A list item: the flow model of seed §2.1, plus what the service may add."""

    id: str | None  # DESIGN gives list items an id; a service that sends none still gets its rows shown
    national_id: str | None
    organization_id: str | None
    status: str | None
    reference_id: str | None
    created_at: datetime | None
    raw: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, item: Any) -> "FlowSummary":
        item = _require_object(item, "flow list item")
        return cls(
            id=_text(item, "id") or _text(item, "flowId"),
            national_id=_text(item, "nationalId"),
            organization_id=_text(item, "organizationId"),
            status=_text(item, "status"),
            reference_id=_text(item, "referenceId"),
            created_at=parse_timestamp(item.get("createdAt")),
            raw=item,
        )


@dataclass(frozen=True)
class FlowPage:
    """One page of the list (seed §2.2) with the cursors to its neighbours (DESIGN §3)."""

    items: list[FlowSummary]
    has_more: bool
    raw: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, payload: Any) -> "FlowPage":
        payload = _require_object(payload, "flow list")
        data = payload.get("data")
        if not isinstance(data, list):
            raise UpstreamProtocolError("The flow list has no data array")
        return cls(
            items=[FlowSummary.from_json(item) for item in data],
            has_more=_flag(payload, "has_more") or False,
            raw=payload,
        )

    @property
    def first_id(self) -> str | None:
        return self.items[0].id if self.items else None

    @property
    def last_id(self) -> str | None:
        return self.items[-1].id if self.items else None


@dataclass(frozen=True)
class CreatedFlow:
    """The create response (seed §2.3)."""

    flow_id: str
    reference_id: str | None
    self_href: str | None
    raw: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, payload: Any) -> "CreatedFlow":
        payload = _require_object(payload, "create response")
        flow_id = _text(payload, "flowId")
        if not flow_id:
            raise UpstreamProtocolError("The create response has no flowId")
        return cls(
            flow_id=flow_id,
            reference_id=_text(payload, "referenceId"),
            self_href=_text(_object(_object(payload, "_links"), "self"), "href"),
            raw=payload,
        )


@dataclass(frozen=True)
class Incident:
    """An incident record (seed §2.5)."""

    id: str
    message: str | None
    task_type: str | None
    task_category: str | None

    @classmethod
    def from_json(cls, key: str, value: Any) -> "Incident":
        value = value if isinstance(value, dict) else {}
        return cls(
            id=_text(value, "id") or key,
            message=_text(value, "message"),
            task_type=_text(value, "taskType"),
            task_category=_text(value, "taskCategory"),
        )


@dataclass(frozen=True)
class FlowData:
    """The flow's input data (seed §2.6)."""

    national_id: str | None
    last_name: str | None
    redirect_url: str | None
    webhook_url: str | None
    organization_number: str | None

    @classmethod
    def from_json(cls, data: dict) -> "FlowData":
        return cls(
            national_id=_text(data, "nationalId"),
            last_name=_text(data, "lastName"),
            redirect_url=_text(data, "redirectUrl"),
            webhook_url=_text(data, "webhookUrl"),
            organization_number=_text(data, "organizationNumber"),
        )


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
    num_attachments: int | None
    process_definition_id: str | None
    process_instance_id: str | None
    process_version: str | None
    flow_definition_id: str | None
    version_tag: str | None
    sandbox: bool | None
    sandbox_config: dict
    data: FlowData
    actions: list[str]
    self_link: str | None
    tasks_link: str | None
    raw: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, payload: Any, requested_id: str | None = None) -> "FlowDetail":
        payload = _require_object(payload, "flow")
        flow = _require_object(payload.get("flow"), "flow object")
        flow_id = _text(flow, "flowId") or requested_id
        if not flow_id:
            raise UpstreamProtocolError("The flow has no flowId")
        links, meta = _object(payload, "_links"), _object(flow, "_meta")
        self_link = links.get("self")
        actions = flow.get("actions")
        return cls(
            flow_id=flow_id,
            status=_text(flow, "status"),
            version=_integer(flow, "version"),
            flow_number=_integer(flow, "flowNumber"),
            reference_id=_text(flow, "referenceId"),
            reference_name=_text(flow, "referenceName"),
            has_errors=_flag(flow, "hasErrors"),
            has_incidents=_flag(flow, "hasIncidents"),
            incidents=[Incident.from_json(key, value) for key, value in _object(flow, "incidents").items()],
            created_at=parse_timestamp(flow.get("createdAt")),
            updated_at=parse_timestamp(flow.get("updatedAt")),
            num_attachments=_integer(flow, "numAttachments"),
            process_definition_id=_text(meta, "processDefinitionId"),
            process_instance_id=_text(meta, "processInstanceId"),
            process_version=_text(meta, "processVersion"),
            flow_definition_id=_text(flow, "flowDefinitionId"),
            version_tag=_text(flow, "versionTag"),
            sandbox=_flag(flow, "sandbox"),
            sandbox_config=_object(flow, "sandboxConfig"),
            data=FlowData.from_json(_object(flow, "data")),
            actions=[action for action in actions if isinstance(action, str)] if isinstance(actions, list) else [],
            self_link=self_link if isinstance(self_link, str) else _text(_object(links, "self"), "href"),
            tasks_link=_text(_object(links, "tasks"), "href"),
            raw=payload,
        )
