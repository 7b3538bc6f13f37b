"""The searched flow list's state in the query string: which values are usable, and the links between pages.

The flow list is live from the service until a search or filter is asked for; then it comes from
the flow index. A national id is never kept in an address: the page turns it into its keyed hash
(`person`) before showing anything. Other search text that holds one (a flow id a service made of one, a name
beside it) goes into links sealed, as flow ids do (`flowlinks`).
"""

from collections.abc import Iterable
from dataclasses import dataclass, replace
from urllib.parse import quote_plus

from flask import flash, get_flashed_messages, url_for
from flask_babel import gettext as _
from werkzeug.datastructures import MultiDict

from .flowindex.keys import NationalId, read_national_id
from .flowindex.search import FlowSearch, Position, flows_named, person_searched
from .flowlinks import NATIONAL_ID_SHAPE, SEALED, from_url_form, sealed_anew, sent_whole, url_form
from .forms import LONGEST_SEARCH, FlowSearchForm
from .i18n import as_sentence
from .masking import id_spellings_in_text, mask_text

# Parameters that ask for the index, with their values that do not (the live list's defaults).
INDEX_PARAMETERS = {
    "q": ("",),
    "person": ("",),
    "born": ("",),
    "status": ("",),
    "lifecycle": ("",),
    "country": ("",),
    "from": ("",),
    "to": ("",),
    "incidents": ("",),
    "sort": ("", "created"),
    "order": ("", "newest"),
    "archived": ("", "true", "false"),  # the live list shows current or archived flows, not both
}
# The order parameters are written in links, and the values a link leaves out.
DEFAULTS = {"archived": "", "sort": "created", "order": "newest", "limit": "10"}
POSITIONS = ("after", "before")
# What the search box sends on (`flows.search_sent`): its own fields, each once. A text one character past the
# search's limit, so the list says it is too long rather than search a part of it; a choice at most as long as
# LONGEST_SENT_CHOICE written in an address. Together within the request line gunicorn reads (4 KiB; past it, a
# bare 414 page of its own).
SENT_FIELDS = frozenset({*INDEX_PARAMETERS, "limit"})
LONGEST_SENT_CHOICE = 100


