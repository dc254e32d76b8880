"""Every public function and class of the API has a Google-style docstring (as optax and equinox write them).

Public API: the names of ``jaxshuffle.__all__`` (some resolved lazily, through ``_LAZY``),
``jaxshuffle.accountant.__all__`` and the public names of ``jaxshuffle.randomizers`` (which has no
``__all__``: what it imports for its users, as ``tests/test_docs_site.py`` reads it), keeping the
functions and classes defined in the package (constants, enum members and third-party objects are
skipped). Checked:

* each has a docstring of its own (not the one ``NamedTuple`` or ``dataclass`` writes);
* a function with a parameter has an ``Args:`` section naming every parameter of its signature
  (``*args``/``**kwargs`` aside: they may be described as ``**options:`` or in prose), and a
  ``Returns:`` section unless it is annotated to return None;
* a ``NamedTuple`` or dataclass has an ``Attributes:`` section naming every field; another class with
  its own ``__init__`` has an ``Args:`` section naming its constructor's parameters.

A section is a line ``Title:`` and the lines indented below it; an entry is a line at the section's
first indentation that starts ``name:`` or ``name (type):``, one entry per parameter (continuation lines
indented further). An entry ``a, b:`` names both (``jaxshuffle.sweep``'s ``blanket_points, discretization``,
in ``jaxshuffle/sweeps/``, is written so); the package writes one entry per parameter elsewhere. The API
reference (mkdocstrings, ``docstring_style: google``) renders these sections as tables of parameters,
returns and raised exceptions.
"""
from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect
import re
import types

import pytest

MODULES = ("jaxshuffle", "jaxshuffle.accountant", "jaxshuffle.randomizers")
_NAME = r"\*{0,2}[A-Za-z_]\w*"
_ENTRY = re.compile(rf"({_NAME}(?:\s*,\s*{_NAME})*)(?:\s*\([^()]*\))?:(?:\s|$)")


