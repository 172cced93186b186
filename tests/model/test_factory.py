"""The one registry of the seven task models (model/tasks.py): the public names and the 14 factories come from it,
and each entry says what its model really has and returns."""

from __future__ import annotations

import pytest
import torch

import bertviz_lab.model as model_package
from bertviz_lab.model import footprint
from bertviz_lab.model.factory import TASK_CLASSES
from bertviz_lab.model.tasks import BY_ARCHITECTURE, TASK_MODELS
from bertviz_lab.trace.saliency import OUTPUT_NAMES

# every size field but the heads: base has 12 heads, large 16 (48 divides by both)
SMALL = dict(vocab_size=100, hidden_size=48, intermediate_size=64, num_hidden_layers=1, max_position_embeddings=32)
HEAD_MODULES = {"mlm": "cls.predictions", "nsp": "cls.seq_relationship", "classifier": "classifier",
                "token_classifier": "classifier", "qa": "qa_outputs"}
DESIGN_TASKS = ("pre_training", "masked_lm", "causal_lm", "next_sentence_prediction", "sequence_classification",
                "token_classification", "question_answering")


def test_the_package_exports_the_seven_models_and_fourteen_factories_named_in_the_design():
    assert len(TASK_MODELS) == 7 and [task.task for task in TASK_MODELS] == list(DESIGN_TASKS)
    factories = {f"bert_for_{task}_{size}" for task in DESIGN_TASKS for size in ("base", "large")}
    classes = {TASK_CLASSES[task.task].__name__ for task in TASK_MODELS}
    assert classes == {"BERTForPreTraining", "BERTForMaskedLM", "BERTForCausalLM", "BERTForNextSentencePrediction",
                       "BERTForSequenceClassification", "BERTForTokenClassification", "BERTForQuestionAnswering"}
    assert factories | classes <= set(model_package.__all__)
    for name in factories | classes:
        assert getattr(model_package, name) is not None, name
    for architecture, task in BY_ARCHITECTURE.items():
        assert TASK_CLASSES[task.task].hf_architecture == architecture


@pytest.mark.parametrize("task", TASK_MODELS, ids=lambda task: task.task)
@pytest.mark.parametrize("size, heads", [("base", 12), ("large", 16)])
def test_each_factory_builds_its_model_on_its_size_with_its_defaults(task, size, heads):
    torch.manual_seed(0)
    model = getattr(model_package, f"bert_for_{task.task}_{size}")(**SMALL)
    assert type(model) is TASK_CLASSES[task.task]
    assert model.config.num_attention_heads == heads and model.config.hidden_size == 48
    assert model.config.is_decoder == (task.task == "causal_lm")
    assert f"BERT-{size}" in getattr(model_package, f"bert_for_{task.task}_{size}").__doc__


@pytest.mark.parametrize("task", TASK_MODELS, ids=lambda task: task.task)
def test_each_entry_names_the_heads_the_model_has_and_the_outputs_it_returns(task):
    torch.manual_seed(0)
    model_class = TASK_CLASSES[task.task]
    model = model_class(model_package.BERTConfig.tiny(**SMALL, num_attention_heads=4, **task.config)).eval()
    modules = {name for name, _ in model.named_modules()}
    assert {HEAD_MODULES[head] for head in task.heads} == {HEAD_MODULES[head] for head in HEAD_MODULES
                                                          if HEAD_MODULES[head] in modules}
    assert footprint.heads_of(model_class) == task.heads
    assert footprint.estimate(model.config, heads=task.heads, pooler=model_class.add_pooling_layer).parameters == \
        model.num_parameters()
    with torch.no_grad():
        output = model(torch.randint(5, 100, (2, 6)))
    values = output if isinstance(output, tuple) else (output,)
    assert len(values) == len(task.outputs) and all(isinstance(value, torch.Tensor) for value in values)
    assert dict(OUTPUT_NAMES)[model_class] == task.outputs
