"""The create form's test-id guardrail and the country it reads off the number, in both environments."""

import re
from datetime import date, timedelta

import pytest
from stdnum import luhn
from support import create_form, form_data, production_settings, signed_in_as

from portal.nationalid import (
    NationalIdProblem,
    birth_date_of,
    example_synthetic_ids,
    infer_country,
    is_synthetic,
    validate_national_id,
)

SYNTHETIC_MESSAGE = "This is a synthetic test identity; the production service needs a real person&#39;s number."
REAL_LOOKING_WARNING = "looks like a real person&#39;s number"


@pytest.mark.parametrize(
    ("number", "country", "born"),
    [
        ("15108695088", "no", date(1986, 10, 15)),
        ("151086 95088", "no", date(1986, 10, 15)),
        ("16822548834", "no", date(1925, 2, 16)),  # Tenor: month + 80
        ("811218-9876", "se", date(1981, 12, 18)),
        ("8112189876", "se", date(1981, 12, 18)),
        ("19121212-1212", "se", date(1912, 12, 12)),
        ("19121212 1212", "se", date(1912, 12, 12)),  # python-stdnum takes a space too
        ("131052-308T", "fi", date(1952, 10, 13)),
        ("150505A9034", "fi", date(2005, 5, 15)),
    ],
)
def test_the_country_and_birth_date_are_read_off_the_number(number, country, born):
    assert infer_country(number) == country
    assert birth_date_of(country, number) == born


@pytest.mark.parametrize("number", ["", "1234", "abc-def", "15108695088x"])
def test_no_country_for_a_number_of_no_known_shape(number):
    assert infer_country(number) is None


@pytest.mark.parametrize(
    ("country", "number", "synthetic"),
    [
        ("no", "16822548834", True),  # Tenor, published by Skatteetaten
        ("no", "15108695088", False),
        ("no", "55108695071", False),  # a D-number (day + 40) belongs to a real person
        ("se", "19121212-1212", True),  # Skatteverket's test personnummer
        ("se", "121212+1212", True),  # the same, 10 digits: + for a hundred years old
        ("se", "811218-9876", False),
        ("fi", "010190-900P", True),  # individual number 900–999
        ("fi", "131052-308T", False),
    ],
)
def test_synthetic_identities_are_told_from_real_looking_ones(country, number, synthetic):
    assert is_synthetic(country, number) is synthetic


@pytest.mark.parametrize("country", ["no", "se", "fi"])
def test_every_offered_example_is_a_valid_synthetic_id_of_its_country(country):
    examples = example_synthetic_ids(country)
    assert examples
    for number in examples:
        assert validate_national_id(country, number)
        assert infer_country(number) == country and is_synthetic(country, number)
        assert birth_date_of(country, number) is not None


def test_a_broken_tenor_checksum_is_still_refused():
    assert infer_country("16822548835") == "no" and not is_synthetic("no", "16822548835")
    assert birth_date_of("no", "16822548835") is None


MISMATCHES = [  # chosen, number, the sentence in en, nb, sv and fi: each says the country once, in its own grammar
    (
        "se",
        "15108695088",
        "This number looks like a Norwegian fødselsnummer, not a Swedish personnummer: choose Norway or check",
        "Dette nummeret ser ut som et norsk fødselsnummer, ikke et svensk personnummer: velg Norge eller",
        "Det här numret ser ut som ett norskt fødselsnummer, inte ett svenskt personnummer: välj Norge eller",
        "Tämä numero näyttää olevan Norjan fødselsnummer, ei Ruotsin personnummer: valitse Norja tai",
    ),
    (
        "no",
        "811218-9876",
        "This number looks like a Swedish personnummer, not a Norwegian fødselsnummer: choose Sweden or check",
        "Dette nummeret ser ut som et svensk personnummer, ikke et norsk fødselsnummer: velg Sverige eller",
        "Det här numret ser ut som ett svenskt personnummer, inte ett norskt fødselsnummer: välj Sverige eller",
        "Tämä numero näyttää olevan Ruotsin personnummer, ei Norjan fødselsnummer: valitse Ruotsi tai",
    ),
    (
        "se",
        "131052-308T",
        "This number looks like a Finnish henkilötunnus, not a Swedish personnummer: choose Finland or check",
        "Dette nummeret ser ut som et finsk henkilötunnus, ikke et svensk personnummer: velg Finland eller",
        "Det här numret ser ut som ett finskt henkilötunnus, inte ett svenskt personnummer: välj Finland eller",
        "Tämä numero näyttää olevan Suomen henkilötunnus, ei Ruotsin personnummer: valitse Suomi tai",
    ),
]


@pytest.mark.parametrize(("chosen", "number", "english"), [case[:3] for case in MISMATCHES])
def test_a_country_and_number_mismatch_is_refused_before_the_service(signed_in, sandbox, chosen, number, english):
    answer = create_form(signed_in("operator"), country=chosen, national_id=number)
    assert answer.status_code == 200
    assert english in answer.text and " from " not in english
    assert 'data-field-error="national_id"' in answer.text
    assert sandbox.stats()["flows_created"] == 0


