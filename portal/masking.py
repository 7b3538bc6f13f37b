"""The one masking policy for national ids: on pages, in raw JSON, events, exports and logs.

A mask shows the birth-date part of an id and its separator (or century sign), never the individual
number or the check digits: given the birth date there remain hundreds of valid ids with the same mask,
so the mask tells a reader no more than the birth date does. Pure functions, no Flask.
"""

import re
import unicodedata
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, TypeVar, overload

from stdnum import luhn
from stdnum.fi import hetu
from stdnum.no import fodselsnummer

MASK = "•"
EMPTY = "—"
NUMBER_MASK_LENGTH = 11

# A whole value known to be a national id (it sits under a national-id key). The hidden part may already
# be masked, so that masking twice changes nothing.
_ID_SHAPES = tuple(
    re.compile(pattern, re.ASCII | re.IGNORECASE)
    for pattern in (
        r"(?P<date>[0-9]{6})(?P<sep>[-+A-FU-Y])(?P<rest>[0-9•]{3}[0-9A-Y•])",  # FI DDMMYY-NNNC, SE YYMMDD-NNNN
        r"(?P<date>[0-9]{8})(?P<sep>[-+ ]?)(?P<rest>[0-9•]{4})",  # SE YYYYMMDD-NNNN, YYYYMMDDNNNN
        r"(?P<date>[0-9]{6})(?P<sep> ?)(?P<rest>[0-9•]{5})",  # NO DDMMYYNNNCC, DDMMYY NNNCC
        r"(?P<date>[0-9]{6})(?P<sep> ?)(?P<rest>[0-9•]{4})",  # SE YYMMDDNNNN
    )
)

# Ids inside free text. Standing alone (not glued to letters or digits), a separator form and 11 digits (also
# written DDMMYY NNNNN or with another separator) are always masked; a bare 10 or 12 digit run only when it is
# a valid Swedish number, so that timestamps and amounts stay readable. Glued to letters ("NO15108695088",
# "ref811218-9876abc") an id is masked when it is a valid one, so hashes and UUIDs keep their digits.
# A separator is one to three of: hyphen, plus, any Unicode dash or minus (fullwidth too), any space (no-break,
# thin, zero width, tab), / . and _.
# Invisible format characters too (a soft hyphen, joiners, a word joiner): between digits they show nothing.
_SEP = (
    "[-+\u2010-\u2015\u2212\ufe58\ufe63\uff0b\uff0d\u00a0\u2000-\u200d\u202f\u205f\u3000\t /._"
    "\u00ad\u2060-\u2064\ufeff]{1,3}"
)
# Not glued to letters, digits or a hyphen: a UUID's groups ("81387407-781e-…") are no id by shape alone.
_ALONE_BEFORE = r"(?<![0-9A-Za-z-])"
_ALONE_AFTER = r"(?![0-9A-Za-z-])"
_SEPARATED_IN_TEXT = re.compile(
    _ALONE_BEFORE
    + rf"(?P<date>[0-9]{{6}}|[0-9]{{8}})(?P<sep>{_SEP}|(?<=[0-9]{{6}})[A-FU-Y])(?P<rest>[0-9]{{3}}[0-9A-Y])"
    + _ALONE_AFTER,
    re.ASCII | re.IGNORECASE,
)
_NORWEGIAN_IN_TEXT = re.compile(
    _ALONE_BEFORE + rf"(?P<date>[0-9]{{6}})(?P<sep>(?:{_SEP})?)(?P<rest>[0-9]{{5}})" + _ALONE_AFTER, re.ASCII
)
_SWEDISH_ISO_DATE_IN_TEXT = re.compile(  # 1981-12-18-9876: the birth date written as a date
    rf"(?<![0-9])(?P<date>(?:19|20)[0-9]{{2}}-[0-9]{{2}}-[0-9]{{2}})(?P<sep>{_SEP})(?P<rest>[0-9]{{4}})(?![0-9])",
    re.ASCII,
)

