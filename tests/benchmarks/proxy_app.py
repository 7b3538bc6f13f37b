"""The page benchmark's reference: the least a Flask proxy of the flow list does (one token, one call, a table)."""

import os
import threading

import requests
from flask import Flask, render_template_string

UPSTREAM = os.environ["UPSTREAM_URL"]
PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Flows</title></head><body><main>
<h1>Flows</h1><table><tr><th>Reference</th><th>Status</th><th>Created</th></tr>
{% for flow in flows %}<tr><td><a href="/flows/{{ flow.id }}">{{ flow.referenceId }}</a></td>
<td>{{ flow.status }}</td><td>{{ flow.createdAt }}</td></tr>{% endfor %}</table></main></body></html>"""

app = Flask(__name__)
local = threading.local()
token: dict = {}


def session() -> requests.Session:
    if not hasattr(local, "session"):
        local.session = requests.Session()
    return local.session


def bearer() -> str:
    if "value" not in token:
        answer = session().post(
            f"{UPSTREAM}/realms/sandbox/protocol/openid-connect/token", data={"grant_type": "client_credentials"}
        )
        token["value"] = answer.json()["access_token"]
    return token["value"]


@app.get("/flows")
def flows():
    answer = session().get(f"{UPSTREAM}/api/flows?limit=10", headers={"Authorization": f"Bearer {bearer()}"})
    return render_template_string(PAGE, flows=answer.json()["data"])


@app.get("/healthz")
def health():
    return {"status": "ok"}
