"""Every operator on the CPU backend with numpy arrays, against float64
references written here, plus the error mapping."""
import numpy as np
import pytest

import tilecraft
from conftest import moe_layer_f64, silu, softmax_topk


def test_moe_reduce_fused(rng):
    x = rng.standard_normal((40, 96)).astype(np.float32)
    pos = rng.permutation(40)[:30].reshape(10, 3).astype(np.int32)
    pos[0, 1] = -1  # a skipped slot
    w = rng.random((10, 3)).astype(np.float32)
    out = tilecraft.moe_reduce_fused(x, pos, w)
    ref = np.zeros((10, 96))
    for t in range(10):
        for k in range(3):
            if pos[t, k] >= 0:
                ref[t] += w[t, k] * x[pos[t, k]]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    given = np.empty((10, 96), np.float32)
    assert tilecraft.moe_reduce_fused(x, pos, w, out=given) is given


def test_moe_topk_gate_softmax(rng):
    logits = rng.standard_normal((50, 16)).astype(np.float32)
    ids, w = tilecraft.moe_topk_gate(logits, 4, renormalize=True)
    want_ids, want_w = softmax_topk(logits.astype(np.float64), 4, True)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_allclose(w, want_w, rtol=1e-5, atol=1e-6)


def test_moe_topk_gate_fp16_scores_break_ties_like_fp16_softmax(rng):
    # Logits whose fp16 roundings tie: the fp16-rounded selection must take the
    # smaller index among equal fp16 scores, and weights are fp16 values.
    logits = rng.standard_normal((500, 8)).astype(np.float32)
    logits[:, 5] = logits[:, 2] + 1e-4  # distinct in fp32, equal once rounded to fp16 (mostly)
    ids, w = tilecraft.moe_topk_gate(logits, top_k=4, score_dtype="float16")
    l16 = logits.astype(np.float16).astype(np.float64)
    p = np.exp(l16 - l16.max(1, keepdims=True))
    p = (p / p.sum(1, keepdims=True)).astype(np.float32).astype(np.float16).astype(np.float32)
    want = np.argsort(-p, axis=1, kind="stable")[:, :4]  # stable: ties to the smaller index
    assert (np.sort(ids, 1) == np.sort(want, 1)).mean() > 0.99  # exp in float64 here may flip a rounding
    np.testing.assert_allclose(w, np.take_along_axis(p, ids, 1), rtol=2e-3)
    assert np.array_equal(w.astype(np.float16).astype(np.float32), w)
    exact_ids, _ = tilecraft.moe_topk_gate(logits, top_k=4)
    assert not np.array_equal(np.sort(exact_ids, 1), np.sort(ids, 1))  # rounding changed some choices
    with pytest.raises(ValueError, match="score_dtype"):
        tilecraft.moe_topk_gate(logits, top_k=4, score_dtype="int8")


def test_moe_fused_mapping_layout(rng):
    ids = np.stack([rng.permutation(12)[:3] for _ in range(20)]).astype(np.int32)
    mine = np.empty(12, np.int32)
    m = tilecraft.moe_fused_mapping(ids, 12, block_m=4, out={"tokens_per_expert": mine})
    assert m["tokens_per_expert"] is mine
    np.testing.assert_array_equal(m["tokens_per_expert"], np.bincount(ids.ravel(), minlength=12))
    off = m["expert_offsets"]
    assert off[0] == 0 and np.all(np.diff(off) % 4 == 0)
    for t in range(20):
        for k in range(3):
            row = m["token_topk_to_pos"][t, k]
            e = ids[t, k]
            assert off[e] <= row < off[e + 1] and m["pos_to_token"][row] == t


@pytest.mark.parametrize("layout", ["nk", "kn"])
def test_moe_grouped_gemm_gated(rng, layout):
    T, K, E, H, N = 24, 2, 4, 64, 48
    x = rng.standard_normal((T, H)).astype(np.float16)
    ids = np.stack([rng.permutation(E)[:K] for _ in range(T)]).astype(np.int32)
    m = tilecraft.moe_fused_mapping(ids, E, block_m=16)
    shape = (E, N, H) if layout == "nk" else (E, H, N)
    wg = (rng.standard_normal(shape) / 8).astype(np.float16)
    wu = (rng.standard_normal(shape) / 8).astype(np.float16)
    per_expert = [wg[e] for e in range(E)]  # the race's form: one tensor per expert
    out = tilecraft.moe_grouped_gemm(x, per_expert if layout == "kn" else wg, w_up=[wu[e] for e in range(E)]
                                     if layout == "kn" else wu, layout=layout, a_index=m["pos_to_token"],
                                     tile_expert=m["tile_expert"], num_tiles=m["num_tiles"])
    for t in range(T):
        for k in range(K):
            e, row = ids[t, k], m["token_topk_to_pos"][t, k]
            g_w = wg[e].astype(np.float64) if layout == "nk" else wg[e].astype(np.float64).T
            u_w = wu[e].astype(np.float64) if layout == "nk" else wu[e].astype(np.float64).T
            xt = x[t].astype(np.float64)
            np.testing.assert_allclose(out[row], silu(g_w @ xt) * (u_w @ xt), rtol=1e-2, atol=1e-2)


