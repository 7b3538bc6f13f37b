"""National ids as staff type them: validated for the chosen country with python-stdnum."""

import re
from datetime import date

from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from stdnum.exceptions import InvalidChecksum, InvalidComponent, InvalidFormat, InvalidLength, ValidationError
from stdnum.fi import hetu
from stdnum.no import fodselsnummer
from stdnum.se import personnummer

# The examples are synthetic test identities (README: the create form's test identities): no real person's.
NUMBERS = {
    "no": (fodselsnummer, _l("Norwegian fødselsnummer"), _l("11 digits, e.g. 16822548834")),
    "se": (personnummer, _l("Swedish personnummer"), _l("YYMMDD-NNNN, e.g. 900602-2397")),
    "fi": (hetu, _l("Finnish henkilötunnus"), _l("DDMMYY-NNNC, e.g. 010190-900P")),
}
PROBLEMS = (
    (InvalidLength, _l("it has the wrong number of characters")),
    (InvalidFormat, _l("it has characters that do not belong in it")),
    (InvalidComponent, _l("its date of birth or individual number is not possible")),
    (InvalidChecksum, _l("its check digit does not match — look for a mistyped digit")),
)


class NationalIdProblem(ValueError):
    """What is wrong with a number, said so that the person can fix it."""


def validate_national_id(country: str, value: str) -> str:
    """The compact form of a valid number for `country`, or NationalIdProblem saying what is wrong."""
    _module, name, example = NUMBERS[country]
    try:
        return valid_number(country, value.strip())
    except ValidationError as error:
        reason = next((text for kind, text in PROBLEMS if isinstance(error, kind)), _l("it is not valid"))
        raise NationalIdProblem(
            _(
                "This is not a valid %(name)s: %(reason)s. Expected %(example)s.",
                name=name,
                reason=reason,
                example=example,
            )
        ) from None


# -- shape, birth date and the test-id guardrail ----------------------------------------------------------

# What each country's number looks like, typed by a person: Norway 11 digits (DDMMYY NNNCC), Sweden 10 or 12
# digits with an optional -, + or space (YYMMDD-NNNN, YYYYMMDD-NNNN), Finland DDMMYY + century sign + NNN + check.
SHAPES = (
    ("no", re.compile(r"\d{6} ?\d{5}")),
    ("se", re.compile(r"(?:\d{2})?\d{6}[-+ ]?\d{4}")),  # python-stdnum takes a space too
    ("fi", re.compile(r"\d{6}[-+A-FU-Y]\d{3}[0-9A-Y]", re.IGNORECASE)),
)
_HETU_LENGTH = len("DDMMYY-NNNC")
_FI_CENTURY = {"+": 1800, **dict.fromkeys("-YXWVU", 1900), **dict.fromkeys("ABCDEF", 2000)}

# Sweden has no synthetic series by shape: Skatteverket publishes a list of test personnummer ("formally
# correct, never assigned to a real person", open data at skatteverket.se). A few of them, 12 digits:
SWEDISH_TEST_NUMBERS = frozenset(
    {
        "191212121212",
        "194408139089",
        "199006022397",
        "199107172380",
        "199610202385",
        "190104132386",
        "200001052380",
        "199312172381",
        "195711212893",
        "197912309296",
    }
)
EXAMPLES = {
    # Tenor (Skatteetaten's synthetic population): month + 80; the first two are published by Skatteetaten.
    "no": ("16822548834", "11812448848"),
    "se": ("19121212-1212", "19900602-2397", "20000105-2380"),
    # Finland: individual numbers 900–999 are never given to people (temporary and test identities).
    "fi": ("010190-900P", "150505A9034", "311299-998D"),
}


def infer_country(value: str | None) -> str | None:
    """The country whose number shape `value` has; of several shapes, the one it is valid for."""
    candidate = (value or "").strip()
    shaped = [country for country, shape in SHAPES if shape.fullmatch(candidate)]
    valid = [country for country in shaped if is_valid(country, candidate)]
    found = valid or shaped
    return found[0] if found else None


_FI_WITH_A_SPACE = re.compile(r"\d{6} \d{3}[0-9A-Y]", re.IGNORECASE)


