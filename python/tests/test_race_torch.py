"""The race's torch-facing entry points with torch tensors: on the CPU backend
everywhere torch is installed, and on the GPU where torch sees one."""
import numpy as np
import pytest

try:
    import torch
except Exception as e:  # not installed, or installed but unusable here
    pytest.skip(f"torch is not usable: {e}", allow_module_level=True)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("dev", DEVICES)
def test_custom_kernel_with_torch_tensors(dev):
    from tilecraft.race import moe

    data = moe.generate_input({"d_hidden": 128, "d_expert": 64, "n_routed_experts": 4, "n_experts_per_token": 2,
                               "batch_size": 2, "seq_len": 24}, seed=3, device=dev)
    ok, detail = moe.check(moe.custom_kernel(moe.clone_data(data)), moe.reference_kernel(data))
    assert ok, detail


@pytest.mark.parametrize("dev", DEVICES)
def test_routed_moe_kernel_on_the_race_abi(dev):
    from tilecraft.race.moe import RoutedMoEKernel

    torch.manual_seed(5)
    E, H, I, bt = 4, 256, 128, 128
    sizes = torch.tensor([130, 0, 7, 300], dtype=torch.int32)
    offsets = torch.cumsum(sizes, 0) - sizes
    padded = (sizes + bt - 1) // bt * bt
    padded_offsets = torch.cumsum(padded, 0) - padded
    blocks = int(sizes.sum().item() // bt + E)
    idx = torch.full((blocks,), E - 1, dtype=torch.int32)
    for e in range(E):
        for b in range(int(padded[e] // bt)):
            idx[int(padded_offsets[e] // bt) + b] = e
    n = int(sizes.sum())
    x = torch.randn(n, H, device=dev, dtype=torch.float16)
    wg, wu = (torch.randn(E, I, H, device=dev, dtype=torch.float16) / 16 for _ in range(2))
    wd = torch.randn(E, H, I, device=dev, dtype=torch.float16) / 11
    rw = torch.rand(n, device=dev, dtype=torch.float16)
    up_logits = torch.empty(n, I, device=dev, dtype=torch.float16)
    out = torch.empty(n, H, device=dev, dtype=torch.float16)
    k = RoutedMoEKernel(H, I, E, n, E, block_token=bt)
    k(x, wg, wu, wd, rw, sizes.to(dev), offsets.to(dev, torch.int32), padded_offsets.to(dev, torch.int32),
      idx.to(dev), up_logits, out)
    want = torch.empty(n, H, device=dev)
    for e in range(E):
        s, c = int(offsets[e]), int(sizes[e])
        if c == 0:
            continue
        xe = x[s:s + c].float()
        h = torch.nn.functional.silu(xe @ wg[e].float().t()) * (xe @ wu[e].float().t())
        want[s:s + c] = (h.half().float() @ wd[e].float().t()) * rw[s:s + c].float().unsqueeze(1)
    torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2)


def test_race_runner_functional_cases_on_cpu(tmp_path):
    import json
    import subprocess
    import sys

    cfg = tmp_path / "cases.json"
    cfg.write_text(json.dumps([{"kind": "functional", "d_hidden": 128, "d_expert": 64, "n_routed_experts": 8,
                                "n_experts_per_token": 4, "batch_size": 1, "seq_len": 40}]))
    r = subprocess.run([sys.executable, "-m", "tilecraft.race", "moe", "--configs", str(cfg), "--device", "cpu"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout
