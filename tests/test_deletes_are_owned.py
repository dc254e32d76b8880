"""Every delete or replace of a file in the package sits in a reviewed function (an allow-list).

The package touches only files it wrote: a delete or replace acts on a file whose ownership is shown
(a sweep directory's manifest or verified chunk, :func:`jaxshuffle.sweeps.ownership.remove_ours`), on a
temporary file the same function has just created, on an entry of the package's own cache, or on the
path a user named for that write. The test reads the source (no import) and finds every call of
``os.remove``, ``os.unlink``, ``os.rmdir``, ``os.removedirs``, ``os.replace``, ``os.rename``,
``os.renames``, ``shutil.rmtree``, ``shutil.move``, ``shutil.copy*`` (these overwrite their target),
``Path.unlink``, ``Path.rmdir`` and ``Path.replace`` / ``Path.rename`` (a method ``replace`` or ``rename``
called with one argument: ``str.replace`` takes two, ``dataclasses.replace`` keywords). A new one
anywhere, or a second one in a listed function, fails here until it is reviewed and listed with its
reason.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "jaxshuffle"

#: (file, function, call) -> (how many such calls, why that is a delete or replace of the package's own file)
REVIEWED: dict[tuple[str, str, str], tuple[int, str]] = {
    ("jaxshuffle/sweeps/ownership.py", "remove_ours", ".unlink"):
        (1, "the one delete of a sweep's files: the directory is a sweep it wrote (store_is_ours: manifest reads, "
            "or a chunk verifies) and each file has a name of ours, is regular, not a link, not a lock (_owned)"),
    ("jaxshuffle/sweeps/merge.py", "_drop_stale_npz", ".unlink"):
        (1, "an earlier merge's results.npz before a partial merge over it: only beside that merge's sidecar "
            "(_earlier_merge: library, fingerprint, merged_from), a regular file, not a link"),
    ("jaxshuffle/sweeps/files.py", "atomic_write", "os.replace"):
        (1, "renames its own just-written temporary file onto the caller's path: the sweep store's names after "
            "run._claim / store_is_ours refused a folder not ours, merge after _check_out_is_ours, to_csv and "
            "the CLI's --curve files onto the path the user gave"),
    ("jaxshuffle/sweeps/files.py", "atomic_write", ".unlink"):
        (1, "its own temporary file .NAME.tmp-PID, created a few lines above, after a failed write"),
    ("jaxshuffle/sweeps/frames.py", "to_parquet", "os.replace"):
        (2, "its own temporary file onto the path the user gave: with overwrite=True only, or where no hard link "
            "can be made and the path does not exist"),
    ("jaxshuffle/sweeps/frames.py", "to_parquet", ".unlink"):
        (1, "its own temporary file .NAME.tmp-PID, in the finally of the write that created it"),
    ("jaxshuffle/_programs.py", "run", "os.replace"):
        (1, "its own temporary file onto <cache>/programs/NAME-KEY.bin, an entry of the package's program cache"),
    ("jaxshuffle/_config.py", "_clear_own_folder", "os.remove"):
        (1, "`jaxshuffle cache clear`: in <root>/xla or <root>/programs only when the folder holds the marker the "
            "package writes on creating it, only regular files directly inside named as the package or JAX's "
            "compilation cache write them there; links, subfolders and other names are left and named"),
}

_MODULE_CALLS = {"os": {"remove", "unlink", "rmdir", "removedirs", "replace", "rename", "renames"},
                 "shutil": {"rmtree", "move", "copy", "copy2", "copyfile", "copytree"}}


def destructive_calls(source: str) -> list[tuple[str, str, int]]:
    """``(function, call, line)`` of every delete or replace in ``source`` (see the module docstring);
    ``function`` is the enclosing def's dotted name (``Class.method``, ``outer.inner``; ``<module>``)."""
    tree = ast.parse(source)
    alias = {"os": "os", "shutil": "shutil"}  # local name -> module, for `import os as _os`
    found: list[tuple[str, str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in _MODULE_CALLS:
                    alias[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module in _MODULE_CALLS:
            for a in node.names:  # `from os import remove`: the call would hide behind a bare name
                if a.name in _MODULE_CALLS[node.module] or a.name == "*":
                    found.append(("<import>", f"from {node.module} import {a.name}", node.lineno))

    def visit(node: ast.AST, where: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, [*where, child.name])
                continue
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute):
                name = child.func.attr
                recv = child.func.value.id if isinstance(child.func.value, ast.Name) else None
                module = alias.get(recv) if recv is not None else None
                if module is not None:
                    if name in _MODULE_CALLS[module]:
                        found.append((".".join(where) or "<module>", f"{module}.{name}", child.lineno))
                elif recv != "dataclasses" and (
                        name in ("unlink", "rmdir")
                        or (name in ("replace", "rename") and (recv == "Path" or (len(child.args) == 1
                                                                               and not child.keywords)))):
                    found.append((".".join(where) or "<module>", f".{name}", child.lineno))
            visit(child, where)

    visit(tree, [])
    return found


def _package_calls() -> dict[tuple[str, str, str], list[int]]:
    calls: dict[tuple[str, str, str], list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for function, call, line in destructive_calls(path.read_text(encoding="utf-8")):
            calls.setdefault((rel, function, call), []).append(line)
    return calls


def test_every_delete_or_replace_is_in_a_reviewed_function():
    calls = _package_calls()
    unreviewed = {k: lines for k, lines in calls.items() if k not in REVIEWED}
    assert not unreviewed, ("deletes or replaces outside the reviewed functions (route a sweep file's delete through "
                            "jaxshuffle.sweeps.ownership.remove_ours, or review the call and list it in REVIEWED with "
                            f"its reason): {unreviewed}")
    more = {k: lines for k, lines in calls.items() if k in REVIEWED and len(lines) != REVIEWED[k][0]}
    assert not more, f"a reviewed function has a different number of such calls than was reviewed: {more}"
    gone = sorted(set(REVIEWED) - set(calls))
    assert not gone, f"reviewed entries no longer in the source (remove them from REVIEWED): {gone}"
    assert all(reason.strip() for _, reason in REVIEWED.values())


def test_every_delete_in_sweeps_goes_through_the_ownership_check():
    """In jaxshuffle.sweeps a sweep's file is deleted in remove_ours only (clear_store and load_chunks' repair
    call it); apart from it, the two writers' own temporary files and merge's stale npz of an earlier merge."""
    deletes = {k for k in _package_calls() if k[0].startswith("jaxshuffle/sweeps/")
               and k[2] in (".unlink", "os.remove", "os.unlink", ".rmdir", "os.rmdir", "shutil.rmtree")}
    assert deletes == {("jaxshuffle/sweeps/ownership.py", "remove_ours", ".unlink"),
                       ("jaxshuffle/sweeps/merge.py", "_drop_stale_npz", ".unlink"),
                       ("jaxshuffle/sweeps/files.py", "atomic_write", ".unlink"),
                       ("jaxshuffle/sweeps/frames.py", "to_parquet", ".unlink")}
    trees = [ast.parse((PACKAGE / "sweeps" / name).read_text(encoding="utf-8"))
             for name in ("store.py", "ownership.py")]
    callers = {f.name for tree in trees for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
               for c in ast.walk(f) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
               and c.func.id == "remove_ours"}
    assert callers == {"clear_store", "load_chunks"}


def test_the_scan_finds_each_kind_of_call():
    source = '''
import os
import os as _os
import shutil
import dataclasses
from os import remove
from pathlib import Path


def deletes(p, q):
    os.remove(p)
    _os.unlink(p)
    shutil.rmtree(p)
    os.rmdir(p)
    Path(p).unlink(missing_ok=True)
    p.rmdir()
    os.replace(p, q)
    os.rename(p, q)
    p.replace(q)
    Path.replace(p, q)
    shutil.move(p, q)


class Store:
    def clear(self, p):
        p.unlink()


def harmless(s, d):
    s.replace("a", "b")
    dataclasses.replace(d, x=1)
    d.replace(tzinfo=None)
    os.path.join(s, "x")
'''
    found = destructive_calls(source)
    assert sorted(call for where, call, _ in found if where == "deletes") == sorted(
        ["os.remove", "os.unlink", "shutil.rmtree", "os.rmdir", ".unlink", ".rmdir", "os.replace", "os.rename",
         ".replace", ".replace", "shutil.move"])
    assert ("Store.clear", ".unlink") in {(w, c) for w, c, _ in found}
    assert ("<import>", "from os import remove") in {(w, c) for w, c, _ in found}
    assert not [f for f in found if f[0] == "harmless"]
