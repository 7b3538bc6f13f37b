"""The role check for views: which signed-in staff may open a page."""

from functools import wraps

from flask import abort
from flask_login import current_user


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
