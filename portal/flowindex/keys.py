"""The searchable forms of personal data: a keyed hash of a national id, a last name's search key."""

import hashlib
import hmac
import re
import unicodedata
from dataclasses import dataclass
from datetime import date

from flask import has_app_context
from stdnum.exceptions import ValidationError

from .. import current
from ..masking import mask_national_id
from ..nationalid import number_birth_date, valid_number

# Letters that Unicode does not decompose into a base letter and a mark.
_FOLDED = str.maketrans({"ø": "o", "æ": "ae", "œ": "oe", "ð": "d", "þ": "th", "ß": "ss", "ł": "l", "đ": "d"})
# Kept: letters and digits of any script, spaces and hyphens. Apostrophes go (O'Brien, O’Brien and OBrien are
# one name to someone typing it), as does `_`, a wildcard of LIKE.
_NOT_NAME = re.compile(r"[^\w -]+|_+")
_SPACES = re.compile(r"\s+")
MAX_NAME_KEY = 100


def name_key(name: str | None) -> str | None:
    """Lower case without diacritics or apostrophes, Nordic letters spelled in ASCII: "Bjørnstad" → "bjornstad",
    "O’Brien" → "obrien"; letters of other scripts stay ("Иванов" → "иванов")."""
    if not name:
        return None
    folded = unicodedata.normalize("NFKD", name.casefold().translate(_FOLDED))
    plain = "".join(char for char in folded if not unicodedata.combining(char))
    key = _SPACES.sub(" ", _NOT_NAME.sub(_dropped_or_space, plain)).strip()
    return key[:MAX_NAME_KEY] or None


def _dropped_or_space(found: re.Match[str]) -> str:
    return "" if set(found[0]) <= _APOSTROPHES else " "


_APOSTROPHES = set("'’‘`´ʼ")


@dataclass(frozen=True)
class NationalId:
    """A valid national id in the forms the index keeps: its country, a canonical text and birth date."""

    country: str
    canonical: str  # one text for every written form: digits with the full birth year
    birth_date: date | None
    written: str  # as the service or a person wrote it, for the mask

    def keyed_hash(self, key: bytes) -> str:
        message = f"{self.country}:{self.canonical}".encode()
        return hmac.new(key, message, hashlib.sha256).hexdigest()

    @property
    def masked(self) -> str:
        return mask_national_id(self.written)

    @property
    def birth_digits(self) -> str:
        """The six digits of the birth date as the masked id shows them (151086•••••, 811218-••••)."""
        if self.country == "no":
            return self.canonical[:6]  # DDMMYY, D-number and Tenor days and months as written
        if self.country == "se":
            return self.canonical[2:8]  # YYMMDD of YYYYMMDDNNNN
        return self.canonical[6:8] + self.canonical[4:6] + self.canonical[2:4]  # fi: DDMMYY of YYYYMMDD…

    @property
    def digit_runs(self) -> tuple[str, ...]:
        """Digits that every written form of the id keeps in a row once all but the digits are left out of a text:
        a text without one of them cannot name the person (a test a scan makes before it reads a text's ids)."""
        if self.country == "no":
            return (self.canonical[-10:],)  # a number that lost its leading 0 (a JSON number) keeps the other ten
        if self.country == "se":
            return (self.canonical[2:],)  # without the century: 811218-9876 as much as 19811218-9876
        return (self.birth_digits + self.canonical[8:11],)  # fi: DDMMYY, the century sign left out, NNN


def read_national_id(value: str | None, country: str | None = None) -> NationalId | None:
    """The id as a NationalId when it is valid (for `country`, or for the one country it fits)."""
    if not isinstance(value, str) or not value.strip():
        return None
    countries = (country,) if country in _READERS else _likely_first(value.strip())
    for candidate in countries:
        try:
            return _READERS[candidate](value.strip())
        except (ValidationError, ValueError):
            continue
    return None


def national_id_readings(value: str | None) -> list[NationalId]:
    """The number read as each country's id it is valid as: a few are valid in two (010111-9907 is a Finnish
    henkilötunnus of 1911 and a Swedish personnummer of 2001), most in one, none when it is no valid id."""
    if not isinstance(value, str) or not value.strip():
        return []
    return [number for country in _likely_first(value.strip()) if (number := read_national_id(value, country))]


def _likely_first(value: str) -> tuple[str, ...]:
    """Every country, the lender's first (those it creates flows for), each group in the order the number's shape
    suggests (a failed validation costs an exception). A number valid in two countries read without one is the
    lender's person: a Finnish lender's 010111-9907 is the Finn of 1911, not the Swede of 2001 (about one Finnish id
    of the 1900s in a hundred is also a valid Swedish number: measured, 1.0 % of 200,000 random ones)."""
    if value.isdigit() and len(value) == 11:
        shaped = ("no", "se", "fi")
    elif value[-1:].isalpha():
        shaped = ("fi", "se", "no")
    else:
        shaped = ("se", "fi", "no")
    lenders = current.settings().create_countries if has_app_context() else ()
    return tuple(sorted(shaped, key=lambda country: country not in lenders))  # stable: the shape's order kept


def _norwegian(value: str) -> NationalId:
    number = valid_number("no", value)
    return NationalId("no", number, number_birth_date("no", number), value)


def _swedish(value: str) -> NationalId:
    return _with_full_birth_year("se", value, rest_from=-4)


def _finnish(value: str) -> NationalId:
    return _with_full_birth_year("fi", value, rest_from=7)


def _with_full_birth_year(country: str, value: str, rest_from: int) -> NationalId:
    """Canonical as the birth date with its century (YYYYMMDD) and the number's individual part."""
    number = valid_number(country, value)
    born = number_birth_date(country, number)
    if born is None:
        raise ValueError("no birth date")
    return NationalId(country, born.strftime("%Y%m%d") + number[rest_from:], born, value)


_READERS = {"no": _norwegian, "se": _swedish, "fi": _finnish}
