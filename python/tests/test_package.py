"""The package itself: import without a GPU, env, stubs, the command line."""
import os
import subprocess
import sys

import tilecraft


def test_import_and_version():
    assert tilecraft.__version__.count(".") == 2


def test_env_reports_device_or_reason():
    e = tilecraft.env()
    assert "nvrtc_version" in e
    assert e.get("gpu") or e.get("no_gpu_reason")


def test_env_of_a_named_gpu_is_checked():
    import pytest

    with pytest.raises(TypeError, match="env: argument 'device'"):
        tilecraft.env("0")
    if tilecraft.env().get("gpu"):
        e = tilecraft.env(0)
        assert e["device_ordinal"] == 0 and e["pci_bus_id"] and e["gpus"][0].startswith("0: ")
        with pytest.raises(ValueError, match="env: argument 'device': expected a CUDA device ordinal from 0 to"):
            tilecraft.env(e["gpus_visible"])
    else:  # a GPU was named and none is usable
        with pytest.raises(RuntimeError, match="env: argument 'device'.*no GPU is usable"):
            tilecraft.env(0)


def test_stubs_and_typed_marker_ship_with_the_package():
    root = os.path.dirname(tilecraft.__file__)
    assert os.path.isfile(os.path.join(root, "_C.pyi"))
    assert os.path.isfile(os.path.join(root, "py.typed"))


def test_python_m_tilecraft_is_the_cli():
    r = subprocess.run([sys.executable, "-m", "tilecraft", "list"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "fused_moe" in r.stdout
    bad = subprocess.run([sys.executable, "-m", "tilecraft", "test", "--op", "no_such_op", "--backend", "cpu"],
                         capture_output=True, text=True)
    assert bad.returncode == 2
    assert "no_such_op" in bad.stderr


def test_compile_without_a_gpu_targets_sm90a():
    ks = tilecraft.compile("moe_topk_gate", "T=4,E=64,K=2", arch="sm_90a")
    assert ks and ks[0]["arch"] == "sm_90a" and int(ks[0]["registers"]) > 0
