"""`FlowClient`: the portal's only way to the Flow Service."""

from urllib.parse import quote

from ..settings import Settings
from .auth import ClientCredentialsProvider, SelfSignedJwtProvider, TokenProvider
from .models import CreatedFlow, FlowDetail, FlowPage
from .transport import Transport


class FlowClient:
    def __init__(self, transport: Transport):
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
    ) -> FlowPage:
        """One page of flows, newest first; pass a cursor to move to the next or previous page."""
        params = {"limit": limit}
        if archived:
            params["archived"] = "true"
        if starting_after:
            params["starting_after"] = starting_after
        if ending_before:
            params["ending_before"] = ending_before
        return FlowPage.from_json(self.transport.get("/api/flows", params))

    def create_flow(
        self, national_id: str, last_name: str, redirect_url: str, webhook_url: str | None = None
    ) -> CreatedFlow:
        body = {"nationalId": national_id, "lastName": last_name, "redirectUrl": redirect_url}
        if webhook_url:
            body["webhookUrl"] = webhook_url
        return CreatedFlow.from_json(self.transport.post("/api/flows", body))

    def get_flow(self, flow_id: str) -> FlowDetail:
        """The full flow, from the spec's retrieve path `/api/applications/<id>`."""
        return FlowDetail.from_json(self.transport.get(f"/api/applications/{quote(flow_id, safe='')}"), flow_id)


def build_provider(settings: Settings) -> TokenProvider:
    timeout = (settings.connect_timeout, settings.read_timeout)
    if settings.auth_mode == "self_signed_jwt":
        return SelfSignedJwtProvider(
            private_key=settings.jwt_private_key,
            kid=settings.jwt_kid,
            issuer=settings.jwt_issuer,
            audience=settings.jwt_audience,
            lifetime=settings.jwt_lifetime,
        )
    return ClientCredentialsProvider(
        token_url=settings.token_url,
        client_id=settings.client_id,
        client_secret=settings.client_secret,
        scopes=settings.scopes,
        auth_method=settings.token_auth_method,
        leeway=settings.token_leeway,
        timeout=timeout,
    )


def build_client(settings: Settings) -> FlowClient:
    return FlowClient(
        Transport(
            settings.api_url,
            build_provider(settings),
            connect_timeout=settings.connect_timeout,
            read_timeout=settings.read_timeout,
            retries=settings.retries,
            retry_budget=settings.retry_budget,
        )
    )
