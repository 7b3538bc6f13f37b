"""The work lists with rows in them, in a real browser: accessible in English and Norwegian, national ids masked."""

import time

from axe_playwright_python.sync_playwright import Axe
from browser_support import sign_in
from playwright.sync_api import expect

THREE_DAYS = 3 * 24 * 3600


def test_work_lists_with_rows_are_accessible_in_every_language(page, stack, shot):
    stack.portal_app.extensions["portal.clock"] = lambda: time.time() + THREE_DAYS  # the seeded flows are stuck
    synced = stack.portal_app.test_cli_runner().invoke(args=["flows", "sync", "--all", "--details", "100"])
    assert synced.exit_code == 0, synced.output
    sign_in(page, stack, "viewer")
    problems = {}
    for language in ("en", "nb", "sv", "fi"):
        if language != "en":
            with page.expect_navigation():
                page.locator("select#language").select_option(language)
            expect(page.locator("html")).to_have_attribute("lang", language)
        for name, path, row in (
            ("stuck", "/insights/stuck", "stuck-row"),
            ("incidents", "/insights/incidents", "incident-row"),
        ):
            page.goto(stack.url + path)
            expect(page.get_by_test_id(row).first).to_be_visible()
            assert "15108695088" not in page.content()
            shot(f"page-worklist-{name}-{language}")
            found = Axe().run(page).response["violations"]
            problems[f"{name} ({language})"] = [f"{item['id']} ({item['impact']})" for item in found]
    assert {name: found for name, found in problems.items() if found} == {}
