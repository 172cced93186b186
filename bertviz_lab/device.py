"""Which devices exist here, and turning a user's device string into a torch.device with a clear error."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DeviceInfo:
    """One device as a user sees it: its name, a readable label, and whether it can be used (and why not)."""

    name: str
    label: str
    available: bool
    reason: str = ""


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def describe_devices() -> list[DeviceInfo]:
    """Every device kind with availability: each CUDA GPU, MPS, and CPU (unavailable ones carry the reason)."""
    devices: list[DeviceInfo] = []
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            devices.append(DeviceInfo(f"cuda:{index}", f"cuda:{index} · {torch.cuda.get_device_name(index)}", True))
    else:
        reason = ("this PyTorch build has no CUDA support" if torch.version.cuda is None
                  else "no CUDA GPU is visible to this process")
        devices.append(DeviceInfo("cuda", "cuda", False, reason))
    if _mps_available():
        devices.append(DeviceInfo("mps", "mps · Apple GPU", True))
    else:
        devices.append(DeviceInfo("mps", "mps", False, "Apple Metal (MPS) is only available on Apple silicon macOS"))
    devices.append(DeviceInfo("cpu", "cpu", True))
    return devices


def available_devices() -> list[str]:
    """Names of the usable devices, best first: "cuda:0", ..., "mps", "cpu"."""
    return [device.name for device in describe_devices() if device.available]


def select_device(device: str | int | torch.device | None = "auto") -> torch.device:
    """Resolve "auto" (CUDA, then MPS, then CPU), "cpu", "cuda", "cuda:N", "gpu", "mps" or N (cuda:N, as torch)."""
    if isinstance(device, torch.device):
        device = str(device)
    if device is None or device == "auto":
        return torch.device(available_devices()[0])
    if isinstance(device, int) and not isinstance(device, bool):
        return _cuda_index(device)
    if not isinstance(device, str):
        raise TypeError(f"device must be a string, an int (a CUDA index) or a torch.device, "
                        f"got {type(device).__name__} {device!r}.")
    name = device.strip().lower()
    if name == "gpu" or name.startswith("gpu:"):
        name = "cuda" + name[3:]
    usable = available_devices()
    if name == "cpu":
        return torch.device("cpu")
    if name == "mps":
        if "mps" not in usable:
            raise ValueError(f"device 'mps' is not available here; available devices: {', '.join(usable)}.")
        return torch.device("mps")
    if name == "cuda" or name.startswith("cuda:"):
        index_text = name[5:] if name.startswith("cuda:") else "0"
        if not index_text.isdigit():
            raise ValueError(f"device {device!r} is not a valid CUDA device; use 'cuda' or 'cuda:N'.")
        if f"cuda:{int(index_text)}" not in usable:
            raise ValueError(f"device {device!r} is not available here; available devices: {', '.join(usable)}.")
        return torch.device(f"cuda:{int(index_text)}")
    raise ValueError(f"unknown device {device!r}; expected 'auto', 'cpu', 'cuda', 'cuda:N', 'gpu' or 'mps' "
                     f"(available here: {', '.join(usable)}).")



def _cuda_index(index: int) -> torch.device:
    """A bare int means a CUDA device index, as in torch's Module.to(0); say so when that GPU is not here."""
    if index < 0:
        raise ValueError(f"device {index} is not a valid CUDA index; use 0 or more, or a name such as 'cpu'.")
    usable = available_devices()
    if f"cuda:{index}" not in usable:
        raise ValueError(f"device {index} (cuda:{index}) is not available here; available devices: "
                         f"{', '.join(usable)}.")
    return torch.device(f"cuda:{index}")