def test_moe_grouped_gemm_row_token_zeros_padding(rng):
    # A in layout order (the down projection): rows the mapping left as padding read zeros.
    T, K, E, H, N = 5, 2, 4, 32, 24
    ids = np.stack([rng.permutation(E)[:K] for _ in range(T)]).astype(np.int32)
    m = tilecraft.moe_fused_mapping(ids, E, block_m=16)
    rows = m["pos_to_token"].shape[0]
    a = rng.standard_normal((rows, H)).astype(np.float16)  # padding rows hold data too
    w = (rng.standard_normal((E, N, H)) / 8).astype(np.float16)
    out = tilecraft.moe_grouped_gemm(a, w, tile_expert=m["tile_expert"], num_tiles=m["num_tiles"],
                                     row_token=m["pos_to_token"], out_dtype="float32")
    live = int(m["num_tiles"][0]) * 16
    for r in range(live):
        e = m["tile_expert"][r // 16]
        want = (w[e].astype(np.float64) @ a[r].astype(np.float64)) if m["pos_to_token"][r] >= 0 else np.zeros(N)
        np.testing.assert_allclose(out[r], want, rtol=1e-2, atol=1e-2)
    assert np.all(out[:live][m["pos_to_token"][:live] < 0] == 0)


def test_fused_moe_layer_and_object(rng):
    B, S, H, I, E, K = 2, 12, 64, 32, 8, 2
    x = rng.standard_normal((B, S, H)).astype(np.float16)
    wr = (rng.standard_normal((E, H)) / 8).astype(np.float16)
    wg = (rng.standard_normal((E, I, H)) / 8).astype(np.float16)
    wu = (rng.standard_normal((E, I, H)) / 8).astype(np.float16)
    wd = (rng.standard_normal((E, H, I)) / 6).astype(np.float16)
    out = tilecraft.fused_moe(x, wr, wg, wu, wd, K)
    assert out.shape == (B, S, H) and out.dtype == np.float16
    ref, _ = moe_layer_f64(x.reshape(-1, H), wr, wg, wu, wd, K)
    np.testing.assert_allclose(out.reshape(-1, H).astype(np.float64), ref, rtol=1e-2, atol=1e-2)
    # The race's layout, per expert by reference: same layer.
    layer = tilecraft.FusedMoE(wr, [np.ascontiguousarray(wg[e].T) for e in range(E)],
                               [np.ascontiguousarray(wu[e].T) for e in range(E)],
                               [np.ascontiguousarray(wd[e].T) for e in range(E)], K, layout="kn")
    np.testing.assert_array_equal(layer(x), out)


def test_fused_moe_takes_a_fused_gate_up_tensor_as_views(rng):
    # vLLM and SGLang keep gate and up as one w13 [E, 2I, H]: its halves go in as views, no copy.
    H, I, E, K = 64, 32, 8, 2
    x = rng.standard_normal((9, H)).astype(np.float16)
    wr = (rng.standard_normal((E, H)) / 8).astype(np.float16)
    w13 = (rng.standard_normal((E, 2 * I, H)) / 8).astype(np.float16)
    wd = (rng.standard_normal((E, H, I)) / 6).astype(np.float16)
    ref = tilecraft.fused_moe(x, wr, np.ascontiguousarray(w13[:, :I]), np.ascontiguousarray(w13[:, I:]), wd, K)
    np.testing.assert_array_equal(tilecraft.fused_moe(x, wr, w13[:, :I], w13[:, I:], wd, K), ref)
    with pytest.raises(ValueError, match="fused_moe.*'w_up'.*expert stride of w_gate"):
        tilecraft.fused_moe(x, wr, w13[:, :I], np.ascontiguousarray(w13[:, I:]), wd, K)
    with pytest.raises(ValueError, match="fused_moe.*'w_gate'.*row-major expert matrices"):
        tilecraft.fused_moe(x, wr, w13[:, :I, ::2], w13[:, I:, ::2], wd, K)


def test_fused_moe_config_keys_are_checked(rng):
    H, I, E, K = 64, 32, 8, 2
    x = rng.standard_normal((1, H)).astype(np.float16)
    wr = (rng.standard_normal((E, H)) / 8).astype(np.float16)
    wg = (rng.standard_normal((E, I, H)) / 8).astype(np.float16)
    wd = (rng.standard_normal((E, H, I)) / 6).astype(np.float16)
    ref = tilecraft.fused_moe(x, wr, wg, wg, wd, K)
    # Valid overrides (they choose kernels, so the CPU golden is unchanged).
    np.testing.assert_array_equal(tilecraft.fused_moe(x, wr, wg, wg, wd, K, config={"decode": 0, "down_gemv": 1}), ref)
    with pytest.raises(ValueError, match="fused_moe.*config.*'bogus'"):
        tilecraft.fused_moe(x, wr, wg, wg, wd, K, config={"bogus": 1})
    with pytest.raises(ValueError, match="fused_moe.*decode.*2"):
        tilecraft.fused_moe(x, wr, wg, wg, wd, K, config={"decode": 2})


def test_errors_map_to_python_exceptions(rng):
    x = rng.standard_normal((8, 16)).astype(np.float32)
    pos = np.zeros((4, 2), np.int32)
    with pytest.raises(TypeError, match="moe_reduce_fused.*'x'"):
        tilecraft.moe_reduce_fused(x.astype(np.float64), pos, out=np.empty((4, 16), np.float32))
    with pytest.raises(ValueError, match="topk_weights.*\\[4, 2\\]"):
        tilecraft.moe_reduce_fused(x, pos, np.ones((4, 3), np.float32))
    with pytest.raises(ValueError, match="mode"):
        tilecraft.moe_topk_gate(x, 2, mode="argmax")
    with pytest.raises(ValueError, match="contiguous"):
        tilecraft.moe_reduce_fused(x[:, ::2], pos)
    with pytest.raises(ValueError, match="'out'.*contiguous"):
        tilecraft.fused_moe(np.zeros((4, 8), np.float16), np.zeros((2, 8), np.float16), np.zeros((2, 4, 8), np.float16),
                            np.zeros((2, 4, 8), np.float16), np.zeros((2, 8, 4), np.float16), 1,
                            out=np.zeros((8, 4), np.float16).T)
    with pytest.raises(TypeError, match="numpy has no bfloat16"):
        tilecraft.moe_reduce_fused(x, pos, out_dtype="bfloat16")


def test_bad_arguments_name_the_op_and_argument(rng):
    """Arguments that size the outputs, or are not tensors at all, fail before any allocation or
    division: block_m=0 once stopped the interpreter (an integer division by zero in C++)."""
    ids = np.array([[0, 1], [1, 2]], np.int32)
    for bad in (0, -3):
        with pytest.raises(ValueError, match="moe_fused_mapping: argument 'block_m'"):
            tilecraft.moe_fused_mapping(ids, 4, block_m=bad)
    with pytest.raises(ValueError, match="moe_fused_mapping: argument 'num_experts'"):
        tilecraft.moe_fused_mapping(ids, 0)
    with pytest.raises(ValueError, match="block_m.*1..1024.*got 0"):
        tilecraft._C.mapping_rows(2, 2, 4, 0)  # the C++ sizing helper checks too
    with pytest.raises(ValueError, match="moe_fused_mapping: argument 'ids': expected a 2-D"):
        tilecraft.moe_fused_mapping(ids.reshape(-1), 4)
    logits = rng.standard_normal((4, 8)).astype(np.float32)
    with pytest.raises(ValueError, match="moe_topk_gate: argument 'top_k'.*-1"):
        tilecraft.moe_topk_gate(logits, -1)
    with pytest.raises(ValueError, match="moe_topk_gate: argument 'top_k'.*True"):
        tilecraft.moe_topk_gate(logits, True)
    assert tilecraft.moe_topk_gate(logits, np.int64(2))[0].shape == (4, 2)  # numpy integers are integers
    with pytest.raises(ValueError, match="moe_topk_gate: argument 'top_k': expected 1..8 .*got 9"):
        tilecraft.moe_topk_gate(logits, 9)  # more than E (8): named as top_k, not as the ids made from it
    with pytest.raises(ValueError, match="moe_topk_gate: argument 'logits': expected 1..1024 experts"):
        tilecraft.moe_topk_gate(np.zeros((4, 0), np.float32), 2)  # no elements: contiguous, so E is named
    f16 = np.float16
    w = [np.zeros((2, 4, 8), f16), np.zeros((2, 4, 8), f16), np.zeros((2, 8, 4), f16)]
    with pytest.raises(TypeError, match="fused_moe: argument 'x': expected a torch.Tensor or numpy.ndarray, got NoneType"):
        tilecraft.fused_moe(None, np.zeros((2, 8), f16), *w, 1)
    with pytest.raises(ValueError, match="fused_moe: argument 'w_gate': expected one tensor per expert"):
        tilecraft.fused_moe(np.zeros((4, 8), f16), np.zeros((2, 8), f16), [], w[1], w[2], 1)
    with pytest.raises(ValueError, match="fused_moe: argument 'top_k'"):
        tilecraft.fused_moe(np.zeros((4, 8), f16), np.zeros((2, 8), f16), *w, 0)
    layer = (np.zeros((4, 8), f16), np.zeros((2, 8), f16), *w, 1)
    for kw, name in (({"scale": "a"}, "scale"), ({"mode": 3}, "mode"), ({"renormalize": "yes"}, "renormalize"),
                     ({"n_group": 1.5}, "n_group"), ({"workspace": 5}, "workspace"), ({"routing": 5}, "routing"),
                     ({"layout": None}, "layout")):
        with pytest.raises(TypeError, match=f"fused_moe: argument '{name}': expected"):
            tilecraft.fused_moe(*layer, **kw)  # named, not the binding's generic signature error
    ids2 = np.array([[0, 1], [1, 2]], np.int32)
    with pytest.raises(TypeError, match="moe_fused_mapping: argument 'out': expected a dict"):
        tilecraft.moe_fused_mapping(ids2, 4, out=5)
    with pytest.raises(TypeError, match="moe_fused_mapping: argument 'num_tiles': expected a torch.Tensor"):
        tilecraft.moe_fused_mapping(ids2, 4, out={"num_tiles": [0]})
    x16, pos = np.ones((4, 8), f16), np.array([[0, 1], [2, 3]], np.int32)
    with pytest.raises(TypeError, match="moe_reduce_fused: argument 'topk_weights': expected a torch.Tensor"):
        tilecraft.moe_reduce_fused(x16, pos, [[1.0, 1.0]])
    for bad in (5, "int8", np.int8):
        with pytest.raises(ValueError, match="moe_reduce_fused: argument 'out_dtype': expected None or one of"):
            tilecraft.moe_reduce_fused(x16, pos, out_dtype=bad)
    for ok in ("float16", np.float16, np.dtype("float16")):  # names, numpy types and dtypes alike
        assert tilecraft.moe_reduce_fused(x16, pos, out_dtype=ok).dtype == np.float16
    gw = np.ones((2, 6, 8), f16)
    with pytest.raises(TypeError, match="moe_grouped_gemm: argument 'tile_expert': expected a torch.Tensor"):
        tilecraft.moe_grouped_gemm(x16, gw, tile_expert=[0, 1])
    with pytest.raises(ValueError, match="moe_grouped_gemm: argument 'out_dtype'.*'int8'"):
        tilecraft.moe_grouped_gemm(x16, gw, tile_expert=np.zeros(1, np.int32), out_dtype="int8")
    with pytest.raises(TypeError, match="fused_moe: argument 'out': expected a torch.Tensor"):
        tilecraft.fused_moe(*layer, out=[0.0])
    with pytest.raises(TypeError, match="moe_topk_gate: argument 'scale': expected a real number"):
        tilecraft.moe_topk_gate(logits, 2, scale=None)
    assert tilecraft.fused_moe(*layer, renormalize=np.bool_(True), scale=np.float32(2.0)).shape == (4, 8)
    for bad in ({"block_m": "x"}, {"block_m": 1.5}, {"block_m": True}, {3: 1}, [("block_m", 64)]):
        with pytest.raises(TypeError, match="fused_moe: argument 'config': expected"):
            tilecraft.fused_moe(np.zeros((4, 8), f16), np.zeros((2, 8), f16), *w, 1, config=bad)
    with pytest.raises(ValueError, match="moe_grouped_gemm: argument 'w': expected a 3-D tensor"):
        tilecraft.moe_grouped_gemm(np.zeros((4, 8), f16), np.zeros((4, 8), f16))


torch = None
try:  # torch is optional: CPU torch tensors when it is installed and usable
    import torch  # noqa: F811
except Exception:
    torch = None


@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_torch_cpu_tensors_in_and_out(rng):
    x = torch.randn(6, 10, 64, dtype=torch.float16)
    E, I, K = 4, 32, 2
    wr = torch.randn(E, 64, dtype=torch.float16) / 8
    wg, wu = (torch.randn(E, I, 64, dtype=torch.float16) / 8 for _ in range(2))
    wd = torch.randn(E, 64, I, dtype=torch.float16) / 6
    out = tilecraft.fused_moe(x, wr, wg, wu, wd, K)
    assert isinstance(out, torch.Tensor) and out.shape == x.shape
    ref, _ = moe_layer_f64(x.reshape(-1, 64).numpy(), wr.numpy(), wg.numpy(), wu.numpy(), wd.numpy(), K)
    np.testing.assert_allclose(out.reshape(-1, 64).double().numpy(), ref, rtol=1e-2, atol=1e-2)
