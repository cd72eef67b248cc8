"""The built wheel carries the kernel templates and the tools' shape sets and finds them once installed.

Builds a wheel offline from a copy of the source tree (so the checkout's ``build/`` stays
untouched), with the virtual environment's setuptools (``--no-build-isolation``: nothing is
downloaded), installs it into a private target folder and, in a fresh interpreter whose working
directory is elsewhere and whose ``sys.path`` starts with that folder, checks that
``builtin_template_dir()`` points inside the installed package and that a kernel renders from it,
and that every shape file ``clconv.tools.shapes`` names loads from the installed package's data.
No kernel is built: the whole file takes a few seconds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = sorted(p.name for p in (REPO / "clconv" / "kernels").glob("*.mako"))

CHILD = r"""
import json, sys
import numpy as np
import clconv, clconv.templates
from clconv.tools import shapes
x = np.ones((1, 2, 5, 5), np.float32)
w = np.ones((3, 2, 3, 3), np.float32)
print(json.dumps({
    "clconv": clconv.__file__,
    "templates": str(clconv.templates.builtin_template_dir()),
    "shape_data": str(shapes.DATA_DIR),
    "shape_sets": {name: len(shapes.resolve_layers(name)) for name in shapes.PACKAGED_FILES},
    "sources": {a: clconv.render(clconv.conv2d, x, w, padding=1, algorithm=a) for a in ("direct", "im2col")},
}))
"""


def _pip(*args: str, cwd: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"pip {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "src"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis",
        ".gpu", ".whl", "results", "tests", "docs"))
    _pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(work / "dist"), str(source),
         cwd=work)
    (built,) = (work / "dist").glob("clconv-*.whl")
    return built


def test_wheel_contains_the_templates(wheel):
    assert TEMPLATES, "no templates in the checkout"
    names = zipfile.ZipFile(wheel).namelist()
    packaged = sorted(n.split("/")[-1] for n in names if n.startswith("clconv/kernels/") and n.endswith(".mako"))
    assert packaged == TEMPLATES
    assert "clconv/__init__.py" in names and "clconv/algorithms/__init__.py" in names


def test_wheel_contains_the_tools_and_their_shape_sets(wheel):
    from clconv.tools import shapes

    names = zipfile.ZipFile(wheel).namelist()
    assert "clconv/tools/__init__.py" in names and "clconv/tools/cli.py" in names
    data = sorted(n[len("clconv/tools/data/"):] for n in names if n.startswith("clconv/tools/data/"))
    assert data == sorted([*shapes.PACKAGED_FILES, "LICENSE", "NOTICE"])
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "clconv = clconv.tools.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_installed_wheel_renders_from_its_own_templates(wheel, tmp_path):
    target = tmp_path / "site"
    _pip("install", "--no-deps", "--no-index", "-q", "--target", str(target), str(wheel), cwd=tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = f"import sys; sys.path.insert(0, {str(target)!r}); exec({CHILD!r})"
    done = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(result["clconv"]).resolve().is_relative_to(target.resolve()), result["clconv"]
    assert Path(result["templates"]).resolve() == (target / "clconv" / "kernels").resolve()
    for algorithm, source in result["sources"].items():
        assert "__kernel void clc_" in source, algorithm
        assert "typedef int clc_idx;" in source, algorithm
