"""The seven task models on the BERT backbone, with loss, prediction, accuracy and from-text helpers.

Module names follow Hugging Face (`bert`, `cls.predictions`, `classifier`, `qa_outputs`) so checkpoints
load both ways; each class names its transformers twin in `hf_architecture`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

import torch
from torch import nn

from bertviz_lab import kernels
from bertviz_lab.model import pretraining as P
from bertviz_lab.model.bert import BERT, BERTPreTrainedModel
from bertviz_lab.model.config import ACTIVATIONS, BERTConfig
from bertviz_lab.model.encoding import encode_text
from bertviz_lab.model.families import family_of
from bertviz_lab.model.layers import linear


# head modules ----------------------------------------------------------------------------------------
class BERTPredictionHeadTransform(nn.Module):
    """Dense + activation + LayerNorm before the vocabulary projection (down to ELECTRA's embedding width; with
    GELU whatever hidden_act says in RoBERTa's and ELECTRA's heads)."""

    def __init__(self, config: BERTConfig) -> None:
        super().__init__()
        E = config.embedding_width
        self.dense = nn.Linear(config.hidden_size, E)
        fixed = family_of(config).head_activation
        self.transform_act_fn = ACTIVATIONS[fixed] if fixed else config.activation()
        self.LayerNorm = nn.LayerNorm(E, eps=config.layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        transformed: torch.Tensor = self.LayerNorm(self.transform_act_fn(self.dense(hidden_states)))
        return transformed


class BERTLMPredictionHead(nn.Module):
    """Transform, then project to the vocabulary with a decoder tied to the word embeddings plus its own bias."""

    def __init__(self, config: BERTConfig) -> None:
        super().__init__()
        self.transform = BERTPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.embedding_width, config.vocab_size)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.decoder.bias = self.bias
        self.linear_backend: kernels.PackedLinear | None = None  # given by the model (kernels.choose)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return linear(self.decoder, self.transform(hidden_states), self.linear_backend)  # (B, T, V)


class BERTOnlyMLMHead(nn.Module):
    def __init__(self, config: BERTConfig) -> None:
        super().__init__()
        self.predictions = BERTLMPredictionHead(config)

    def forward(self, sequence_output: torch.Tensor) -> torch.Tensor:
        scores: torch.Tensor = self.predictions(sequence_output)
        return scores


class BERTOnlyNSPHead(nn.Module):
    def __init__(self, config: BERTConfig) -> None:
        super().__init__()
        self.seq_relationship = nn.Linear(config.hidden_size, 2)

    def forward(self, pooled_output: torch.Tensor) -> torch.Tensor:
        scores: torch.Tensor = self.seq_relationship(pooled_output)
        return scores


class BERTPreTrainingHeads(nn.Module):
    def __init__(self, config: BERTConfig) -> None:
        super().__init__()
        self.predictions = BERTLMPredictionHead(config)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)

    def forward(self, sequence_output: torch.Tensor, pooled_output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.predictions(sequence_output), self.seq_relationship(pooled_output)


class ELECTRADiscriminatorHead(nn.Module):
    """ELECTRA's replaced-token detector: dense, activation, then one logit per token (> 0: "replaced")."""

    def __init__(self, config: BERTConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = config.activation()
        self.dense_prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.dense_prediction(self.activation(self.dense(hidden_states)))
        return logits.squeeze(-1)  # (B, T)


def classifier_dropout(config: BERTConfig) -> float:
    """The classifier's own dropout when set, else the hidden dropout (as Hugging Face)."""
    return config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob


# shared behaviour ------------------------------------------------------------------------------------
class ModelInputs(TypedDict):
    """What the *_from_text helpers pass on from the tokenizer's output."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor


class BERTTaskModel(BERTPreTrainedModel):
    """A backbone plus one head: weight tying, head initialisation, and text encoding for *_from_text."""

    add_pooling_layer = True

    def __init__(self, config: BERTConfig) -> None:
        super().__init__(config)
        self.bert = BERT(config, add_pooling_layer=self.add_pooling_layer)

    def _init_head(self) -> None:
        """Initialise everything but the (already initialised) backbone, then tie."""
        for name, child in self.named_children():
            if name != "bert":
                child.apply(self._init_weights)
        self.tie_weights()
        self.hook_points()  # names them from this model: `bert.embeddings.hidden`, ...
        kernels.choose(self)  # the decoder's packed CPU GEMM

    def tie_weights(self) -> None:
        predictions = getattr(getattr(self, "cls", None), "predictions", None)
        if predictions is not None:
            predictions.decoder.bias = predictions.bias
            if self.config.tie_word_embedding:
                predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight

    def get_input_embeddings(self) -> nn.Embedding:
        return self.bert.get_input_embeddings()

    def get_output_embeddings(self) -> nn.Linear | None:
        predictions = getattr(getattr(self, "cls", None), "predictions", None)
        return predictions.decoder if predictions is not None else None

    def _encode(self, tokenizer: Any, text_a: str, text_b: str | None = None,
                device: str | torch.device | None = None) -> dict[str, torch.Tensor]:
        """Tokenize one text (pair) to (1, T) tensors on the model's device (or `device`, which must hold it); a text
        longer than the model's positions is an error here, since a loss on part of it would mislead."""
        from bertviz_lab.device import select_device

        if device is not None and select_device(device) != self.device:
            raise ValueError(f"the model is on {self.device} but device={str(device)!r} was asked; "
                             f"move it first with model.to({str(device)!r}).")
        return dict(encode_text(self, tokenizer, text_a, text_b, truncate=False).encoding)

    @staticmethod
    def _model_inputs(encoded: dict[str, torch.Tensor]) -> ModelInputs:
        return ModelInputs(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"],
                           token_type_ids=encoded["token_type_ids"])

    def _masked(self, tokenizer: Any, encoded: dict[str, torch.Tensor], seed: int | None,
                mlm_probability: float = P.MASK_PROBABILITY) -> tuple[torch.Tensor, torch.Tensor]:
        return P.create_masked_lm_inputs(
            encoded["input_ids"], vocab_size=self.config.vocab_size, mask_token_id=tokenizer.mask_token_id,
            special_token_ids=tokenizer.all_special_ids, attention_mask=encoded["attention_mask"],
            special_tokens_mask=encoded["special_tokens_mask"], mlm_probability=mlm_probability, seed=seed)

    def create_masked_lm_inputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                                special_tokens_mask: torch.Tensor | None = None, *, mask_token_id: int = 103,
                                special_token_ids: tuple[int, ...] = (), mlm_probability: float = P.MASK_PROBABILITY,
                                mask_replace_prob: float = P.MASK_REPLACE_PROBABILITY,
                                random_replace_prob: float = P.RANDOM_REPLACE_PROBABILITY,
                                ignore_index: int = P.IGNORE_INDEX, generator: torch.Generator | None = None,
                                seed: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """80/10/10 masking for this model's vocabulary: (masked_input_ids, labels)."""
        specials = {*special_token_ids, *((self.config.pad_token_id,) if self.config.pad_token_id is not None else ())}
        return P.create_masked_lm_inputs(
            input_ids, vocab_size=self.config.vocab_size, mask_token_id=mask_token_id, special_token_ids=specials,
            attention_mask=attention_mask, special_tokens_mask=special_tokens_mask, mlm_probability=mlm_probability,
            mask_replace_prob=mask_replace_prob, random_replace_prob=random_replace_prob, ignore_index=ignore_index,
            generator=generator, seed=seed)


# the seven models ------------------------------------------------------------------------------------
class BERTForPreTraining(BERTTaskModel):
    """Masked-LM and next-sentence heads, as BERT was pretrained. NSP label 0: B follows A; 1: B is random."""

    hf_architecture = "BertForPreTraining"

    def __init__(self, config: BERTConfig) -> None:
        super().__init__(config)
        self.cls = BERTPreTrainingHeads(config)
        self._init_head()

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                inputs_embeds: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(prediction_scores (B, T, V), seq_relationship_scores (B, 2))."""
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)
        scores: tuple[torch.Tensor, torch.Tensor] = self.cls(out.last_hidden_state, out.pooler_output)
        return scores

    def get_mlm_loss(self, mlm_labels: torch.Tensor, input_ids: torch.Tensor | None = None,
                     attention_mask: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None, *,
                     ignore_index: int = P.IGNORE_INDEX, reduction: str = "mean", **inputs: Any) -> torch.Tensor:
        scores, _ = self(input_ids, attention_mask, token_type_ids, **inputs)
        return P.token_loss(scores, mlm_labels, ignore_index, reduction, name="mlm_labels")

    def get_nsp_loss(self, nsp_labels: torch.Tensor, input_ids: torch.Tensor | None = None,
                     attention_mask: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None, *,
                     reduction: str = "mean", **inputs: Any) -> torch.Tensor:
        _, nsp = self(input_ids, attention_mask, token_type_ids, **inputs)
        return P.sequence_loss(nsp, nsp_labels, reduction, name="nsp_labels")

    def get_loss(self, mlm_labels: torch.Tensor, nsp_labels: torch.Tensor, input_ids: torch.Tensor | None = None,
                 attention_mask: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None, *,
                 mlm_weight: float = 1.0, nsp_weight: float = 1.0, ignore_index: int = P.IGNORE_INDEX,
                 reduction: str = "mean", **inputs: Any) -> torch.Tensor:
        """mlm_weight * MLM loss + nsp_weight * NSP loss, from one forward pass."""
        scores, nsp = self(input_ids, attention_mask, token_type_ids, **inputs)
        return (mlm_weight * P.token_loss(scores, mlm_labels, ignore_index, reduction, name="mlm_labels")
                + nsp_weight * P.sequence_loss(nsp, nsp_labels, reduction, name="nsp_labels"))

    def predict_mlm_token_ids(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                              token_type_ids: torch.Tensor | None = None, **inputs: Any) -> torch.Tensor:
        return P.predict_labels(self(input_ids, attention_mask, token_type_ids, **inputs)[0])

    def predict_nsp_labels(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                           token_type_ids: torch.Tensor | None = None, **inputs: Any) -> torch.Tensor:
        return P.predict_labels(self(input_ids, attention_mask, token_type_ids, **inputs)[1])

    def get_mlm_accuracy(self, mlm_labels: torch.Tensor, input_ids: torch.Tensor | None = None,
                         attention_mask: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None, *,
                         ignore_index: int = P.IGNORE_INDEX, **inputs: Any) -> torch.Tensor:
        """Accuracy over labelled (masked) positions only."""
        predictions = self.predict_mlm_token_ids(input_ids, attention_mask, token_type_ids, **inputs)
        return P.masked_accuracy(predictions, mlm_labels, ignore_index, name="mlm_labels")

    def get_nsp_accuracy(self, nsp_labels: torch.Tensor, input_ids: torch.Tensor | None = None,
                         attention_mask: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None,
                         **inputs: Any) -> torch.Tensor:
        predictions = self.predict_nsp_labels(input_ids, attention_mask, token_type_ids, **inputs)
        return P.accuracy(predictions, nsp_labels, name="nsp_labels")

    def get_accuracy(self, mlm_labels: torch.Tensor, nsp_labels: torch.Tensor, input_ids: torch.Tensor | None = None,
                     attention_mask: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None, *,
                     mlm_weight: float = 1.0, nsp_weight: float = 1.0, ignore_index: int = P.IGNORE_INDEX,
                     **inputs: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(MLM accuracy, NSP accuracy, their weighted mean), from one forward pass."""
        scores, nsp = self(input_ids, attention_mask, token_type_ids, **inputs)
        mlm_acc = P.masked_accuracy(P.predict_labels(scores), mlm_labels, ignore_index, name="mlm_labels")
        nsp_acc = P.accuracy(P.predict_labels(nsp), nsp_labels, name="nsp_labels")
        total = mlm_weight + nsp_weight
        weighted = (mlm_weight * mlm_acc + nsp_weight * nsp_acc) / (total if total > 0 else 1.0)
        return mlm_acc, nsp_acc, weighted

    def get_loss_from_text(self, tokenizer: Any, text_a: str, text_b: str | None = None, nsp_label: int = 0, *,
                           device: str | torch.device | None = None, mlm_probability: float = P.MASK_PROBABILITY,
                           mlm_weight: float = 1.0, nsp_weight: float = 1.0, seed: int | None = None) -> torch.Tensor:
        """Tokenize, mask (80/10/10, seeded when `seed` is given) and return the weighted pretraining loss."""
        encoded = self._encode(tokenizer, text_a, text_b, device)
        masked, labels = self._masked(tokenizer, encoded, seed, mlm_probability)
        nsp_labels = torch.tensor([nsp_label], device=self.device)
        return self.get_loss(labels, nsp_labels, masked, encoded["attention_mask"], encoded["token_type_ids"],
                             mlm_weight=mlm_weight, nsp_weight=nsp_weight)

    def predict_nsp_labels_from_text(self, tokenizer: Any, text_a: str, text_b: str, *,
                                     device: str | torch.device | None = None) -> torch.Tensor:
        return self.predict_nsp_labels(**self._model_inputs(self._encode(tokenizer, text_a, text_b, device)))


class BERTForMaskedLM(BERTTaskModel):
    """Masked-language-model head only (no pooler), as for fill-in-the-blank."""

    hf_architecture = "BertForMaskedLM"
    add_pooling_layer = False

    def __init__(self, config: BERTConfig) -> None:
        super().__init__(config)
        self.cls = BERTOnlyMLMHead(config)
        self._init_head()

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        """Prediction scores (B, T, V)."""
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)
        scores: torch.Tensor = self.cls(out.last_hidden_state)
        return scores

    def get_loss(self, labels: torch.Tensor, input_ids: torch.Tensor | None = None,
                 attention_mask: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None, *,
                 ignore_index: int = P.IGNORE_INDEX, reduction: str = "mean", **inputs: Any) -> torch.Tensor:
        return P.token_loss(self(input_ids, attention_mask, token_type_ids, **inputs), labels, ignore_index, reduction)

    def predict_token_ids(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                          token_type_ids: torch.Tensor | None = None, **inputs: Any) -> torch.Tensor:
        return P.predict_labels(self(input_ids, attention_mask, token_type_ids, **inputs))

    def get_accuracy(self, labels: torch.Tensor, input_ids: torch.Tensor | None = None,
                     attention_mask: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None, *,
                     ignore_index: int = P.IGNORE_INDEX, **inputs: Any) -> torch.Tensor:
        """Accuracy over labelled positions only."""
        return P.masked_accuracy(self.predict_token_ids(input_ids, attention_mask, token_type_ids, **inputs),
                                 labels, ignore_index)

    def get_loss_from_text(self, tokenizer: Any, text_a: str, text_b: str | None = None, *,
                           device: str | torch.device | None = None, mlm_probability: float = P.MASK_PROBABILITY,
                           seed: int | None = None) -> torch.Tensor:
        encoded = self._encode(tokenizer, text_a, text_b, device)
        masked, labels = self._masked(tokenizer, encoded, seed, mlm_probability)
        return self.get_loss(labels, masked, encoded["attention_mask"], encoded["token_type_ids"])

    def predict_token_ids_from_text(self, tokenizer: Any, text_a: str, text_b: str | None = None, *,
                                    device: str | torch.device | None = None) -> torch.Tensor:
        return self.predict_token_ids(**self._model_inputs(self._encode(tokenizer, text_a, text_b, device)))


