"""The create form's script in a real browser: country and birth date read as typed, synthetic ids at a click."""

import re
from datetime import datetime, timezone

from browser_support import send_new_flow, sign_in
from playwright.sync_api import expect


def test_typing_a_number_preselects_its_country_and_shows_the_birth_date(page, stack, console_errors):
    sign_in(page, stack)
    page.goto(f"{stack.url}/flows/new")
    reading = page.get_by_test_id("id-reading")
    expect(reading).to_be_empty()
    expect(reading).to_be_hidden()  # no room taken while empty
    page.get_by_label("National id").fill("811218-9876")
    expect(page.get_by_label("Country")).to_have_value("se")
    expect(reading).to_have_text(re.compile(r"Sweden · Born 18 Dec 1981"))
    page.get_by_label("National id").fill("")
    expect(reading).to_be_empty()
    # a live region changed from hidden and filled at once is not read out by every screen reader: it stays
    assert reading.evaluate("element => !element.hidden && getComputedStyle(element).display !== 'none'")
    page.get_by_label("National id").fill("131052-308T")
    expect(page.get_by_label("Country")).to_have_value("fi")
    expect(reading).to_contain_text("Born 13 Oct 1952")
    assert console_errors == []


def test_a_synthetic_id_is_filled_in_at_a_click_and_creates_a_flow(page, stack, console_errors):
    sign_in(page, stack)
    page.goto(f"{stack.url}/flows/new")
    page.get_by_role("button", name="16822548834").click()
    expect(page.get_by_label("National id")).to_have_value("16822548834")
    expect(page.get_by_label("Country")).to_have_value("no")
    expect(page.get_by_test_id("id-reading")).to_contain_text("Born 16 Feb 1925")
    page.get_by_label("Last name").fill("Syntetisk")
    page.get_by_role("button", name="Create flow").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(re.compile(r"LA-\d+"))
    expect(page.locator(".alert-warning")).to_have_count(0)
    assert console_errors == []


def test_a_real_looking_number_is_asked_about_before_anything_is_sent(page, stack, console_errors):
    """A real person's number in the test environment was warned about only once the flow was created."""
    sign_in(page, stack)
    send_new_flow(page, stack, "811218-9876", "Verklig")
    expect(page.locator("[data-field-error=national_id]")).to_contain_text("looks like a real person")
    expect(page.get_by_label("National id")).to_be_focused()
    page.get_by_label("The person agreed to take part with their real number").check()
    page.get_by_role("button", name="Create flow").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(re.compile(r"LA-\d+"))
    assert console_errors == []


def test_a_country_chosen_first_stays_chosen_and_a_number_of_another_is_said(page, stack, console_errors):
    """Sweden chosen, then a Norwegian number typed: the script switched the country back to Norway without a word,
    and the form went out as a Norwegian flow (found by a new user). The choice stays; the reading says so."""
    sign_in(page, stack)
    page.goto(f"{stack.url}/flows/new")
    page.get_by_label("Country").select_option("se")
    page.get_by_label("National id").fill("16822548834")
    expect(page.get_by_label("Country")).to_have_value("se")
    expect(page.get_by_test_id("id-reading")).to_contain_text("Looks like a number from Norway, not from the country")
    page.get_by_label("National id").fill("16822548835")  # and mistyped: said too, not a birth date (a walk)
    expect(page.get_by_test_id("id-reading")).to_have_text(
        "Looks like a number from Norway, not from the country chosen · Its check digit does not match: look for a "
        "mistyped digit"
    )
    page.get_by_label("National id").fill("16822548834")
    page.get_by_label("Last name").fill("Syntetisk")
    page.get_by_role("button", name="Create flow").click()
    expect(page.locator("[data-field-error=national_id]")).to_be_visible()  # refused by the server, as chosen
    assert console_errors == []


def test_a_number_whose_check_digit_does_not_match_is_said_as_it_is_typed(page, stack, console_errors):
    """The reading showed a birth date for a number with a mistyped digit: only sending the form said it was not
    valid (noticed on a walk). The check digit is read as typed, as the server reads it, in every country."""
    sign_in(page, stack)
    page.goto(f"{stack.url}/flows/new")
    reading, national_id = page.get_by_test_id("id-reading"), page.get_by_label("National id")
    for mistyped, country in (("16822548835", "no"), ("811218-9875", "se"), ("131052-308U", "fi")):
        national_id.fill(mistyped)
        expect(page.get_by_label("Country")).to_have_value(country)
        expect(reading).to_contain_text("Its check digit does not match: look for a mistyped digit")
        expect(reading).not_to_contain_text("Born")
        expect(reading).to_have_class(re.compile("text-warning-emphasis"))
    # the check digit right, the date not: as the server says (a samordningsnummer is no personnummer to it either)
    for impossible, country in (("32018612339", "no"), ("811318-9875", "se"), ("811278-9873", "se")):
        national_id.fill(impossible)
        expect(page.get_by_label("Country")).to_have_value(country)
        expect(reading).to_contain_text("Its date of birth or individual number is not possible")
    national_id.fill("16822548834")
    expect(reading).to_have_text("Looks like: Norway · Born 16 Feb 1925")
    expect(reading).not_to_have_class(re.compile("text-warning-emphasis"))
    national_id.fill("19121212 1212")  # with a space, as python-stdnum takes it (it read as nothing; a walk)
    expect(reading).to_have_text("Looks like: Sweden · Born 12 Dec 1912")
    national_id.fill("131052-9030")  # a Swedish shape too, whose Luhn digit does not match: the Finnish number it is
    expect(page.get_by_label("Country")).to_have_value("fi")
    expect(reading).to_have_text("Looks like: Finland · Born 13 Oct 1952")
    # Ten digits name no century: on 29 Nov 2026 (the browser's clock, set), 11 Dec 2026 is ahead, so 1926; a day
    # earlier, 2026, as the server reads them (it read the year alone, born in the future until New Year).
    page.clock.set_fixed_time(datetime(2026, 11, 29, 12, tzinfo=timezone.utc))
    national_id.fill("2612111803")
    expect(reading).to_have_text("Looks like: Sweden · Born 11 Dec 1926")
    national_id.fill("2611284122")
    expect(reading).to_have_text("Looks like: Sweden · Born 28 Nov 2026")
    assert console_errors == []


def test_a_swedish_plus_reads_the_century_as_the_server_does(page, stack, console_errors):
    """A "+" in ten digits says a hundred years or more: the server (python-stdnum) reads 811218+9876 as born in
    1881, a century before 811218-9876. The reading took the century off 2081 only when the "+" was not there and
    took 1981 for both; the year a "+" names is that of the "-" less a hundred, as the script read it before."""
    sign_in(page, stack)
    page.goto(f"{stack.url}/flows/new")
    reading, national_id = page.get_by_test_id("id-reading"), page.get_by_label("National id")
    page.clock.set_fixed_time(datetime(2026, 11, 29, 12, tzinfo=timezone.utc))
    for typed, born in (
        ("811218-9876", "18 Dec 1981"),
        ("811218+9876", "18 Dec 1881"),
        ("2612111803", "11 Dec 1926"),
        ("261211+1803", "11 Dec 1926"),  # the server: 2026, a hundred years earlier for "+", not ahead: 1926
        ("2611284122", "28 Nov 2026"),
        ("261128+4122", "28 Nov 1926"),
    ):
        national_id.fill(typed)
        expect(reading).to_have_text(f"Looks like: Sweden · Born {born}")
    assert console_errors == []