@pytest.mark.parametrize(("chosen", "number", "said"), [(case[0], case[1], case[3:]) for case in MISMATCHES])
def test_a_mismatch_reads_correctly_in_every_language(signed_in, sandbox, chosen, number, said):
    """ "a Norwegian fødselsnummer from Norway" said the country twice; sv "ett finsk", fi "ei maan Ruotsi tunnus"."""
    client = signed_in("operator")
    for language, sentence in zip(("nb", "sv", "fi"), said, strict=True):
        client.post("/language", data={"language": language})
        assert sentence in create_form(client, country=chosen, national_id=number).text, language


def test_the_test_environment_offers_the_synthetic_identities(signed_in):
    page = signed_in("operator").get("/flows/new").text
    assert 'data-testid="synthetic-ids"' in page
    for country, name in (("no", "Norway"), ("se", "Sweden"), ("fi", "Finland")):
        listed = re.search(rf"<li[^>]*><span[^>]*>{name}:</span>(.*?)</li>", page, re.DOTALL)  # by country (a walk)
        assert listed, name
        for number in example_synthetic_ids(country):
            assert f'data-synthetic-id="{number}" data-country="{country}"' in listed[1]
            assert f'{number}<span class="visually-hidden"> ({name})</span>' in listed[1]
    assert "js/create-flow.js" in page and "e.g. 16822548834" in page  # the format, with a synthetic example


@pytest.mark.parametrize("number", [example_synthetic_ids(country)[0] for country in ("no", "se", "fi")])
def test_a_synthetic_id_creates_a_flow_in_the_test_environment_without_a_warning(signed_in, sandbox, number):
    client = signed_in("operator")
    answer = create_form(client, country=infer_country(number), national_id=number)
    assert answer.status_code == 302, answer.text
    assert REAL_LOOKING_WARNING not in client.get(answer.headers["Location"]).text
    assert sandbox.stats()["flows_created"] == 1


def test_a_real_looking_id_in_the_test_environment_is_asked_about_before_anything_is_sent(signed_in, sandbox):
    """The warning came after the flow was created, with the consent request already on its way to a real person
    (found by a new user): now nothing is sent until the operator ticks that the person agreed."""
    client = signed_in("operator")
    asked = create_form(client, national_id="15108695088", real_person="")
    assert asked.status_code == 200 and sandbox.stats()["flows_created"] == 0
    assert REAL_LOOKING_WARNING in asked.text and 'data-testid="real-person"' in asked.text
    assert 'name="real_person"' in asked.text and 'value="15108695088"' in asked.text, "the form, as typed"
    agreed = create_form(client, national_id="15108695088", real_person="y")
    assert agreed.status_code == 302 and sandbox.stats()["flows_created"] == 1
    assert REAL_LOOKING_WARNING not in client.get(agreed.headers["Location"]).text


def test_the_birth_date_read_is_shown_after_a_submit(signed_in, sandbox):
    answer = create_form(signed_in("operator"), national_id="16822548834", last_name="")
    assert answer.status_code == 200 and sandbox.stats()["flows_created"] == 0
    assert "Born 16 Feb 1925 according to the number" in answer.text


@pytest.fixture
def production_operator(make_app):
    """A signed-in operator of a production portal (CSRF off, as in the other view tests)."""
    app = make_app(WTF_CSRF_ENABLED=False, **production_settings())
    return signed_in_as(app, "prod-operator", "operator")


@pytest.mark.parametrize(
    ("country", "number"),
    [(country, number) for country in ("no", "se", "fi") for number in example_synthetic_ids(country)],
)
def test_production_refuses_synthetic_ids(production_operator, sandbox, country, number):
    answer = production_operator.post(
        "/flows/new", data=form_data(production_operator, country=country, national_id=number)
    )
    assert answer.status_code == 200
    assert SYNTHETIC_MESSAGE in answer.text and 'data-field-error="national_id"' in answer.text
    assert sandbox.stats()["flows_created"] == 0


def test_production_offers_no_synthetic_ids_and_does_not_warn_about_real_ones(production_operator, sandbox):
    page = production_operator.get("/flows/new").text
    assert 'data-testid="synthetic-ids"' not in page and "data-synthetic-id" not in page
    answer = production_operator.post("/flows/new", data=form_data(production_operator, last_name=""))
    assert answer.status_code == 200 and REAL_LOOKING_WARNING not in answer.text
    assert SYNTHETIC_MESSAGE not in answer.text and "Born 15 Oct 1986 according to the number" in answer.text


@pytest.mark.parametrize(("country", "number"), [("fi", "131052A308T"), ("se", "20521013-0000")])
def test_a_number_of_someone_born_in_the_future_is_no_valid_id(country, number):
    """python-stdnum takes them (found by a new user, whose search for one was run and audited)."""
    with pytest.raises(NationalIdProblem, match="date of birth or individual number is not possible"):
        validate_national_id(country, number)


def test_a_ten_digit_personnummer_whose_date_is_ahead_this_century_is_last_century_s():
    """261218-1236 read as born 18 Dec 2026 was refused as born in the future (on 28 Nov 2026): a 99-year-old's
    number (found by a re-check). Made from tomorrow's date, the number means the same on any day the tests run
    (261218-1236 itself would have read as 2026 from 18 Dec 2026 on)."""
    ahead = date.today() + timedelta(days=1)
    digits = f"{ahead:%y%m%d}123"
    number = f"{digits[:6]}-{digits[6:]}{luhn.calc_check_digit(digits)}"
    assert validate_national_id("se", number)
    assert birth_date_of("se", number) == ahead.replace(year=ahead.year - 100)