class BERTForCausalLM(BERTTaskModel):
    """Left-to-right language model (needs is_decoder=True); optional cross-attention and KV caching.

    Pass `past_key_values=DynamicCache()` (or a StaticCache / EncoderDecoderCache) to decode incrementally:
    the cache object is updated in place.
    """

    hf_architecture = "BertLMHeadModel"
    add_pooling_layer = False

    def __init__(self, config: BERTConfig) -> None:
        if not config.is_decoder:
            raise ValueError("BERTForCausalLM needs a causal decoder: build it with BERTConfig(is_decoder=True).")
        super().__init__(config)
        self.cls = BERTOnlyMLMHead(config)
        self._init_head()

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                inputs_embeds: torch.Tensor | None = None, encoder_hidden_states: torch.Tensor | None = None,
                encoder_attention_mask: torch.Tensor | None = None, past_key_values: Any = None,
                use_cache: bool | None = None, cache_position: torch.Tensor | None = None) -> torch.Tensor:
        """Next-token scores (B, T, V)."""
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, encoder_hidden_states,
                        encoder_attention_mask, past_key_values, use_cache, cache_position)
        scores: torch.Tensor = self.cls(out.last_hidden_state)
        return scores

    def get_loss(self, labels: torch.Tensor, input_ids: torch.Tensor | None = None,
                 attention_mask: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None, *,
                 ignore_index: int = P.IGNORE_INDEX, reduction: str = "mean", shift_labels: bool = True,
                 **inputs: Any) -> torch.Tensor:
        """Next-token cross-entropy (labels are usually the input ids; shifted here)."""
        logits = self(input_ids, attention_mask, token_type_ids, **inputs)
        return P.causal_lm_loss(logits, labels, ignore_index, reduction, shift_labels)

    def get_perplexity(self, labels: torch.Tensor, input_ids: torch.Tensor | None = None,
                       attention_mask: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None,
                       **inputs: Any) -> torch.Tensor:
        """exp(mean next-token loss)."""
        return self.get_loss(labels, input_ids, attention_mask, token_type_ids, **inputs).exp()

    def predict_next_token_id(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                              token_type_ids: torch.Tensor | None = None, **inputs: Any) -> torch.Tensor:
        """Greedy next token after the last position, (B,)."""
        return P.predict_labels(self(input_ids, attention_mask, token_type_ids, **inputs)[:, -1])

    def get_loss_from_text(self, tokenizer: Any, text: str, *,
                           device: str | torch.device | None = None) -> torch.Tensor:
        encoded = self._encode(tokenizer, text, None, device)
        labels = encoded["input_ids"].masked_fill(encoded["attention_mask"] == 0, P.IGNORE_INDEX)
        return self.get_loss(labels, **self._model_inputs(encoded))

    def get_perplexity_from_text(self, tokenizer: Any, text: str, *,
                                 device: str | torch.device | None = None) -> torch.Tensor:
        return self.get_loss_from_text(tokenizer, text, device=device).exp()

    def predict_next_token_id_from_text(self, tokenizer: Any, text: str, *,
                                        device: str | torch.device | None = None) -> torch.Tensor:
        """Next token after the text (the trailing [SEP] is left out so the model continues the text)."""
        encoded = self._encode(tokenizer, text, None, device)
        inputs = self._model_inputs(encoded)
        return self.predict_next_token_id(inputs["input_ids"][:, :-1], inputs["attention_mask"][:, :-1],
                                          inputs["token_type_ids"][:, :-1])


