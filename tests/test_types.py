"""The package type-checks: ``python -m mypy`` with pyproject.toml's ``[tool.mypy]`` reports no error over the whole
package (the engines, the accountant, the randomizers, the command line, sweeps, plots, exact enumeration and the
top level), with no module exempted."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow  # about a minute from a cold mypy cache
def test_mypy_reports_no_error():
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]' pins it)")
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, f"mypy failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}"
