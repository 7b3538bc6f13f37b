"""The portal's forms; Flask-WTF adds the CSRF token to each."""

import ipaddress
import unicodedata
from datetime import date
from urllib.parse import urlsplit

from flask import request
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_babel import lazy_pgettext
from flask_wtf import FlaskForm
from wtforms import (
    BooleanField,
    DateField,
    Form,
    FormField,
    HiddenField,
    PasswordField,
    SearchField,
    SelectField,
    StringField,
    SubmitField,
)
from wtforms.fields.choices import SelectChoice
from wtforms.validators import DataRequired, EqualTo, Length, Optional, Regexp, ValidationError

from . import current
from .accounts import MAX_PASSWORD, MIN_PASSWORD
from .flowindex.keys import national_id_readings
from .flowindex.observations import CONSENT_STATUSES, LIFECYCLES
from .labels import OTHER_STORED, ROLE_LABELS, STATUS_LABELS, audit_action_label, capitalised, purpose_label
from .listing import PAGE_SIZES
from .masking import mask_text
from .models import ROLES
from .nationalid import (
    NUMBERS,
    NationalIdProblem,
    birth_date_of,
    example_synthetic_ids,
    infer_country,
    is_synthetic,
    is_valid,
    validate_national_id,
)
from .settings import is_http_url


def printable(form, field) -> None:
    """No control characters: they are never part of a name or number, and PostgreSQL refuses NUL."""
    if field.data and not field.data.isprintable():
        raise ValidationError(_("Remove the invisible control characters from this field."))


def http_url(form, field) -> None:
    if field.data and not is_http_url(field.data.strip()):
        if is_http_url(field.data.strip(), any_host=True):  # "http://%00/": it starts so and holds no space
            raise ValidationError(_("This address has no valid host name after the //."))
        raise ValidationError(_("Enter a full address starting with https:// (or http://), without spaces."))
    if field.data and "@" in urlsplit(field.data.strip()).netloc:
        # The service keeps the address, and the flow's page shows it to every role (an attack).
        raise ValidationError(_("Leave the user name and password out of the address (the part before @)."))


# Besides letters and their accents (any script): what names are written with. Space; hyphens and dashes (- ‐ ‑ –);
# apostrophes as keyboards type them (' ’ ʼ ‘ ´ `); full stop; brackets for a name one was born with ("(f. Berg)").
NAME_PUNCTUATION = frozenset(" -\u2010\u2011\u2013'\u2019\u02bc\u2018\u00b4`.()")


def written_as_a_name(form, field) -> None:
    """Letters, accents, spaces, hyphens, apostrophes and full stops only: no digits, brackets or other signs
    ("<b>Mäkinen</b>" went to the Flow Service as typed)."""
    odd = sorted({char for char in field.data or "" if not _in_a_name(char)})
    if odd:
        raise ValidationError(
            _(
                "A last name holds letters, spaces, hyphens, apostrophes, full stops and brackets only, "
                "not %(characters)s.",
                characters=" ".join(odd),
            )
        )


def _in_a_name(char: str) -> bool:
    return unicodedata.category(char)[0] in "LM" or char in NAME_PUNCTUATION


def has_a_letter(form, field) -> None:
    """A name holds at least one letter of some script: not only apostrophes, hyphens or accents on nothing."""
    if field.data and not any(unicodedata.category(character).startswith("L") for character in field.data):
        raise ValidationError(_("A last name needs at least one letter."))


COUNTRY_NAMES = {"no": _l("Norway"), "se": _l("Sweden"), "fi": _l("Finland")}
# A country's number inside a sentence, translated whole: its article and gender (ett finskt henkilötunnus), the
# country in the genitive where a language says it so (Ruotsin personnummer). The adjective names the country once.
NUMBER_IN_A_SENTENCE = {
    "no": _l("a Norwegian fødselsnummer"),
    "se": _l("a Swedish personnummer"),
    "fi": _l("a Finnish henkilötunnus"),
}


