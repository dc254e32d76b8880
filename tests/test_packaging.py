"""Packaging metadata is consistent: license, py.typed, one version source, CITATION.cff.

Fast and offline: reads the files of the checkout (building the artifacts is .ci/wheel-smoke's job).
"""
from __future__ import annotations

import ast
import hashlib
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

import jaxshuffle
from jaxshuffle import _config

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]

# sha256 of https://www.apache.org/licenses/LICENSE-2.0.txt (11358 bytes), the file LICENSE copies verbatim.
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def _static_version() -> str:
    """VERSION as setuptools reads it for the build ([tool.setuptools.dynamic] attr): from the AST."""
    attr = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    module, name = attr.rsplit(".", 1)
    tree = ast.parse((ROOT / (module.replace(".", "/") + ".py")).read_text())
    values = [node.value.value for node in tree.body if isinstance(node, ast.Assign)
              and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)]
    assert len(values) == 1, f"{attr} must be assigned once, to a literal"
    return values[0]


def test_license_is_the_spdx_expression_and_ships_the_apache_text():
    assert PROJECT["license"] == "Apache-2.0"
    assert PROJECT["license-files"] == ["LICENSE"]
    assert not any(c.startswith("License ::") for c in PROJECT.get("classifiers", ())), \
        "PEP 639: a license expression replaces License classifiers"
    setuptools = next(Requirement(r) for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools"))
    assert not setuptools.specifier.contains("76.9"), "license expressions need setuptools >= 77"
    text = (ROOT / "LICENSE").read_bytes()
    assert b"Apache License\n                           Version 2.0, January 2004" in text
    assert hashlib.sha256(text).hexdigest() == APACHE_2_SHA256


def test_py_typed_marker_is_package_data():
    assert (ROOT / "jaxshuffle" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["jaxshuffle"]


def test_one_version_source():
    assert "version" not in PROJECT and "version" in PROJECT["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "jaxshuffle._config.VERSION"}
    assert _static_version() == _config.VERSION == jaxshuffle.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", jaxshuffle.__version__)


def test_requires_python_and_classifiers_agree():
    requires = SpecifierSet(PROJECT["requires-python"])
    assert not requires.contains("3.10"), "the jax/jaxlib floor (0.10.2) needs Python >= 3.11"
    versions = [c.rsplit(" :: ", 1)[1] for c in PROJECT["classifiers"]
                if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert versions and all(requires.contains(v) for v in versions)


def test_citation_cff_parses_and_matches_the_package():
    yaml = pytest.importorskip("yaml")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert str(cff["cff-version"]) == "1.2.0"
    assert cff["title"] == "jaxshuffle" and cff["type"] == "software"
    assert str(cff["version"]) == jaxshuffle.__version__
    assert cff["license"] == PROJECT["license"]
    assert cff["authors"] and cff["message"]
    paper = cff["references"][0]
    assert paper["title"] == "Privacy Amplification via Shuffling: Unified, Simplified, and Tightened"
    assert paper["authors"][0] == {"family-names": "Wang", "given-names": "Shaowei"} and paper["year"] == 2024
    # The release date is the CHANGELOG's for this version, where the CHANGELOG dates it.
    dated = re.search(rf"^## \[{re.escape(jaxshuffle.__version__)}\] - (\d{{4}}-\d\d-\d\d)",
                      (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)
    if dated:
        assert str(cff["date-released"]) == dated.group(1)
