"""A flow's id where it goes into a URL: the flow's pages, their forms, the list's page positions, notices.

A flow id in the spec's form (a UUID) goes in as it is. A service that names flows otherwise may name one by a
national id; masked on every page, it would still stand in the address bar, the browser's history, a Referer
and the server's access log. Such an id goes into URLs sealed instead: `~` and the id encrypted with a key
derived from PORTAL_SECRET_KEY (AES-SIV with a random nonce: another seal every time, so no one can have the portal
seal a guess and compare it with a seal seen on a page, in a history or a log; a bookmark still opens). A sealed id
this portal did not make, or made under another secret key, opens nothing (404).

The same seal keeps other text that holds a national id out of addresses: search text and filters (`sent_whole`:
one typed whole is redirected to a sealed form) and a page's own address in its `next` fields (`return_address`,
opened and sealed again on the way back by `sealed_address`). Where a key must stay the same for the same flow (a
reveal grant in the session cookie), `cookie_key` gives a keyed hash instead.
"""

import base64
import binascii
import hmac
import os
import re
from functools import lru_cache
from urllib.parse import parse_qsl, quote, unquote, unquote_plus, urlencode, urlsplit, urlunsplit

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESSIV
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from flask import current_app, request, url_for
from werkzeug.exceptions import HTTPException
from werkzeug.routing import BaseConverter, ValidationError

from . import current
from .masking import mask_flow_id

SEALED = "~"  # never in a flow id the portal opens (FLOW_ID: letters, digits, - and _)
# The shape of a Nordic national id (digits, separators, a Finnish century sign or check letter): a
# mistyped one is not searched as a name; it stays in the box to be corrected, in the address only sealed.
NATIONAL_ID_SHAPE = re.compile(r"[0-9]{6,8}[ +A-Fa-fU-Yu-y-]?[0-9]{3,4}[0-9A-Ya-y]")
_NONCE_BYTES = 16
_KEY_PURPOSE = b"flow-portal: flow ids in URLs"
_SEAL_TEXT = re.compile(r"[A-Za-z0-9_-]+")  # base64url without padding, as `in_url` writes it


def hidden_in_urls(flow_id: str) -> bool:
    """Whether a person reading this id would see a national id in it (the pages show it masked)."""
    return mask_flow_id(flow_id) != flow_id


def in_url(flow_id: str, secret_key: str) -> str:
    """How `flow_id` stands in a URL: as it is, or sealed (another seal every time)."""
    return _sealed_once(flow_id, secret_key) if hidden_in_urls(flow_id) else flow_id


def _sealed_once(text: str, secret_key: str) -> str:
    """Sealed with a random nonce: another seal every time. With one seal for each id, anyone able to have a value
    sealed (a filter or a flow address typed with it, a signed-out request's way back through sign-in) could match a
    seal found on a page, in a history or a log against the seals of guesses, unthrottled and unaudited."""
    nonce = os.urandom(_NONCE_BYTES)
    return _seal_text(nonce + _cipher(secret_key).encrypt(text.encode(), [nonce]))


def _seal_text(sealed: bytes) -> str:
    return SEALED + base64.urlsafe_b64encode(sealed).rstrip(b"=").decode("ascii")


def _opened(sealed: bytes, secret_key: str) -> str:
    """What a seal holds, made by `_sealed_once` or by the one-seal-per-id form of earlier versions (links in
    bookmarks and sent notices); ValueError or InvalidTag when neither made it."""
    cipher = _cipher(secret_key)
    try:
        return cipher.decrypt(sealed, None).decode()
    except InvalidTag:
        nonce, rest = sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:]
        return cipher.decrypt(rest, [nonce]).decode()


def from_url(text: str, secret_key: str) -> str | None:
    """The flow id a URL names: `text` itself, or what a sealed one holds; None for a seal this portal did not make.

    Only the seal exactly as `in_url` writes it opens: the base64 decoder alone would also take it with padding, a
    character it skips or other unused bits at the end.
    """
    if not text.startswith(SEALED):
        return text
    encoded = text[len(SEALED) :]
    if not _SEAL_TEXT.fullmatch(encoded):
        return None
    try:
        sealed = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        opened = _opened(sealed, secret_key)
    except (binascii.Error, ValueError, InvalidTag):  # ValueError: too short for AES-SIV, or not UTF-8
        return None
    return opened if _seal_text(sealed) == text else None


def url_form(text: str) -> str:
    """`in_url` under this app's secret key (templates: `| in_url`, for a flow id in a query string)."""
    if not hidden_in_urls(text):  # a list's every row comes here: no look-up of the settings for a UUID
        return text
    return in_url(text, current.settings().secret_key)


