"""Fixtures that put a test module's portal in front of the alternative service (tests/altservice.py).

A module imports them by name (`from alt_fixtures import app, sandbox`): they override conftest's fixtures of
the same names there, so `make_app`, `signed_in` and the rest use the alternative service.
"""

import pytest
from altservice import PORTAL_SETTINGS as ALT_SETTINGS


@pytest.fixture
def sandbox(alt):
    """Overrides conftest's: `make_app` needs a default service, and here it is the alternative one."""
    return alt


@pytest.fixture
def app(make_app, alt):
    """The portal against the alternative service (overrides conftest's `app`, so `signed_in` uses it)."""
    return make_app(sandbox_url=alt.url, **ALT_SETTINGS, WTF_CSRF_ENABLED=False)
