"""Named presets: `--config tiny` reads the YAML shipped in the package from any folder; a path still works and wins
over a preset's name; a name that is neither is one line naming the presets."""

from __future__ import annotations

from pathlib import Path

import pytest

from bertviz_lab.cli import main
from bertviz_lab.train.presets import PRESETS, config_path, preset_names
from bertviz_lab.train.run_config import ConfigError, load_config

REPO = Path(__file__).resolve().parents[2]


def test_every_shipped_preset_is_a_name_and_the_repository_configs_link_to_them():
    assert preset_names() == sorted(path.stem for path in PRESETS.glob("*.yaml")) == [
        "bert_base_gpu", "multi_gpu", "tiny"]
    for name in preset_names():
        linked = REPO / "configs" / f"{name}.yaml"
        assert linked.is_symlink() and linked.resolve() == (PRESETS / f"{name}.yaml").resolve()


def test_a_preset_name_reads_the_same_config_as_its_path_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_config("tiny") == load_config(REPO / "configs" / "tiny.yaml")
    assert load_config("tiny")["training"]["num_threads"] == 1


def test_a_file_of_that_name_wins_over_the_preset(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny").write_text("training:\n  steps: 7\n", encoding="utf-8")
    assert config_path("tiny") == Path("tiny")
    assert load_config("tiny")["training"]["steps"] == 7


def test_an_unknown_name_is_one_line_naming_the_presets(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"config file 'tinny' does not exist \(or name a shipped preset: "
                                          r"bert_base_gpu, multi_gpu, tiny\)"):
        load_config("tinny")
    assert main(["train", "--config", "tinny"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "shipped preset" in error


def test_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    listed = capsys.readouterr().out.split("positional arguments:", 1)[1]
    for command in ("train", "html", "corpus"):
        assert f"\n    {command} " in listed