# Every shape above begins with six digits in a row, or with a birth date written 1981-12-18: text holding
# neither holds no id (one search, where the substitutions below cost six; most text is short and has none).
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.ASCII | re.IGNORECASE)
_MAYBE_AN_ID = re.compile(rf"[0-9]{{6}}|[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}|(?:[0-9](?:{_SEP})?){{11}}", re.ASCII)
# Eleven digits with separators anywhere among them ("1510-8695088", "15-10-86-95088", "1510 – 8695088"), as the
# search reads a Norwegian id too: masked when they are a valid one. (Ten or twelve digits written so are as often a
# phone number or a time: "070-123 45 69", "2026-11 28 08 31".)
_SCATTERED_IN_TEXT = re.compile(rf"(?<![0-9A-Za-z])[0-9](?:(?:{_SEP})?[0-9]){{10}}(?![0-9A-Za-z])", re.ASCII)
_OTHER_DIGIT = re.compile(r"(?![0-9])\d")  # a decimal digit of another script


def _swedish(number: str) -> bool:
    """A valid personnummer or samordningsnummer (day + 60), written with any separator."""
    digits = "".join(char for char in number if char.isdigit())[-10:]
    if len(digits) != 10 or not luhn.is_valid(digits):
        return False
    month, day = int(digits[2:4]), int(digits[4:6])
    return 1 <= month <= 12 and (1 <= day <= 31 or 61 <= day <= 91)


def _norwegian(number: str) -> bool:
    """A valid fødselsnummer or D-number, or one of the synthetic Tenor series (month + 80) the portal takes too."""
    digits = "".join(char for char in number if char.isdigit())
    if fodselsnummer.is_valid(digits):
        return True
    tenor = len(digits) == 11 and 81 <= int(digits[2:4]) <= 92
    return tenor and digits[-2:] == fodselsnummer.calc_check_digit1(digits) + fodselsnummer.calc_check_digit2(digits)


def _finnish(number: str) -> bool:
    """A valid henkilötunnus, the synthetic series (individual number 900–999) included."""
    return hetu.is_valid(number[:6] + number[-5:], allow_temporary=True)


# Glued: each shape with the check that tells an id from digits that merely look like one.
_GLUED_IN_TEXT = (
    (re.compile(rf"(?<![0-9])(?P<date>[0-9]{{6}})(?P<sep>(?:{_SEP})?)(?P<rest>[0-9]{{5}})(?![0-9])"), _norwegian),
    (
        re.compile(rf"(?<![0-9])(?P<date>[0-9]{{6}}|[0-9]{{8}})(?P<sep>(?:{_SEP})?)(?P<rest>[0-9]{{4}})(?![0-9])"),
        _swedish,
    ),
    (_SWEDISH_ISO_DATE_IN_TEXT, _swedish),
    (
        # A check letter ends the id whatever follows ("131052-308T0"); a check digit glued to more is no id.
        re.compile(
            r"(?<![0-9])(?P<date>[0-9]{6})(?P<sep>[-+A-FU-Y])(?P<rest>[0-9]{3}[0-9A-Y])(?:(?<=[A-Y])|(?![0-9]))",
            re.IGNORECASE,
        ),
        _finnish,
    ),
)

# Every shape `mask_text` hides, for finding the ids a text names.
_PATTERNS_IN_TEXT = (
    _SEPARATED_IN_TEXT,
    _NORWEGIAN_IN_TEXT,
    *(pattern for pattern, _valid in _GLUED_IN_TEXT),
    _SCATTERED_IN_TEXT,
)

