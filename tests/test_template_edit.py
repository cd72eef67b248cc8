"""An edited user template takes effect in the running process (not only in a new one).

The prepared-kernel caches key on ``clconv.templates.generation()`` (the user templates' times and
sizes) and Mako's compiled modules are named by file time and size, so an edit made within the
same second as the previous build is still seen.
"""

from __future__ import annotations

import shutil

import numpy as np

import clconv
from clconv import reference
from clconv.builder import stats
from clconv.geometry import resolve_conv
from clconv.templates import builtin_template_dir

from helpers import random

STORE = "    y_base[y_off + nc * CLC_OP + p] = acc;"


def test_edit_in_the_same_process_is_picked_up(tmp_path, monkeypatch, rng):
    folder = tmp_path / "templates"
    folder.mkdir()
    shutil.copy(builtin_template_dir() / "direct.mako", folder / "direct.mako")
    monkeypatch.setenv("CLCONV_TEMPLATE_PATH", str(folder))
    x, w = random(rng, (1, 2, 5, 5)), random(rng, (3, 2, 3, 3))
    g = resolve_conv(2, x.shape, w.shape, None, 1, 1, 1, 1).geometry
    ref = reference.forward(g, x, w)

    np.testing.assert_allclose(clconv.conv2d(x, w, padding=1, algorithm="direct"), ref, rtol=1e-5, atol=1e-5)
    source = (folder / "direct.mako").read_text()
    assert STORE in source, "the forward store line of direct.mako changed; update this test"
    (folder / "direct.mako").write_text(source.replace(STORE, "    y_base[y_off + nc * CLC_OP + p] = acc + 1;"))

    builds = stats.source_builds
    edited = clconv.conv2d(x, w, padding=1, algorithm="direct")
    assert stats.source_builds == builds + 1, "the edited template was not rebuilt"
    np.testing.assert_allclose(edited, ref + 1, rtol=1e-5, atol=1e-5)
    assert "acc + 1" in clconv.render(clconv.conv2d, x, w, padding=1, algorithm="direct")
