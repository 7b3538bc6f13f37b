"""The sandbox under its former name, `flask --app portal.sandbox run -p 8081`, which DESIGN still documents.

The sandbox is the top-level package `flow_sandbox` and imports nothing from the portal; this alias only hands
Flask its app factory.
"""

from flow_sandbox import create_app

__all__ = ["create_app"]
