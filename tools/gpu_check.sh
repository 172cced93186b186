#!/usr/bin/env bash
# One short check on a machine with a GPU: the accelerator tests (with the corpus run when duckdb and usearch are
# installed), saliency on the model's device, then the CUDA rows of the forward and corpus benchmarks.
#     bash tools/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.__version__, torch.cuda.get_device_name())"
python -m pytest -q -rs tests/test_accelerators.py tests/trace/test_saliency.py::test_runs_on_the_models_device
python benchmarks/forward.py --gpu-only --quick
if python -c "import duckdb, usearch" 2>/dev/null; then python benchmarks/corpus.py --only speed --device cuda; fi
