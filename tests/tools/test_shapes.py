"""benchdnn descriptor parsing, shape files (the packaged ones too) and named sets; the NumPy im2col
baseline (no OpenCL)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from clconv import reference
from clconv.geometry import ConvGeometry, resolve_conv, resolve_conv_transpose
from clconv.tools import shapes
from clconv.tools.libraries import numpy_im2col_forward
from clconv.tools.report import geomean

REPO = Path(__file__).resolve().parents[2]


def test_defaults_and_square_copy():
    layer = shapes.parse_descriptor('mb32ic64ih56oc64oh56kh3ph1n"resnet_50:res2a_branch2b*3"')
    g = layer.geometry
    assert layer.name == "resnet_50:res2a_branch2b*3" and not layer.transposed
    assert (g.ndim, g.batch, g.groups, g.in_channels, g.out_channels) == (2, 32, 1, 64, 64)
    assert g.in_size == (1, 56, 56) and g.kernel == (1, 3, 3) and g.pad_begin == g.pad_end == (0, 1, 1)
    assert g.stride == (1, 1, 1) and g.dilation == (1, 1, 1) and g.out_size == (1, 56, 56)
    assert shapes.parse_descriptor("ic3oc8ih5").geometry.batch == 2  # benchdnn's default minibatch


def test_matches_the_resolver():
    g = shapes.parse_descriptor("g2mb3ic8ih11iw9oc6kh3kw2sh2sw1ph1pw0dh1dw0").geometry
    expected = resolve_conv(2, (3, 8, 11, 9), (6, 4, 3, 2), None, stride=(2, 1), padding=(1, 0),
                            dilation=(2, 1), groups=2).geometry
    assert g == expected


def test_zero_based_dilation_and_computed_padding():
    # output given, padding not: benchdnn computes it ((o-1)*s - i + extent) // 2
    g = shapes.parse_descriptor("mb1ic4ih10oc4oh10kh3dh1").geometry
    assert g.dilation[1:] == (2, 2) and g.pad_begin[1:] == (2, 2) and g.out_size[1:] == (10, 10)


def test_asymmetric_padding_when_output_needs_it():
    # 7x7/2 stem with no padding given and output 112 from 224: total padding 5 -> 2 before, 3 after
    g = shapes.parse_descriptor("mb1ic3ih224oc64oh112kh7sh2").geometry
    assert g.pad_begin[1:] == (2, 2) and g.pad_end[1:] == (3, 3) and g.out_size[1:] == (112, 112)


def test_1d_and_3d():
    g1 = shapes.parse_descriptor("mb2ic4iw20oc8ow10kw3sw2pw1").geometry
    assert g1.ndim == 1 and g1.in_size == (1, 1, 20) and g1.out_size == (1, 1, 10)
    g3 = shapes.parse_descriptor('g2_ic32oc32_id17kd2_n"3d_gconv"').geometry
    assert g3.ndim == 3 and g3.in_size == (17, 17, 17) and g3.kernel == (2, 2, 2) and g3.out_size == (16, 16, 16)


def test_transposed_layer_is_the_canonical_data_gradient():
    layer = shapes.parse_descriptor("mb64ic256ih16oc128oh32kh4sh2ph1", transposed=True)
    expected = resolve_conv_transpose(2, (64, 256, 16, 16), (256, 128, 4, 4), None, stride=2, padding=1).geometry
    assert layer.transposed and layer.geometry == expected


@pytest.mark.parametrize("bad, what", [
    ("mb2ih5oc4", "ic"), ("mb2ic4oc4", "spatial"), ("mb2ic4ih5oc4xx3", "cannot parse"),
    ("mb2ic4ic5ih5oc4", "twice"), ("mb2g3ic4ih5oc6", "g3"), ("mb0ic4ih6oc8kh3ph1", "mb0 is an empty batch"),
])
def test_errors_name_the_problem(bad, what):
    with pytest.raises(ValueError, match=what):
        shapes.parse_descriptor(bad)


def test_shape_file_with_includes_comments_mb_and_duplicates(tmp_path):
    (tmp_path / "inner").write_text("# a comment\nmb8ic4ih5oc4oh5kh3ph1n\"a\"  # trailing\n\nic4ih7oc4kh1\n")
    (tmp_path / "outer").write_text("--dir=BWD_D\n--mb=3\n--batch=inner\nmb8ic4ih5oc4oh5kh3ph1\n")
    layers = shapes.load_file(tmp_path / "outer")
    assert [l.geometry.batch for l in layers] == [3, 3]  # --mb overrides; the repeat is kept once
    assert layers[0].name == "a"
    assert [l.geometry.batch for l in shapes.load_file(tmp_path / "outer", batch=5)] == [5, 5]


def test_unexpressible_layers_are_skipped_and_reported(tmp_path):
    (tmp_path / "f").write_text("mb1ic1oc16_kd2kh1kw1_id2ih1iw1_od1oh1ow1_sd2sh1sw1_pd1ph0pw0\nic4ih7oc4kh1\n")
    skipped: list = []
    assert len(shapes.load_file(tmp_path / "f", skipped=skipped)) == 1 and len(skipped) == 1


def test_named_sets():
    gpu = shapes.named_set("gpu")
    assert len(gpu) == 9 and sum(l.transposed for l in gpu) == 1
    assert all(l.geometry.batch in (32, 64) for l in gpu)
    assert all(l.geometry.batch <= 4 for l in shapes.named_set("cpu"))
    with pytest.raises(ValueError, match="shape set"):
        shapes.named_set("nope")


def test_every_packaged_shape_file_loads_from_the_package():
    """The files shapes.py names lie inside the package (data/) and each parses into geometries."""
    package = Path(shapes.__file__).resolve().parent
    assert shapes.DATA_DIR.resolve().is_relative_to(package)
    for name in shapes.PACKAGED_FILES:
        path = shapes.packaged_file(name)
        assert path is not None and path.resolve().is_relative_to(package / "data") and path.is_file(), name
        skipped: list = []
        layers = shapes.resolve_layers(name)
        assert layers and len(shapes.load_file(path, skipped=skipped)) == len(layers), name
        assert not skipped, (name, skipped)
        assert all(isinstance(l.geometry, ConvGeometry) for l in layers)
        assert all(l.transposed == name.startswith("deconv/") for l in layers), name
    # a conv/ file is named by its file name alone; the package's folder holds nothing unnamed
    resnet = shapes.resolve_layers("shapes_resnet_50", batch=4)
    assert len(resnet) > 15 and all(l.geometry.batch == 4 for l in resnet)
    on_disk = {f"{p.parent.name}/{p.name}" for p in shapes.DATA_DIR.glob("*/shapes_*")}
    assert on_disk == set(shapes.PACKAGED_FILES)
    assert (shapes.DATA_DIR / "NOTICE").is_file() and (shapes.DATA_DIR / "LICENSE").is_file()
    with pytest.raises(ValueError, match="ships no shape file"):
        shapes.resolve_layers("shapes_no_such_network")


def test_the_tools_name_no_path_outside_the_package():
    for path in (REPO / "clconv").rglob("*.py"):
        text = path.read_text()
        assert "shared/data" not in text and "/work/" not in text, path


def test_shape_sets_load_from_another_working_directory(tmp_path):
    code = ("from clconv.tools import shapes; "
            "print(sum(len(shapes.resolve_layers(n)) for n in shapes.PACKAGED_FILES))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.strip()) > 200


def test_all_benchdnn_inputs_parse_when_present():
    """oneDNN's whole benchdnn input folder, where a copy lies beside the checkout (development only)."""
    root = REPO.parent / "shared" / "data" / "benchdnn"
    if not root.is_dir():
        pytest.skip("no copy of benchdnn's inputs beside this checkout")
    skipped: list = []
    total = sum(len(shapes.load_file(f, skipped=skipped)) for d in ("conv", "deconv") for f in sorted((root / d).iterdir()))
    assert total > 1000 and len(skipped) <= 3