class KeptCreateInput(Form):
    """What was typed into a New flow form sent after its session ended: carried through the sign-in page (in the
    page, never in an address or a cookie) and shown again once signed in, to be checked and sent."""

    country = HiddenField(filters=[lambda value: (value or "")[:2]])
    national_id = HiddenField(filters=[lambda value: (value or "")[:20]])
    last_name = HiddenField(filters=[lambda value: (value or "")[:100]])
    redirect_url = HiddenField(filters=[lambda value: (value or "")[:2048]])
    webhook_url = HiddenField(filters=[lambda value: (value or "")[:2048]])
    real_person = HiddenField(filters=[lambda value: "y" if value in ("y", "on", "true", "1") else ""])
    typed_by = HiddenField(filters=[lambda value: (value or "")[:64]])  # staff_sessions.typist_mark: whose it is

    def holds_input(self) -> bool:
        return any(field.data for field in self if field is not self.typed_by)

    def typed(self) -> dict[str, str]:
        """The values typed, by the create form's field names."""
        return {field.short_name: field.data for field in self if field is not self.typed_by and field.data}


SENT_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})  # Flask-WTF's: a form is read from these


class PortalForm(FlaskForm):
    """Every form of the portal: its fields are read from the form as sent, never from an upload or a JSON body under
    a field's name (Flask-WTF reads both), which reached validators made for text (an attack: a 500 on /login)."""

    class Meta:
        def wrap_formdata(self, form, formdata):
            if formdata is None or hasattr(formdata, "getlist"):  # handed in by the view
                return formdata
            # Flask-WTF's default, "from the request": the form as sent (a JSON body not read: a list broke it too)
            return request.form if request.method in SENT_METHODS and request.form else None


class LoginForm(PortalForm):
    username = StringField(
        _l("Username"),
        validators=[DataRequired(), Length(max=80), printable],
        render_kw={"autocomplete": "username"},
    )
    password = PasswordField(
        _l("Password"),
        validators=[DataRequired(), Length(max=256), printable],
        render_kw={"autocomplete": "current-password"},
    )
    next = HiddenField()  # not validated: auth.safe_next sends anything unsafe to the flow list instead
    # "1" when a link on another site led to this page: where `next` leads asks first (security.LED_FROM_ELSEWHERE)
    elsewhere = HiddenField()
    kept = FormField(KeptCreateInput)
    submit = SubmitField(_l("Sign in"))

    @property
    def username_kept(self) -> bool:
        """Sent back with the username filled (a wrong password): the password is what is left to type."""
        return bool(self.username.data)


class ConfirmForm(PortalForm):
    """A form with nothing but its CSRF token, for POST-only actions (sign out, reveal)."""


class RevealForm(PortalForm):
    """Why a national id is revealed: one of the configured purposes, or another said in words."""

    purpose = SelectField(_l("Purpose"), validators=[DataRequired(message=_l("Choose why you need the full id."))])
    detail = StringField(
        _l("Details"),
        validators=[Optional(), Length(max=150), printable],
        description=_l("Required for “Other”: e.g. the case or ticket number."),
    )

    def __init__(self, purposes: tuple[str, ...], **kwargs):
        super().__init__(**kwargs)
        named = ((purpose, purpose_label(purpose)) for purpose in purposes)
        self.purpose.choices = [("", _("Choose a purpose")), *named]
        self.purpose.choices.append((OTHER_PURPOSE, _("Other")))

    def validate(self, extra_validators=None) -> bool:
        valid = super().validate(extra_validators)
        if self.purpose.data == OTHER_PURPOSE and not (self.detail.data or "").strip():  # Optional() skips it
            self.detail.errors = [*self.detail.errors, _("Say why in a few words.")]
            return False
        return valid

    @property
    def stated_purpose(self) -> str:
        """The purpose as recorded: the choice, and the words given with it (a national id among them masked: the
        purpose is kept in the audit and access logs, and in the session while the reveal lasts)."""
        detail = mask_text((self.detail.data or "").strip())
        chosen = OTHER_STORED if self.purpose.data == OTHER_PURPOSE else self.purpose.data  # stored in English
        return f"{chosen}: {detail}"[:255] if detail else chosen


OTHER_PURPOSE = "other"