def _public(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:  # jaxshuffle.randomizers: what it imports for its users
        names = [n for n in vars(module) if not n.startswith("_")
                 and not isinstance(getattr(module, n), types.ModuleType)]
    return sorted(names)


def api() -> dict[str, object]:
    """``{"module.name": object}`` of every public function and class defined in the package (each object once)."""
    out, seen = {}, set()
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in _public(module_name):
            obj = getattr(module, name)  # jaxshuffle.__getattr__ resolves the _LAZY names
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue  # constants (CATALOG), modules
            if not getattr(obj, "__module__", "").startswith("jaxshuffle"):
                continue  # re-exported third-party objects
            if id(obj) not in seen:
                seen.add(id(obj))
                out[f"{module_name}.{name}"] = obj
    return out


def section(doc: str, title: str) -> list[str] | None:
    """The lines of the docstring's section ``title`` (``None`` when it has none)."""
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        head = re.fullmatch(rf"(\s*){title}:\s*", line)
        if head is None:
            continue
        indent, body = len(head.group(1)), []
        for nxt in lines[i + 1:]:
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                break
            body.append(nxt)
        return body
    return None


def entries(body: list[str]) -> list[str]:
    """Names a section's entries describe (``**options:`` gives ``options``)."""
    items = [line for line in body if line.strip()]
    if not items:
        return []
    indent = min(len(line) - len(line.lstrip()) for line in items)
    names = []
    for line in items:
        if len(line) - len(line.lstrip()) == indent:
            m = _ENTRY.match(line.lstrip())
            if m:
                names += [name.strip().lstrip("*") for name in m.group(1).split(",")]
    return names


def _own_doc(obj) -> str:
    doc = inspect.cleandoc(obj.__doc__ or "")
    if inspect.isclass(obj) and doc.startswith(f"{obj.__name__}("):
        return ""  # written by NamedTuple / dataclass, not by us
    return doc


def _named_params(sig: inspect.Signature) -> list[str]:
    return [p.name for p in sig.parameters.values()
            if p.name not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _check_section(doc: str, title: str, names: list[str]) -> list[str]:
    body = section(doc, title)
    if body is None:
        return [f"no {title}: section (needs {', '.join(names)})"]
    missing = [n for n in names if n not in entries(body)]
    return [f"{title}: does not name {', '.join(missing)}"] if missing else []


def problems(obj) -> list[str]:
    """What the object's docstring lacks (empty when it is complete)."""
    doc = _own_doc(obj)
    if not doc:
        return ["no docstring"]
    if inspect.isclass(obj):
        if issubclass(obj, enum.Enum):
            return []  # members documented where they are defined (``#:`` comments)
        fields = (list(obj._fields) if issubclass(obj, tuple) and hasattr(obj, "_fields")
                  else [f.name for f in dataclasses.fields(obj)] if dataclasses.is_dataclass(obj) else None)
        if fields is not None:
            return _check_section(doc, "Attributes", fields)
        if "__init__" in vars(obj):
            params = _named_params(inspect.signature(obj.__init__))
            return _check_section(doc, "Args", params) if params else []
        return []
    sig = inspect.signature(obj)
    out = []
    params = _named_params(sig)
    has_varargs = any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values())
    if params:
        out += _check_section(doc, "Args", params)
    elif has_varargs and section(doc, "Args") is None:
        out.append("no Args: section")
    returns_none = sig.return_annotation in (None, "None")
    if (params or has_varargs) and not returns_none and section(doc, "Returns") is None:
        out.append("no Returns: section")
    return out


def test_api_is_found():
    found = api()
    assert len(found) > 100, sorted(found)
    for name in ("jaxshuffle.amplify", "jaxshuffle.epsilon", "jaxshuffle.accountant.rdp", "jaxshuffle.randomizers.grr",
                 "jaxshuffle.randomizers.VRParams", "jaxshuffle.sweep"):
        assert name in found, name
    assert "jaxshuffle.randomizers.CATALOG" not in found  # a constant


def test_every_public_function_and_class_has_google_sections():
    bad = {name: p for name, obj in api().items() if (p := problems(obj))}
    assert not bad, f"{len(bad)} public names lack docstring sections:\n" + "\n".join(
        f"  {name}: {'; '.join(p)}" for name, p in sorted(bad.items()))


def _complete(eps0, k=2):
    """Certified upper bound of something.

    Args:
      eps0: local budget, in [0, 700]; a continuation line
        indented further.
      k: number of values.

    Returns:
      The bound (errs high).
    """


def _no_args(eps0, k=2):
    """Certified upper bound of something.

    ``eps0``: local budget; ``k``: number of values (prose, not a section).

    Returns:
      The bound (errs high).
    """


def _one_missing(eps0, *, k=2, **options):
    """Certified upper bound of something.

    Args:
      eps0: local budget.
        k: a continuation line, not an entry.
      **options: passed on.

    Returns:
      The bound.
    """


def _grouped(eps0, k):
    """Something.

    Args:
      eps0, k: local budget and number of values.

    Returns:
      The bound.
    """


def _no_returns(eps0):
    """Something.

    Args:
      eps0 (float): local budget.
    """


def _returns_none(eps0) -> None:
    """Something.

    Args:
      eps0: local budget.
    """


@pytest.mark.parametrize("fn, expected", [
    (_complete, []),
    (_no_args, ["no Args: section (needs eps0, k)"]),
    (_one_missing, ["Args: does not name k"]),
    (_grouped, []),
    (_no_returns, ["no Returns: section"]),
    (_returns_none, []),
])
def test_the_check_itself(fn, expected):
    assert problems(fn) == expected


def test_a_lost_args_section_is_caught():
    """Dropping the ``Args:`` heading of a real docstring (its entries become prose) fails the check."""
    from jaxshuffle.randomizers import grr

    assert problems(grr) == []

    def stripped(eps0, k):
        pass

    stripped.__doc__ = grr.__doc__.replace("Args:", "Options:")
    assert problems(stripped) == ["no Args: section (needs eps0, k)"]
