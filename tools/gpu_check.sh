#!/usr/bin/env bash
# One short check on a machine with a GPU: the accelerator tests, then the CUDA rows of the forward benchmark.
#     bash tools/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.__version__, torch.cuda.get_device_name())"
python -m pytest -q -rs tests/test_accelerators.py
python benchmarks/forward.py --gpu-only --quick