class BERTForNextSentencePrediction(BERTTaskModel):
    """Does sentence B follow sentence A? Label 0: yes (IsNext); 1: B is random (NotNext)."""

    hf_architecture = "BertForNextSentencePrediction"

    def __init__(self, config: BERTConfig) -> None:
        super().__init__(config)
        self.cls = BERTOnlyNSPHead(config)
        self._init_head()

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        """Scores (B, 2)."""
        pooled = self.bert(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds).pooler_output
        scores: torch.Tensor = self.cls(pooled)
        return scores

    def get_loss(self: BERTTaskModel, labels: torch.Tensor, input_ids: torch.Tensor | None = None,
                 attention_mask: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None, *,
                 reduction: str = "mean", **inputs: Any) -> torch.Tensor:
        # self: any task model, as BERTForSequenceClassification shares this method
        return P.sequence_loss(self(input_ids, attention_mask, token_type_ids, **inputs), labels, reduction)

    def predict_labels(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                       token_type_ids: torch.Tensor | None = None, **inputs: Any) -> torch.Tensor:
        return P.predict_labels(self(input_ids, attention_mask, token_type_ids, **inputs))

    def predict_proba(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                      token_type_ids: torch.Tensor | None = None, **inputs: Any) -> torch.Tensor:
        return torch.softmax(self(input_ids, attention_mask, token_type_ids, **inputs).float(), dim=-1)

    def get_accuracy(self, labels: torch.Tensor, input_ids: torch.Tensor | None = None,
                     attention_mask: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None,
                     **inputs: Any) -> torch.Tensor:
        return P.accuracy(self.predict_labels(input_ids, attention_mask, token_type_ids, **inputs), labels)

    def get_loss_from_text(self, tokenizer: Any, text_a: str, text_b: str, label: int = 0, *,
                           device: str | torch.device | None = None) -> torch.Tensor:
        encoded = self._encode(tokenizer, text_a, text_b, device)
        return self.get_loss(torch.tensor([label], device=self.device), **self._model_inputs(encoded))

    def predict_labels_from_text(self, tokenizer: Any, text_a: str, text_b: str, *,
                                 device: str | torch.device | None = None) -> torch.Tensor:
        return self.predict_labels(**self._model_inputs(self._encode(tokenizer, text_a, text_b, device)))


