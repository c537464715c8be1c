"""Shared helpers: seeded numpy data and float64 references written plainly."""
import numpy as np
import pytest

SEED = 20261129  # fixed and recorded: every test's data derives from it


@pytest.fixture
def rng():
    return np.random.default_rng(SEED)


def softmax_topk(logits, k, renormalize):
    """float64 softmax top-k, ties to the smaller index (stable sort)."""
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    ids = np.argsort(-p, axis=1, kind="stable")[:, :k]
    w = np.take_along_axis(p, ids, axis=1)
    if renormalize:
        w /= w.sum(axis=1, keepdims=True)
    return ids.astype(np.int32), w


def silu(v):
    return v / (1.0 + np.exp(-v))


def moe_layer_f64(x, wr, wg, wu, wd, k, renormalize=False):
    """The layer in float64 with nn.Linear weights: gate/up [E, I, H], down [E, H, I]."""
    x = x.astype(np.float64)
    ids, w = softmax_topk(x @ wr.astype(np.float64).T, k, renormalize)
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(k):
            e = ids[t, j]
            h = silu(wg[e].astype(np.float64) @ x[t]) * (wu[e].astype(np.float64) @ x[t])
            out[t] += w[t, j] * (wd[e].astype(np.float64) @ h)
    return out, ids
