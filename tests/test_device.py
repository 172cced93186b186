"""Device discovery and selection: "auto" picks the best, missing devices raise errors naming what is there.

No test is skipped: where a branch depends on the hardware, the expected outcome is computed from torch."""

from __future__ import annotations

import pytest
import torch

from bertviz_lab.device import available_devices, describe_devices, select_device
from bertviz_lab.model import BERT

HAS_CUDA = torch.cuda.is_available()
CUDA_COUNT = torch.cuda.device_count() if HAS_CUDA else 0
HAS_MPS = bool(getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available())


def test_available_devices_order_and_selectable():
    devices = available_devices()
    assert devices[-1] == "cpu"
    assert devices.count("cpu") == 1
    expected = [f"cuda:{i}" for i in range(CUDA_COUNT)] + (["mps"] if HAS_MPS else []) + ["cpu"]
    assert devices == expected
    for name in devices:
        device = select_device(name)
        assert isinstance(device, torch.device)
        assert str(device) == name
        torch.zeros(1, device=device)  # really usable


def test_describe_devices_explains_missing_ones():
    infos = {info.name: info for info in describe_devices()}
    assert infos["cpu"].available
    assert [info.name for info in describe_devices() if info.available] == available_devices()
    if not HAS_CUDA:
        assert not infos["cuda"].available and "CUDA" in infos["cuda"].reason
    if not HAS_MPS:
        assert not infos["mps"].available and "MPS" in infos["mps"].reason


@pytest.mark.parametrize("spec", ["auto", None])
def test_auto_is_first_available(spec):
    assert select_device(spec) == torch.device(available_devices()[0])


def test_cpu_and_normalisation():
    assert select_device("cpu") == torch.device("cpu")
    assert select_device("  CPU ") == torch.device("cpu")
    assert select_device(torch.device("cpu")) == torch.device("cpu")


@pytest.mark.parametrize("spec", ["gpu", "cuda", "GPU", "gpu:0", "cuda:0"])
def test_cuda_aliases(spec):
    if HAS_CUDA:
        assert select_device(spec) == torch.device("cuda:0")
    else:
        with pytest.raises(ValueError, match=r"is not available here; available devices: .*cpu"):
            select_device(spec)


def test_cuda_index_beyond_count():
    if CUDA_COUNT > 7:
        assert select_device("cuda:7") == torch.device("cuda:7")
    else:
        with pytest.raises(ValueError, match=r"device 'cuda:7' is not available here; available devices: "
                                             + ", ".join(available_devices())):
            select_device("cuda:7")


def test_mps():
    if HAS_MPS:
        assert select_device("mps") == torch.device("mps")
    else:
        with pytest.raises(ValueError, match=r"device 'mps' is not available here; available devices: .*cpu"):
            select_device("mps")


@pytest.mark.parametrize("spec", ["tpu", "xla", "cuda0", "", "metal"])
def test_unknown_device_names(spec):
    with pytest.raises(ValueError, match=r"unknown device .*expected 'auto', 'cpu', 'cuda', 'cuda:N', 'gpu' or 'mps' "
                                         r"\(available here: .*cpu\)"):
        select_device(spec)


@pytest.mark.parametrize("spec", ["cuda:x", "cuda:-1", "gpu:one"])
def test_malformed_cuda_index(spec):
    with pytest.raises(ValueError, match=r"is not a valid CUDA device; use 'cuda' or 'cuda:N'"):
        select_device(spec)


@pytest.mark.parametrize("spec", [1.5, ["cpu"], True])
def test_non_string_device(spec):
    with pytest.raises(TypeError, match=r"device must be a string, an int \(a CUDA index\) or a torch.device, got "):
        select_device(spec)


@pytest.mark.parametrize("index", [0, 1, 7])
def test_int_is_a_cuda_index(index):
    if index < CUDA_COUNT:
        assert select_device(index) == torch.device(f"cuda:{index}")
    else:
        with pytest.raises(ValueError, match=rf"device {index} \(cuda:{index}\) is not available here; "
                                             rf"available devices: {', '.join(available_devices())}"):
            select_device(index)


def test_negative_int_is_not_an_index():
    with pytest.raises(ValueError, match=r"device -1 is not a valid CUDA index"):
        select_device(-1)


@pytest.fixture(scope="module")
def model(tiny_config):
    torch.manual_seed(0)
    return BERT(tiny_config(vocab_size=50, hidden_size=32, num_attention_heads=2, num_hidden_layers=1,
                            intermediate_size=64, max_position_embeddings=16)).eval()


def test_model_to_cpu(model):
    assert model.to("cpu") is model
    assert model.device == torch.device("cpu")
    assert model.to(device="cpu").device == torch.device("cpu")
    assert model.to("auto").device == torch.device(available_devices()[0])
    model.to("cpu")
    with torch.no_grad():
        out = model(torch.tensor([[1, 2, 3]]))
    assert out.last_hidden_state.device == torch.device("cpu")
    assert model.to(torch.float64).dtype == torch.float64  # non-device arguments still work
    model.to(torch.float32)


def test_model_to_missing_device_raises(model):
    if CUDA_COUNT > 9:
        pytest.fail("this test assumes fewer than 10 CUDA devices")
    with pytest.raises(ValueError, match=r"device 'cuda:9' is not available here; available devices: .*cpu"):
        model.to("cuda:9")
    with pytest.raises(ValueError, match=r"device 'cuda:9' is not available here"):
        model.to(device="cuda:9")
    with pytest.raises(ValueError, match=r"device 9 \(cuda:9\) is not available here"):
        model.to(9)
    assert model.device == torch.device("cpu")  # unchanged after the error
    if not HAS_CUDA:
        with pytest.raises(ValueError, match="available devices: "):
            model.to("gpu")