def cookie_key(flow_id: str) -> str:
    """The flow as a key in the session cookie (signed, not encrypted): as it is, or a keyed hash of it when it reads
    as a national id. One for each flow, where a seal is another every time."""
    if not hidden_in_urls(flow_id):
        return flow_id
    key = current.settings().secret_key.encode()
    return "#" + hmac.new(key, b"flow-in-cookie:" + flow_id.encode(), "sha256").hexdigest()[:32]


def sealed_anew(text: str) -> str:
    """`text` sealed with a random nonce under this app's secret key: for an address anyone could have had made."""
    return _sealed_once(text, current.settings().secret_key)


def from_url_form(text: str) -> str | None:
    return from_url(text, current.settings().secret_key)


def sent_whole(value: str, sent: str) -> bool:
    """Whether `value` (a query parameter as read) reads as a national id and `sent` gave it as typed, not sealed:
    the view redirects to the sealed address, to take it out of the address bar and the browser's history."""
    sent = sent.strip()
    return hidden_in_urls(value) and not (sent.startswith(SEALED) and from_url_form(sent) == value)


def left_untidy(args, defaults: dict[str, str] | None = None) -> bool:
    """Whether a query string holds a parameter the page's own links leave out, sent empty or at its default: a
    GET form sends every field, filled or not. The view redirects to the tidy address, which a person can read,
    share and find in the browser's history."""
    defaults = defaults or {}
    return any(not value.strip() or value == defaults.get(name) for name, value in args.items(multi=True))


def sealed_address(path: str, shapes: bool = False) -> str:
    """A local address with each path segment and query value that reads as a national id sealed: where a page's
    sealed `next` leads back to, so that the way back does not hold the id either (the pages open what they seal).
    With `shapes`, a query value with an id's shape that is no valid id (a mistyped one, a numeric reference) is
    sealed too: for an address taken out of the address bar, whose free-text filters open seals (`asked_here`)."""
    parts = urlsplit(path)
    segments = [quote(url_form(unquote(segment)), safe="~") for segment in parts.path.split("/")]
    query = [(name, _sealed_value(value, shapes)) for name, value in parse_qsl(parts.query, keep_blank_values=True)]
    return urlunsplit(("", "", "/".join(segments), urlencode(query), ""))


def _sealed_value(value: str, shapes: bool) -> str:
    if shapes and not hidden_in_urls(value) and NATIONAL_ID_SHAPE.fullmatch(value.strip()):
        return sealed_anew(value)
    return url_form(value)


def holds_an_id_shape(path: str) -> bool:
    """Whether a path segment or query value of a local address has the shape of a national id, valid or mistyped
    (the mask leaves some shapes of a mistyped one whole: ten bare digits)."""
    parts = urlsplit(path)
    values = [unquote(segment) for segment in parts.path.split("/")]
    values += [value for _name, value in parse_qsl(parts.query, keep_blank_values=True)]
    return any(NATIONAL_ID_SHAPE.fullmatch(value.strip()) for value in values)


def is_local_path(target: str) -> bool:
    """A path on this portal (a browser would not read it as another site's: no `//`, no backslash, no scheme)."""
    if not (target.startswith("/") and not target.startswith("//") and "\\" not in target and target.isprintable()):
        return False
    parts = urlsplit(target)
    return not parts.scheme and not parts.netloc


def return_address(path: str) -> str:
    """A page's own address (path and query string) as a `next` field carries it back: sealed when, decoded, it
    holds a national id (a cursor or a search typed into the address bar), or a mistyped one; `auth.safe_next`
    opens it."""
    if not (hidden_in_urls(unquote_plus(path)) or holds_an_id_shape(path)):  # %20 or + would hide them from the mask
        return path
    return _sealed_once(path, current.settings().secret_key)


def back_to_this_page() -> str:
    """Where a form on every page (the language switch) sends the person back: this page; after a form was answered,
    the page that form is on (an answer to a POST cannot be loaded again), else the flow list."""
    if request.method == "GET":
        return return_address(request.full_path)
    try:  # the same address read (a form may post to a route of its own, as /admin/users does)
        current_app.url_map.bind_to_environ(request.environ).match(request.path, method="GET")
    except HTTPException:  # no page to read there (404, 405) or one that redirects elsewhere
        return url_for("flows.index")
    return return_address(request.path)


@lru_cache(maxsize=4)
def _cipher(secret_key: str) -> AESSIV:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_KEY_PURPOSE).derive(secret_key.encode())
    return AESSIV(key)


class FlowIdConverter(BaseConverter):
    """`<flow:flow_id>`: the view gets the flow id, url_for writes it sealed where it must be."""

    def to_python(self, value: str) -> str:
        flow_id = from_url_form(value)
        if flow_id is None:
            raise ValidationError()  # no route matches: 404
        return flow_id

    def to_url(self, value) -> str:
        return super().to_url(url_form(str(value)))
