"""mypy --strict runs with the tests, so the one test command keeps the type hints true too."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parent.parent
MYPY = shutil.which("mypy", path=str(Path(sys.executable).parent)) or shutil.which("mypy")


@pytest.mark.skipif(MYPY is None, reason="mypy is not installed (it comes with the test extras)")
@pytest.mark.timeout(600)  # a cold run over ~250 files on a busy machine takes over a minute
def test_mypy_strict() -> None:
    # the packages, strictness and plugins come from [tool.mypy] in pyproject.toml; the cache in
    # .mypy_cache makes a re-run take a few seconds instead of a minute (cold: ~2 minutes on a
    # slow 2-core machine, the suite's longest test; two workers check apart what can be)
    assert MYPY is not None  # else skipped
    result = subprocess.run([MYPY, "--num-workers", "2"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