class CreateFlowForm(PortalForm):
    country = SelectField(_l("Country"))
    national_id = StringField(
        _l("National id"),
        validators=[DataRequired(), Length(max=20), printable],
        render_kw={"autocomplete": "off", "spellcheck": "false"},
    )
    last_name = StringField(
        _l("Last name"),
        validators=[DataRequired(), Length(max=100), printable, has_a_letter, written_as_a_name],
        render_kw={"autocomplete": "off"},
    )
    redirect_url = StringField(
        _l("Redirect URL"),
        validators=[DataRequired(), Length(max=2048), printable, http_url],
        description=_l("Where the individual is sent when the consent is done."),
    )
    webhook_url = StringField(
        _l("Webhook URL"),
        validators=[Optional(), Length(max=2048), printable, http_url],
        description=_l("Where the Flow Service reports changes; leave empty for none."),
    )
    submission = HiddenField(
        validators=[DataRequired(_l("The form is incomplete: reload the page.")), Length(max=64), printable]
    )
    # Whose input this is (staff_sessions.typist_mark of the account the form was shown to): a form sent once its
    # session ended, or once another account signed in at the browser, goes back to that account only.
    typed_by = HiddenField(filters=[lambda value: (value or "")[:64]])
    # Asked for in a test environment when the number is not a synthetic one: nothing is sent before it is ticked.
    real_person = BooleanField(_l("The person agreed to take part with their real number"))
    # Asked for when the person has a flow still waiting for their answer (`open_flows`, set by the view).
    another_flow = BooleanField(_l("Create another flow for this person anyway"))
    submit = SubmitField(_l("Create flow"))

    def __init__(self, countries: list[str], **kwargs):
        super().__init__(**kwargs)
        self.asks_real_person = False
        self.country.choices = [SelectChoice(code, COUNTRY_NAMES[code]) for code in countries]
        self.country.description = " · ".join(f"{COUNTRY_NAMES[code]}: {NUMBERS[code][2]}" for code in countries)
        self.production = current.settings().environment == "production"
        # The test environment offers the official synthetic identities to pick from, by country.
        self.synthetic_examples = (
            [] if self.production else [(code, COUNTRY_NAMES[code], example_synthetic_ids(code)) for code in countries]
        )
        self.birth_date: date | None = None  # read from a valid number, shown for a visual check
        self.open_flows: list = []  # the person's flows not done, when the form stops to ask about another one
        self.check_refused = False  # over the limit of look-ups by national id: asked without looking

    def validate_national_id(self, field) -> None:
        country = self.country.data
        if country not in NUMBERS:
            return  # the country field reports its own error
        try:
            field.data = validate_national_id(country, field.data or "")
        except NationalIdProblem as problem:
            looks_like = infer_country(field.data)
            if looks_like and looks_like != country and is_valid(looks_like, field.data):
                raise ValidationError(
                    _(
                        "This number looks like %(number)s, not %(chosen)s: choose %(country)s or check the number.",
                        number=NUMBER_IN_A_SENTENCE[looks_like],
                        chosen=NUMBER_IN_A_SENTENCE[country],
                        country=COUNTRY_NAMES[looks_like],
                    )
                ) from None
            raise ValidationError(str(problem)) from None
        self.birth_date = birth_date_of(country, field.data)
        self._guard_test_identity(country, field.data)

    def _guard_test_identity(self, country: str, number: str) -> None:
        """Synthetic ids never reach production; a real-looking one in a test environment is pointed out."""
        synthetic = is_synthetic(country, number)
        if self.production and synthetic:
            raise ValidationError(
                _("This is a synthetic test identity; the production service needs a real person's number.")
            )
        if not self.production and not synthetic and not self.real_person.data:
            self.asks_real_person = True
            raise ValidationError(
                _(
                    "The national id looks like a real person's number, and this is a test environment: use a "
                    "synthetic test identity (listed below), or tick the box below if the person agreed to take part."
                )
            )


ROLE_NAMES = {
    "viewer": _l("viewer (reads)"),
    "operator": _l("operator (reads and creates flows)"),
    "admin": _l("admin (everything, users and the audit log)"),
}


ROLE_CHOICES = [SelectChoice(role, ROLE_NAMES[role]) for role in ROLES]


class NewUserForm(PortalForm):
    username = StringField(
        _l("Username"), validators=[DataRequired(), Length(max=80), printable], render_kw={"autocomplete": "off"}
    )
    role = SelectField(_l("Role"), choices=ROLE_CHOICES, default="viewer")
    password = PasswordField(
        _l("Password"),
        validators=[
            DataRequired(),
            Length(
                min=MIN_PASSWORD, message=_l("The password must be at least %(count)d characters.", count=MIN_PASSWORD)
            ),
            Length(
                max=MAX_PASSWORD, message=_l("The password can be at most %(count)d characters.", count=MAX_PASSWORD)
            ),
            printable,
        ],
        render_kw={"autocomplete": "new-password"},
    )
    confirm = PasswordField(
        _l("Password again"),
        validators=[EqualTo("password", _l("The passwords differ."))],
        # The same limit as the password's: a long password pasted into both must be cut alike, or they differ.
        render_kw={"autocomplete": "new-password", "maxlength": MAX_PASSWORD},
    )
    submit = SubmitField(_l("Create user"))