class BERTClassifierModel(BERTTaskModel):
    """A dropout and a linear classifier over the pooled [CLS] state (one label per text) or every token's state."""

    per_token = False
    # each subclass takes it from the head whose labels it shares (NSP's per text, MLM's per token)
    predict_labels: Callable[..., torch.Tensor]

    def __init__(self, config: BERTConfig) -> None:
        super().__init__(config)
        self.dropout = nn.Dropout(classifier_dropout(config))
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self._init_head()

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (B, num_labels), or (B, T, num_labels) per token."""
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)
        features = out.last_hidden_state if self.per_token else out.pooler_output
        logits: torch.Tensor = self.classifier(self.dropout(features))
        return logits

    def predict_labels_from_text(self, tokenizer: Any, text_a: str, text_b: str | None = None, *,
                                 device: str | torch.device | None = None) -> torch.Tensor:
        return self.predict_labels(**self._model_inputs(self._encode(tokenizer, text_a, text_b, device)))


class BERTForSequenceClassification(BERTClassifierModel):
    """Classify a text (pair) from the pooled [CLS] state; num_labels == 1 means regression (MSE)."""

    hf_architecture = "BertForSequenceClassification"

    get_loss = BERTForNextSentencePrediction.get_loss
    predict_labels = BERTForNextSentencePrediction.predict_labels
    predict_proba = BERTForNextSentencePrediction.predict_proba
    get_accuracy = BERTForNextSentencePrediction.get_accuracy

    def get_loss_from_text(self, tokenizer: Any, text_a: str, text_b: str | None = None, label: int | float = 0, *,
                           device: str | torch.device | None = None) -> torch.Tensor:
        encoded = self._encode(tokenizer, text_a, text_b, device)
        return self.get_loss(torch.tensor([label], device=self.device), **self._model_inputs(encoded))


class BERTForTokenClassification(BERTClassifierModel):
    """A label per token (NER, POS tagging); labels of -100 are ignored."""

    hf_architecture = "BertForTokenClassification"
    add_pooling_layer = False
    per_token = True

    get_loss = BERTForMaskedLM.get_loss
    predict_labels = BERTForMaskedLM.predict_token_ids
    get_accuracy = BERTForMaskedLM.get_accuracy


class BERTForQuestionAnswering(BERTTaskModel):
    """Extractive QA: start and end scores per token; the answer is the best valid span."""

    hf_architecture = "BertForQuestionAnswering"
    add_pooling_layer = False

    def __init__(self, config: BERTConfig) -> None:
        super().__init__(config)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self._init_head()

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                inputs_embeds: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(start_logits (B, T), end_logits (B, T))."""
        states = self.bert(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds).last_hidden_state
        start, end = self.qa_outputs(states).split(1, dim=-1)
        return start.squeeze(-1), end.squeeze(-1)

    def get_loss(self, start_positions: torch.Tensor, end_positions: torch.Tensor,
                 input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                 token_type_ids: torch.Tensor | None = None, *, reduction: str = "mean", **inputs: Any) -> torch.Tensor:
        """Mean of start and end cross-entropy (positions outside the sequence are clamped and ignored, as HF)."""
        start, end = self(input_ids, attention_mask, token_type_ids, **inputs)
        P.check_span_positions("start_positions", start_positions, start.shape[0])
        P.check_span_positions("end_positions", end_positions, start.shape[0])
        T = start.shape[1]
        start_positions = start_positions.reshape(-1).clamp(0, T)
        end_positions = end_positions.reshape(-1).clamp(0, T)
        loss = nn.functional.cross_entropy
        return (loss(start.float(), start_positions, ignore_index=T, reduction=reduction)
                + loss(end.float(), end_positions, ignore_index=T, reduction=reduction)) / 2

    def predict_spans(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                      token_type_ids: torch.Tensor | None = None, *, max_answer_length: int = 30,
                      **inputs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Best (start, end) per example: max p_start * p_end with start <= end < start + max_answer_length."""
        start, end = self(input_ids, attention_mask, token_type_ids, **inputs)
        allowed = attention_mask.bool() if attention_mask is not None else None
        best_start, best_end, _ = P.best_spans(start, end, max_answer_length, allowed)
        return best_start, best_end

    def get_accuracy(self, start_positions: torch.Tensor, end_positions: torch.Tensor,
                     input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                     token_type_ids: torch.Tensor | None = None, **inputs: Any) -> torch.Tensor:
        """Exact match: both ends right."""
        start, end = self.predict_spans(input_ids, attention_mask, token_type_ids, **inputs)
        P.check_span_positions("start_positions", start_positions, start.shape[0])
        P.check_span_positions("end_positions", end_positions, start.shape[0])
        return ((start == start_positions.reshape(-1)) & (end == end_positions.reshape(-1))).float().mean()

    def predict_answer_from_text(self, tokenizer: Any, question: str, context: str, *,
                                 max_answer_length: int = 30, device: str | torch.device | None = None) -> str:
        """The answer span inside `context` (question first, as in SQuAD), decoded to text."""
        encoded = self._encode(tokenizer, question, context, device)
        start, end = self(**self._model_inputs(encoded))
        context_tokens = (encoded["token_type_ids"] == 1) & (encoded["special_tokens_mask"] == 0)
        best_start, best_end, _ = P.best_spans(start, end, max_answer_length, context_tokens)
        ids = encoded["input_ids"][0, int(best_start[0]): int(best_end[0]) + 1]
        answer: str = tokenizer.decode(ids.tolist())
        return answer


class BERTForReplacedTokenDetection(BERTTaskModel):
    """ELECTRA's discriminator: for every token, a logit that it was replaced (> 0) rather than original."""

    hf_architecture = "ElectraForPreTraining"
    add_pooling_layer = False

    def __init__(self, config: BERTConfig) -> None:
        super().__init__(config)
        self.discriminator_predictions = ELECTRADiscriminatorHead(config)
        self._init_head()

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        """Replaced-token logits (B, T)."""
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)
        logits: torch.Tensor = self.discriminator_predictions(out.last_hidden_state)
        return logits

    def predict_replaced(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                         token_type_ids: torch.Tensor | None = None, **inputs: Any) -> torch.Tensor:
        """True where the discriminator judges a token replaced, (B, T)."""
        logits: torch.Tensor = self(input_ids, attention_mask, token_type_ids, **inputs)
        return logits > 0
