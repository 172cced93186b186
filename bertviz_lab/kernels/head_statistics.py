"""The per-head attention statistics of a corpus analysis, named once, in the order every producer writes them.

The kernels compute them in this order (statistics.py's PyTorch path stacks them by name; avx2.c's kernel writes
them by index and exports its names, which build.py compares with this list when it loads the library), the corpus
tables have a column per name, and the head atlas offers them and titles its colour bar from the label and unit.
Each is a sum over a text's non-padding queries i of a quantity of query i's attention p_i; the tables hold
token-weighted means (sum / number of queries).
"""

from __future__ import annotations

from dataclasses import dataclass

NATS, SHARE = "nats", "share of attention"


@dataclass(frozen=True)
class Statistic:
    """One statistic: its column name, what it measures (a colour bar's title), its unit and how it is reduced."""

    name: str  # the corpus tables' column and the `stat=` argument: "cls"
    label: str  # "weight on [CLS]"
    unit: str  # NATS or SHARE
    description: str  # what is summed over the queries i, for the docs (Markdown)


STATISTICS: tuple[Statistic, ...] = (
    Statistic("entropy", "entropy of its attention", NATS, "`-Σ_j p_ij ln p_ij`, how spread the attention is"),
    Statistic("cls", "weight on [CLS]", SHARE, "the weight on the [CLS] key"),
    Statistic("sep", "weight on [SEP]", SHARE, "the total weight on [SEP] keys"),
    Statistic("self", "weight on itself", SHARE, "`p_ii`, the weight on the query's own token"),
    Statistic("prev", "weight on the previous token", SHARE, "`p_i,i-1` (0 for the first token)"),
    Statistic("next", "weight on the next token", SHARE, "`p_i,i+1` (0 for the last token of the text)"),
    Statistic("punct", "weight on punctuation", SHARE, "the total weight on keys made only of Unicode punctuation "
                                                       "(special tokens are not punctuation)"),
)
STATISTIC_NAMES: tuple[str, ...] = tuple(statistic.name for statistic in STATISTICS)
_BY_NAME = {statistic.name: statistic for statistic in STATISTICS}


def statistic(name: object) -> Statistic:
    """The statistic called `name`; else a one-line error naming them all."""
    if not isinstance(name, str) or name not in _BY_NAME:
        raise ValueError(f"stat must be one of {', '.join(STATISTIC_NAMES)}; got {name!r}.")
    return _BY_NAME[name]
