"""A wheel built from the repository serves every page: templates, static files and translations go into it.

The wheel is built from a copy of the sources without compiled catalogs (as a fresh clone has), installed
into a fresh virtual environment outside the checkout, and the installed portal renders its sign-in page
(in English and Norwegian) and a static file; the installed sandbox renders its home page.
"""

import json
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
from support import portal_config

ROOT = Path(__file__).resolve().parents[1]
NOT_SOURCES = shutil.ignore_patterns(
    ".venv", ".git", "build", "dist", "*.egg-info", "instance", "__pycache__", "*.mo", "mutants", "test-artifacts"
)

CHECK = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path

    import flow_sandbox
    import portal
    from flask_migrate import upgrade

    config = json.loads(sys.argv[1])
    app = portal.create_app(config)
    with app.app_context():
        upgrade()
    client = app.test_client()
    login = client.get("/login")
    norwegian = client.get("/login", headers={"Accept-Language": "nb"})
    css = client.get("/static/css/portal.css")
    sandbox = flow_sandbox.create_app().test_client().get("/")
    print(json.dumps({
        "portal": portal.__file__,
        "sandbox": flow_sandbox.__file__,
        "login": [login.status_code, 'name="password"' in login.text],
        "norwegian": "Logg inn" in norwegian.text,
        "css": [css.status_code, css.mimetype, len(css.data)],
        "sandbox_home": sandbox.status_code,
    }))
    """
)


@pytest.fixture(scope="module")
def installed_python(tmp_path_factory) -> Path:
    """The python of a fresh venv holding only the wheel; the dependencies are read from the test venv."""
    work = tmp_path_factory.mktemp("wheel")
    sources = work / "sources"
    shutil.copytree(ROOT, sources, ignore=NOT_SOURCES)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(work / "dist"), str(sources)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (work / "dist").glob("flow_portal-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    # The dependencies come from the test venv's site-packages, after the venv's own: a plain path there adds
    # no .pth processing, so the checkout's editable install stays out.
    own_site = Path(
        subprocess.check_output([str(python), "-c", "import site; print(site.getsitepackages()[0])"], text=True).strip()
    )
    (own_site / "test-venv-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def test_the_installed_wheel_serves_pages_static_files_and_translations(installed_python, tmp_path):
    config = portal_config("http://127.0.0.1:9", f"sqlite:///{tmp_path / 'portal.db'}")
    result = subprocess.run(
        [str(installed_python), "-c", CHECK, json.dumps(config)],
        cwd=tmp_path,  # outside the checkout: nothing can be found beside the sources
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert ROOT not in Path(seen["portal"]).parents and "site-packages" in seen["portal"]
    assert ROOT not in Path(seen["sandbox"]).parents
    assert seen["login"] == [200, True]
    assert seen["norwegian"], "the wheel carries compiled translations"
    status, mimetype, size = seen["css"]
    assert (status, mimetype) == (200, "text/css") and size > 100
    assert seen["sandbox_home"] == 200


def test_the_wheel_holds_every_module_of_the_sources(installed_python):
    site = Path(
        subprocess.check_output(
            [str(installed_python), "-c", "import portal, pathlib; print(pathlib.Path(portal.__file__).parents[1])"],
            text=True,
        ).strip()
    )
    for package in ("portal", "flow_sandbox"):
        sources = {path.relative_to(ROOT) for path in (ROOT / package).rglob("*.py")}
        installed = {path.relative_to(site) for path in (site / package).rglob("*.py")}
        assert sources - installed == set(), f"left out of the wheel: {sorted(sources - installed)}"
