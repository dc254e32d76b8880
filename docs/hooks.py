"""MkDocs hooks: pages generated at build time from the code and the recorded benchmark runs.

* ``reference/cli.md``: the marker ``<!-- cli-help -->`` becomes the ``--help`` text of every
  ``jaxshuffle`` subcommand, rendered from the argparse parsers in :mod:`jaxshuffle.cli` (so the
  page cannot drift from the command).
* ``notebooks/*.md``: the marker ``<!-- notebook: NAME -->`` becomes ``notebooks/NAME.ipynb``: its markdown
  cells as they are and its code cells as Python blocks (the notebooks are committed without outputs;
  the test suite runs them).
* ``benchmarks.md``: the marker ``<!-- benchmark-results -->`` becomes every
  ``benchmarks/results/*.txt`` file, verbatim, each headed by the script that wrote it and the
  machine it ran on, as the file itself names them.

Nothing here touches the network; it imports jaxshuffle (which imports jax) once per build.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI_MARKER = "<!-- cli-help -->"
BENCH_MARKER = "<!-- benchmark-results -->"
NOTEBOOK_MARKER = re.compile(r"<!-- notebook: ([A-Za-z0-9_]+) -->")


def _fence(text: str) -> str:
    return f"```text\n{text.rstrip()}\n```\n"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps subcommands in a _SubParsersAction
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def cli_reference() -> str:
    """Markdown: ``jaxshuffle --help`` and every subcommand's ``--help`` (nested ones included)."""
    os.environ["COLUMNS"] = "80"  # argparse wraps help to the terminal width: fix it for a stable page
    if str(ROOT) not in sys.path:  # this checkout's CLI, as mkdocstrings' `paths: ["."]` reads its API
        sys.path.insert(0, str(ROOT))  # (at build time: mkdocs restores sys.path after loading a hook)
    from jaxshuffle.cli import _build_parser

    parser = _build_parser([])
    out = ["## `jaxshuffle`\n", _fence(parser.format_help())]
    for name, sub in _subparsers(parser).items():
        out += [f"## `jaxshuffle {name}`\n", _fence(sub.format_help())]
        for nested, subsub in _subparsers(sub).items():
            out += [f"### `jaxshuffle {name} {nested}`\n", _fence(subsub.format_help())]
    # a randomizer's own options appear once --randomizer names it: one example
    grr = _subparsers(_build_parser(["epsilon", "--randomizer", "grr"]))["epsilon"]
    out += ["## `jaxshuffle epsilon --randomizer grr`\n",
            "With `--randomizer` given, the help lists that randomizer's options too (here `--k` and "
            "`--eps0` of k-ary randomized response):\n", _fence(grr.format_help())]
    return "\n".join(out)


def notebook_markdown(name: str) -> str:
    """Markdown of ``notebooks/<name>.ipynb`` (nbformat 4): markdown cells verbatim, code cells as Python blocks."""
    import json

    book = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    note = (f"*From `notebooks/{name}.ipynb` (shown without outputs: run it with Jupyter, or set "
            "`JAXSHUFFLE_SMALL=1` for a quick run).*\n")
    out: list[str] = []
    for cell in book["cells"]:
        src = cell["source"]
        text = ("".join(src) if isinstance(src, list) else src).rstrip()
        if not text:
            continue
        if cell["cell_type"] == "markdown":
            out.append(text + "\n")
        elif cell["cell_type"] == "code":
            out.append(f"```python\n{text}\n```\n")
    # the note goes under the notebook's own title (its first line, when that is a heading)
    title, _, rest = out[0].partition("\n") if out and out[0].startswith("# ") else ("", "", None)
    if rest is None:
        return "\n".join([note, *out])
    return "\n".join([title + "\n", note, rest.strip() + "\n", *out[1:]])


def _named(text: str, path: Path) -> tuple[str, str]:
    """The script and the machine a result file names (the script falls back to the file name's prefix)."""
    m = re.search(r"benchmarks/([a-z_]+)\.py", text)
    script = f"benchmarks/{m.group(1)}.py" if m else None
    if script is None:
        prefix = path.stem.split("_")[0]
        script = f"benchmarks/{prefix}.py" if (ROOT / "benchmarks" / f"{prefix}.py").exists() else "not named"
    machine = None
    for pattern in (r"NVIDIA [A-Z0-9]+[^,;()\n]*", r"[0-9]+-core [^,;()\n]*CPU", r"[0-9]+ cores"):
        m = re.search(pattern, text)
        if m:
            machine = m.group(0).strip()
            break
    if machine is None:
        machine = "CPU" if path.stem.endswith("_cpu") else "not named"
    if machine.endswith(" cores"):
        machine = f"{machine} CPU"
    return script, machine


def benchmark_results() -> str:
    out = []
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.txt")):
        text = path.read_text()
        script, machine = _named(text, path)
        out += [f"### `{path.name}`\n",
                f"Script: `{script}`. Machine: {machine}. File: `benchmarks/results/{path.name}`.\n",
                _fence(text)]
    return "\n".join(out)


# The docstrings are written for Sphinx-style reading (``:func:`amplify```, ``:mod:`~jaxshuffle.pair```, a
# paragraph ending in ``::`` before a literal block); mkdocstrings renders the roles as text. Drop the role
# names and the ``~`` prefix so the API pages read as plain code references, and the literal marker.
_ROLE = re.compile(r":(?:func|class|mod|meth|attr|data|obj|exc|const|ref):(<code>)~?")
_LITERAL_MARK = re.compile(r"::(</p>)")


def on_page_content(html: str, page, config, files) -> str:
    if page.file.src_uri.startswith("reference/"):
        html = _LITERAL_MARK.sub(r":\1", _ROLE.sub(r"\1", html))
    return html


def on_page_markdown(markdown: str, page, config, files) -> str:
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    if BENCH_MARKER in markdown:
        markdown = markdown.replace(BENCH_MARKER, benchmark_results())
    return NOTEBOOK_MARKER.sub(lambda m: notebook_markdown(m.group(1)), markdown)
