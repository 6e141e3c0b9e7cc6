"""Real-kernel fixtures: one IPython kernel per test module, its state in a temporary folder.

The notebook layer must work on ipykernel 6 as well as 7. ``bash scripts/dev.sh test`` builds a
second venv with ipykernel 6, registers it as the kernelspec ``kode-ipykernel6`` and names it in
``KODE_NB_EXTRA_KERNELS`` (comma-separated kernelspec names). A module that runs on every kernel
says ``pytestmark = EVERY_KERNEL``; its ``kernel`` fixture is then one kernel per kernelspec. Without
the variable (pytest run directly) the extra kernels' tests are skipped, and on CI they fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import Kernel

EXT = "kode_nb"

EXTRA_KERNELS_VAR = "KODE_NB_EXTRA_KERNELS"
DEV_SH_KERNELS = ("kode-ipykernel6",)
"""What ``bash scripts/dev.sh test`` registers: expected when the variable is unset."""


def extra_kernels() -> list[str]:
    """The kernelspecs named in ``KODE_NB_EXTRA_KERNELS``, or dev.sh's when it is unset."""
    value = os.environ.get(EXTRA_KERNELS_VAR)
    if value is None:
        return list(DEV_SH_KERNELS)
    return list(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))


KERNEL_NAMES = ["python3", *(n for n in extra_kernels() if n != "python3")]

EVERY_KERNEL = pytest.mark.parametrize("kernel", KERNEL_NAMES, indirect=True, scope="module")
"""``pytestmark = EVERY_KERNEL``: the module's tests run once per kernel (ids ``[python3]`` ...)."""


@pytest.fixture(scope="module")
def kernel(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Kernel]:
    """A kernel with kode_nb loaded (``k.ok(code)``, ``k.button(...)``, ``k.click(...)``)."""
    name = str(getattr(request, "param", "python3"))
    if name != "python3" and EXTRA_KERNELS_VAR not in os.environ:
        why = (
            f"the {name!r} kernel is set up by `bash scripts/dev.sh test`, which names it in "
            f"{EXTRA_KERNELS_VAR}; that variable is unset"
        )
        if os.environ.get("CI"):
            pytest.fail(f"{why} (on CI it must be set)", pytrace=False)
        pytest.skip(why)
    k = Kernel(tmp_path_factory.mktemp("kernel"), name)
    try:
        k.ok(f"%load_ext {EXT}")
        yield k
    finally:
        k.close()


# --------------------------------------------------------------------------- browser tests' servers

_LAB_ARGS = (
    "--LabApp.expose_app_in_browser=True",
    "--LabApp.news_url=None",
    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
)


@pytest.fixture(scope="module")
def lab(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """A JupyterLab server for this test module on a free loopback port, all its state in a
    temporary folder: ``(base URL, the folder it serves)``."""
    from .browser import jupyter_server

    root = tmp_path_factory.mktemp(f"lab-{request.module.__name__.rsplit('.', 1)[-1]}")
    with jupyter_server("jupyterlab", root, *_LAB_ARGS) as served:
        yield served


@pytest.fixture(scope="module")
def notebook7(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """A Notebook 7 server for this test module, like :func:`lab`."""
    from .browser import jupyter_server

    root = tmp_path_factory.mktemp(f"nb7-{request.module.__name__.rsplit('.', 1)[-1]}")
    with jupyter_server(
        "notebook", root, "--JupyterNotebookApp.expose_app_in_browser=True"
    ) as served:
        yield served
