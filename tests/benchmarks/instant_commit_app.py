"""A reference for the webhook CPU breakdown: the portal with no index writer and a commit that answers at once.

What is left is the request itself (gunicorn, the lean lane, signature, JSON, the row): never a setting.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from no_index_app import app  # noqa: E402

from portal.extensions import db  # noqa: E402
from portal.webhooks.group_commit import GroupCommitter  # noqa: E402


class InstantCommitter(GroupCommitter):
    def store(self, row: dict, replay_keys: frozenset[str]) -> bool:
        return True


with app.app_context():
    app.extensions["webhook_committer"] = InstantCommitter(db.engine)
