"""Every README and docs-site example is true: Python blocks run and print exactly the output block after them.

Convention in README.md and the site's pages (docs/**/*.md): a fenced ``python`` block followed by a
fenced ``text`` block is an example and its printed output; the test runs one page's blocks in
order, in one namespace (a page's example may build on the earlier ones of the same page, never on
another page's), and compares stdout line by line. On the docs pages every ``python`` block is such
an example unless the line before it is an HTML comment ``<!-- not-run: why -->`` (code that needs
a cluster, say). Shell examples that start with ``jaxshuffle`` are run as subprocesses (slow tier)
and must exit 0; the lines of one shell block run in order in one directory (a later line may
read what an earlier one wrote).
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

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: every page whose examples run: the README and the docs site's Markdown pages
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
_NOT_RUN = re.compile(r"<!--\s*not-run\b[^>]*-->\s*\Z")


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _page(name: str) -> Path:
    return ROOT / name


def _fenced(page: Path = README) -> list[tuple[str, str, bool]]:
    """(language, body, marked not-run) of every fenced block of ``page``, in order."""
    text = page.read_text()
    return [(m.group(1), m.group(2), bool(_NOT_RUN.search(text[:m.start()]))) for m in _FENCE.finditer(text)]


def _blocks(page: Path = README) -> list[tuple[str, str]]:
    return [(lang, body) for lang, body, _ in _fenced(page)]


def _examples(page: Path = README) -> list[tuple[str, str]]:
    blocks = _fenced(page)
    return [(code, out) for (lang, code, skip), (lang2, out, _) in zip(blocks, blocks[1:])
            if lang == "python" and lang2 == "text" and not skip]


def test_readme_has_examples_with_outputs():
    assert len(_examples()) >= 2


@pytest.mark.parametrize("page", [_name(p) for p in PAGES[1:]])
def test_docs_python_blocks_are_all_examples(page):
    """On the docs pages a python block without its output block is a mistake, unless marked not-run."""
    blocks = _fenced(_page(page))
    orphans = [code.splitlines()[0] for i, (lang, code, skip) in enumerate(blocks)
               if lang == "python" and not skip and (i + 1 == len(blocks) or blocks[i + 1][0] != "text")]
    assert not orphans


# One namespace per page and test process, as a reader runs a page's examples: in order, each once. A
# test whose earlier examples ran in this process continues from there; an out-of-order one starts
# again from the page's first example (under xdist a process may see any subset of the indices).
_SESSIONS: dict[str, dict] = {}


def _namespace_before(page: str, index: int) -> dict:
    session = _SESSIONS.setdefault(page, {"namespace": None, "ran": 0})
    if session["namespace"] is None or session["ran"] > index:
        session.update(namespace={"__name__": "__readme__"}, ran=0)
    for code, _ in _examples(_page(page))[session["ran"]:index]:  # earlier examples may define names later ones use
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, page, "exec"), session["namespace"])  # noqa: S102
        session["ran"] += 1
    return session["namespace"]


@pytest.mark.slow
@pytest.mark.parametrize("page,index", [(_name(p), i) for p in PAGES for i in range(len(_examples(p)))])
def test_python_example_prints_its_output(page, index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = _namespace_before(page, index)
    code, expected = _examples(_page(page))[index]
    buf = io.StringIO()
    _SESSIONS[page]["ran"] = index + 1
    with contextlib.redirect_stdout(buf):
        exec(compile(code, page, "exec"), namespace)  # noqa: S102
    assert buf.getvalue().strip().splitlines() == expected.strip().splitlines()


def _shell_blocks() -> list[tuple[str, tuple[str, ...]]]:
    """(page, the block's ``jaxshuffle`` lines) per shell block; a block whose lines all ran in an earlier one is
    left out."""
    out, seen = [], set()
    for page in PAGES:
        for lang, body in _blocks(page):
            if lang not in ("", "sh", "bash", "shell"):
                continue
            lines = []
            for line in body.splitlines():
                line = line.split("   #")[0].strip()
                if line.startswith("jaxshuffle ") and "--scheduler" not in line:
                    lines.append(line)
            if lines and not set(lines) <= seen:
                seen.update(lines)
                out.append((_name(page), tuple(lines)))
    return out


def _shell_examples() -> list[str]:
    return [line for _, lines in _shell_blocks() for line in lines]


@pytest.mark.slow
@pytest.mark.parametrize("page,lines", _shell_blocks())
def test_shell_example_runs(page, lines, tmp_path):
    run_cli = "import sys; from jaxshuffle.cli import main; sys.exit(main(sys.argv[1:]))"
    for line in lines:
        argv = shlex.split(line, comments=True)
        res = subprocess.run([sys.executable, "-c", run_cli, *argv[1:]], cwd=tmp_path, capture_output=True,
                             text=True, timeout=600)
        assert res.returncode == 0, f"{page}: {line}\n{res.stderr[-3000:]}"
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
