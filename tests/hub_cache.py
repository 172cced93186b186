"""A Hugging Face Hub cache laid out as huggingface_hub lays it out, for tests that never reach the network:
models--org--name/blobs/<sha256>, snapshots/<40-hex commit>/<file> -> ../../blobs/<sha256>, refs/<branch or tag>."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import torch
from huggingface_hub import constants as hub_constants

HUB_ENV = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def commit(n: int) -> str:
    """A made-up 40-hex commit hash, one per snapshot."""
    return hashlib.sha1(f"snapshot {n}".encode()).hexdigest()


def add_snapshot(cache: Path, repo_id: str, files: dict[str, Path | bytes | str | dict], revision: str,
                 refs: tuple[str, ...] = ("main",)) -> Path:
    """Store `files` (a path to copy, bytes, text or a JSON object) as one snapshot of `repo_id`; returns its folder."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    for name, content in files.items():
        if isinstance(content, Path):
            data = content.read_bytes()
        elif isinstance(content, dict):
            data = json.dumps(content).encode()
        elif isinstance(content, str):
            data = content.encode()
        else:
            data = content
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        if not blob.exists():
            blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
    for ref in refs:
        (repo / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(revision)
    return snapshot


def add_folder(cache: Path, repo_id: str, folder: Path, revision: str, refs: tuple[str, ...] = ("main",),
               skip: tuple[str, ...] = ()) -> Path:
    """Every file of a checkpoint folder (subfolders too) as one snapshot."""
    files = {str(path.relative_to(folder)): path for path in sorted(folder.rglob("*"))
             if path.is_file() and path.name not in skip}
    return add_snapshot(cache, repo_id, files, revision, refs)


def offline_cache(monkeypatch: pytest.MonkeyPatch, cache: Path, via: str = "HF_HUB_CACHE") -> None:
    """Point this test at `cache` (through HF_HUB_CACHE, or HF_HOME=<cache's parent>) with HF_HUB_OFFLINE=1: in the
    environment (for child processes) and in huggingface_hub's constants, which it read from the environment when
    it was imported (as a process started with these variables would have them)."""
    for name in HUB_ENV:
        monkeypatch.delenv(name, raising=False)
    if via == "HF_HOME":
        assert cache.name == "hub", "HF_HOME holds the hub cache in its hub/ folder"
        monkeypatch.setenv("HF_HOME", str(cache.parent))
    else:
        monkeypatch.setenv(via, str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)


def online(monkeypatch: pytest.MonkeyPatch) -> None:
    """No offline switch anywhere (for tests whose download function is replaced and never reaches a network)."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)


def perturbed(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Distinct random values in every parameter (heads included), so a wrong or missing tensor shows."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.05)
    return model.eval()
