"""Gathering a batch from a queue, for the process's background writers (webhook group commit, flow index).

Their queues are `queue.Queue`, never `queue.SimpleQueue`: on CPython 3.11 a `SimpleQueue.get(timeout=…)`
interrupted by a signal just before its deadline goes round again with a negative timeout, which means "wait for
ever", so it waits for the next item instead. A gunicorn worker told to stop (SIGTERM) then kept the deliveries of
its open batch waiting until its graceful timeout ran out (2 slow stops in about 230 after a webhook load).
`Queue.get` waits on a lock whose interrupted wait times out as it should.
"""

import queue
import time
from collections.abc import Callable
from typing import TypeVar

Item = TypeVar("Item")


def gather(
    waiting: "queue.Queue[Item]", batch: list[Item], seconds: float, wants_more: Callable[[list[Item]], bool]
) -> list[Item]:
    """Add to `batch` what is waiting or arrives within `seconds`, for as long as `wants_more(batch)`."""
    gather_until = time.monotonic() + seconds
    while wants_more(batch):
        try:
            batch.append(waiting.get(timeout=max(0.0, gather_until - time.monotonic())))
        except queue.Empty:
            break
    return batch
