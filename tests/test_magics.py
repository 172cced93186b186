"""%bert_inspect in a real IPython shell: `%load_ext bertviz_lab`, each option, the cell form, one-line errors for bad
names and options, names looked up and never evaluated, and the `%bert_inspect?` documentation."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import torch
from IPython.core.error import UsageError

from bertviz_lab.device import available_devices
from bertviz_lab.magics import wait_for_warm_up
from bertviz_lab.model import BERT, BERT_Weights, BERTForPreTraining, BERTTokenizerFast
from bertviz_lab.widgets import (
    ArchitecturePanel,
    AttentionPanel,
    DevicePicker,
    MaskingPreview,
    TrainingPanel,
    Workbench,
)


class Spy:
    """Records every attribute access and call: evaluating a name would leave a trace here."""

    def __init__(self) -> None:
        self.touched: list[str] = []

    def __getattr__(self, name: str):
        self.touched.append(name)
        return lambda *args, **kwargs: self.touched.append(f"{name}()")

    def __call__(self, *args, **kwargs):
        self.touched.append("call")


@pytest.fixture(scope="module")
def shell(tiny_config, ipython_shell):
    ip = ipython_shell
    result = ip.run_cell("%load_ext bertviz_lab")
    assert result.success, result.error_in_exec
    wait_for_warm_up()
    tokenizer = BERTTokenizerFast.from_pretrained(BERT_Weights.DEFAULT.path)
    torch.manual_seed(0)
    model = BERTForPreTraining(tiny_config(vocab_size=tokenizer.vocab_size, max_position_embeddings=128,
                                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    ip.user_ns.update(m=model, tok=tokenizer, x=3, spy=Spy(), word="REPLACED")
    yield ip
    for name in ("m", "tok", "x", "spy", "word", "panel"):
        ip.user_ns.pop(name, None)


def run(shell, source: str):
    """Run a cell as a notebook would; return its value (the cell's last expression), failing on an error."""
    result = shell.run_cell(source)
    assert result.success, result.error_in_exec or result.error_before_exec
    return result.result


def usage_error(shell, line: str, cell: str | None = None) -> str:
    """The one-line UsageError a bad line gives."""
    with pytest.raises(UsageError) as error:
        if cell is None:
            shell.run_line_magic("bert_inspect", line)
        else:
            shell.run_cell_magic("bert_inspect", line, cell)
    message = str(error.value)
    assert message and "\n" not in message
    return message


def test_load_ext_registers_the_line_and_cell_magic(shell):
    assert "bertviz_lab" in shell.extension_manager.loaded
    assert shell.find_line_magic("bert_inspect") is not None and shell.find_cell_magic("bert_inspect") is not None


@pytest.mark.slow
def test_load_ext_warms_up_the_panels_and_the_default_model_in_the_background():
    # a fresh interpreter: in this one, earlier tests may already have imported the panels and loaded the model
    script = textwrap.dedent("""
        import sys, threading
        from IPython.testing.globalipapp import start_ipython
        ip = start_ipython()
        assert ip.run_cell("%load_ext bertviz_lab").success
        from bertviz_lab.magics import WARM_UP_THREAD
        warm_up = [t for t in threading.enumerate() if t.name == WARM_UP_THREAD]
        assert len(warm_up) == 1 and warm_up[0].daemon
        warm_up[0].join()
        from bertviz_lab.widgets.panels import models
        assert "bertviz_lab.widgets.panels.attention" in sys.modules and "anywidget" in sys.modules
        assert models._load_default_once.cache_info().currsize == 1
        from bertviz_lab.kernels import choice
        assert choice._cpu_backend is not choice._UNSET  # chosen (AVX2 kernels built or verified) before a forward
        panel = ip.run_line_magic("bert_inspect", "--view attention 'warm already'")
        assert models._load_default_once.cache_info().hits == 1, models._load_default_once.cache_info()
        print(type(panel).__name__)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "AttentionPanel"


def test_default_model_is_loaded_once_when_asked_from_two_threads():
    from bertviz_lab.widgets.panels import models
    models._load_default_once.cache_clear()
    results = []
    threads = [threading.Thread(target=lambda: results.append(models.default_model_and_tokenizer()))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2 and results[0][0] is results[1][0]
    assert models._load_default_once.cache_info().misses == 1


def test_default_model_on_a_text(shell):
    panel = run(shell, '%bert_inspect "The cat sat on the mat."')
    assert isinstance(panel, Workbench) and isinstance(panel.model, BERT)
    assert panel.model.config.num_hidden_layers == 6  # all-MiniLM-L6-v2
    assert panel.text_box.value == "The cat sat on the mat."  # the quotes group the words and are removed
    assert panel.attention.trace.tokens[0] == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", ".", "[SEP]"]


def test_model_tokenizer_view_layer_and_head(shell):
    panel = run(shell, '%bert_inspect m tok --view attention --layer 1 --head 0 "A short text here."')
    assert isinstance(panel, AttentionPanel) and panel.model is shell.user_ns["m"]
    assert (panel.layer.value, panel.head.value) == (1, 0) and panel.text == "A short text here."
    np.testing.assert_allclose(panel.heatmap.weights(), panel.trace.attention(1)[0, 0].numpy(),
                               rtol=2**-11, atol=3e-8)  # float16
    # options before the names and the text, and the value of an assignment
    run(shell, "panel = %bert_inspect --head 3 --view attention m tok 'Another one.'")
    panel = shell.user_ns["panel"]
    assert panel.head.value == 3 and panel.trace.tokens[0] == ["[CLS]", "another", "one", ".", "[SEP]"]


def test_pair_option(shell):
    panel = run(shell, '%bert_inspect --pair "It was warm." "The cat slept."')
    assert isinstance(panel, Workbench) and panel.text_b_box.value == "It was warm."
    tokens = panel.attention.trace.tokens[0]
    assert tokens == ["[CLS]", "the", "cat", "slept", ".", "[SEP]", "it", "was", "warm", ".", "[SEP]"]
    assert panel.attention.trace.token_type_ids[0].tolist() == [0] * 6 + [1] * 5


@pytest.mark.parametrize("view,kind", [("masking", MaskingPreview), ("architecture", ArchitecturePanel),
                                       ("training", TrainingPanel), ("device", DevicePicker), ("all", Workbench)])
def test_every_view(shell, view, kind):
    assert type(run(shell, f'%bert_inspect m tok --view {view} --device cpu "Some text."')) is kind


def test_cell_form_takes_the_body_as_text(shell):
    preview = run(shell, "%%bert_inspect m tok --view masking\nThe cat sat on the mat\nand purred.\n")
    assert isinstance(preview, MaskingPreview)
    expected = shell.user_ns["tok"].encode_pretraining_inputs("The cat sat on the mat\nand purred.")
    assert preview.inputs["input_ids"].tolist() == expected["input_ids"].tolist()
    assert preview.predictions()  # BERTForPreTraining has an MLM head
    panel = run(shell, "%%bert_inspect --view attention --pair 'Second.'\nFirst sentence.\n")
    assert panel.trace.tokens[0] == ["[CLS]", "first", "sentence", ".", "[SEP]", "second", ".", "[SEP]"]
    assert "empty" in usage_error(shell, "m tok --view masking", "   \n")


def test_text_is_taken_literally(shell):
    """IPython expands {expressions} and $names in magic lines unless the magic opts out: this one does."""
    spy = shell.user_ns["spy"]
    panel = run(shell, '%bert_inspect m tok --view attention "costs {spy.touch()} and $word"')
    assert panel.text == "costs {spy.touch()} and $word" and spy.touched == []
    panel = run(shell, "%%bert_inspect m tok --view attention --pair {spy.touch()}\nbody $word\n")
    assert panel.text_b == "{spy.touch()}" and panel.text == "body $word" and spy.touched == []


def test_an_unquoted_name_of_a_str_variable_is_its_text(shell):
    """`t = "..."` then `%bert_inspect t` inspects the text t holds (the names before it are variables too); quoted,
    "t" is the word itself; a name that holds no text is a one-line error, and an unknown name is a one-word text."""
    shell.user_ns["sentence"] = "The cat sat on the mat."
    panel = run(shell, "%bert_inspect m tok --view attention sentence")
    assert panel.text == "The cat sat on the mat."
    assert run(shell, "%bert_inspect --view attention --head 1 m tok sentence").text == "The cat sat on the mat."
    assert run(shell, '%bert_inspect m tok --view attention "sentence"').text == "sentence"
    assert run(shell, "%bert_inspect m tok --view attention 'sentence'").text == "sentence"
    assert run(shell, "%bert_inspect m tok --view attention unbound_word").text == "unbound_word"
    paired = run(shell, "%bert_inspect m tok --view attention --pair sentence 'First.'")
    assert paired.text_b == "The cat sat on the mat." and paired.text == "First."
    assert run(shell, "%bert_inspect m tok --view attention --pair 'sentence' 'First.'").text_b == "sentence"
    assert "'x' names a variable of type int, not a text" in usage_error(shell, "m tok x")
    assert "quote it to inspect the word 'm' itself" in usage_error(shell, "m")


@pytest.mark.parametrize("line,expected", [
    ('nosuch tok "some text"', "unknown name 'nosuch'"),
    ('m nosuch "some text"', "unknown name 'nosuch'"),
    ('x tok "some text"', "'x' is of type int, not a bertviz_lab BERT model"),
    ('m x "some text"', "'x' is of type int, not a BERTTokenizerFast"),
    ('m "some text"', "give the tokenizer after the model"),
    ('m tok spy "some text"', "at most MODEL and TOKENIZER"),
    ("", "missing TEXT"),
    ('m tok --view bogus "t"', "invalid choice: 'bogus'"),
    ('m tok --layer -1 "t"', "--layer must be >= 0, got -1"),
    ('m tok --head -2 "t"', "--head must be >= 0, got -2"),
    ('m tok --layer 99 "t"', "layer 99 does not exist; this model has layers 0..1"),
    ('m tok --view attention --head 4 "t"', "head 4 does not exist; this model has heads 0..3"),
    ('--layer 6 "t"', "layer 6 does not exist; this model has layers 0..5"),
    ('m tok --layer one "t"', "argument --layer: invalid int value: 'one'"),
    ('m tok --view masking --layer 1 "t"', "layer and head choose what the attention view shows; the masking view"),
    ('--view device --head 0 "t"', "the device view has none"),
    ('m tok --device cuda:9 "t"', "'cuda:9' is not available here; available devices: "),
    ('m tok --device tpu "t"', "unknown device 'tpu'"),
    ('m tok --colour red "t"', "unrecognized arguments: --colour"),
    ('m tok "unclosed', "No closing quotation"),
    ('m tok "  "', "empty"),
])
def test_bad_names_and_options_give_one_line_errors(shell, line, expected):
    message = usage_error(shell, line)
    assert expected in message
    if "cuda:9" in line:
        assert all(device in message for device in available_devices())


def test_errors_in_a_notebook_cell_are_usage_errors(shell):
    result = shell.run_cell('%bert_inspect nosuch tok "some text"')
    assert not result.success and isinstance(result.error_in_exec, UsageError)


@pytest.mark.parametrize("names", ["os.system tok", "spy.touch tok", "m tok.__class__", "spy() tok", "m[0] tok",
                                   "__import__('os').system tok", "spy m"])
def test_names_are_looked_up_never_evaluated(shell, names):
    spy = shell.user_ns["spy"]
    spy.touched.clear()
    message = usage_error(shell, f'{names} "some text"')
    assert "must be a variable name" in message or "not a bertviz_lab BERT model" in message
    assert spy.touched == []


def test_question_mark_documents_every_option(shell, capsys):
    capsys.readouterr()
    assert shell.run_cell("%bert_inspect?").success
    doc = capsys.readouterr().out
    assert doc.strip() == shell.object_inspect_text("%bert_inspect").strip()
    choices = "attention,masking,architecture,training,device,causal,head,model,neuron,saliency,all"
    for part in ("%bert_inspect", "--view", choices, "--layer",
                 "--head", "--pair", "TEXT_B", "--device", "[MODEL [TOKENIZER]] TEXT", "%%bert_inspect",
                 "never evaluated"):
        assert part in doc, part
    import bertviz_lab

    assert bertviz_lab.load_ipython_extension.__module__ == "bertviz_lab"