def why_not_an_id(value: str) -> str:
    """What is wrong with text that has the shape of a national id but is none, said so that it can be fixed: as
    the number of the country whose shape it has, else what a new user typed ("131052 308T"), else generally."""
    candidate = value.strip()
    if country := infer_country(candidate):
        try:
            valid_number(country, candidate)
        except ValidationError as error:
            reason = next((text for kind, text in PROBLEMS if isinstance(error, kind)), _l("it is not valid"))
            return _(
                "That looks like a national id but is not a valid one: as a %(name)s, %(reason)s.",
                name=NUMBERS[country][1],
                reason=reason,
            )
    if _FI_WITH_A_SPACE.fullmatch(candidate):
        return _(
            "That looks like a national id but is not a valid one: a Finnish henkilötunnus has its century sign"
            " where the space is (- for people born in the 1900s, A for the 2000s)."
        )
    return _("That looks like a national id but is not a valid one: check its digits.")


def birth_date_of(country: str, value: str) -> date | None:
    """The birth date a valid number of `country` says, or None."""
    try:
        number = valid_number(country, value.strip())
    except ValidationError:
        return None
    return number_birth_date(country, number)


def is_synthetic(country: str, value: str) -> bool:
    """A valid number from the official test series of `country` (never a real person's)."""
    try:
        number = valid_number(country, value.strip())
    except ValidationError:
        return False
    if country == "no":
        return 81 <= int(number[2:4]) <= 92
    if country == "fi":
        return int(number[7:10]) >= 900
    born = number_birth_date(country, number)
    return born is not None and f"{born:%Y%m%d}{number[-4:]}" in SWEDISH_TEST_NUMBERS


def example_synthetic_ids(country: str) -> tuple[str, ...]:
    """Valid synthetic numbers of `country` the create form offers in a test environment."""
    return EXAMPLES.get(country, ())


def is_valid(country: str, value: str) -> bool:
    """Whether `value` is a valid number of `country`, synthetic test series included."""
    try:
        valid_number(country, value)
    except ValidationError:
        return False
    return True


def valid_number(country: str, value: str) -> str:
    """python-stdnum's validation, widened to the synthetic series stdnum refuses (Tenor, Finnish 900–999), and
    narrowed to people born by today (stdnum takes a Finnish or a 12-digit Swedish number born in 2052)."""
    number = _stdnum_valid(country, value)
    born = number_birth_date(country, number)
    if born is not None and born > date.today():
        raise InvalidComponent("born in the future")
    return number


def _stdnum_valid(country: str, value: str) -> str:
    if country == "fi":
        # stdnum calls every mismatch a format error: "131052-308", a character short, would read as holding
        # characters that do not belong in it.
        if len(hetu.compact(value)) != _HETU_LENGTH:
            raise InvalidLength()
        return hetu.validate(value, allow_temporary=True)
    if country == "no":
        number = fodselsnummer.compact(value)
        if len(number) == 11 and number.isdigit() and 81 <= int(number[2:4]) <= 92:
            if number[-2:] != fodselsnummer.calc_check_digit1(number) + fodselsnummer.calc_check_digit2(number):
                raise InvalidChecksum()
            fodselsnummer.get_birth_date(_tenor_as_real(number))  # the date must exist
            return number
    return NUMBERS[country][0].validate(value)


def _swedish_birth_date(number: str) -> date:
    """The birth date a personnummer says. Written with ten digits it names no century: "-" says under a hundred
    years old, so a date that would lie ahead (python-stdnum puts 261218-1236 in 2026) is a century earlier."""
    born = personnummer.get_birth_date(number)
    if sum(char.isdigit() for char in number) == 10 and born > date.today():
        born = born.replace(year=born.year - 100)
    return born


def _tenor_as_real(number: str) -> str:
    """A Tenor number with its month brought back (month - 80), for reading the birth date."""
    return f"{number[:2]}{int(number[2:4]) - 80:02d}{number[4:]}"


def number_birth_date(country: str, number: str) -> date | None:
    """The birth date a valid number (`valid_number`'s form) says, or None (a date stdnum cannot tell)."""
    try:
        if country == "no":
            return fodselsnummer.get_birth_date(_tenor_as_real(number) if int(number[2:4]) > 80 else number)
        if country == "se":
            return _swedish_birth_date(number)
        century = _FI_CENTURY[number[6].upper()]
        return date(century + int(number[4:6]), int(number[2:4]), int(number[:2]))
    except (ValidationError, ValueError, KeyError):
        return None
