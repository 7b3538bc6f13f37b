"""National ids as staff type them: validated for the chosen country with python-stdnum."""

from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from stdnum.exceptions import InvalidChecksum, InvalidComponent, InvalidFormat, InvalidLength, ValidationError
from stdnum.fi import hetu
from stdnum.no import fodselsnummer
from stdnum.se import personnummer

NUMBERS = {
    "no": (fodselsnummer, _l("Norwegian fødselsnummer"), _l("11 digits, e.g. 15108695088")),
    "se": (personnummer, _l("Swedish personnummer"), _l("YYMMDD-NNNN, e.g. 811218-9876")),
    "fi": (hetu, _l("Finnish henkilötunnus"), _l("DDMMYY-NNNC, e.g. 131052-308T")),
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
    module, name, example = NUMBERS[country]
    try:
        return module.validate(value.strip())
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