# Keys naming a national id, compared without case, accents or separators.
_ID_KEY_NAMES = frozenset(
    {
        "nationalid",
        "nationalidnumber",
        "nationalidentifier",
        "nationalidentitynumber",
        "nationalidentificationnumber",
        "socialsecuritynumber",
        "socialsecurityno",
        "personnummer",
        "personnr",
        "samordningsnummer",
        "coordinationnumber",
        "personnumber",
        "personalnumber",
        "personalidnumber",
        "personalidentitynumber",
        "personalidentificationnumber",
        "personalidentitycode",
        "identitynumber",
        "henkilotunnus",
        "fodselsnummer",
        "fodselsnr",
    }
)
# Short names match only as a whole key or its last word ("applicant_ssn", "customerSSN").
_SHORT_ID_KEY_NAMES = frozenset({"ssn", "hetu", "fnr", "pnr"})
_FOLDED = str.maketrans({"ø": "o", "Ø": "O", "æ": "ae", "Æ": "AE", "ð": "d", "Ð": "D", "þ": "th", "Þ": "TH", "ß": "ss"})
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def mask_national_id(value) -> str:
    """The id with only its birth-date part and separator shown: "010190•••••"; "—" for none."""
    if value is None or value == "":
        return EMPTY
    if not isinstance(value, str):
        return MASK * NUMBER_MASK_LENGTH  # a JSON number has lost any leading zero: its shape tells nothing
    text = value.strip()
    for shape in _ID_SHAPES:
        match = shape.fullmatch(text)
        if match:
            return _masked(match)
    return MASK * len(text) or EMPTY


_T = TypeVar("_T")


@overload
def mask_text(text: str) -> str: ...
@overload
def mask_text(text: _T) -> _T: ...
def mask_text(text: object) -> object:
    """The text with every id-shaped number in it masked; anything not a string is returned as it is.

    Digits of other scripts (fullwidth １, Arabic-Indic ١) count as digits: the search reads an id written in them,
    so they are masked too (the text then shows ASCII digits where an id was found)."""
    if not isinstance(text, str):
        return text
    if not text.isascii() and _OTHER_DIGIT.search(text):
        in_ascii_digits = _OTHER_DIGIT.sub(lambda digit: str(unicodedata.decimal(digit[0])), text)
        masked = _masked_ascii(in_ascii_digits)
        return text if masked == in_ascii_digits else masked
    return _masked_ascii(text)


def id_spellings_in_text(text: str) -> Iterator[tuple[str, ...]]:
    """Each number in `text` that masking would hide as a possible national id, as the ways to read it, best first:
    with its separator where that is one character (a Finnish century sign; a Swedish "+" for a hundred years), then
    its digits and check letter alone. Which one is an id, if any, is the reader's to decide (read_national_id)."""
    if not isinstance(text, str):
        return
    if not text.isascii() and _OTHER_DIGIT.search(text):
        text = _OTHER_DIGIT.sub(lambda digit: str(unicodedata.decimal(digit[0])), text)
    if not _MAYBE_AN_ID.search(text):
        return
    for pattern in _PATTERNS_IN_TEXT:
        for match in pattern.finditer(text):
            plain = "".join(char for char in match[0] if char.isascii() and char.isalnum())
            separator = _one_character(match.groupdict().get("sep") or "")
            yield (match["date"] + separator + match["rest"], plain) if separator else (plain,)


def _one_character(separator: str) -> str:
    """A separator as one character, the way a reader takes it: "811218 - 9876" and "811218＋9876" as "-" and "+" (a
    Swedish "+" says a hundred years old); a Finnish century letter as it is."""
    if len(separator) <= 1 and separator != _FULLWIDTH_PLUS:
        return separator
    return "+" if "+" in separator or _FULLWIDTH_PLUS in separator else "-"


_FULLWIDTH_PLUS = "\uff0b"


def _masked_ascii(text: str) -> str:
    if not _MAYBE_AN_ID.search(text):
        return text
    text = _SEPARATED_IN_TEXT.sub(_masked, text)
    text = _NORWEGIAN_IN_TEXT.sub(_masked, text)
    for pattern, valid in _GLUED_IN_TEXT:
        text = pattern.sub(partial(_masked_if_valid, valid=valid), text)
    return _SCATTERED_IN_TEXT.sub(_masked_if_scattered_id, text)


@overload
def mask_flow_id(flow_id: str) -> str: ...
@overload
def mask_flow_id(flow_id: _T) -> _T: ...
def mask_flow_id(flow_id: object) -> object:
    """A flow id (or an event id) as shown: one in the spec's form, a UUID, as it is; anything else masked like any
    text.

    About one random UUID in 8,000 holds a run of digits that reads as a valid national id ("…-ff2203813460");
    masked, the id staff copy would be wrong. A service that names flows otherwise gets its ids masked."""
    return flow_id if isinstance(flow_id, str) and _UUID.fullmatch(flow_id) else mask_text(flow_id)


