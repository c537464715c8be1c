"""On a GPU with torch: results equal to the CPU backend's, torch's current
stream honoured, torch.cuda.graph capture. Skipped (saying why) elsewhere."""
import numpy as np
import pytest

import tilecraft

try:
    import torch
except Exception as e:  # not installed, or installed but unusable here
    pytest.skip(f"torch is not usable: {e}", allow_module_level=True)
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)


def _layer(seed=7, T=300, H=256, I=128, E=16, K=4, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s, sc=1.0: (torch.randn(*s, generator=g) * sc).to(dtype)  # noqa: E731
    return (mk(T, H), mk(E, H, sc=H ** -0.5), mk(E, I, H, sc=H ** -0.5), mk(E, I, H, sc=H ** -0.5),
            mk(E, H, I, sc=I ** -0.5), K)


def test_cuda_matches_cpu_backend():
    x, wr, wg, wu, wd, K = _layer()
    cpu = tilecraft.fused_moe(x, wr, wg, wu, wd, K)
    cuda = tilecraft.fused_moe(*(t.cuda() for t in (x, wr, wg, wu, wd)), K)
    np.testing.assert_allclose(cuda.float().cpu().numpy(), cpu.float().numpy(), rtol=1e-2, atol=1e-2)


def test_decode_path_and_mapped_path_agree():
    # T = 1 takes the decode path by default; config={'decode': 0} the mapped path.
    x, wr, wg, wu, wd, K = (t.cuda() if hasattr(t, "cuda") else t for t in _layer(T=1, E=32))
    dec = tilecraft.fused_moe(x, wr, wg, wu, wd, K)
    mapped = tilecraft.fused_moe(x, wr, wg, wu, wd, K, config={"decode": 0})
    np.testing.assert_allclose(dec.float().cpu().numpy(), mapped.float().cpu().numpy(), rtol=1e-2, atol=1e-2)
    assert not torch.equal(dec, torch.zeros_like(dec))


def test_fused_gate_up_views_keep_the_bits():
    # w13 [E, 2I, H] as vLLM keeps it: its halves as views give the bits of contiguous copies
    # (prefill and decode paths).
    for T in (300, 1):
        x, wr, wg, wu, wd, K = (t.cuda() if hasattr(t, "cuda") else t for t in _layer(T=T, E=32))
        w13 = torch.cat([wg, wu], dim=1)
        I = wg.shape[1]
        ref = tilecraft.fused_moe(x, wr, w13[:, :I].contiguous(), w13[:, I:].contiguous(), wd, K)
        got = tilecraft.fused_moe(x, wr, w13[:, :I], w13[:, I:], wd, K)
        assert torch.equal(got, ref), f"T = {T}"
        assert not torch.equal(ref, torch.zeros_like(ref))


def _both(fn, *tensors, **kw):
    """fn on CPU tensors and on their CUDA copies; results as CPU tensors."""
    cpu = fn(*tensors, **kw)
    cuda = fn(*(t.cuda() for t in tensors), **kw)
    to_cpu = lambda r: tuple(v.cpu() for v in r) if isinstance(r, tuple) else (  # noqa: E731
        {k: v.cpu() for k, v in r.items()} if isinstance(r, dict) else r.cpu())
    return cpu, to_cpu(cuda)


def test_every_op_matches_the_cpu_backend():
    g = torch.Generator().manual_seed(11)
    x = torch.randn(64, 512, generator=g).to(torch.bfloat16)
    pos = torch.randperm(64, generator=g)[:48].reshape(16, 3).to(torch.int32)
    w = torch.rand(16, 3, generator=g)
    cpu, cuda = _both(tilecraft.moe_reduce_fused, x, pos, w)
    assert torch.equal(cpu, cuda)  # bitwise, as the C++ tests promise
    logits = torch.randn(200, 64, generator=g)
    (ci, cw), (gi, gw) = _both(tilecraft.moe_topk_gate, logits, top_k=6, renormalize=True)
    assert torch.equal(ci, gi)
    torch.testing.assert_close(cw, gw, rtol=1e-5, atol=1e-6)
    cpu, cuda = _both(tilecraft.moe_fused_mapping, ci, num_experts=64, block_m=16)
    for k in cpu:
        assert torch.equal(cpu[k], cuda[k]), k
    a = torch.randn(200, 256, generator=g).to(torch.bfloat16)
    wg = (torch.randn(64, 128, 256, generator=g) / 16).to(torch.bfloat16)
    args = (a, wg)
    kw = dict(a_index=cpu["pos_to_token"], tile_expert=cpu["tile_expert"], num_tiles=cpu["num_tiles"])
    c_out = tilecraft.moe_grouped_gemm(*args, **kw)
    g_out = tilecraft.moe_grouped_gemm(a.cuda(), wg.cuda(), **{k: v.cuda() for k, v in kw.items()})
    used = int(cpu["num_tiles"].item()) * 16
    torch.testing.assert_close(g_out.cpu()[:used].float(), c_out[:used].float(), rtol=1e-2, atol=1e-2)


def test_work_is_ordered_on_the_current_stream():
    x = torch.randn(4096, 2048, device="cuda", dtype=torch.float16)
    pos = torch.arange(4096 * 2, device="cuda", dtype=torch.int32).reshape(4096, 2) % 4096
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x.mul_(2)  # a torch kernel on the side stream...
        out = tilecraft.moe_reduce_fused(x, pos)  # ...must finish before ours reads x
    side.synchronize()
    want = x[pos.long()].float().sum(1)
    torch.testing.assert_close(out.float(), want, rtol=1e-2, atol=1e-2)


def test_cuda_graph_capture():
    x, wr, wg, wu, wd, K = (t.cuda() if torch.is_tensor(t) else t for t in _layer())
    layer = tilecraft.FusedMoE(wr, wg, wu, wd, K)
    eager = layer(x)
    out = torch.empty_like(eager)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        layer(x, out=out)  # sizes the workspace outside the capture
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        layer(x, out=out)
    out.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, eager)


def test_a_million_small_calls_keep_memory_flat():
    x = torch.randn(8, 64, device="cuda", dtype=torch.float16)
    pos = torch.zeros(4, 2, device="cuda", dtype=torch.int32)
    for _ in range(1000):
        tilecraft.moe_reduce_fused(x, pos)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    for _ in range(1_000_000):
        tilecraft.moe_reduce_fused(x, pos)
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs visible to torch")
def test_ops_run_on_the_tensors_gpu_and_leave_the_current_one():
    # The layer on cuda:1 while cuda:0 is current and the other way round: the same bits as on
    # the current GPU, torch's current device unchanged after the call, and a tensor of the
    # other GPU among them refused by name.
    host = _layer(T=300, E=16)
    K = host[-1]
    results = {}
    for current, there in ((0, 1), (1, 0), (0, 0)):
        torch.cuda.set_device(current)
        layer = [t.to(f"cuda:{there}") for t in host[:-1]]
        out = tilecraft.fused_moe(*layer, K)
        assert torch.cuda.current_device() == current
        assert out.device == torch.device(f"cuda:{there}")
        results[(current, there)] = out.cpu()
        with pytest.raises(ValueError, match="cuda"):
            tilecraft.fused_moe(layer[0], layer[1], layer[2].to(f"cuda:{1 - there}"), *layer[3:], K)
    torch.cuda.set_device(0)
    assert torch.equal(results[(0, 1)], results[(0, 0)])
    assert torch.equal(results[(1, 0)], results[(0, 0)])
    assert not torch.equal(results[(0, 0)], torch.zeros_like(results[(0, 0)]))
