"""National ids of the three service countries: which country a number belongs to, and is it valid.

The service takes a bare `nationalId`, so the country (and with it the create scope) is read off
the number's shape: Norway 11 digits, Sweden 10 or 12 digits with an optional `-`/`+`,
Finland `DDMMYY` + century sign (`+`, `-`, `A`–`F`, `U`–`Y`) + 3 digits + a check character.
"""

import re

from stdnum.exceptions import ValidationError
from stdnum.fi import hetu
from stdnum.no import fodselsnummer
from stdnum.se import personnummer

COUNTRY_VALIDATORS = {"no": fodselsnummer, "se": personnummer, "fi": hetu}

_SHAPES = (
    ("no", re.compile(r"\d{6} ?\d{5}")),
    ("se", re.compile(r"(\d{2})?\d{6}[-+]?\d{4}")),
    ("fi", re.compile(r"\d{6}[-+A-FU-Y]\d{3}[0-9A-Y]", re.IGNORECASE)),
)


class InvalidNationalId(ValueError):
    """The number has no known shape or fails its country's checksum."""


def country_of(national_id: str) -> str:
    """Return the country code (`no`, `se`, `fi`) whose number shape `national_id` has."""
    candidate = national_id.strip()
    for country, shape in _SHAPES:
        if shape.fullmatch(candidate):
            return country
    raise InvalidNationalId(
        "not a Norwegian, Swedish or Finnish national id (expected 11 digits, YYMMDD-NNNN or DDMMYY-NNNC)"
    )


def normalize(national_id: str) -> tuple[str, str]:
    """Validate the number and return `(country, compact number)`."""
    country = country_of(national_id)
    try:
        return country, _validate(country, national_id.strip())
    except ValidationError as error:
        raise InvalidNationalId(f"invalid {country.upper()} national id: {getattr(error, 'message', error)}") from None


def _validate(country: str, number: str) -> str:
    """stdnum's check, also taking the synthetic test series a test service accepts.

    Norway's Tenor test population has month + 80; Finnish individual numbers 900–999 are test and
    temporary identities. Both are refused by stdnum, which knows only numbers given to people.
    """
    if country == "fi":
        return hetu.validate(number, allow_temporary=True)
    digits = fodselsnummer.compact(number)
    if country == "no" and digits.isdigit() and len(digits) == 11 and 81 <= int(digits[2:4]) <= 92:
        real = f"{digits[:2]}{int(digits[2:4]) - 80:02d}{digits[4:9]}"
        checks = fodselsnummer.calc_check_digit1(digits) + fodselsnummer.calc_check_digit2(digits)
        if digits[-2:] != checks:
            raise InvalidNationalId("invalid NO national id: the checksum does not match")
        fodselsnummer.get_birth_date(real + "00")  # the date must exist
        return digits
    return COUNTRY_VALIDATORS[country].validate(number)