def search_box_fields(form: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The search box's fields as sent, for its address: the first value of each field the box has, stripped, cut
    to what an address holds, empty ones and the list's defaults left out."""
    kept: dict[str, str] = {}
    for name, value in form:
        value = value.strip()
        if name in SENT_FIELDS and name not in kept and value and value != DEFAULTS.get(name):
            kept[name] = value[: LONGEST_SEARCH + 1] if name == "q" else _within_an_address(value, LONGEST_SENT_CHOICE)
    return list(kept.items())


def _within_an_address(value: str, longest: int) -> str:
    written = 0
    for end, character in enumerate(value):
        written += len(quote_plus(character))
        if written > longest:
            return value[:end]
    return value


FILTERS = ("status", "lifecycle", "country", "incidents", "from", "to", "sort", "order", "limit")
LEFT_OUT = "left-out:"  # a flash category: a value left out of a search, said under its filter (`tie_left_out`)
MAX_AUDIT_TARGET = 255


def wants_index(args) -> bool:
    """True when the query string asks for a search or a filter the live list cannot answer."""
    return any(args.get(name, "").strip() not in plain for name, plain in INDEX_PARAMETERS.items())


@dataclass(frozen=True)
class SearchQuery:
    """A validated search: its parameters (as they go into links) and what they mean."""

    args: dict[str, str]
    search: FlowSearch
    limit: int
    after: Position | None
    before: Position | None
    national_id: NationalId | None  # the search box held a national id (to be looked up by its hash)
    form: FlowSearchForm
    mistyped_id: bool  # the box held what looks like a national id but is none: kept there to be corrected
    named_flow: str | None = None  # the one flow whose reference or flow id (or its start) the search text is
    # The box held a valid national id search cannot read (two ids, "151086.95088"): left out of the page
    unread_id: bool = False

    @property
    def nothing_searched(self) -> bool:
        """The box held an id search cannot use, so nothing was searched (the whole list was no answer either)."""
        return self.mistyped_id or self.unread_id

    @property
    def positioned(self) -> bool:
        return bool(self.after or self.before)

    @property
    def text(self) -> str | None:
        return self.search.text

    @property
    def filtered(self) -> bool:
        """Whether a filter or an order beside the search box is set (the filters are then shown open)."""
        return any(self.args.get(name) not in (None, "", DEFAULTS.get(name)) for name in FILTERS)

    def url(self, endpoint: str = "flows.index", **changes) -> str:
        """This search's address with `changes` (None drops a parameter), defaults left out."""
        args = {name: value for name, value in self.args.items() if name not in POSITIONS} | changes
        kept = {name: value for name, value in args.items() if value not in (None, "", DEFAULTS.get(name))}
        if kept.get("q"):  # a mistyped id sealed too, though the mask would not hide every shape of one
            kept["q"] = sealed_anew(kept["q"]) if self.mistyped_id else url_form(kept["q"])
        return url_for(endpoint, **kept)

    def page_url(self, position: Position, direction: str) -> str:
        return self.url(**{direction: position.token})

    def export_url(self) -> str:
        return self.url("flows.export", limit=None)

    def with_person(self, keyed_hash: str) -> "SearchQuery":
        """The same search for the national id's keyed hash instead of the id itself."""
        return replace(
            self,
            args={**self.args, "q": "", "person": keyed_hash},
            search=replace(self.search, text=None, person=keyed_hash),
            national_id=None,
        )

    def describe(self) -> str:
        """The search in a line for the audit log: never a national id, only its hash's beginning."""
        shown = {name: value for name, value in self.args.items() if value and name not in (*POSITIONS, "limit")}
        if "person" in shown:
            shown["person"] = f"hash:{shown['person'][:12]}"
        if self.nothing_searched:  # searched without it (the box only showed it): nor is it in the log
            shown.pop("q", None)
        elif "q" in shown:
            shown["q"] = mask_text(shown["q"])
        return " ".join(f"{name}={value}" for name, value in sorted(shown.items()))[:MAX_AUDIT_TARGET] or "all"


@dataclass(frozen=True)
class Problem:
    """A value of a search that could not be used: what to say, and the filter it is about (None: the search's)."""

    message: str
    field: str | None = None

    def flash(self) -> None:
        """Said on the page the search goes on to: under its filter there (`tie_left_out`), else at the top."""
        flash(self.message, f"{LEFT_OUT}{self.field}" if self.field else "warning")


def left_out_messages() -> dict[str, list[str]]:
    """The messages of values left out (flashed on the way here under LEFT_OUT), by the field they are about. The
    page's top leaves out those its template says under their fields (`tied_fields`)."""
    left_out: dict[str, list[str]] = {}
    flashed: list[tuple[str, str]] = get_flashed_messages(with_categories=True)  # type: ignore[assignment]
    for category, message in flashed:
        if category.startswith(LEFT_OUT):
            left_out.setdefault(category.removeprefix(LEFT_OUT), []).append(message)
    return left_out


def tie_left_out(form: FlowSearchForm) -> set[str]:
    """The messages of values left out of the search (flashed on the way here) as the errors of their filters, so
    that each is said under its field, tied to it for a screen reader (an accessibility review); the filters tied.
    A mistyped national id kept in the search box is tied to the box (a keyboard walk: said at the top of the page,
    it left the focus there, away from the digit to fix)."""
    left_out = left_out_messages()
    tied = set()
    for field in form:
        if field.name in left_out and field.name in (*FILTERS, "q"):
            field.errors = [*field.errors, *left_out[field.name]]
            tied.add(field.name)
    return tied


def read_search(args) -> tuple[SearchQuery, list[Problem]]:
    """The search in `args`, with every unusable value dropped and a message saying so."""
    values, problems = _opened({name: value.strip() for name, value in args.items()})
    form = FlowSearchForm(formdata=MultiDict(values))
    form.validate()
    for field in form:
        for error in field.errors:
            problem = as_sentence(error)  # some catalogues end WTForms' words without a full stop
            message = _("%(field)s: %(problem)s That value was left out.", field=field.label.text, problem=problem)
            problems.append(Problem(message, field.name if field.name in FILTERS else None))
    raw = {field.name: field.raw_data[0].strip() for field in form if field.raw_data and not field.errors}
    after, before = Position.parse(raw.get("after")), Position.parse(raw.get("before"))
    if (raw.get("after") and not after) or (raw.get("before") and not before) or (after and before):
        problems.append(Problem(_("That page position is not valid; showing the first page.")))
        after = before = None
    raw = {name: value for name, value in raw.items() if name not in POSITIONS}
    if raw.get("q") and raw.get("person"):  # typed into the box of a person's results: a new search, the text's
        del raw["person"]
    raw |= {name: position.token for name, position in (("after", after), ("before", before)) if position}
    text = raw.get("q") or None
    national_id = (person_searched(text) or _one_id_among_words(text)) if text else None
    named = flows_named(text) if text and national_id is None else []
    # About one random flow id in 40 begins with eight digits, and its start as the lists show it ("11595624-8854")
    # has a Swedish personnummer's shape: the flows it starts win (read as a mistyped id, it found nothing; CI).
    # A valid id with a character more ("15108695088x") is text that holds one, sealed in the box: as a mistyped id
    # it was shown whole there (an attack).
    mistyped_id = bool(
        text and national_id is None and NATIONAL_ID_SHAPE.fullmatch(text) and not named and not _holds_an_id(text)
    )
    # Ids that search cannot read (a new user's walk: the box then showed the address's seal)
    unread_id = bool(text and national_id is None and not named and not mistyped_id and _only_ids(text))
    if unread_id:
        form.q.data = ""  # a valid id is never in a page whole; the page says why the box is empty
    elif form.q.data and not mistyped_id:  # the box shows it as the address holds it (sealed when it holds an id),
        form.q.data = url_form(form.q.data)  # as the events box; a mistyped id as typed, for its digit to be fixed
    query = SearchQuery(
        args=raw,
        search=_flow_search(form, raw, None if national_id or mistyped_id or unread_id else text),
        limit=int(raw.get("limit") or DEFAULTS["limit"]),
        after=after,
        before=before,
        national_id=national_id,
        form=form,
        mistyped_id=mistyped_id,
        named_flow=named[0] if len(named) == 1 else None,
        unread_id=unread_id,
    )
    return query, problems


def _only_ids(text: str) -> bool:
    """Whether the text is national ids and what stands between them, as masking reads it: "151086.95088", two ids;
    not a reference that holds one ("LA-131052-308T", searched as text)."""
    masked = mask_text(text)
    return masked != text and not any(character.isalpha() for character in masked)


def _holds_an_id(text: str) -> bool:
    """Whether the text holds a valid national id among other characters, as masking reads it."""
    return any(read_national_id(spelling) for spellings in id_spellings_in_text(text) for spelling in spellings)


def _one_id_among_words(text: str) -> NationalId | None:
    """The national id in "Nordmann 15108695088", as staff paste a person: the id alone finds the person's flows
    (and the words beside it, searched as text, would find nothing). None unless the numbers among the words make
    one valid id, together or exactly one of them alone."""
    words = text.replace(",", " ").split()
    numbers = [word for word in words if any(character.isdigit() for character in word)]
    if len(numbers) == len(words):
        return None  # all of it is numbers: the whole text was read as an id already
    together = person_searched(" ".join(numbers))  # "Bjørnstad 151086 95088": written with a space
    found = [national_id for national_id in map(person_searched, numbers) if national_id]
    return together or (found[0] if len(found) == 1 else None)


def _opened(values: dict[str, str]) -> tuple[dict[str, str], list[Problem]]:
    """The values with a sealed search text opened; a seal this portal did not make is left out, with a word."""
    if not values.get("q", "").startswith(SEALED):
        return values, []
    text = from_url_form(values["q"])
    if text is None:  # as the events list says
        return values | {"q": ""}, [Problem(_("A filter value was not valid and was left out."))]
    return values | {"q": text}, []


def typed_whole(query: SearchQuery, sent: str) -> bool:
    """Whether the search text holds a national id, or is a mistyped one, and was sent as typed, not sealed: out of
    the address with it."""
    if query.mistyped_id:
        return not sent.strip().startswith(SEALED)  # a seal was opened to read it: one this portal made
    return sent_whole(query.args.get("q") or "", sent)


def _flow_search(form: FlowSearchForm, raw: dict[str, str], text: str | None) -> FlowSearch:
    searching = bool(text or raw.get("person") or raw.get("born"))
    archived = raw.get("archived") or ("all" if searching else "false")  # a person's flows: all of them
    return FlowSearch(
        text=text,
        person=raw.get("person") or None,
        born=_valid(form.born),
        status=raw.get("status") or None,
        lifecycle=raw.get("lifecycle") or None,
        country=raw.get("country") or None,
        created_from=_valid(form.created_from),
        created_to=_valid(form.created_to),
        incidents={"yes": True, "no": False}.get(raw.get("incidents", "")),
        archived={"true": True, "false": False, "all": None}[archived],
        sort=raw.get("sort") or DEFAULTS["sort"],
        oldest_first=raw.get("order") == "oldest",
    )


def _valid(field):
    return None if field.errors else field.data
