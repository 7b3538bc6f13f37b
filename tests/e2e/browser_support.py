"""Helpers for the browser tests."""

from support import PASSWORD


def sign_in(page, stack, role="operator"):
    page.goto(f"{stack.url}/login")
    page.get_by_label("Username").fill(role)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{stack.url}/flows")
