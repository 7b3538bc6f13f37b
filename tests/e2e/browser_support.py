"""Helpers for the browser tests."""

from support import PASSWORD

# Every signed-in page, for the crawls (axe, layout): `{flow}` and `{event}` stand for a flow's and an event's path.
STAFF_PAGES = {
    "flows": "/flows",
    "archived": "/flows?archived=true",
    "search": "/flows?archived=all&status=Accepted",
    "detail": "{flow}",
    "new": "/flows/new",
    "events": "/events",
    "event-detail": "{event}",
    "users": "/admin/users",
    "audit": "/admin/audit",
    "access": "/admin/access",
    "subjects": "/admin/subjects",
    "rejected": "/admin/rejected",
    "gaps": "/admin/gaps",
    "notifications": "/admin/notifications",
    "insights": "/insights?range=30d",
    "stuck": "/insights/stuck?hours=1",
    "incidents": "/insights/incidents",
    "not-found": "/flows/00000000-0000-4000-8000-000000000000",
}


def sign_in(page, stack, role="operator"):
    page.goto(f"{stack.url}/login")
    page.get_by_label("Username").fill(role)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{stack.url}/flows")


def send_new_flow(page, stack, national_id: str, last_name: str) -> None:
    """Open New flow, type the two fields a person types, and select Create flow."""
    page.goto(f"{stack.url}/flows/new")
    page.get_by_label("National id").fill(national_id)
    page.get_by_label("Last name").fill(last_name)
    page.get_by_role("button", name="Create flow").click()
