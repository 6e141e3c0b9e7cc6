"""The wheel carries the JupyterLab extension prebuilt: ``pip wheel .`` holds
``share/jupyter/labextensions/kode-nb`` (package.json, install.json, static JS), and installed with
JupyterLab into a fresh venv with no node on PATH, ``jupyter labextension list`` shows it enabled
and OK. One slow test (a wheel build and a venv install, from pip's cache).

Needs the extension built once in this clone (``bash scripts/dev.sh install``); the wheel build
then reuses it (hatch-jupyter-builder's ``skip-if-exists``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILT = ROOT / "kode_nb" / "labextension" / "static" / "style.js"
DATA = "kode_nb-0.1.0.data/data/share/jupyter/labextensions/kode-nb"


def run(cmd: list[str], **kwargs: object) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return str(done.stdout + done.stderr)


@pytest.mark.skipif(
    not BUILT.exists(), reason="labextension not built: bash scripts/dev.sh install"
)
def test_the_wheel_ships_the_extension_and_a_node_less_venv_lists_it(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(dist)])
    (wheel,) = dist.glob("kode_nb-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("package.json", "install.json", "static/style.js"):
        assert f"{DATA}/{needed}" in names, sorted(n for n in names if "labextensions" in n)
    assert any(re.fullmatch(rf"{DATA}/static/remoteEntry\.[0-9a-f]+\.js", n) for n in names)
    assert not [n for n in names if "node_modules" in n or n.endswith(".ts")]

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    run([python, "-m", "pip", "install", "-q", "--no-deps", str(wheel)])
    run([python, "-m", "pip", "install", "-q", "jupyterlab>=4.2,<5"])

    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env.update(
        PATH=str(venv / "bin"), JUPYTER_PLATFORM_DIRS="1", HOME=str(tmp_path),
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"), JUPYTER_DATA_DIR=str(tmp_path / "data"),
    )  # fmt: skip
    assert shutil.which("node", path=env["PATH"]) is None  # no node anywhere on that PATH
    listed = run([str(venv / "bin" / "jupyter"), "labextension", "list"], env=env)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", listed)
    assert re.search(r"kode-nb v0\.1\.0 enabled OK \(python, kode_nb\)", plain), plain
    assert str(venv / "share" / "jupyter" / "labextensions") in plain