def test_unexpressible_layer_is_its_own_error():
    with pytest.raises(shapes.UnexpressibleLayer, match="cannot give output"):
        shapes.parse_descriptor("mb1ic1oc16_kd2kh1kw1_id2ih1iw1_od1oh1ow1_sd2sh1sw1_pd1ph0pw0")
    with pytest.raises(ValueError) as info:
        shapes.parse_descriptor("mb2ic4ih5oc4xx3")
    assert not isinstance(info.value, shapes.UnexpressibleLayer)


@pytest.mark.parametrize("desc", ["mb2ic5ih9oc7oh9kh3ph1", "mb2g2ic4ih9iw7oc6kh3kw2sh2sw1ph1pw0dh1",
                                  "mb2ic3iw11oc4kw3sw2pw1", "mb1ic2id5oc3kd2sd1pd1"])
def test_numpy_im2col_baseline_matches_reference(desc):
    g = shapes.parse_descriptor(desc).geometry
    rng = np.random.default_rng(3)
    x = rng.standard_normal(g.input_shape).astype(np.float32)
    w = rng.standard_normal(g.weight_shape).astype(np.float32)
    np.testing.assert_allclose(numpy_im2col_forward(g, x, w), reference.forward(g, x, w), rtol=1e-4, atol=1e-4)


def test_geomean():
    assert geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert np.isnan(geomean([]))