class UserChangeForm(PortalForm):
    """One account's row: a new role, or disable/enable. The role by its name alone: what each may do is said on the
    new account's form, and a phone's table cell has room for a name only (found by a new user)."""

    role = SelectField(_l("Role"), choices=[SelectChoice(role, ROLE_LABELS[role]) for role in ROLES])
    save_role = SubmitField(_l("Save role"))
    toggle = SubmitField()


ANY = SelectChoice("", _l("Any"))


SEARCH_YEARS = (1800, 2999)  # birth dates and creation days the portal can turn into times in every zone


def within_years(form, field) -> None:
    if field.data and not SEARCH_YEARS[0] <= field.data.year <= SEARCH_YEARS[1]:
        raise ValidationError(
            _("Use a date between the years %(first)d and %(last)d.", first=SEARCH_YEARS[0], last=SEARCH_YEARS[1])
        )


LONGEST_SEARCH = 100  # characters in the flow list's search box


class FlowSearchForm(PortalForm):
    """The search box and filters of the flow list: a GET form, its state all in the query string.

    `after`/`before` are keyset positions and `person` the keyed hash a national id was turned into;
    the page writes them, a person never types them.
    """

    class Meta:
        csrf = False  # a GET search changes nothing

    q = SearchField(
        _l("Search"),
        validators=[Optional(), Length(max=LONGEST_SEARCH), printable],
        description=_l(
            "A reference (LA-10040), a flow id, a national id in any written form, or the start of a last name"
        ),
        render_kw={"autocomplete": "off", "spellcheck": "false"},
    )
    born = DateField(
        _l("Born"), validators=[Optional(), within_years], description=_l("Date of birth, to narrow a name")
    )
    status = SelectField(
        _l("Consent status"),
        choices=[ANY, *(SelectChoice(code, STATUS_LABELS[code]) for code in CONSENT_STATUSES)],
        default="",
    )
    lifecycle = SelectField(
        _l("Lifecycle"),
        choices=[ANY, *(SelectChoice(code, capitalised(STATUS_LABELS[code])) for code in LIFECYCLES)],
        default="",
    )
    country = SelectField(
        _l("Country"), choices=[ANY, *(SelectChoice(code, name) for code, name in COUNTRY_NAMES.items())], default=""
    )
    created_from = DateField(_l("Created from"), validators=[Optional(), within_years], name="from")
    created_to = DateField(_l("Created until"), validators=[Optional(), within_years], name="to")
    incidents = SelectField(
        _l("Incidents"),
        choices=[ANY, SelectChoice("yes", _l("With incidents")), SelectChoice("no", _l("Without incidents"))],
        default="",
    )
    archived = SelectField(_l("Which flows"), choices=["", "false", "true", "all"], default="")  # the tabs set it
    sort = SelectField(
        _l("Sort by"),
        choices=[SelectChoice("created", _l("Created")), SelectChoice("changed", _l("Last change"))],
        default="created",
    )
    order = SelectField(
        _l("Order"),
        choices=[SelectChoice("newest", _l("Newest first")), SelectChoice("oldest", _l("Oldest first"))],
        default="newest",
    )
    limit = SelectField(_l("Per page"), choices=[str(size) for size in PAGE_SIZES], default=str(PAGE_SIZES[0]))
    person = HiddenField(_l("National id"), validators=[Optional(), Regexp(r"[0-9a-f]{64}\Z")])
    after = HiddenField()  # keyset positions: read by the search itself
    before = HiddenField()

    def validate_created_to(self, field) -> None:
        if field.data and self.created_from.data and field.data < self.created_from.data:
            raise ValidationError(_("The end of the date range is before its start."))


