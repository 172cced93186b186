"""The package stands on its own: its wheel, installed in a fresh virtual environment outside the repository, holds
its licence and presets, trains the `tiny` preset from an empty folder and lists every command in --help.

The run from the wheel is cut to a few steps: it proves the preset ships and trains from the installed package; that
its full 200 steps learn (MLM loss, held-out NSP) is tests/train/test_train_cli.py's acceptance test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from markdown_blocks import REPO

pytestmark = pytest.mark.slow
WHEEL_STEPS = 20  # ~1 nat of MLM loss below the start (7.7 -> 6.6), in ~5 s of training instead of ~40 s


def source_copy(folder):
    """The repository's files (tracked, and new ones git does not ignore) without build output or node_modules, but
    with the built front ends, as an sdist carries them: the build takes them as they are and needs no npm."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    bundles = [str(path.relative_to(REPO)) for path in (REPO / "bertviz_lab/widgets/views/static").glob("*.js*")]
    assert bundles, "the front ends are not built: npm run build"
    for name in filter(None, [*listed, *bundles]):
        source = REPO / name
        if not (source.exists() or source.is_symlink()) or name.startswith(("node_modules/", "docs/", "tests/")):
            continue
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    return folder


def see_running_environment(python: Path) -> None:
    """Let the venv of `python` import this environment's packages (torch ...), whether pytest runs in a venv or in
    the system's interpreter: a `.pth` line naming each of its site-packages folders. `--system-site-packages`
    would reach the base interpreter's, which inside a user's venv has no torch. A path in a `.pth` file is added
    without running the `.pth` files inside it, so the repository's editable install stays out."""
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, timeout=120).stdout.strip()
    ours = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (Path(site) / "running_environment.pth").write_text("".join(f"{folder}\n" for folder in ours), encoding="utf-8")


def test_the_wheel_installed_elsewhere_trains_the_tiny_preset_and_lists_every_command(tmp_path):
    source = source_copy(tmp_path / "source")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    wheel, = (tmp_path / "dist").glob("bertviz_lab-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names), "the wheel holds no LICENSE"
    assert "bertviz_lab/train/presets/tiny.yaml" in names
    for view in ("heatmap", "head_view", "panel_link"):  # each view's bundle, which anywidget loads, and its map
        assert {f"bertviz_lab/widgets/views/static/{view}.js", f"bertviz_lab/widgets/views/static/{view}.js.map"} <= \
            set(names), view
    assert "bertviz_lab/widgets/views/heatmap.css" in names

    venv = tmp_path / "venv"
    # No pip of its own (ensurepip takes seconds): this interpreter's pip installs into it, the wheel alone.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python, command = venv / "bin" / "python", venv / "bin" / "bertviz-lab"
    see_running_environment(python)
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                                "--no-index", "-q", str(wheel)], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    located = subprocess.run([str(python), "-c", "import bertviz_lab; print(bertviz_lab.__file__)"], cwd=elsewhere,
                             env=env, capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    assert located.startswith(str(venv)), f"bertviz_lab came from {located}, not the wheel"

    helped = subprocess.run([str(command), "--help"], cwd=elsewhere, env=env, capture_output=True, text=True,
                            timeout=120)
    assert helped.returncode == 0, helped.stderr
    listed = helped.stdout.split("positional arguments:", 1)[1]
    for name in ("train", "html", "corpus"):
        assert f"\n    {name} " in listed, f"bertviz-lab --help does not list {name}:\n{helped.stdout}"

    trained = subprocess.run([str(command), "train", "--config", "tiny", "--output", "r.json",
                              "--set", f"training.steps={WHEEL_STEPS}", "--set", "logging.progress=false"],
                             cwd=elsewhere, env=env, capture_output=True, text=True, timeout=900)
    assert trained.returncode == 0, trained.stderr[-3000:]
    results = json.loads((elsewhere / "r.json").read_text(encoding="utf-8"))
    assert results["steps"] == WHEEL_STEPS and results["train_mlm_loss"] < results["initial_train_mlm_loss"]
    assert results["test_pairs"] > 0 and results["stop_reason"] == "finished"
    print(f"\nbertviz-lab train --config tiny from the wheel: {results['seconds']:.1f} s of training")
