"""Webhook deliveries signed per Standard Webhooks, sent from a background worker with retries."""

import heapq
import itertools
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone

import requests
from standardwebhooks import Webhook

from .state import iso_millis, utc_now

USER_AGENT = "flow-sandbox-webhooks/1"


@dataclass
class Delivery:
    url: str
    flow_id: str
    event: dict
    attempts: int = 0
    # A failed incident notice must not raise another incident about itself.
    raises_incident: bool = True

    @property
    def event_id(self) -> str:
        return self.event["id"]


def build_event(event_type: str, data: dict) -> dict:
    return {"id": str(uuid.uuid4()), "type": event_type, "timestamp": iso_millis(utc_now()), "data": data}


class WebhookSender:
    """Schedules deliveries; a failed one is retried with doubling backoff up to `attempts` times."""

    def __init__(
        self,
        secret: str,
        *,
        attempts: int,
        backoff: float,
        timeout: float,
        on_exhausted: Callable[[Delivery], None],
        drop: Callable[[], bool] = lambda: False,
    ):
        self._signer = Webhook(secret)
        self._drop = drop
        self._attempts, self._backoff, self._timeout = attempts, backoff, timeout
        self._on_exhausted = on_exhausted
        self._queue: list[tuple[float, int, Delivery]] = []
        self._sequence = itertools.count()
        self._wakeup = threading.Condition()
        self._closed = False
        self._http = requests.Session()
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="webhook-send")
        self.log: deque[dict] = deque(maxlen=2000)
        self._scheduler = threading.Thread(target=self._run, name="webhook-scheduler", daemon=True)
        self._scheduler.start()

    def send(self, url: str, flow_id: str, event: dict, *, raises_incident: bool = True) -> None:
        delivery = Delivery(url, flow_id, event, raises_incident=raises_incident)
        if self._drop():  # a blocked webhook: never sent, never retried, no incident (gap detection's tests)
            self.log.append(self._entry(delivery, {"ok": False, "dropped": True}))
            return
        self._schedule(delivery, delay=0)

    def close(self) -> None:
        with self._wakeup:
            self._closed = True
            self._wakeup.notify_all()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def pending(self) -> int:
        with self._wakeup:
            return len(self._queue)

    def _schedule(self, delivery: Delivery, delay: float) -> None:
        with self._wakeup:
            heapq.heappush(self._queue, (time.monotonic() + delay, next(self._sequence), delivery))
            self._wakeup.notify()

    def _run(self) -> None:
        while True:
            with self._wakeup:
                while not self._closed and (not self._queue or self._queue[0][0] > time.monotonic()):
                    timeout = self._queue[0][0] - time.monotonic() if self._queue else None
                    self._wakeup.wait(timeout)
                if self._closed:
                    return
                _, _, delivery = heapq.heappop(self._queue)
            try:
                self._pool.submit(self._attempt, delivery)
            except RuntimeError:  # pool shut down while closing
                return

    def _attempt(self, delivery: Delivery) -> None:
        delivery.attempts += 1
        outcome = self._post(delivery)
        self.log.append(self._entry(delivery, outcome))
        if outcome["ok"]:
            return
        if outcome.get("status") != 410 and delivery.attempts < self._attempts:
            self._schedule(delivery, delay=self._backoff * 2 ** (delivery.attempts - 1))
        elif delivery.raises_incident:
            self._on_exhausted(delivery)

    @staticmethod
    def _entry(delivery: Delivery, outcome: dict) -> dict:
        return {
            "eventId": delivery.event_id,
            "type": delivery.event["type"],
            "url": delivery.url,
            "attempt": delivery.attempts,
            **outcome,
        }

    def _post(self, delivery: Delivery) -> dict:
        body = json.dumps(delivery.event, separators=(",", ":"))
        now = datetime.now(timezone.utc)
        headers = {
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            "webhook-id": delivery.event_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": self._signer.sign(delivery.event_id, now, body),
        }
        try:
            answer = self._http.post(
                delivery.url,
                data=body.encode(),
                headers=headers,
                timeout=self._timeout,
                allow_redirects=False,
            )
        except requests.RequestException as error:
            return {"ok": False, "error": type(error).__name__}
        return {"ok": 200 <= answer.status_code < 300, "status": answer.status_code}
