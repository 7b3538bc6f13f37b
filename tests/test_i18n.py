"""Languages: English by default, Norwegian bokmål on request, and every string translated."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po
from flask_babel import gettext
from support import set_account_language, sign_in

from portal import i18n
from portal.i18n import MOST_WORDS_KEPT, request_words

ROOT = Path(__file__).resolve().parents[1]
TRANSLATIONS = ROOT / "portal/translations"


def test_english_by_default(client):
    page = client.get("/login").text
    assert '<html lang="en">' in page and ">Sign in</h1>" in page


def test_norwegian_when_the_browser_asks(client):
    for header in ("nb-NO,nb;q=0.9,en;q=0.5", "no", "nn-NO"):
        page = client.get("/login", headers={"Accept-Language": header}).text
        assert '<html lang="nb">' in page and ">Logg inn</h1>" in page, header


def test_the_chosen_language_sticks_for_the_session(signed_in):
    client = signed_in("operator")
    answer = client.post("/language", data={"language": "nb", "next": "/flows?archived=true"})
    assert answer.headers["Location"] == "/flows?archived=true"
    assert "Arkiverte flyter" in client.get("/flows?archived=true").text
    assert (
        client.post("/language", data={"language": "xx", "next": "https://evil.example/"}).headers["Location"]
        == "/flows"
    )
    assert "Flyter" in client.get("/flows").text


def test_swedish_when_the_browser_asks(client):
    page = client.get("/login", headers={"Accept-Language": "sv-SE,sv;q=0.9"}).text
    assert '<html lang="sv">' in page and ">Logga in</h1>" in page


def test_finnish_when_the_browser_asks(client):
    page = client.get("/login", headers={"Accept-Language": "fi-FI,fi;q=0.9,en;q=0.5"}).text
    assert '<html lang="fi">' in page and ">Kirjaudu sisään</h1>" in page


def test_validation_messages_are_translated(signed_in, sandbox):
    client = signed_in("operator")
    client.post("/language", data={"language": "nb"})
    page = client.get("/flows/new")
    token = page.text.split('name="submission" type="hidden" value="')[1].split('"')[0]
    answer = client.post(
        "/flows/new",
        data={
            "country": "no",
            "national_id": "15108695089",
            "last_name": "",
            "redirect_url": "https://a.example/",
            "submission": token,
        },
    )
    assert "Dette er ikke et gyldig norsk fødselsnummer: kontrollsifferet stemmer ikke" in answer.text
    assert "Dette feltet er påkrevd" in answer.text, "WTForms' own messages follow the language too"


def test_the_language_switch_on_an_answered_form_stays_on_the_form_s_page(signed_in):
    admin = signed_in("admin")
    answered = admin.post("/admin/access", data={"national_id": "12345"})
    assert answered.status_code == 400
    assert 'name="next" value="/admin/access"' in answered.text, "the page the form is on, not the flow list"
    assert 'name="next" value="/admin/access?x=1"' in admin.get("/admin/access?x=1").text, "a page read is itself"
    refused = admin.post("/admin/users", data={"username": "kari", "password": "short", "confirm": "short"})
    assert refused.status_code == 400 and 'name="next" value="/admin/users"' in refused.text, "a POST-only route's page"


def test_a_date_range_s_ends_and_a_source_column_are_each_said_as_such_in_finnish(signed_in):
    """ "From" was one message for a date range's start and for where a sign-in came from: Finnish said "Mistä"
    ("from where") over the insights' and the audit log's dates (a Finnish walk)."""
    admin = signed_in("admin")
    admin.post("/language", data={"language": "fi"})
    labels = dict(
        re.findall(r'<label class="form-label[^"]*" for="(from|to)">([^<]*)</label>', admin.get("/insights").text)
    )
    assert labels == {"from": "Alkupäivä", "to": "Loppupäivä"}
    audit = admin.get("/admin/audit").text
    assert re.search(r'<label class="form-label[^"]*" for="from">Alkupäivä</label>', audit)
    assert '<th scope="col" class="d-none d-md-table-cell">Mistä</th>' in audit  # where an entry came from


def test_the_language_switch_works_before_sign_in(client, make_user):
    client.post("/language", data={"language": "nb", "next": "/login"})
    assert ">Logg inn</h1>" in client.get("/login").text
    sign_in(client, make_user("viewer"))
    assert ">Flyter</h1>" in client.get("/flows").text


def plain(text):
    """Plural translations come as a list from one reader and a tuple from the other."""
    return tuple(text) if isinstance(text, (list, tuple)) else text


@pytest.mark.parametrize("language", ["nb", "sv", "fi"])
def test_every_message_in_the_code_is_translated(tmp_path, language):
    template = tmp_path / "messages.pot"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "babel.messages.frontend",
            "extract",
            "-F",
            "babel.cfg",
            "-k",
            "_l",
            "-k",
            "ngettext:1,2",
            "-k",
            "lazy_pgettext:1c,2",
            "--no-location",
            "-o",
            str(template),
            ".",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    with template.open("rb") as handle:
        wanted = {plain(message.id) for message in read_po(handle) if message.id}
    catalog_folder = TRANSLATIONS / language / "LC_MESSAGES"
    with (catalog_folder / "messages.po").open("rb") as handle:
        catalog = {plain(message.id): plain(message.string) for message in read_po(handle) if message.id}
    assert wanted - {key for key, text in catalog.items() if text} == set(), "see Translations in the README"
    with (catalog_folder / "messages.mo").open("rb") as handle:
        compiled = {plain(message.id): plain(message.string) for message in read_mo(handle) if message.id}
    assert compiled == catalog, "messages.mo is out of date: pybabel compile -d portal/translations"


def test_template_words_are_escaped_formatted_and_translated(app):
    """`_` in a template, as Jinja's newstyle gettext: translated, its variables escaped, `%%` a percent sign."""
    template = app.jinja_env.from_string('{{ _("Sign out") }}|{{ _("Hi %(name)s", name=who) }}|{{ _("100%% sure") }}')
    with app.test_request_context(headers={"Accept-Language": "nb"}):
        assert template.render(who="<b>Kari</b>") == "Logg ut|Hi &lt;b&gt;Kari&lt;/b&gt;|100% sure"


