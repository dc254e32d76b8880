"""Every README example is true: Python blocks run and print exactly the output block after them.

Convention in README.md: a fenced ``python`` block followed by a fenced ``text`` block is an
example and its printed output; the test runs the blocks in order, in one namespace, and
compares stdout line by line. Shell examples that start with ``jaxshuffle`` are run as
subprocesses (slow tier) and must exit 0.
"""
from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def _blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in _FENCE.finditer(README.read_text())]


def _examples() -> list[tuple[str, str]]:
    blocks = _blocks()
    return [(code, out) for (lang, code), (lang2, out) in zip(blocks, blocks[1:]) if lang == "python" and lang2 == "text"]


def test_readme_has_examples_with_outputs():
    assert len(_examples()) >= 2


# One namespace per test process, as a reader runs the examples: in order, each once. A test
# whose earlier examples ran in this process continues from there; an out-of-order one starts
# again from the first example (under xdist a process may see any subset of the indices).
_SESSION: dict = {"namespace": None, "ran": 0}


def _namespace_before(index: int) -> dict:
    if _SESSION["namespace"] is None or _SESSION["ran"] > index:
        _SESSION.update(namespace={"__name__": "__readme__"}, ran=0)
    for code, _ in _examples()[_SESSION["ran"]:index]:  # earlier examples may define names later ones use
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, "README.md", "exec"), _SESSION["namespace"])  # noqa: S102
        _SESSION["ran"] += 1
    return _SESSION["namespace"]


@pytest.mark.parametrize("index", range(len(_examples())))
def test_python_example_prints_its_output(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = _namespace_before(index)
    code, expected = _examples()[index]
    buf = io.StringIO()
    _SESSION["ran"] = index + 1
    with contextlib.redirect_stdout(buf):
        exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102
    assert buf.getvalue().strip().splitlines() == expected.strip().splitlines()


def _shell_examples() -> list[str]:
    lines = []
    for lang, body in _blocks():
        if lang in ("", "sh", "bash", "shell"):
            for line in body.splitlines():
                line = line.split("   #")[0].strip()
                if line.startswith("jaxshuffle ") and "--scheduler" not in line and "sweep merge" not in line:
                    lines.append(line)
    return lines


@pytest.mark.slow
@pytest.mark.parametrize("line", _shell_examples())
def test_shell_example_runs(line, tmp_path):
    argv = shlex.split(line)
    run_cli = "import sys; from jaxshuffle.cli import main; sys.exit(main(sys.argv[1:]))"
    res = subprocess.run([sys.executable, "-c", run_cli, *argv[1:]], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Traceback" not in res.stderr


def test_docs_math_names_only_tests_that_exist():
    """docs/math.md points each formula at the test that checks it: every such pointer resolves."""
    text = (README.parent / "docs" / "math.md").read_text()
    current = None
    missing = []
    for m in re.finditer(r"(tests/test_[a-z0-9_]+\.py)?::(test_[a-z0-9_]+)", text):
        current = m.group(1) or current
        source = (README.parent / current).read_text()
        if not re.search(rf"def {m.group(2)}\b", source):
            missing.append(f"{current}::{m.group(2)}")
    assert not missing
