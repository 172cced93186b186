"""The kernel tests: `avx2_kernels` skips where the AVX2 kernels cannot run, and fails in CI where they do not build."""

import pytest
from system_programs import require_avx2_kernels


@pytest.fixture
def avx2_kernels() -> None:
    require_avx2_kernels()
