"""`FlowClient`: the portal's only way to the Flow Service."""

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import NamedTuple, TypeVar
from urllib.parse import quote

from .. import requestid
from ..settings import Settings
from .errors import EndpointNotFound, NotFound, UpstreamProtocolError, UpstreamTimeout, ValidationFailed
from .problems import read_problem, says_it_failed
from .records import CreatedFlow, FlowDetail, FlowPage, FlowSummary
from .tokens import ClientCredentialsProvider, SelfSignedJwtProvider, TokenProvider
from .transport import Transport

_T = TypeVar("_T")


class FlowClient:
    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    @property
    def provider(self) -> TokenProvider:
        return self.transport.provider

    def list_flows(
        self,
        limit: int = 10,
        archived: bool = False,
        starting_after: str | None = None,
        ending_before: str | None = None,
        position: Mapping[str, str] | None = None,
    ) -> FlowPage:
        """One page of flows, newest first.

        Move with DESIGN's cursors (`starting_after`, `ending_before`) or with the `position` a
        previous page named itself (`FlowPage.next_position`). `archived=false` is always sent:
        a service may list every flow when the parameter is absent.
        """
        params = dict(position or {}) | {"limit": limit, "archived": "true" if archived else "false"}
        if starting_after:
            params["starting_after"] = starting_after
        if ending_before:
            params["ending_before"] = ending_before
        with _required_endpoint("flow list"):
            payload = self.transport.get("/api/flows", params)
        with _read_as_sent():
            return FlowPage.from_json(payload)

    def listed_item(
        self, flow_id: str, archived: bool, in_time: Callable[[], bool] = lambda: True
    ) -> FlowSummary | None:
        """The flow's own item in the list of current (or archived) flows: the list alone says a consent status.

        The list has no filter by id, so the item is read beside a neighbour (DESIGN's cursors): the flow just
        older than it, then the one page of one item right before that one, which is this flow. At most three
        calls, whatever the service answers: never a walk through the list. Each call after the first is made
        only while `in_time()`, else UpstreamTimeout (a slow list kept a flow's page waiting for six in a row).
        """

        def one(starting_after: str | None = None, ending_before: str | None = None) -> FlowPage:
            if not in_time():
                raise UpstreamTimeout("The flow list answered too slowly to look the flow up in it", code="slow_list")
            return self.list_flows(1, archived, starting_after, ending_before)

        if older := self.list_flows(limit=1, archived=archived, starting_after=flow_id).first_id:
            around = one(ending_before=older)
        elif newer := one(ending_before=flow_id).first_id:
            around = one(starting_after=newer)
        else:  # the only flow of the list, if it is in it at all
            around = one()
        return next((item for item in around.items if item.id == flow_id), None)

    def create_flow(
        self, national_id: str, last_name: str, redirect_url: str, webhook_url: str | None = None
    ) -> CreatedFlow:
        body = {"nationalId": national_id, "lastName": last_name, "redirectUrl": redirect_url}
        if webhook_url:
            body["webhookUrl"] = webhook_url
        with _required_endpoint("create endpoint"):
            reply = self.transport.post("/api/flows", body)
        created = CreatedFlow.from_reply(reply.payload, reply.headers, reply.status)
        if not (created.flow_id or created.reference_id) and says_it_failed(reply.payload):
            # An error answered with a 2xx and no flow named: the service's refusal, not a flow without an id.
            problem = read_problem(reply.status, reply.payload)
            raise ValidationFailed(
                f"The Flow Service answered HTTP {reply.status} with an error",
                details=problem.details,
                status=reply.status,
                code=problem.code,
                reason=problem.reason,
            )
        return created

    def get_flow(self, flow_id: str) -> FlowDetail:
        """The full flow, from the spec's retrieve path `/api/applications/<id>`."""
        payload = self.transport.get(f"/api/applications/{quote(flow_id, safe='')}")
        with _read_as_sent():
            return FlowDetail.from_json(payload, flow_id)


@contextmanager
def _read_as_sent() -> Iterator[None]:
    """An answer of a shape the portal cannot read ("no data array") names the request it answered, for support:
    a code and the request id the service was sent (as an HTTP error does)."""
    try:
        yield
    except UpstreamProtocolError as error:
        error.code = error.code or "unreadable_answer"
        error.request_id = error.request_id or requestid.current()
        raise


@contextmanager
def _required_endpoint(what: str) -> Iterator[None]:
    """A 404 from a path the service must have means the portal is pointed at the wrong address."""
    try:
        yield
    except NotFound as error:
        raise EndpointNotFound(
            f"The Flow Service answered 404 for its {what}",
            status=error.status,
            code=error.code,
            request_id=error.request_id,
        ) from None


class Clock(NamedTuple):
    """Where the client reads the time and waits: the real monotonic clock, or a test's."""

    now: Callable[[], float]
    sleep: Callable[[float], None]


MONOTONIC = Clock(time.monotonic, time.sleep)


def _refuses_sandbox(settings: Settings) -> bool:
    return settings.environment == "production"


def _required(value: _T | None, name: str) -> _T:
    """A setting the auth mode requires: load_settings refuses to load without it, so None is a bug."""
    if value is None:
        raise ValueError(f"{name} is required with this FLOW_AUTH_MODE")
    return value


def build_provider(settings: Settings, clock: Clock = MONOTONIC) -> TokenProvider:
    """The token provider of FLOW_AUTH_MODE; `clock` (monotonic seconds and a sleep) times renewal and retries."""
    timeout = (settings.connect_timeout, settings.read_timeout)
    if settings.auth_mode == "self_signed_jwt":
        return SelfSignedJwtProvider(
            private_key=_required(settings.jwt_private_key, "FLOW_JWT_PRIVATE_KEY"),
            kid=_required(settings.jwt_kid, "FLOW_JWT_KID"),
            issuer=_required(settings.jwt_issuer, "FLOW_JWT_ISSUER"),
            audience=_required(settings.jwt_audience, "FLOW_JWT_AUDIENCE"),
            lifetime=settings.jwt_lifetime,
        )
    return ClientCredentialsProvider(
        token_url=_required(settings.token_url, "FLOW_TOKEN_URL"),
        client_id=_required(settings.client_id, "FLOW_CLIENT_ID"),
        client_secret=_required(settings.client_secret, "FLOW_CLIENT_SECRET"),
        scopes=settings.scopes,
        auth_method=settings.token_auth_method,
        leeway=settings.token_leeway,
        timeout=timeout,
        retries=settings.retries,
        retry_budget=settings.retry_budget,
        refuse_sandbox=_refuses_sandbox(settings),
        clock=clock.now,
        sleep=clock.sleep,
    )


def build_client(settings: Settings, clock: Clock = MONOTONIC) -> FlowClient:
    return FlowClient(
        Transport(
            settings.api_url,
            build_provider(settings, clock),
            connect_timeout=settings.connect_timeout,
            read_timeout=settings.read_timeout,
            retries=settings.retries,
            retry_budget=settings.retry_budget,
            refuse_sandbox=_refuses_sandbox(settings),
            clock=clock.now,
            sleep=clock.sleep,
        )
    )
