"""The documentation site builds under ``mkdocs build --strict`` and its API reference covers the public API.

The build (slow tier) needs the ``docs`` extra; without mkdocs it is skipped, not failed. The
coverage test reads the API reference pages' mkdocstrings directives, so it runs without mkdocs:
every name in ``jaxshuffle.__all__``, ``jaxshuffle.accountant.__all__`` and the public names of
``jaxshuffle.randomizers`` (which has no ``__all__``) must be listed as a member there; after a
build it also checks that each one was rendered (an anchor with the name's identifier).
"""
from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference"
PAGES = {"jaxshuffle": "jaxshuffle.md", "jaxshuffle.accountant": "accountant.md",
         "jaxshuffle.randomizers": "randomizers.md", "jaxshuffle.interop": "interop.md"}


def _public(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:  # jaxshuffle.randomizers: what it imports for its users
        names = [n for n in vars(module) if not n.startswith("_")
                 and not isinstance(getattr(module, n), types.ModuleType)]
    return sorted(names)


# A function that shares its name with the submodule defining it (``jaxshuffle.accountant.amplify`` is
# both) is rendered from its own directive, ``::: <module>.<name>.<name>``: griffe resolves the package
# attribute to the submodule. The top-level page links to the accountant's three.
SHADOWED = {
    **{(m, n): ("accountant.md", f"jaxshuffle.accountant.{n}.{n}")
       for m in ("jaxshuffle", "jaxshuffle.accountant") for n in ("amplify", "tune")},
    # compose is defined in jaxshuffle.pld.composition; jaxshuffle.accountant.compose is that module's old path
    **{(m, "compose"): ("accountant.md", "jaxshuffle.pld.composition.compose")
       for m in ("jaxshuffle", "jaxshuffle.accountant")},
    ("jaxshuffle.randomizers", "witchhat"): ("randomizers.md", "jaxshuffle.randomizers.witchhat.witchhat"),
}


def _anchor(module_name: str, name: str) -> tuple[str, str]:
    """(page, html id) where ``module_name.name`` is rendered."""
    return SHADOWED.get((module_name, name), (PAGES[module_name], f"{module_name}.{name}"))


def _listed(page: Path, module_name: str) -> set[str]:
    """Members listed under the page's ``::: module`` directive, and shadowed names it renders or links."""
    text = page.read_text()
    m = re.search(rf"^::: {re.escape(module_name)}\n((?:[ \t]+.*\n?)*)", text, re.M)
    assert m, f"{page.name}: no '::: {module_name}' directive"
    members = re.search(r"^\s+members:\n((?:\s+- .*\n?)*)", m.group(1), re.M)
    assert members, f"{page.name}: the directive lists no members"
    listed = set(re.findall(r"- (\w+)", members.group(1)))
    for (mod, name), (target, ident) in SHADOWED.items():
        if mod == module_name and (f"::: {ident}\n" in text or f"({target}#{ident})" in text):
            listed.add(name)
    return listed


@pytest.mark.parametrize("module_name", PAGES)
def test_api_reference_lists_every_public_name(module_name):
    missing = set(_public(module_name)) - _listed(REFERENCE / PAGES[module_name], module_name)
    assert not missing, f"add to docs/reference/{PAGES[module_name]}: {sorted(missing)}"


def _mkdocs_available() -> bool:
    try:
        importlib.import_module("mkdocs")
        importlib.import_module("mkdocstrings")
    except ImportError:
        return False
    return True


@pytest.mark.slow
def test_site_builds_strict(tmp_path):
    """One build (about half a minute), then what it must hold: every public name, the generated pages."""
    if not _mkdocs_available():
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    site = tmp_path / "site"
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-5000:]

    def html(page: str) -> str:
        return (site / "reference" / page.removesuffix(".md") / "index.html").read_text()

    missing = [f"{module_name}.{name}" for module_name in PAGES for name in _public(module_name)
               if f'id="{_anchor(module_name, name)[1]}"' not in html(_anchor(module_name, name)[0])]
    assert not missing, f"not rendered in the API reference: {missing}"

    cli = (site / "reference" / "cli" / "index.html").read_text()
    for command in ("epsilon", "calibrate", "compose", "sweep", "plot", "tune", "sandwich", "compare"):
        assert f"usage: jaxshuffle {command}" in cli, command
    bench = (site / "benchmarks" / "index.html").read_text()
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.txt")):
        assert path.name in bench, path.name
    assert "<!-- cli-help -->" not in cli and "<!-- benchmark-results -->" not in bench


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_notebook_has_a_rendered_page_with_all_its_cells():
    """Each notebook has a page (docs/notebooks/NAME.md, in the nav) whose marker the build's hook turns
    into the notebook's markdown cells and every code cell, verbatim."""
    import json

    hooks = _hooks()
    nav = (ROOT / "mkdocs.yml").read_text()
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        page = ROOT / "docs" / "notebooks" / f"{nb.stem}.md"
        assert page.read_text().strip() == f"<!-- notebook: {nb.stem} -->", page
        assert f"notebooks/{nb.stem}.md" in nav, nb.stem
        rendered = hooks.on_page_markdown(page.read_text(), None, None, None)
        for cell in json.loads(nb.read_text())["cells"]:
            text = "".join(cell["source"]).rstrip()
            if cell["cell_type"] == "code" and text:
                assert f"```python\n{text}\n```" in rendered, (nb.stem, text[:60])
            elif text:  # markdown, line by line (the page's note goes under the notebook's title)
                assert all(line in rendered for line in text.splitlines()), (nb.stem, text[:60])
        assert rendered.index("*From `notebooks/") > rendered.index("\n") or not rendered.startswith("# "), nb.stem
