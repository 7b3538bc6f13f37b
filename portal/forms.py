"""The portal's forms; Flask-WTF adds the CSRF token to each."""

from urllib.parse import urlsplit

from flask_wtf import FlaskForm
from wtforms import HiddenField, PasswordField, SelectField, StringField, SubmitField
from wtforms.validators import DataRequired, Length, Optional, ValidationError

from .nationalid import NUMBERS, NationalIdProblem, validate_national_id
from .settings import COUNTRIES


def printable(form, field) -> None:
    """No control characters: they are never part of a name or number, and PostgreSQL refuses NUL."""
    if field.data and not field.data.isprintable():
        raise ValidationError("Remove the invisible control characters from this field.")


def http_url(form, field) -> None:
    if not field.data:
        return
    parts = urlsplit(field.data.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError("Enter a full address starting with https:// (or http://).")


class LoginForm(FlaskForm):
    username = StringField(
        "Username",
        validators=[DataRequired(), Length(max=80), printable],
        render_kw={"autocomplete": "username", "autofocus": True},
    )
    password = PasswordField(
        "Password",
        validators=[DataRequired(), Length(max=256), printable],
        render_kw={"autocomplete": "current-password"},
    )
    next = HiddenField(validators=[printable])
    submit = SubmitField("Sign in")


class ConfirmForm(FlaskForm):
    """A form with nothing but its CSRF token, for POST-only actions (sign out, reveal)."""


class CreateFlowForm(FlaskForm):
    country = SelectField("Country")
    national_id = StringField(
        "National id",
        validators=[DataRequired(), Length(max=20), printable],
        render_kw={"autocomplete": "off", "spellcheck": "false"},
    )
    last_name = StringField(
        "Last name", validators=[DataRequired(), Length(max=100), printable], render_kw={"autocomplete": "off"}
    )
    redirect_url = StringField(
        "Redirect URL",
        validators=[DataRequired(), Length(max=2048), printable, http_url],
        description="Where the individual is sent when the consent is done.",
    )
    webhook_url = StringField(
        "Webhook URL",
        validators=[Optional(), Length(max=2048), printable, http_url],
        description="Where the Flow Service reports changes; leave empty for none.",
    )
    submission = HiddenField(
        validators=[DataRequired("The form is incomplete: reload the page."), Length(max=64), printable]
    )
    submit = SubmitField("Create flow")

    def __init__(self, countries: list[str], **kwargs):
        super().__init__(**kwargs)
        self.country.choices = [(code, COUNTRIES[code]) for code in countries]
        self.country.description = " · ".join(f"{COUNTRIES[code]}: {NUMBERS[code][2]}" for code in countries)

    def validate_national_id(self, field) -> None:
        if self.country.data not in NUMBERS:
            return  # the country field reports its own error
        try:
            field.data = validate_national_id(self.country.data, field.data or "")
        except NationalIdProblem as problem:
            raise ValidationError(str(problem)) from None
