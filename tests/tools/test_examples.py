"""The examples in ``examples/`` run and do what they say (the PyTorch one only where torch is
installed: it is not a test dependency)."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"clconv_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_autoencoder_training_loss_goes_down():
    example = load_example("autoencoder_training")
    out = io.StringIO()
    losses = example.train(steps=12, batch=8, every=4, out=out)
    assert len(losses) == 12 and np.isfinite(losses).all()
    assert np.mean(losses[-3:]) < 0.8 * np.mean(losses[:3]), losses
    assert "step   11  loss" in out.getvalue()


def test_synthetic_images_are_in_range_and_not_blank():
    images = load_example("autoencoder_training").synthetic_images(np.random.default_rng(0), 6)
    assert images.shape == (6, 1, 16, 16) and images.dtype == np.float32
    assert images.min() >= 0 and images.max() <= 1
    assert (images.reshape(6, -1).max(axis=1) > 0.3).all()


def test_torch_interop_matches_torch_and_passes_gradcheck():
    pytest.importorskip("torch")
    example = load_example("torch_interop")
    out = io.StringIO()
    example.check(out=out)
    text = out.getvalue()
    assert "match torch.nn.functional.conv2d" in text
    assert "gradcheck passed" in text or "gradcheck skipped" in text
