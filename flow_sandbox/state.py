"""The sandbox's flows, kept in memory behind one lock so concurrent requests stay consistent."""

import threading
import uuid
from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import datetime, timezone

PROCESS_DEFINITION = "loan-application-consent"
PROCESS_VERSION = "3"
REFERENCE_PREFIX = "LA"
FIRST_FLOW_NUMBER = 10001

UNOPENED, OPENED, ACCEPTED, REJECTED = "Unopened", "Opened", "Accepted", "Rejected"
ACTIVE, COMPLETED, CANCELLED = "active", "completed", "cancelled"


class FlowNotFound(LookupError):
    """No flow with that id in the caller's organization."""


class TransitionNotAllowed(ValueError):
    """The flow's current state does not allow the requested change."""


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def iso_millis(moment: datetime) -> str:
    """ISO 8601 in UTC with milliseconds, as the service writes timestamps."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + (f"{moment.microsecond // 1000:03d}Z")


@dataclass
class Flow:
    id: str
    organization_id: str
    organization_number: str
    flow_number: int
    national_id: str
    country: str
    last_name: str
    redirect_url: str
    webhook_url: str | None
    created_at: datetime
    updated_at: datetime
    status: str = UNOPENED
    lifecycle: str = ACTIVE
    archived: bool = False
    version: int = 1
    incidents: dict = field(default_factory=dict)
    process_instance_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def reference_id(self) -> str:
        return f"{REFERENCE_PREFIX}-{self.flow_number}"

    @property
    def actions(self) -> list[str]:
        return ["read", "assign", "cancel"] if self.lifecycle == ACTIVE else ["read"]

    def list_item(self) -> dict:
        """The flow model of seed §2.1, plus `referenceId`, `createdAt` and `updatedAt` (DESIGN §3: may carry more)."""
        return {
            "id": self.id,
            "nationalId": self.national_id,
            "organizationId": self.organization_id,
            "status": self.status,
            "referenceId": self.reference_id,
            "createdAt": iso_millis(self.created_at),
            "updatedAt": iso_millis(self.updated_at),
        }

    def retrieve_response(self) -> dict:
        """The retrieve response of seed §2.4."""
        return {
            "_links": {
                "self": f"/api/flows/{self.id}",
                "tasks": {"href": f"/api/tasks?flowId={self.id}"},
            },
            "flow": {
                "flowId": self.id,
                "version": self.version,
                "hasErrors": bool(self.incidents),
                "hasIncidents": bool(self.incidents),
                "incidents": {key: dict(value) for key, value in self.incidents.items()},
                "status": self.lifecycle,
                "createdAt": iso_millis(self.created_at),
                "updatedAt": iso_millis(self.updated_at),
                "numAttachments": 0,
                "_meta": {
                    "processDefinitionId": f"{PROCESS_DEFINITION}:{PROCESS_VERSION}",
                    "processInstanceId": self.process_instance_id,
                    "processVersion": PROCESS_VERSION,
                },
                "flowDefinitionId": PROCESS_DEFINITION,
                "flowNumber": self.flow_number,
                "referenceId": self.reference_id,
                "referenceName": None,
                "versionTag": None,
                "sandbox": True,
                "sandboxConfig": {"consentUrl": f"/consent/{self.id}"},
                "data": {
                    "nationalId": self.national_id,
                    "lastName": self.last_name,
                    "redirectUrl": self.redirect_url,
                    "webhookUrl": self.webhook_url,
                    "organizationNumber": self.organization_number,
                },
                "actions": self.actions,
            },
        }

    def event_data(self, previous_status: str | None) -> dict:
        return {
            "flowId": self.id,
            "referenceId": self.reference_id,
            "status": self.status,
            "previousStatus": previous_status,
            "flowStatus": self.lifecycle,
            "archived": self.archived,
            "version": self.version,
        }


@dataclass(frozen=True)
class Page:
    items: list[dict]
    has_more: bool


# What each control action needs and does: allowed from (status, lifecycle) -> new values.
# action -> the (status, lifecycle) pairs it may start from, and the fields it sets
_TRANSITIONS: dict[str, tuple[set[tuple[str, str]], dict[str, object]]] = {
    "open": ({(UNOPENED, ACTIVE)}, {"status": OPENED}),
    "accept": ({(UNOPENED, ACTIVE), (OPENED, ACTIVE)}, {"status": ACCEPTED, "lifecycle": COMPLETED}),
    "reject": ({(UNOPENED, ACTIVE), (OPENED, ACTIVE)}, {"status": REJECTED, "lifecycle": COMPLETED}),
    "cancel": ({(UNOPENED, ACTIVE), (OPENED, ACTIVE)}, {"lifecycle": CANCELLED, "archived": True}),
}
ACTIONS = (*_TRANSITIONS, "archive")


def _newest_first(flows: list[Flow], has_more: bool) -> Page:
    return Page([flow.list_item() for flow in reversed(flows)], has_more=has_more)


class FlowStore:
    """All flows of all organizations, newest last; every method is safe across threads."""

    def __init__(self):
        self._lock = threading.RLock()
        self._flows: list[Flow] = []
        self._by_id: dict[str, Flow] = {}
        self._next_number = FIRST_FLOW_NUMBER

    def create(self, *, organization_id: str, organization_number: str, created_at=None, **fields) -> Flow:
        """A new flow; `created_at` only for seeding a demo with a past."""
        with self._lock:
            now = created_at or utc_now()
            flow = Flow(
                id=str(uuid.uuid4()),
                organization_id=organization_id,
                organization_number=organization_number,
                flow_number=self._next_number,
                created_at=now,
                updated_at=now,
                **fields,
            )
            self._next_number += 1
            self._flows.append(flow)
            self._by_id[flow.id] = flow
            return flow

    def get(self, flow_id: str, organization_id: str | None = None) -> Flow:
        """The flow, if it exists and (when given) belongs to `organization_id`."""
        with self._lock:
            flow = self._by_id.get(flow_id)
        if flow is None or (organization_id is not None and flow.organization_id != organization_id):
            raise FlowNotFound(flow_id)
        return flow

    def newest(self, limit: int) -> list[Flow]:
        """The newest flows of every organization, newest first (for the sandbox's home page)."""
        with self._lock:
            return list(reversed(self._flows[-limit:]))

    def count(self) -> int:
        with self._lock:
            return len(self._flows)

    def page(
        self,
        organization_id: str,
        *,
        archived: bool,
        limit: int,
        starting_after: str | None = None,
        ending_before: str | None = None,
    ) -> Page:
        """A page newest first; cursors are flow ids of the same organization (DESIGN §3)."""
        with self._lock:
            matching = [
                flow for flow in self._flows if flow.organization_id == organization_id and flow.archived == archived
            ]
            numbers = [flow.flow_number for flow in matching]  # ascending: oldest first
            if ending_before:
                cursor = self.get(ending_before, organization_id).flow_number
                newer = matching[bisect_left(numbers, cursor + 1) :]
                return _newest_first(newer[:limit], has_more=len(newer) > limit)
            if starting_after:
                cursor = self.get(starting_after, organization_id).flow_number
                older = matching[: bisect_left(numbers, cursor)]
            else:
                older = matching
            return _newest_first(older[-limit:], has_more=len(older) > limit)

    def apply(self, flow_id: str, action: str, at: datetime | None = None) -> tuple[Flow, str]:
        """Carry out a control action (at `at` when seeding a past); returns the flow and its status before it."""
        with self._lock:
            flow = self.get(flow_id)
            previous = flow.status
            if action == "archive":
                if flow.archived:
                    raise TransitionNotAllowed("the flow is already archived")
                changes: dict[str, object] = {"archived": True}
            else:
                allowed_from, changes = _TRANSITIONS[action]
                if (flow.status, flow.lifecycle) not in allowed_from:
                    raise TransitionNotAllowed(f"cannot {action} a flow that is {flow.status} ({flow.lifecycle})")
            for name, value in changes.items():
                setattr(flow, name, value)
            self._touch(flow, at)
            return flow, previous

    def add_incident(self, flow_id: str, *, message: str, task_type: str, at: datetime | None = None) -> dict:
        with self._lock:
            flow = self.get(flow_id)
            incident_id = str(uuid.uuid4())
            incident = {
                "id": incident_id,
                "message": message,
                "taskType": task_type,
                "taskCategory": "incident",
            }
            flow.incidents[incident_id] = incident
            self._touch(flow, at)
            return incident

    def snapshot(self, flow_id: str, render) -> dict:
        """Render a flow under the lock, so a concurrent change cannot tear the answer."""
        with self._lock:
            return render(self.get(flow_id))

    @staticmethod
    def _touch(flow: Flow, at: datetime | None = None) -> None:
        flow.version += 1
        flow.updated_at = max(at or utc_now(), flow.updated_at)
