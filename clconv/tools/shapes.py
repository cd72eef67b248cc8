"""Layer shapes for benchmarks and tuning: benchdnn problem descriptors and named shape sets.

A benchdnn descriptor such as ``mb32ic64ih56oc64oh56kh3ph1n"resnet_50:res2a_branch2b"`` names a
convolution by ``key value`` pairs (``g mb ic id ih iw oc od oh ow kd kh kw sd sh sw pd ph pw dd dh
dw``, an optional ``n"name"``; ``_`` is ignored).  The rules of oneDNN's parser
(``tests/benchdnn/conv/conv_aux.cpp``, ``doc/driver_conv.md``) are followed:

* defaults: ``g=1``, ``mb=2``, strides 1, padding 0, kernel 1; dilation is **zero-based**
  (``dh0`` = no dilation = PyTorch ``dilation=1``);
* a problem is 3D if any ``d`` entry is given, 1D if only ``w`` entries are, else 2D; a missing
  width (or depth, in 3D) copies the height;
* a missing output size is computed from the padding; a missing padding is computed from a given
  output size (``((o-1)*s - i + extent) // 2``) and the far side's padding takes up the rest, so
  an odd total gives asymmetric padding as benchdnn does.

Deconvolution (``deconv/`` files, or ``transposed=True``) reads ``ic/ih`` as the transposed op's
input and ``oc/oh`` as its output.  Every layer is stored as the canonical convolution of
:mod:`clconv.geometry`; for a transposed layer that is the convolution whose data gradient the
layer is (``in_channels`` = the transposed op's ``oc``).

Shape files hold one descriptor per line, ``#`` comments and ``--batch=FILE`` includes; options
such as ``--dir=`` and ``--mb=`` (which overrides the batch) are honoured or ignored as noted in
:func:`load_file`.  A few of oneDNN's benchdnn shape files ship with the package (``data/``, named
in :data:`PACKAGED_FILES`; licence and origin in ``data/NOTICE``); any other file is given by path.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from pathlib import Path

from clconv.geometry import ConvGeometry

log = logging.getLogger("clconv.tools.shapes")

_KEYS = ("mb", "g", "ic", "id", "ih", "iw", "oc", "od", "oh", "ow", "kd", "kh", "kw",
         "sd", "sh", "sw", "pd", "ph", "pw", "dd", "dh", "dw")
_TOKEN = re.compile(r'(mb|g|ic|id|ih|iw|oc|od|oh|ow|kd|kh|kw|sd|sh|sw|pd|ph|pw|dd|dh|dw)(\d+)|n"([^"]*)"|n(\S+)$')

# oneDNN's benchdnn input files shipped in data/ (conv/ and deconv/ as in benchdnn's inputs/ folder;
# a file under deconv/ holds transposed layers): networks of every kind clconv serves (1D, 2D, 3D,
# grouped, depthwise, dilated, transposed).  Named by file name (a deconv/ one with its folder).
DATA_DIR = Path(__file__).resolve().parent / "data"
PACKAGED_FILES = (
    "conv/shapes_resnet_50", "conv/shapes_mobilenet", "conv/shapes_mobilenet_dw", "conv/shapes_googlenet_v3",
    "conv/shapes_vgg_11", "conv/shapes_unet", "conv/shapes_yolov2", "conv/shapes_dilated",
    "conv/shapes_1d_wavenet", "conv/shapes_3d_unet",
    "deconv/shapes_1d", "deconv/shapes_2d", "deconv/shapes_3d",
)


class UnexpressibleLayer(ValueError):
    """A well-formed descriptor clconv's geometry cannot express (an output that needs a negative
    far-side padding, i.e. cropping): shape files skip these; anything else malformed is a plain
    ValueError."""


@dataclass(frozen=True)
class Layer:
    """One benchmarked layer: its name, the canonical geometry, and whether the user's op is transposed."""

    name: str
    geometry: ConvGeometry
    transposed: bool = False
    descriptor: str = ""

    @property
    def label(self) -> str:
        return self.name or self.geometry.tag()

    def with_batch(self, batch: int) -> "Layer":
        return replace(self, geometry=self.geometry.with_batch(batch))