class AuditFilterForm(PortalForm):
    """The audit log's filters: a GET form, so every filtered page and its export is an address."""

    class Meta:
        csrf = False  # a GET filter changes nothing

    user = StringField(_l("Who"), validators=[Optional(), Length(max=80), printable])
    action = SelectField(_l("What"), default="")
    target = StringField(
        _l("Target contains"), validators=[Optional(), Length(max=255), printable], render_kw={"spellcheck": "false"}
    )
    since = DateField(
        lazy_pgettext("the start of a date range", "From"), validators=[Optional(), within_years], name="from"
    )
    until = DateField(_l("Until"), validators=[Optional(), within_years], name="to")

    def __init__(self, actions: list[str], **kwargs):
        super().__init__(**kwargs)
        self.action.choices = [ANY, *((action, audit_action_label(action)) for action in actions)]

    def validate_until(self, field) -> None:
        if field.data and self.since.data and field.data < self.since.data:
            raise ValidationError(_("The end of the date range is before its start."))


class RejectedFilterForm(PortalForm):
    """Which refused deliveries to show: one reason, one sending address (a GET form)."""

    class Meta:
        csrf = False  # a GET filter changes nothing

    kind = SelectField(_l("Reason"), default="")
    source = StringField(
        _l("From (address or network)"),
        validators=[Optional(), Length(max=64), printable],
        render_kw={"spellcheck": "false"},
    )
    diagnosis = SelectField(_l("Why"), default="")

    def __init__(
        self, kinds: tuple[str, ...], diagnoses: dict | None = None, kind_titles: dict | None = None, **kwargs
    ):
        super().__init__(**kwargs)
        titles = kind_titles or {}
        self.kind.choices = [ANY, *((kind, f"{titles[kind]} ({kind})" if kind in titles else kind) for kind in kinds)]
        self.diagnosis.choices = [ANY, *((code, f"{title} ({code})") for code, title in (diagnoses or {}).items())]

    def validate_source(self, field) -> None:
        """An address or a network, as refusals are counted by (or "unknown", as an address not told is kept)."""
        if not field.data or field.data == "unknown":
            return
        try:
            ipaddress.ip_network(field.data.strip(), strict=False)
        except ValueError:
            raise ValidationError(
                _("Type an IPv4 or IPv6 address, or a network such as 203.0.113.0/24 or 2001:db8::/48.")
            ) from None


class SubjectLookupForm(PortalForm):
    """A person's national id, typed by an admin to see who looked at their data (a POST: the id is no URL), and
    their country when the number is valid in more than one."""

    national_id = StringField(
        _l("National id"), validators=[DataRequired(), Length(max=20), printable], render_kw={"autocomplete": "off"}
    )
    country = SelectField(
        _l("Country"),
        choices=[SelectChoice("", _l("As the number says")), *(SelectChoice(c, n) for c, n in COUNTRY_NAMES.items())],
        default="",
    )

    def validate_country(self, field) -> None:
        if field.data not in ("", *COUNTRY_NAMES):  # refused by its choices already (an attack: a KeyError here)
            return
        readings = national_id_readings(self.national_id.data)
        countries = ", ".join(str(COUNTRY_NAMES[number.country]) for number in readings)
        if field.data and readings and field.data not in {number.country for number in readings}:
            raise ValidationError(
                _(
                    "This number is a valid national id of %(countries)s, not of %(chosen)s: choose its country.",
                    countries=countries,
                    chosen=COUNTRY_NAMES[field.data],
                )
            )
        if not field.data and len(readings) > 1:
            raise ValidationError(
                _(
                    "This number is a valid national id in more than one country (%(countries)s), each a different "
                    "person: choose the person's country.",
                    countries=countries,
                )
            )


class OlderAccessesForm(PortalForm):
    """Another page of a person's access log: the subject key the look-up found (no national id) and where the page
    shown ends (empty: the newest entries again). The page writes both; a person never types them."""

    subject = HiddenField(validators=[DataRequired(), Regexp(r"[0-9a-f]{64}\Z")])
    before = HiddenField(validators=[Optional(), Regexp(r"[0-9]{1,10}\Z")])


class SubjectRequestForm(SubjectLookupForm):
    """An access or erasure request for one person, by their national id."""

    confirm = BooleanField(_l("I have checked the request: erase this person's records"))
    export = SubmitField(_l("Export as JSON"))
    erase = SubmitField(_l("Erase"))

    def validate_confirm(self, field) -> None:
        if self.erase.data and not field.data:
            raise ValidationError(_("Tick the box to confirm the erasure."))
