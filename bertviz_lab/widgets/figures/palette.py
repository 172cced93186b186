"""The colours every figure and panel shares: one per role, and one per attention head."""

# One colour per role, readable on light and dark themes.
COLORS = {
    "mask": "#d62728",
    "random": "#ff7f0e",
    "kept": "#2ca02c",
    "untouched": "#e8e8e8",
    "special": "#9e9e9e",
    "sentence_a": "#1f77b4",
    "sentence_b": "#9467bd",
}
HEAD_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
               "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"]