def parse_descriptor(text: str, transposed: bool = False, name: str | None = None) -> Layer:
    """Parse one benchdnn descriptor into a :class:`Layer`; raises ValueError naming what is wrong."""
    raw = text.strip()
    body = raw.replace("_", "") if 'n"' not in raw else raw[: raw.index('n"')].replace("_", "") + raw[raw.index('n"'):]
    values: dict[str, int] = {}
    found_name = None
    pos = 0
    while pos < len(body):
        match = _TOKEN.match(body, pos)
        if match is None:
            raise ValueError(f"benchdnn descriptor {raw!r}: cannot parse from {body[pos:]!r} "
                             f"(expected one of {', '.join(_KEYS)} followed by a number, or n\"name\")")
        if match.group(1):
            key = match.group(1)
            if key in values:
                raise ValueError(f"benchdnn descriptor {raw!r}: {key} given twice")
            values[key] = int(match.group(2))
        else:
            found_name = match.group(3) if match.group(3) is not None else match.group(4)
        pos = match.end()
    for key in ("ic", "oc"):
        if key not in values:
            raise ValueError(f"benchdnn descriptor {raw!r}: {key} (channels) is required")
    has = lambda *keys: any(k in values for k in keys)  # noqa: E731
    if has("id", "od", "kd", "sd", "pd", "dd"):
        ndim = 3
    elif has("ih", "oh", "kh", "sh", "ph", "dh"):
        ndim = 2
    elif has("iw", "ow", "kw", "sw", "pw", "dw"):
        ndim = 1
    else:
        raise ValueError(f"benchdnn descriptor {raw!r}: no spatial size (ih/iw/id) given")
    axes = ("d", "h", "w")[3 - ndim:]

    # benchdnn's square rule: an axis whose input size is missing copies the whole group (input,
    # output, kernel, stride, padding, dilation) of the axis before it (width from height, height
    # from depth)
    source = {axis: axis for axis in axes}
    if ndim >= 2:
        for axis, previous in (("h", "d"), ("w", "h")):
            if axis in axes and "i" + axis not in values and previous in axes:
                source[axis] = source[previous]

    def get(prefix: str, axis: str) -> int | None:
        return values.get(prefix + source[axis])

    def get_or(prefix: str, axis: str, default: int) -> int:
        value = values.get(prefix + source[axis])
        return default if value is None else value

    mb, groups, ic, oc = values.get("mb", 2), values.get("g", 1), values["ic"], values["oc"]
    if mb < 1:
        raise ValueError(f"benchdnn descriptor {raw!r}: mb0 is an empty batch, which runs no kernel "
                         "(nothing to time or tune): give mb1 or more")
    in_size: list[int] = []
    out_size: list[int] = []
    kernel: list[int] = []
    stride: list[int] = []
    pad_b: list[int] = []
    pad_e: list[int] = []
    dil: list[int] = []
    for axis in axes:
        i = get("i", axis)
        if i is None:
            raise ValueError(f"benchdnn descriptor {raw!r}: input size i{axis} missing")
        k, s, d = get_or("k", axis, 1), get_or("s", axis, 1), get_or("d", axis, 0) + 1
        extent = (k - 1) * d + 1
        o, p = get("o", axis), get("p", axis)
        if p is None:
            if o is None:
                p = 0
            elif transposed:
                p = max(0, ((i - 1) * s - o + extent) // 2)
            else:
                p = max(0, ((o - 1) * s - i + extent) // 2)
        if o is None:
            o = (i - 1) * s + extent - 2 * p if transposed else (i - extent + 2 * p) // s + 1
        if transposed:  # the canonical convolution runs from the transposed op's output to its input
            i, o = o, i
        # far-side padding: symmetric when that gives the stated output (PyTorch style), else the rest
        if (i + 2 * p - extent) // s + 1 == o:
            e = p
        else:
            e = (o - 1) * s + extent - i - p
        if e < 0 or o < 1:
            raise UnexpressibleLayer(f"benchdnn descriptor {raw!r}: along {axis}, input {i}, kernel {k}, stride {s}, "
                             f"padding {p} cannot give output {o}")
        for values_list, value in ((in_size, i), (out_size, o), (kernel, k), (stride, s), (pad_b, p),
                                   (pad_e, e), (dil, d)):
            values_list.append(value)
    cin, cout = (oc, ic) if transposed else (ic, oc)
    if cin % groups or cout % groups:
        raise ValueError(f"benchdnn descriptor {raw!r}: g{groups} does not divide ic{ic} and oc{oc}")
    try:
        geometry = ConvGeometry.make(ndim, mb, groups, cin, cout, in_size, kernel, stride, pad_b, pad_e, dil)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"benchdnn descriptor {raw!r}: {exc}") from None
    if tuple(geometry.user_out_size) != tuple(out_size):
        raise ValueError(f"benchdnn descriptor {raw!r}: gives output {geometry.user_out_size}, expected {tuple(out_size)}")
    return Layer(name if name is not None else (found_name or ""), geometry, transposed, raw)


def packaged_file(name: str) -> Path | None:
    """The packaged shape file ``name`` (``shapes_resnet_50``, ``conv/shapes_resnet_50``,
    ``deconv/shapes_2d``), or None if the package has none of that name."""
    for candidate in (name, f"conv/{name}"):
        if candidate in PACKAGED_FILES:
            return DATA_DIR / candidate
    return None


def load_file(path: str | Path, transposed: bool | None = None, batch: int | None = None,
              skipped: list[str] | None = None) -> list[Layer]:
    """Layers of a benchdnn batch file (``--batch=`` includes followed, relative to the file).

    ``transposed`` defaults to whether the file lies in a ``deconv`` directory; ``--mb=N`` lines set
    the batch of the following descriptors (``batch`` overrides everything); other ``--`` options are
    ignored.  Duplicate descriptors (benchdnn files repeat layers) are kept once.  A descriptor that
    clconv's geometry cannot express (negative far-side padding, i.e. cropping) is skipped with a
    logged warning and appended to ``skipped``; any other malformed line raises ValueError.
    """
    path = Path(path)
    if transposed is None:
        transposed = "deconv" in path.parts
    layers: list[Layer] = []
    seen: set = set()
    mb_override = None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        for item in line.split():
            if item.startswith("--batch="):
                included = load_file(path.parent / item[len("--batch="):], transposed, batch or mb_override, skipped)
                for layer in included:
                    if layer.geometry not in seen:
                        seen.add(layer.geometry)
                        layers.append(layer)
            elif item.startswith("--mb="):
                mb_override = int(item[len("--mb="):]) or None
            elif item.startswith("--"):
                continue
            else:
                try:
                    layer = parse_descriptor(item, transposed)
                except UnexpressibleLayer as exc:
                    log.warning("clconv: skipping %s:%d: %s", path, number, exc)
                    if skipped is not None:
                        skipped.append(f"{path.name}:{number}: {item}")
                    continue
                except ValueError as exc:
                    raise ValueError(f"{path}:{number}: {exc}") from None
                if batch or mb_override:
                    layer = layer.with_batch(batch or mb_override or layer.geometry.batch)
                if layer.geometry not in seen:
                    seen.add(layer.geometry)
                    layers.append(layer)
    return layers


# -- the named sets our figures are quoted on --------------------------------------------------------

# The GPU set (batch 32 unless said, fp32, NCHW): ResNet-50 3x3 stride-1 layers, two 1x1
# layers, the 7x7/2 stem, a MobileNetV2 depthwise 3x3 and a DCGAN transposed 4x4/2 layer (batch 64).
GPU_SET = [
    ("resnet50 3x3 56x56x64", "mb32ic64ih56oc64oh56kh3ph1", False),
    ("resnet50 3x3 28x28x128", "mb32ic128ih28oc128oh28kh3ph1", False),
    ("resnet50 3x3 14x14x256", "mb32ic256ih14oc256oh14kh3ph1", False),
    ("resnet50 3x3 7x7x512", "mb32ic512ih7oc512oh7kh3ph1", False),
    ("resnet50 1x1 256->64 56x56", "mb32ic256ih56oc64oh56kh1ph0", False),
    ("resnet50 1x1 1024->256 14x14", "mb32ic1024ih14oc256oh14kh1ph0", False),
    ("resnet50 stem 7x7/2", "mb32ic3ih224oc64oh112kh7sh2ph3", False),
    ("mobilenetv2 dw3x3 144ch 56x56", "mb32g144ic144ih56oc144oh56kh3ph1", False),
    ("dcgan deconv 4x4/2 256->128", "mb64ic256ih16oc128oh32kh4sh2ph1", True),
]

# The CPU set: the same kinds of layer at batch 2-4 and smaller spatial sizes (PoCL on 2 cores).
CPU_SET = [
    ("resnet50 3x3 28x28x64", "mb4ic64ih28oc64oh28kh3ph1", False),
    ("resnet50 3x3 14x14x128", "mb4ic128ih14oc128oh14kh3ph1", False),
    ("resnet50 3x3 7x7x256", "mb2ic256ih7oc256oh7kh3ph1", False),
    ("resnet50 1x1 256->64 28x28", "mb4ic256ih28oc64oh28kh1ph0", False),
    ("resnet50 1x1 1024->256 14x14", "mb2ic1024ih14oc256oh14kh1ph0", False),
    ("resnet50 stem 7x7/2", "mb2ic3ih112oc64oh56kh7sh2ph3", False),
    ("mobilenetv2 dw3x3 144ch 28x28", "mb4g144ic144ih28oc144oh28kh3ph1", False),
    ("dcgan deconv 4x4/2 256->128", "mb4ic256ih16oc128oh32kh4sh2ph1", True),
]

# A tiny set for smoke runs and tests: odd sizes so that every tile has a remainder.
TINY_SET = [
    ("tiny 3x3", "mb2ic5ih9oc7oh9kh3ph1", False),
    ("tiny 1x1/2", "mb2ic6ih7oc5oh4kh1sh2ph0", False),
    ("tiny dw3x3", "mb2g6ic6ih7oc6oh7kh3ph1", False),
    ("tiny deconv 4x4/2", "mb2ic6ih5oc4oh10kh4sh2ph1", True),
]

NAMED_SETS = {"gpu": GPU_SET, "cpu": CPU_SET, "tiny": TINY_SET}


def named_set(name: str) -> list[Layer]:
    if name not in NAMED_SETS:
        raise ValueError(f"shape set must be one of {sorted(NAMED_SETS)} or a benchdnn file, got {name!r}")
    return [parse_descriptor(desc, transposed, label) for label, desc, transposed in NAMED_SETS[name]]


def resolve_layers(spec: str, batch: int | None = None) -> list[Layer]:
    """Layers for ``spec``: a named set (``gpu``, ``cpu``, ``tiny``), a shape file path, a packaged
    benchdnn file (``shapes_resnet_50``, ``deconv/shapes_2d``: :data:`PACKAGED_FILES`), or one descriptor."""
    packaged = packaged_file(spec)
    if spec in NAMED_SETS:
        layers = named_set(spec)
    elif Path(spec).is_file():
        layers = load_file(spec)
    elif packaged is not None:
        layers = load_file(packaged, transposed=packaged.parent.name == "deconv")
    elif spec.startswith(("shapes_", "set_")) or "/" in spec:
        names = ", ".join(name[len("conv/"):] if name.startswith("conv/") else name for name in PACKAGED_FILES)
        raise ValueError(f"shape set {spec!r}: no such file, and the package ships no shape file of that name "
                         f"(it has: {names})")
    else:
        layers = [parse_descriptor(spec)]
    return [layer.with_batch(batch) for layer in layers] if batch else layers
