"""What the service does to flows, with the webhook event every change sends."""

import hashlib
import random
from datetime import datetime, timedelta

from stdnum.no import orgnr

from .nationalid import normalize
from .state import Flow, FlowStore, utc_now
from .webhooks import Delivery, WebhookSender, build_event

WEBHOOK_INCIDENT_TASK = "send-initiate-webhook"


def organization_number(organization: str) -> str:
    """A stable, valid Norwegian organisation number for an organization id."""
    digest = int(hashlib.sha256(organization.encode()).hexdigest(), 16)
    for attempt in range(1000):
        candidate = f"9{(digest + attempt) % 10**8:08d}"
        if orgnr.is_valid(candidate):
            return candidate
    raise AssertionError("unreachable: one in eleven numbers has a valid check digit")


class FlowService:
    def __init__(self, store: FlowStore, sender: WebhookSender | None = None):
        self.store = store
        self.sender = sender
        self.flows_created = 0

    def attach_sender(self, sender: WebhookSender) -> None:
        self.sender = sender

    def create(
        self, organization: str, *, national_id, country, last_name, redirect_url, webhook_url, created_at=None
    ) -> Flow:
        flow = self.store.create(
            created_at=created_at,
            organization_id=organization,
            organization_number=organization_number(organization),
            national_id=national_id,
            country=country,
            last_name=last_name,
            redirect_url=redirect_url,
            webhook_url=webhook_url,
        )
        self.flows_created += 1
        self._notify(flow, "flow.created", previous_status=None)
        return flow

    def apply(self, flow_id: str, action: str, at: datetime | None = None) -> Flow:
        flow, previous = self.store.apply(flow_id, action, at)
        self._notify(flow, "flow.status_changed", previous_status=previous)
        return flow

    def record_failed_delivery(self, delivery: Delivery) -> None:
        message = (
            f"Webhook {delivery.event['type']} ({delivery.event_id}) to {delivery.url} "
            f"failed after {delivery.attempts} attempts"
        )
        incident = self.store.add_incident(delivery.flow_id, message=message, task_type=WEBHOOK_INCIDENT_TASK)
        flow = self.store.get(delivery.flow_id)
        self._notify(flow, "flow.incident", previous_status=flow.status, incident=incident, raises_incident=False)

    def _notify(self, flow: Flow, event_type: str, *, previous_status, incident=None, raises_incident=True) -> None:
        if not (self.sender and flow.webhook_url):
            return
        data = self.store.snapshot(flow.id, lambda current: current.event_data(previous_status))
        if incident:
            data["incident"] = incident
        self.sender.send(flow.webhook_url, flow.id, build_event(event_type, data), raises_incident=raises_incident)


DEMO_PEOPLE = (
    ("15108695088", "Nordmann"),
    ("24058600160", "Hansen"),
    ("811218-9876", "Andersson"),
    ("19701231-9872", "Lindqvist"),
    ("131052-308T", "Virtanen"),
    ("010190-123M", "Korhonen"),
    ("30079200049", "Østby"),
)
SEED_DAYS = timedelta(days=30)
# Spread demo flows over every state: (actions to apply, share of flows).
DEMO_SCRIPTS = ((), ("open",), ("accept",), ("reject",), ("open", "accept"), ("cancel",), ("archive",))


def seed_demo_flows(service: FlowService, count: int, organization: str, redirect_url: str) -> None:
    """Create `count` flows across every status, some archived, a few with incidents, over the past SEED_DAYS.

    A past makes a first look meaningful: flows per day, time to decision, and flows stuck for days.
    """
    chooser = random.Random(20261121)
    now = utc_now()
    for index in range(count):
        national_id, last_name = DEMO_PEOPLE[index % len(DEMO_PEOPLE)]
        country, national_id = normalize(national_id)
        moment = now - SEED_DAYS * (count - index) / count  # older flows first, as their numbers run
        flow = service.create(
            organization,
            national_id=national_id,
            country=country,
            last_name=last_name,
            redirect_url=redirect_url,
            webhook_url=None,
            created_at=moment,
        )
        for action in DEMO_SCRIPTS[index % len(DEMO_SCRIPTS)]:
            moment = min(moment + timedelta(minutes=chooser.uniform(5, 36 * 60)), now)
            service.apply(flow.id, action, at=moment)
        if chooser.random() < 0.15:
            service.store.add_incident(
                flow.id,
                message="Webhook flow.created to https://lender.example/hooks failed after 5 attempts",
                task_type=WEBHOOK_INCIDENT_TASK,
                at=min(moment + timedelta(minutes=10), now),
            )
