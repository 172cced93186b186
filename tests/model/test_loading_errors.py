"""Loading a model or tokenizer from broken, hostile or odd files fails with one line that names the file or the value:
through bertviz_lab.load, every from_pretrained, the tokenizer's constructor, a Hub repo id, %bert_inspect --model and
the training CLI's data.tokenizer. Pipes and devices (which would hang a load or fill memory) and huge files run in a
child process with a memory limit and a timeout, and must end quickly with the error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml
from hub_cache import add_folder, commit, offline_cache
from IPython.core.error import UsageError
from tiny_models import tiny_config

import bertviz_lab
from bertviz_lab.cli import main as console_main
from bertviz_lab.magics import BertInspectMagics
from bertviz_lab.model import BERT, BERTConfig, BERTForMaskedLM, BERTTokenizerFast
from bertviz_lab.util.files import MAX_TEXT_MB_VARIABLE

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{i}" for i in range(95))]  # tiny_config's 100 ids
LONG_NAME = "x" * 10_000
MESSAGE_LIMIT = 600  # one line of at most ~200 characters per echoed path or value, plus the sentence around them


@pytest.fixture
def checkpoint(tmp_path) -> Path:
    """A tiny masked-LM checkpoint with every tokenizer file: config.json, model.safetensors, vocab.txt,
    tokenizer.json, tokenizer_config.json."""
    folder = tmp_path / "ckpt"
    BERTForMaskedLM(tiny_config()).save_pretrained(folder)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    BERTTokenizerFast(vocab_file=folder / "vocab.txt").save_pretrained(folder)
    return folder


def one_line(error: pytest.ExceptionInfo, *parts: str) -> str:
    """The error's message, checked to be one bounded line holding every part."""
    message = str(error.value)
    assert "\n" not in message and len(message) <= MESSAGE_LIMIT, message[:2000]
    for part in parts:
        assert part in message, (part, message)
    return message


def edit_json(file: Path, **changes) -> None:
    file.write_text(json.dumps({**json.loads(file.read_text()), **changes}))


# a corrupt tokenizer.json, through every way in ----------------------------------------------------------------
DAMAGED_TOKENIZERS = {"no model": "{}", "cut short": None, "not json": "tokenizer"}