def test_the_words_kept_for_a_language_stay_bounded(app):
    """Words are kept for the process, and the service's own values pass through them: never without a bound."""
    with app.test_request_context(headers={"Accept-Language": "fi"}):
        words = request_words()
        for number in range(MOST_WORDS_KEPT + 10):
            assert words(str, number) == str(number)
        assert words.gettext("Consent") == "Suostumus"
        assert 0 < len(i18n._SAID_IN["fi"]) <= MOST_WORDS_KEPT


def test_the_finnish_tabs_of_the_flow_list_agree_in_number(app, make_user):
    """ "Nykyiset", "Arkistoitu", "Kaikki": the archived tab read as one flow's state (found by a new user)."""
    client = app.test_client()
    username = make_user("viewer")
    set_account_language(app, username, "fi")
    sign_in(client, username)
    for path in ("/flows", "/flows?archived=all&q=x"):
        page = client.get(path, follow_redirects=True).text
        assert ">Nykyiset</a>" in page and ">Arkistoidut</a>" in page and ">Kaikki</a>" in page, path


VERSION_LINE = (
    "The last event received said version %(heard)s (%(heard_at)s); the service says version %(version)s, "
    "updated %(updated)s."
)


@pytest.mark.parametrize(
    ("language", "english", "said"),
    [
        ("sv", "active", "aktivt"),  # beside slutfört, avbrutet, arkiverat: ett flöde
        ("nb", "Cancelled (any status)", "Avbrutt (alle statuser)"),  # avbrutt, as the lifecycle reads elsewhere
        ("sv", "Finnish henkilötunnus", "finskt henkilötunnus"),  # beside norskt fødselsnummer
    ],
)
def test_words_a_new_user_found_wrong_read_right(app, language, english, said):
    with app.test_request_context(headers={"Accept-Language": language}):
        assert request_words().gettext(english) == said


@pytest.mark.parametrize("language", ["en", "nb", "sv", "fi"])
def test_the_version_heard_and_its_time_are_not_two_numbers_side_by_side(app, language):
    """ "sa versjon 1 28. nov. 2026, 16:42:07": the event's time in brackets after its version, in every language."""
    with app.test_request_context(headers={"Accept-Language": language}):
        sentence = gettext(VERSION_LINE, heard=1, heard_at="28 Nov", version=2, updated="29 Nov")
    assert " 1 (28 Nov);" in sentence and " 2, " in sentence, sentence
    assert (language == "en") == sentence.startswith("The last event"), "translated"


def test_uncompiled_catalogues_are_named_at_start(tmp_path, caplog):
    """Found by an operator: gunicorn run from the checkout served English pages to Norwegians, silently (the
    checkout's catalogues are compiled by the scripts and the wheel, not by git)."""
    from portal.i18n import _warn_of_uncompiled_catalogues

    for language, compiled in (("nb", False), ("sv", True)):
        folder = tmp_path / language / "LC_MESSAGES"
        folder.mkdir(parents=True)
        (folder / "messages.po").write_text("")
        if compiled:
            (folder / "messages.mo").write_bytes(b"")
    with caplog.at_level("WARNING", logger="portal.i18n"):
        _warn_of_uncompiled_catalogues(tmp_path)
    assert [record.getMessage().split(":")[0] for record in caplog.records] == ["translations of nb are not compiled"]


SERVICE_NAMES = {"nb": "Flow-tjeneste", "sv": "Flow-tjänst", "fi": "Flow-palvelu"}


@pytest.mark.parametrize("language", sorted(SERVICE_NAMES))
def test_each_language_names_the_service_one_way(language):
    """A new user's walk: Norwegian and Swedish pages said "Flow Service" on Insights and the gaps page, and
    "Flow-tjenesten" / "Flow-tjänsten" everywhere else."""
    path = Path(i18n.__file__).parent / "translations" / language / "LC_MESSAGES" / "messages.po"
    with path.open("rb") as handle:
        catalog = read_po(handle)
    english = [
        message.id
        for message in catalog
        for text in (message.string if isinstance(message.string, tuple) else (message.string,))
        if text and "Flow Service" in text
    ]
    assert english == []
    assert any(SERVICE_NAMES[language] in str(message.string) for message in catalog)
