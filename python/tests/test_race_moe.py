"""The race drop-in on the race's data layout (numpy stand-ins on the CPU):
same answer as a float64 layer, clear errors on malformed data."""
import numpy as np
import pytest

from conftest import moe_layer_f64
from tilecraft.race import moe


def _race_data(rng, bs=2, seq=8, H=64, I=32, E=4, K=2):
    x = rng.standard_normal((bs, seq, H)).astype(np.float16)
    w = {"router.weight": (rng.standard_normal((E, H)) / np.sqrt(H)).astype(np.float16)}
    for i in range(E):
        w[f"experts.{i}.0.weight"] = (rng.standard_normal((H, I)) / np.sqrt(I)).astype(np.float16)
        w[f"experts.{i}.1.weight"] = (rng.standard_normal((H, I)) / np.sqrt(I)).astype(np.float16)
        w[f"experts.{i}.2.weight"] = (rng.standard_normal((I, H)) / np.sqrt(H)).astype(np.float16)
    return x, w, {"n_experts_per_token": K}


def test_custom_kernel_matches_the_layer(rng):
    x, w, cfg = _race_data(rng)
    out = moe.custom_kernel((x, w, cfg))
    assert out.shape == x.shape and out.dtype == np.float16
    E = 4
    wg = np.stack([w[f"experts.{i}.0.weight"].T for i in range(E)])
    wu = np.stack([w[f"experts.{i}.1.weight"].T for i in range(E)])
    wd = np.stack([w[f"experts.{i}.2.weight"].T for i in range(E)])
    ref, _ = moe_layer_f64(x.reshape(-1, 64), w["router.weight"], wg, wu, wd, 2)
    np.testing.assert_allclose(out.reshape(-1, 64).astype(np.float64), ref, atol=1e-2, rtol=1e-2)


def test_malformed_data_says_what_is_missing(rng):
    x, w, _ = _race_data(rng)
    with pytest.raises(ValueError, match="top-k"):
        moe.custom_kernel((x, w, {"hidden": 64}))
    with pytest.raises(ValueError, match="experts.0.0.weight"):
        moe.custom_kernel((x, {"router.weight": w["router.weight"]}, {"top_k": 2}))
