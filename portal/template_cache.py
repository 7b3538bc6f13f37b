"""Compiled templates kept for the life of the process and shared by every app built in it.

Jinja compiles a template once per environment, and each `create_app` makes a new environment. A gunicorn worker
builds one app, so for it nothing changes; the test suite builds over a thousand, and compiling the templates of
their pages took about a third of a second each time. Entries are keyed by template file and checked against the
template's source (Jinja's bucket checksum), so an edited template is compiled again.
"""

from flask import Flask
from jinja2 import BytecodeCache
from jinja2.bccache import Bucket


class ProcessTemplateCache(BytecodeCache):
    def __init__(self) -> None:
        self._compiled: dict[str, bytes] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        compiled = self._compiled.get(bucket.key)
        if compiled is not None:
            bucket.bytecode_from_string(compiled)

    def dump_bytecode(self, bucket: Bucket) -> None:
        self._compiled[bucket.key] = bucket.bytecode_to_string()


PROCESS_TEMPLATE_CACHE = ProcessTemplateCache()


def init_app(app: Flask) -> None:
    app.jinja_env.bytecode_cache = PROCESS_TEMPLATE_CACHE