def is_national_id_key(key) -> bool:
    """Whether a JSON key names a national id: "nationalID", "ssn", "henkilötunnus", "applicant_ssn"…"""
    if not isinstance(key, str):
        return False
    words = _ascii_words(key)
    compact = "".join(words).lower()
    if any(name in compact for name in _ID_KEY_NAMES):  # also "nationalIdNo", "applicantPersonnummer2"
        return True
    return bool(words) and words[-1].lower() in _SHORT_ID_KEY_NAMES


def mask_document(document: Any) -> Any:
    """A copy of a JSON document with national ids masked: under id keys, and id-shaped in any text or key."""
    if isinstance(document, dict):
        return {mask_text(key): _mask_entry(key, value) for key, value in document.items()}
    if isinstance(document, list):
        return [mask_document(item) for item in document]
    if isinstance(document, int | float) and not isinstance(document, bool):
        return _masked_number(document)
    # A value that is a UUID (an event's or a flow's id) is shown whole, as the pages do.
    return hide_url_passwords(mask_flow_id(document)) if isinstance(document, str) else document


# From "://" (a scheme before it is matched from each of its letters on: quadratic in a long word, seconds for a page)
# to the last "@" before the address's host, as a browser reads it: a user name or a password may hold an "@" (they
# showed "us@er:pw" whole, and "p@ss" as "•••@ss"). A backslash ends the authority as a slash does (WHATWG).
_URL_PASSWORD = re.compile(r"(://[^\s/?#\\:]*:)[^\s/?#\\]+@")


def hide_url_passwords(text: str) -> str:
    """The text with the password of each address in it (scheme://user:password@host) hidden: a flow's webhook
    address may hold one, and every role reads the flow page (an attack)."""
    if "@" not in text or "://" not in text:
        return text
    return _URL_PASSWORD.sub(r"\1" + MASK * 3 + "@", text)


def _masked_number(number: int | float):
    """An id sent as a JSON number, under any key: as an integer, a float, or having lost a leading zero; after a
    minus sign too (shown with it: no id is negative, but its digits are an id's all the same)."""
    if number < 0:
        masked = _masked_number(-number)
        return number if masked == -number else f"-{masked}"
    held = national_id_in_number(number)
    return number if held is None else mask_national_id(held)


def national_id_in_number(number: int | float) -> str | None:
    """The national id a JSON number holds, as text (01019012480 sent as 1019012480 gets its zero back), or None:
    the numbers masking hides, and the only ones a subject request takes for a person."""
    if number < 0 or (isinstance(number, float) and not (number.is_integer() and number < 1e13)):
        return None
    digits = str(int(number))
    if len(digits) == 10 and fodselsnummer.is_valid("0" + digits):
        return "0" + digits
    return digits if mask_text(digits) != digits else None


def _mask_entry(key, value):
    if is_national_id_key(key) and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return mask_national_id(value)
    return mask_document(value)


def _masked(match: re.Match) -> str:
    return match["date"] + match["sep"] + MASK * len(match["rest"])


def _masked_if_valid(match: re.Match[str], valid: Callable[[str], bool]) -> str:
    """Mask the match when `valid` says it is an id, whatever separator it was written with."""
    return _masked(match) if valid(match[0]) else match[0]


def _masked_if_scattered_id(match: re.Match[str]) -> str:
    written = match[0]
    if not _norwegian(written):  # it reads the digits alone
        return written
    shown, counted = [], 0
    for char in written:  # the first six digits (the birth date) and the separators as written; the rest hidden
        counted += char.isdigit()
        shown.append(MASK if char.isdigit() and counted > 6 else char)
    return "".join(shown)


def _ascii_words(key: str) -> list[str]:
    """The key's words in ASCII letters: "henkilöTunnus" → ["henkilo", "Tunnus"]."""
    folded = unicodedata.normalize("NFKD", key.translate(_FOLDED))
    plain = "".join(char for char in folded if not unicodedata.combining(char))
    return _WORDS.findall(plain)
