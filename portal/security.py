"""Response headers that make the strict CSP work, the Host header check in front of the app, and audited GETs
that a link on another site cannot make in someone's name."""

import ipaddress
import re
from collections.abc import Callable
from functools import wraps
from urllib.parse import urlsplit

from flask import Flask, g, redirect, render_template, request, session
from werkzeug.exceptions import BadRequest
from werkzeug.sansio.utils import host_is_trusted
from werkzeug.wsgi import get_host

from .flowlinks import return_address, sealed_address
from .news import BACKGROUND_ENDPOINTS

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)


# The portal uses none of these browser features; a page (or an injected script) cannot ask for them. Only names
# Chromium knows: it warns on every page about one it does not (`bluetooth`).
PERMISSIONS_POLICY = (
    "camera=(), microphone=(), geolocation=(), payment=(), usb=(), serial=(), "
    "accelerometer=(), gyroscope=(), magnetometer=(), display-capture=(), interest-cohort=()"
)
HSTS = "max-age=31536000; includeSubDomains"


def security_headers(https: bool) -> dict[str, str]:
    """The headers every answer carries; HSTS when the public URL is https (never fall back to plain http)."""
    headers = {
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",
        "X-Frame-Options": "DENY",
        "Permissions-Policy": PERMISSIONS_POLICY,
    }
    return headers | ({"Strict-Transport-Security": HSTS} if https else {})


# Session key: the page a sign-in goes on to is the one a link on another site chose (its `next`). The sign-in's own
# redirect is same-origin, so without it such a link, followed while signed out, opened an export or a search by
# national id under the person's name once they signed in, without asking.
LED_FROM_ELSEWHERE = "led_from_elsewhere"
# Requests that are not the page a sign-in goes on to, and must not take its mark: files, background questions.
_NOT_A_PAGE = {"static", *BACKGROUND_ENDPOINTS}


def lead_on_as_from_elsewhere() -> None:
    """Mark the next page this session opens (where a sign-in goes on to) as one a link on another site led to."""
    session[LED_FROM_ELSEWHERE] = True


def _take_the_mark() -> None:
    """The page after such a sign-in reads as led here from elsewhere (`_carry_the_mark` says until when)."""
    if request.endpoint not in _NOT_A_PAGE and LED_FROM_ELSEWHERE in session:  # a file's answer never varies by cookie
        g.led_from_elsewhere = True


def _carry_the_mark(response):
    """The mark lasts through the portal's own redirects (an id taken out of the address first) to the page answered."""
    if g.get("led_from_elsewhere") and not 300 <= response.status_code < 400:
        session.pop(LED_FROM_ELSEWHERE, None)
    return response


def followed_from_another_site() -> bool:
    """Whether a link or a form on another site led the browser here: another registrable domain, or another origin
    of the same one (a wiki or an upload host beside the portal), also by way of the sign-in page. Fetch Metadata says
    so; a browser that sends none (Safari before 16.4, Firefox before 90, some privacy proxies) may still name where it
    came from in `Origin` or `Referer`. A client that sends none of them is taken as coming from here."""
    if g.get("led_from_elsewhere"):
        return True
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None:
        return fetch_site in ("cross-site", "same-site")
    came_from = request.headers.get("Origin") or request.headers.get("Referer")
    if came_from is None:
        return False
    try:
        return urlsplit(came_from).netloc.lower() != request.host.lower()
    except ValueError:  # "http://[": no address of this portal's, whatever it is
        return True


def asking_to_continue(address: str | None = None):
    """A page that asks whether to go on to this address (or `address`), instead of doing what it does."""
    return render_template("continue.html", address=address or request.full_path.rstrip("?"))


def asked_here(view: Callable) -> Callable:
    """For a GET recorded in the audit log under the signed-in person (an export): a link on another site does not
    do it in their name (session cookies are SameSite=Lax, sent with such a link); the person is asked first."""

    @wraps(view)
    def checked(*args, **kwargs):
        if not followed_from_another_site():
            return view(*args, **kwargs)
        here = request.full_path.rstrip("?")
        if return_address(here) != here:  # a national id in the address: out of it (history, Referer) first
            # its values sealed, a mistyped id's too (the filters kept); one in a parameter's name stays: the path alone
            sealed = sealed_address(here, shapes=True)
            return redirect(sealed if return_address(sealed) == sealed else request.path)
        return asking_to_continue()

    return checked


# Answers no cache may keep: pages, what they ask in the background, and plain text (metrics, probes); files are kept.
NOT_KEPT_BY_CACHES = ("text/html", "application/json", "text/plain")


def init_app(app: Flask, https: bool) -> None:
    headers = security_headers(https)
    app.before_request(_take_the_mark)
    app.after_request(_carry_the_mark)

    @app.after_request
    def secure_headers(response):
        for name, value in headers.items():
            response.headers.setdefault(name, value)
        if response.mimetype in NOT_KEPT_BY_CACHES:
            response.headers.setdefault("Cache-Control", "no-store")
        return response


class TrustedHosts:
    """WSGI middleware: a request whose Host is not one of the portal's own is a plain 400.

    Checked before Flask sees the request, so no page, redirect or link is ever built from a foreign host.
    """

    def __init__(self, app, hosts: tuple[str, ...], headers: dict[str, str]):
        self.app = app
        self.hosts = [host for host in hosts if not host.startswith("[")]
        # IPv6 literals by address: werkzeug's check cuts a trusted name at its first ":", so "[::1]" never matched.
        self.addresses = {_ipv6(host) for host in hosts if host.startswith("[")} - {None}
        self.headers = headers

    def __call__(self, environ, start_response):
        if not self._trusted(environ):
            refusal = BadRequest("This portal does not answer to that host name.").get_response(environ)
            refusal.headers.update(self.headers | {"Cache-Control": "no-store"})
            return refusal(environ, start_response)
        return self.app(environ, start_response)

    def _trusted(self, environ) -> bool:
        literal = _IPV6_HOST.fullmatch(environ.get("HTTP_HOST", ""))
        if literal:
            port = literal["port"]
            return _ipv6(literal["address"]) in self.addresses and (port is None or 0 < int(port) < 65536)
        return host_is_trusted(get_host(environ).lower(), self.hosts)  # a host name is the same in any case


_IPV6_HOST = re.compile(r"\[(?P<address>[0-9A-Fa-f:.]+)\](?::(?P<port>[0-9]{1,5}))?")


def _ipv6(text: str) -> ipaddress.IPv6Address | None:
    try:
        return ipaddress.IPv6Address(text.strip("[]"))
    except ValueError:
        return None
