"""Tiny random-weight checkpoints of BERT's relatives (RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA), each built and
saved by transformers with its family's own tokenizer files, offline, in well under a second each."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import transformers
from hub_cache import perturbed
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

FAMILIES = ("roberta", "xlm-roberta", "distilbert", "electra")
TEXTS = [
    "The cat sat on the mat because it was warm.",
    "A dog barked at the moon and the stars all night.",
    "Attention heads look at other tokens in the sentence.",
    "She read the book twice, then wrote a short letter home.",
] * 8
SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # RoBERTa's ids 0..4
WORDPIECE_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _roberta_tokenizer() -> transformers.PreTrainedTokenizerBase:
    """A byte-level BPE learnt from TEXTS, as RoBERTa's: <s> A </s>, <mask> taking the space before it."""
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(TEXTS, trainers.BpeTrainer(vocab_size=300, special_tokens=SPECIALS,
                                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    backend.add_special_tokens([AddedToken("<mask>", lstrip=True, normalized=False, special=True)])
    backend.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    return transformers.RobertaTokenizerFast(tokenizer_object=backend)


def _xlm_roberta_tokenizer() -> transformers.PreTrainedTokenizerBase:
    """A SentencePiece Unigram learnt from TEXTS, set up by transformers as XLM-RoBERTa's."""
    backend = Tokenizer(models.Unigram())
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.train_from_iterator(TEXTS, trainers.UnigramTrainer(vocab_size=120, special_tokens=SPECIALS,
                                                               unk_token="<unk>"))
    vocab = [tuple(piece) for piece in json.loads(backend.to_str())["model"]["vocab"]]
    return transformers.XLMRobertaTokenizer(vocab=vocab)


def _wordpiece_tokenizer(cls: type) -> transformers.PreTrainedTokenizerBase:
    """An uncased WordPiece vocabulary of TEXTS' words and letters (BERT's specials first)."""
    words = sorted({w.strip(".,").lower() for text in TEXTS for w in text.split()} - {""})
    letters = sorted({c for w in words for c in w})
    vocab = WORDPIECE_SPECIALS + [".", ","] + letters + [f"##{c}" for c in letters] + words
    return cls(vocab={token: i for i, token in enumerate(dict.fromkeys(vocab))})


def family_config(family: str, vocab_size: int, **overrides) -> transformers.PretrainedConfig:
    """transformers' config of the family at the tests' tiny sizes (ELECTRA with narrower embeddings)."""
    if family == "roberta":
        return transformers.RobertaConfig(vocab_size=vocab_size, max_position_embeddings=42, **SIZES, **overrides)
    if family == "xlm-roberta":
        return transformers.XLMRobertaConfig(vocab_size=vocab_size, max_position_embeddings=42, **SIZES, **overrides)
    if family == "distilbert":
        return transformers.DistilBertConfig(vocab_size=vocab_size, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                             max_position_embeddings=40, **overrides)
    if family == "electra":
        return transformers.ElectraConfig(vocab_size=vocab_size, embedding_size=16, max_position_embeddings=40,
                                          **SIZES, **overrides)
    raise ValueError(f"unknown family {family!r}")


def family_tokenizer(family: str) -> transformers.PreTrainedTokenizerBase:
    """The family's tokenizer, built offline."""
    if family == "roberta":
        return _roberta_tokenizer()
    if family == "xlm-roberta":
        return _xlm_roberta_tokenizer()
    return _wordpiece_tokenizer(transformers.DistilBertTokenizer if family == "distilbert"
                                else transformers.ElectraTokenizer)


HEADS = {"model": "AutoModel", "mlm": "AutoModelForMaskedLM", "discriminator": "ElectraForPreTraining",
         "token": "AutoModelForTokenClassification", "qa": "AutoModelForQuestionAnswering",
         "sequence": "AutoModelForSequenceClassification"}


def build_family_checkpoint(family: str, folder: Path, head: str = "mlm", seed: int = 0) -> Path:
    """Save a tiny random `family` model (`head`: model, mlm or discriminator) and its tokenizer into `folder`."""
    tokenizer = family_tokenizer(family)
    config = family_config(family, len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    cls = getattr(transformers, HEADS[head])
    model = cls.from_config(config) if cls.__name__.startswith("Auto") else cls(config)
    perturbed(model, seed)  # every tensor distinct from its initial value, so a wrong or missing name shows
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def transformers_model(folder: Path, head: str = "mlm") -> torch.nn.Module:
    """The reference: the checkpoint loaded by transformers with eager attention (so attentions are returned)."""
    return getattr(transformers, HEADS[head]).from_pretrained(str(folder), attn_implementation="eager").eval()


def family_hub(root: Path) -> tuple[Path, dict[str, Path]]:
    """A Hub cache under `root` holding one tiny masked-LM checkpoint per family as org/tiny-<family>; the folders."""
    from hub_cache import add_folder, commit

    folders = {family: build_family_checkpoint(family, root / "folders" / family, seed=i)
               for i, family in enumerate(FAMILIES)}
    for i, (family, folder) in enumerate(folders.items()):
        add_folder(root / "hub", hub_name(family), folder, commit(100 + i))
    return root / "hub", folders


def hub_name(family: str) -> str:
    """The repo id of `family`'s checkpoint in family_hub's cache."""
    return f"org/tiny-{family}"
