"""Response headers that make the strict CSP work, and the role check for views."""

from functools import wraps

from flask import Flask, abort
from flask_login import current_user

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)


def init_app(app: Flask) -> None:
    @app.after_request
    def secure_headers(response):
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        response.headers.setdefault("X-Frame-Options", "DENY")
        if response.mimetype == "text/html":
            response.headers.setdefault("Cache-Control", "no-store")
        return response


def role_required(role: str):
    """Let the view run only for a signed-in user whose role is `role` or above (else 403)."""

    def decorate(view):
        @wraps(view)
        def guarded(*args, **kwargs):
            if not current_user.can(role):
                abort(403)
            return view(*args, **kwargs)

        return guarded

    return decorate
