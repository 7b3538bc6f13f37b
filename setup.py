"""The one build step pyproject.toml cannot declare: the wheel gets compiled translations.

`messages.mo` is a build output, not kept in git (scripts/_setup.sh compiles it beside the sources for a
checkout); a wheel built from a clean checkout compiles its own copy here.
"""

from pathlib import Path

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithCatalogs(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads the sources' own catalogs
            return
        for source in Path("portal/translations").glob("*/LC_MESSAGES/messages.po"):
            target = Path(self.build_lib) / source.with_suffix(".mo")
            target.parent.mkdir(parents=True, exist_ok=True)
            with source.open("rb") as po:
                catalog = read_po(po)
            with target.open("wb") as mo:
                write_mo(mo, catalog)


setup(cmdclass={"build_py": BuildWithCatalogs})
