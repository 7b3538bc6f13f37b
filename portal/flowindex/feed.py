"""What the rest of the portal calls when it has seen a flow: each call hands the index writer a job."""

from flask import Flask, current_app

from ..flowapi import CreatedFlow, FlowDetail, FlowPage
from ..webhooks.shape import EventFields
from ..webhooks.store import clean_text, storable_moment
from .observations import LIST, from_created, from_detail, from_event, from_summary
from .writer import IndexWriter, utc_now


def init_app(app: Flask) -> None:
    app.extensions["flow_index"] = IndexWriter(app)


def writer() -> IndexWriter:
    return current_app.extensions["flow_index"]


def saw_page(page: FlowPage, archived: bool | None, source: str = LIST) -> None:
    """A list page just fetched. Its items are compared with what the list said of them lately here, on the
    request: a page reloaded unchanged (most of them) wakes no writer thread, which would only take the GIL."""
    seen_at, index_writer = utc_now(), writer()
    fresh = [
        item
        for item in page.items
        if item.id and not index_writer.said_lately(f"{source}:{item.id}", (archived, item.raw), seen_at)
    ]
    if fresh:
        index_writer.submit(lambda: (from_summary(item, archived, seen_at, source) for item in fresh))


def saw_detail(flow: FlowDetail) -> None:
    seen_at = utc_now()
    writer().submit(lambda: (from_detail(flow, seen_at),))


def saw_created(created: CreatedFlow, national_id: str, country: str, last_name: str, username: str) -> None:
    seen_at = utc_now()
    writer().submit(lambda: (from_created(created, national_id, country, last_name, username, seen_at),))


def saw_event(fields: EventFields, payload: dict) -> None:
    """A webhook event just stored, with its fields as the receiver read them."""
    seen_at = utc_now()

    def observe():
        return (
            from_event(
                clean_text(fields.flow_id, 100),
                clean_text(fields.event_type, 100),
                clean_text(fields.status, 40),
                storable_moment(fields.timestamp),
                clean_text(fields.reference_id, 100),
                payload,
                seen_at,
            ),
        )

    writer().submit(observe)
