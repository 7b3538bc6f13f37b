"""National ids as staff type them: validated for the chosen country with python-stdnum."""

from stdnum.exceptions import InvalidChecksum, InvalidComponent, InvalidFormat, InvalidLength, ValidationError
from stdnum.fi import hetu
from stdnum.no import fodselsnummer
from stdnum.se import personnummer

NUMBERS = {
    "no": (fodselsnummer, "Norwegian fødselsnummer", "11 digits, e.g. 15108695088"),
    "se": (personnummer, "Swedish personnummer", "YYMMDD-NNNN, e.g. 811218-9876"),
    "fi": (hetu, "Finnish henkilötunnus", "DDMMYY-NNNC, e.g. 131052-308T"),
}
PROBLEMS = (
    (InvalidLength, "it has the wrong number of characters"),
    (InvalidFormat, "it has characters that do not belong in it"),
    (InvalidComponent, "its date of birth or individual number is not possible"),
    (InvalidChecksum, "its check digit does not match — look for a mistyped digit"),
)


class NationalIdProblem(ValueError):
    """What is wrong with a number, said so that the person can fix it."""


def validate_national_id(country: str, value: str) -> str:
    """The compact form of a valid number for `country`, or NationalIdProblem saying what is wrong."""
    module, name, example = NUMBERS[country]
    try:
        return module.validate(value.strip())
    except ValidationError as error:
        reason = next((text for kind, text in PROBLEMS if isinstance(error, kind)), "it is not valid")
        raise NationalIdProblem(f"This is not a valid {name}: {reason}. Expected {example}.") from None