def damage_tokenizer(folder: Path, damage: str) -> Path:
    file = folder / "tokenizer.json"
    text = file.read_text()
    file.write_text(DAMAGED_TOKENIZERS[damage] if DAMAGED_TOKENIZERS[damage] is not None else text[: len(text) // 2])
    return file


@pytest.mark.parametrize("damage", DAMAGED_TOKENIZERS)
@pytest.mark.parametrize("way_in", ["load", "from_pretrained folder", "from_pretrained file", "constructor"])
def test_a_corrupt_tokenizer_json_is_a_value_error_naming_it(checkpoint, damage, way_in):
    file = damage_tokenizer(checkpoint, damage)
    calls = {"load": lambda: bertviz_lab.load(checkpoint),
             "from_pretrained folder": lambda: BERTTokenizerFast.from_pretrained(checkpoint),
             "from_pretrained file": lambda: BERTTokenizerFast.from_pretrained(file),
             "constructor": lambda: BERTTokenizerFast(tokenizer_file=file)}
    with pytest.raises(ValueError) as error:
        calls[way_in]()
    one_line(error, str(file), "not a tokenizer.json the tokenizers library can read")


def test_a_corrupt_tokenizer_json_in_a_hub_repo_names_the_cached_file(checkpoint, monkeypatch, tmp_path):
    damage_tokenizer(checkpoint, "no model")
    snapshot = add_folder(tmp_path / "hub", "org/broken-tokenizer", checkpoint, commit(3))
    offline_cache(monkeypatch, tmp_path / "hub")
    for call in (lambda: bertviz_lab.load("org/broken-tokenizer"),
                 lambda: BERTTokenizerFast.from_pretrained("org/broken-tokenizer")):
        with pytest.raises(ValueError) as error:
            call()
        one_line(error, str(snapshot / "tokenizer.json"), "Model missing")


class Shell:
    """What %bert_inspect reads of an IPython shell: the notebook's namespace."""

    def __init__(self) -> None:
        self.user_ns: dict = {}
        self.magics = BertInspectMagics(shell=self)


def test_bert_inspect_model_names_the_corrupt_tokenizer_json(checkpoint):
    file = damage_tokenizer(checkpoint, "no model")
    with pytest.raises(UsageError) as error:
        Shell().magics.bert_inspect(f'--model {checkpoint} "A text."')
    one_line(error, str(file), "not a tokenizer.json")


def cli_config(tmp_path: Path, tokenizer: str) -> Path:
    """A training config whose data.tokenizer is `tokenizer` (a corpus file, so the tokenizer is built)."""
    documents = [f"Document {n} starts here. It has a second sentence. And a third one." for n in range(20)]
    (tmp_path / "corpus.txt").write_text("\n\n\n".join(documents) + "\n")
    config = {"data": {"corpus": str(tmp_path / "corpus.txt"), "tokenizer": tokenizer, "sequence_length": 16,
                       "batch_size": 2},
              "model": {"dim_model": 32, "num_heads": 2, "dim_ff": 64, "num_layers": 1},
              "training": {"steps": 1, "device": "cpu"}, "logging": {"progress": False}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    return tmp_path / "c.yaml"


@pytest.mark.parametrize("damage", ["tokenizer.json", "vocab.txt"])
def test_the_training_cli_exits_2_naming_the_tokenizer_file(checkpoint, tmp_path, capsys, damage):
    if damage == "tokenizer.json":
        bad = damage_tokenizer(checkpoint, "no model")
    else:
        (checkpoint / "tokenizer.json").unlink()
        bad = checkpoint / "vocab.txt"
        bad.write_bytes(b"[PAD]\n\xff\xfe\n")
    assert console_main(["train", "--config", str(cli_config(tmp_path, str(checkpoint)))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("bertviz-lab train: error: data.tokenizer: "), err
    assert str(bad) in err and len(err) <= MESSAGE_LIMIT


# what config.json and the tokenizer files may hold --------------------------------------------------------------
@pytest.mark.parametrize("name, expected", [
    ("config.json", "nests lists or objects too deeply"),
    ("tokenizer_config.json", "nests lists or objects too deeply"),
    ("tokenizer.json", "not a tokenizer.json the tokenizers library can read"),  # the Rust parser's own limit
])
def test_json_nested_too_deeply_is_refused_not_a_recursion_error(checkpoint, name, expected):
    (checkpoint / name).write_text('{"a": ' + "[" * 200_000 + "]" * 200_000 + "}")
    with pytest.raises(ValueError) as error:
        bertviz_lab.load(checkpoint)
    one_line(error, str(checkpoint / name), expected)


def test_config_json_nested_too_deeply_through_the_config_and_model_classes(checkpoint):
    (checkpoint / "config.json").write_text("[" * 200_000 + "]" * 200_000)
    for call in (lambda: BERTConfig.from_pretrained(checkpoint), lambda: BERT.from_pretrained(checkpoint)):
        with pytest.raises(ValueError) as error:
            call()
        one_line(error, str(checkpoint / "config.json"), "too deeply")


@pytest.mark.parametrize("architectures", [5, "BertForMaskedLM", [1, 2], {"a": 1}])
def test_architectures_must_be_a_list_of_class_names(checkpoint, architectures):
    edit_json(checkpoint / "config.json", architectures=architectures)
    with pytest.raises(ValueError) as error:
        bertviz_lab.load(checkpoint)
    one_line(error, str(checkpoint / "config.json"), "architectures must be a list", repr(architectures)[:10])


@pytest.mark.parametrize("where, name", [("config.json", "hidden_size"), ("config.json", "some_unknown_key"),
                                         ("tokenizer_config.json", "model_max_length")])
def test_a_5000_digit_integer_is_named_in_one_short_line(checkpoint, where, name):
    text = (checkpoint / where).read_text().rstrip().rstrip("}")
    (checkpoint / where).write_text(text + f', "{name}": {"9" * 5000}}}')
    with pytest.raises(ValueError) as error:
        bertviz_lab.load(checkpoint)
    one_line(error, str(checkpoint / where), "an integer of 5000 digits")


def test_an_integer_no_tensor_can_hold_is_named(checkpoint):
    edit_json(checkpoint / "config.json", vocab_size=10**4000)
    with pytest.raises(ValueError) as error:
        bertviz_lab.load(checkpoint)
    one_line(error, str(checkpoint / "config.json"), "vocab_size", "at most 2**63 - 1")


@pytest.mark.parametrize("literal, shown", [("1e400", "float inf"), ('"512"', "str '512'"), ("0", "int 0"),
                                            ("2.5", "float 2.5"), ("true", "bool True"), ("[512]", "list [512]")])
def test_a_bad_model_max_length_names_the_file_and_value(checkpoint, literal, shown):
    config = json.loads((checkpoint / "tokenizer_config.json").read_text())
    text = json.dumps({**config, "model_max_length": 0}).replace('"model_max_length": 0', f'"model_max_length": '
                                                                                          f'{literal}')
    (checkpoint / "tokenizer_config.json").write_text(text)
    for call in (lambda: bertviz_lab.load(checkpoint), lambda: BERTTokenizerFast.from_pretrained(checkpoint)):
        with pytest.raises(ValueError) as error:
            call()
        one_line(error, str(checkpoint / "tokenizer_config.json"), "model_max_length must be a positive integer",
                 f"got {shown}")


def test_model_max_length_written_as_a_whole_float_is_read(checkpoint):
    edit_json(checkpoint / "tokenizer_config.json", model_max_length=256.0)
    assert BERTTokenizerFast.from_pretrained(checkpoint).model_max_length == 256
    edit_json(checkpoint / "tokenizer_config.json", model_max_length=1e30)  # transformers' "no limit saved"
    assert BERTTokenizerFast.from_pretrained(checkpoint).model_max_length == 512


@pytest.mark.parametrize("key, value, expected", [("do_lower_case", "yes", "true or false"),
                                                  ("mask_token", 5, "a token"),
                                                  ("strip_accents", [1], "true, false or null")])
def test_bad_tokenizer_settings_name_the_file_and_key(checkpoint, key, value, expected):
    edit_json(checkpoint / "tokenizer_config.json", **{key: value})
    with pytest.raises(ValueError) as error:
        BERTTokenizerFast.from_pretrained(checkpoint)
    one_line(error, str(checkpoint / "tokenizer_config.json"), f"{key} must be {expected}")


def test_a_bad_special_token_in_special_tokens_map_names_that_file(checkpoint):
    config = json.loads((checkpoint / "tokenizer_config.json").read_text())
    del config["cls_token"]  # so it comes from special_tokens_map.json
    (checkpoint / "tokenizer_config.json").write_text(json.dumps(config))
    (checkpoint / "special_tokens_map.json").write_text(json.dumps({"cls_token": ["[CLS]"]}))
    with pytest.raises(ValueError) as error:
        BERTTokenizerFast.from_pretrained(checkpoint)
    one_line(error, str(checkpoint / "special_tokens_map.json"), "cls_token must be a token")


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json", "special_tokens_map.json",
                                  "tokenizer.json", "vocab.txt"])
def test_a_file_that_is_not_utf8_is_named(checkpoint, name):
    if name == "vocab.txt":
        (checkpoint / "tokenizer.json").unlink()  # vocab.txt is read when there is no tokenizer.json
    (checkpoint / name).write_bytes(b'{"do_lower_case": "\xff\xfe"}')
    with pytest.raises(ValueError) as error:
        bertviz_lab.load(checkpoint)
    one_line(error, str(checkpoint / name), "is not UTF-8 text: byte 0xff at offset 19")


# names that are not paths ----------------------------------------------------------------------------------------
NAME_CALLS = {
    "load": bertviz_lab.load,
    "BERT.from_pretrained": BERT.from_pretrained,
    "BERTConfig.from_pretrained": BERTConfig.from_pretrained,
    "BERTTokenizerFast.from_pretrained": BERTTokenizerFast.from_pretrained,
    "vocab_file": lambda name: BERTTokenizerFast(vocab_file=name),
    "tokenizer_file": lambda name: BERTTokenizerFast(tokenizer_file=name),
}


@pytest.mark.parametrize("call", NAME_CALLS)
def test_a_10000_character_name_is_refused_in_one_short_line(tmp_path, call):
    name = str(tmp_path / LONG_NAME)
    with pytest.raises(ValueError) as error:
        NAME_CALLS[call](name)
    message = one_line(error, str(tmp_path)[:40], "characters) cannot be looked up")  # a long path is cut after ~66
    assert message.count("x") < 250


@pytest.mark.parametrize("call", NAME_CALLS)
def test_a_name_with_a_nul_byte_is_refused(tmp_path, call):
    with pytest.raises(ValueError) as error:
        NAME_CALLS[call](str(tmp_path / "a\0b"))
    one_line(error, "NUL byte", "a\\x00b")


@pytest.mark.parametrize("call", NAME_CALLS)
def test_an_empty_name_never_means_the_current_folder(checkpoint, monkeypatch, call):
    monkeypatch.chdir(checkpoint)  # a loadable checkpoint right here: "" must still not load it
    with pytest.raises(ValueError) as error:
        NAME_CALLS[call]("")
    one_line(error, "got an empty string")


def test_load_none_is_a_type_error_naming_load_default():
    with pytest.raises(TypeError) as error:
        bertviz_lab.load(None)
    one_line(error, "got None", "load_default()")


@pytest.mark.parametrize("value, shown", [(3, "int 3"), (b"/tmp/x", "bytes b'/tmp/x'"), (["a" * 5000], "list")])
def test_a_name_of_another_type_is_a_type_error(value, shown):
    for call in (bertviz_lab.load, BERTTokenizerFast.from_pretrained, BERTConfig.from_pretrained):
        with pytest.raises(TypeError) as error:
            call(value)
        one_line(error, f"got {shown}")


def test_a_path_to_a_pipe_given_as_the_checkpoint_folder_is_named(tmp_path):
    os.mkfifo(tmp_path / "pipe")  # only looked at, never opened: safe in this process
    with pytest.raises(ValueError) as error:
        bertviz_lab.load(tmp_path / "pipe")
    one_line(error, str(tmp_path / "pipe"), "is a named pipe (FIFO), not a checkpoint folder")


# size limits -----------------------------------------------------------------------------------------------------
def test_a_text_file_over_the_limit_is_refused_and_the_limit_can_be_raised(checkpoint, monkeypatch):
    monkeypatch.setenv(MAX_TEXT_MB_VARIABLE, "1")
    (checkpoint / "config.json").write_text((checkpoint / "config.json").read_text() + " " * (2 << 20))
    with pytest.raises(ValueError) as error:
        bertviz_lab.load(checkpoint)
    one_line(error, str(checkpoint / "config.json"), "more than the 1 MB", MAX_TEXT_MB_VARIABLE)
    monkeypatch.setenv(MAX_TEXT_MB_VARIABLE, "4")
    model, tokenizer = bertviz_lab.load(checkpoint)
    assert type(model) is BERTForMaskedLM and len(tokenizer) == 100


@pytest.mark.parametrize("setting", ["lots", "0", "-1", "nan", "1e300"])
def test_a_bad_size_limit_setting_is_named(checkpoint, monkeypatch, setting):
    monkeypatch.setenv(MAX_TEXT_MB_VARIABLE, setting)
    with pytest.raises(ValueError) as error:
        BERTConfig.from_pretrained(checkpoint)
    one_line(error, f"{MAX_TEXT_MB_VARIABLE}={setting} is not a size")


# sharded checkpoints: what is wrong with the index or a shard ---------------------------------------------------
@pytest.fixture
def sharded(checkpoint) -> Path:
    """The checkpoint split by hand into two shards and an index, as transformers lays them out."""
    from safetensors.torch import load_file, save_file

    state = load_file(checkpoint / "model.safetensors")
    (checkpoint / "model.safetensors").unlink()
    names = sorted(state)
    halves = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for shard, part in halves.items():
        save_file({name: state[name] for name in part}, str(checkpoint / shard), metadata={"format": "pt"})
    weight_map = {name: shard for shard, part in halves.items() for name in part}
    (checkpoint / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return checkpoint


def test_the_hand_made_shards_load(sharded):
    model, _ = bertviz_lab.load(sharded)
    assert type(model) is BERTForMaskedLM and not model.load_report.missing


def test_a_missing_shard_is_named(sharded):
    (sharded / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(FileNotFoundError) as error:
        bertviz_lab.load(sharded)
    one_line(error, "model.safetensors.index.json names the shard 'model-00002-of-00002.safetensors'",
             "the checkpoint is incomplete")


def test_a_tensor_the_index_puts_in_a_shard_that_lacks_it_is_named(sharded):
    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    index["weight_map"]["cls.predictions.bias"] = "model-00001-of-00002.safetensors"
    index["weight_map"]["bert.embeddings.LayerNorm.bias"] = "model-00002-of-00002.safetensors"
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError) as error:
        bertviz_lab.load(sharded)
    one_line(error, "that it does not hold", "the index and its shards do not match")


@pytest.mark.parametrize("shard", ["../model-00001-of-00002.safetensors", "/etc/passwd", "sub/x.safetensors", "..",
                                   "model-00001-of-00002.bin", 7])
def test_a_shard_outside_the_folder_or_not_safetensors_is_refused(sharded, shard):
    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    index["weight_map"]["cls.predictions.bias"] = shard
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError) as error:
        bertviz_lab.load(sharded)
    one_line(error, "'cls.predictions.bias'", repr(shard), "expected the name of a .safetensors file in the same "
                                                           "folder")


@pytest.mark.parametrize("index", [{}, {"weight_map": {}}, {"weight_map": ["a"]}, []])
def test_an_index_without_a_weight_map_is_named(sharded, index):
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError) as error:
        bertviz_lab.load(sharded)
    one_line(error, str(sharded / "model.safetensors.index.json"))


def test_sharded_pickle_checkpoints_are_said_to_be_unsupported(sharded):
    (sharded / "model.safetensors.index.json").rename(sharded / "pytorch_model.bin.index.json")
    with pytest.raises(ValueError) as error:
        bertviz_lab.load(sharded)
    one_line(error, "pytorch_model.bin.index.json", "sharded pickle checkpoints are not supported")


# pipes, devices and huge files: in a child process with a memory limit and a timeout --------------------------------
CHILD = textwrap.dedent("""
    import contextlib, io, json, resource, sys, time
    memory = int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    import bertviz_lab
    from bertviz_lab.cli import main
    from bertviz_lab.model import BERT, BERTTokenizerFast

    def cli(config):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = main(["train", "--config", config])
        return {"exit": code, "stderr": err.getvalue()}

    calls = {
        "load": bertviz_lab.load,
        "BERT.from_pretrained": BERT.from_pretrained,
        "BERTTokenizerFast.from_pretrained": BERTTokenizerFast.from_pretrained,
        "vocab_file": lambda path: BERTTokenizerFast(vocab_file=path),
        "tokenizer_file": lambda path: BERTTokenizerFast(tokenizer_file=path),
        "cli": cli,
        "hub": bertviz_lab.load,
    }
    for case, call, path in json.loads(sys.argv[1]):
        start = time.monotonic()
        try:
            value = calls[call](path)
            result = {"returned": value if isinstance(value, dict) else repr(value)[:200]}
        except BaseException as error:
            result = {"type": type(error).__name__, "message": str(error)}
        result.update(case=case, seconds=time.monotonic() - start)
        print(json.dumps(result), flush=True)
""")
CHILD_MEMORY = 4 << 30  # bytes of address space: torch and a tiny model fit; reading /dev/zero to the end does not
CHILD_TIMEOUT = 150  # seconds; the child needs ~15 s on a busy 2-core machine


def make_special(folder: Path, name: str, what: str) -> Path:
    """Replace folder/name by a named pipe, a link to /dev/zero, or a sparse regular file of 100 GB."""
    path = folder / name
    if path.exists():
        path.unlink()
    if what == "pipe":
        os.mkfifo(path)
    elif what == "zero":
        os.symlink("/dev/zero", path)
    else:
        with open(path, "wb") as handle:
            handle.truncate(100 << 30)
    return path


SPECIAL_CASES = {  # case -> (file replaced, replaced by, the call)
    "config.json pipe": ("config.json", "pipe", "load"),
    "config.json zero": ("config.json", "zero", "load"),
    "config.json sparse 100 GB": ("config.json", "sparse", "load"),
    "tokenizer.json pipe": ("tokenizer.json", "pipe", "BERTTokenizerFast.from_pretrained"),
    "tokenizer.json zero (constructor)": ("tokenizer.json", "zero", "tokenizer_file"),
    "tokenizer_config.json zero": ("tokenizer_config.json", "zero", "load"),
    "special_tokens_map.json pipe": ("special_tokens_map.json", "pipe", "BERTTokenizerFast.from_pretrained"),
    "vocab.txt pipe (constructor)": ("vocab.txt", "pipe", "vocab_file"),
    "vocab.txt sparse 100 GB": ("vocab.txt", "sparse", "vocab_file"),
    "model.safetensors pipe": ("model.safetensors", "pipe", "BERT.from_pretrained"),
    "model.safetensors zero": ("model.safetensors", "zero", "load"),
    "pytorch_model.bin zero": ("pytorch_model.bin", "zero", "load"),
    "index pipe": ("model.safetensors.index.json", "pipe", "load"),
    "shard zero": ("model-00001-of-00002.safetensors", "zero", "load"),
    "cli data.tokenizer vocab.txt pipe": ("vocab.txt", "pipe", "cli"),
    "Hub repo config.json pipe": ("config.json", "pipe", "hub"),
    "Hub repo tokenizer.json zero": ("tokenizer.json", "zero", "hub"),
}


@pytest.fixture(scope="module")
def special_results(tmp_path_factory) -> dict[str, dict]:
    """Run every special-file case in one child process; a case that hangs leaves itself and the rest unreported."""
    root = tmp_path_factory.mktemp("special-files")
    cases = []
    for n, (case, (name, what, call)) in enumerate(SPECIAL_CASES.items()):
        folder = root / f"case{n}"
        BERTForMaskedLM(tiny_config()).save_pretrained(folder)
        (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
        BERTTokenizerFast(vocab_file=folder / "vocab.txt").save_pretrained(folder)
        if name == "pytorch_model.bin":
            (folder / "model.safetensors").unlink()
        if name.startswith(("model.safetensors.index", "model-0")):
            (folder / "model.safetensors").rename(folder / "model-00001-of-00002.safetensors")
            weight_map = {"bert.embeddings.word_embeddings.weight": "model-00001-of-00002.safetensors"}
            (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
        if name == "special_tokens_map.json":
            (folder / name).write_text("{}")
        if call == "hub":  # the file in the repo's cached snapshot (a link to a blob) becomes the pipe or device
            path = make_special(add_folder(root / "hub", f"org/case{n}", folder, commit(n)), name, what)
        else:
            path = make_special(folder, name, what)
        argument = {"load": folder, "BERT.from_pretrained": folder, "BERTTokenizerFast.from_pretrained": folder,
                    "cli": cli_config(folder, str(path)), "hub": f"org/case{n}"}.get(call, path)
        cases.append([case, call, str(argument)])
    package_root = Path(bertviz_lab.__file__).resolve().parents[1]
    inherited = {key: value for key, value in os.environ.items() if key != MAX_TEXT_MB_VARIABLE}
    env = {**inherited, "PYTHONPATH": os.pathsep.join([str(package_root), os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_CACHE": str(root / "hub"), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
    command = [sys.executable, "-c", CHILD, json.dumps(cases), str(CHILD_MEMORY)]
    start = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=CHILD_TIMEOUT, env=env, cwd=root)
        out, err, status = done.stdout, done.stderr, f"exit {done.returncode}"
    except subprocess.TimeoutExpired as timeout:
        out = (timeout.stdout or b"").decode() if isinstance(timeout.stdout, bytes) else timeout.stdout or ""
        err = (timeout.stderr or b"").decode() if isinstance(timeout.stderr, bytes) else timeout.stderr or ""
        status = f"killed after {CHILD_TIMEOUT} s (a case hung)"
    results: dict[str, dict] = {}
    for line in out.splitlines():
        if line.startswith("{"):
            result = json.loads(line)
            results[result["case"]] = result
    results["_child"] = {"status": status, "stderr": err[-3000:], "seconds": time.monotonic() - start}
    return results


@pytest.mark.parametrize("case", SPECIAL_CASES)
def test_pipes_devices_and_huge_files_are_refused_quickly_in_one_line(special_results, case):
    name, what, call = SPECIAL_CASES[case]
    result = special_results.get(case)
    assert result is not None, f"{case}: no result from the child process ({special_results['_child']})"
    assert result["seconds"] < 20, result
    if call == "cli":
        returned = result.get("returned") or {}
        assert returned.get("exit") == 2, result
        message = returned["stderr"]
        assert message.startswith("bertviz-lab train: error: data.tokenizer: ") and message.count("\n") == 1, result
        assert "is a named pipe (FIFO), not a regular file" in message and name in message, result
        return
    expected = {"pipe": "is a named pipe (FIFO), not a regular file", "zero": "is a character device, not a "
                "regular file", "sparse": f"more than the 64 MB a config or tokenizer file may have; set "
                f"{MAX_TEXT_MB_VARIABLE}"}[what]
    assert result.get("type") == "ValueError", result
    message = result["message"]
    assert "\n" not in message and len(message) <= MESSAGE_LIMIT and expected in message and name in message, result
