"""The reference for the webhook benchmark: an endpoint that reads the body and answers 204."""

from flask import Flask, request

app = Flask(__name__)


@app.post("/webhooks/flow")
def receive():
    request.get_data()
    return "", 204


@app.get("/healthz")
def health():
    return {"status": "ok"}
