"""Process-wide settings (jaxshuffle._config): the x64 decision and the compilation cache."""
import os
import subprocess
import sys
import textwrap

import pytest


def _run(code: str, **env) -> subprocess.CompletedProcess:
    full = {**os.environ, "JAX_PLATFORMS": "cpu", **env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full, timeout=300)


def test_opt_out_leaves_float32_default_and_refuses_outside_a_scoped_block():
    res = _run("""
        import jax, jax.numpy as jnp
        import jaxshuffle as js
        assert jnp.zeros(2).dtype == jnp.float32          # the process default is untouched
        try:
            js.stronger_clone_pair(1.0)
        except RuntimeError as e:
            assert "enable_x64" in str(e)
        else:
            raise SystemExit("computed a bound outside float64")
        with jax.enable_x64(True):
            pair = js.stronger_clone_pair(1.0)
            assert pair.u.dtype == jnp.float64
            r = js.epsilon(pair, 100, 1e-3)
            assert r.upper.dtype == jnp.float64 and 0 < float(r.upper) < 1.0
        print("ok")
    """, JAXSHUFFLE_ENABLE_X64="0")
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "ok"


def test_default_enables_x64_on_import():
    res = _run("""
        import jax.numpy as jnp
        import jaxshuffle
        print(jnp.zeros(2).dtype)
    """)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "float64"


@pytest.mark.slow
def test_compilation_cache_is_on_by_default_and_can_be_moved_or_switched_off(tmp_path):
    where = tmp_path / "cache"
    res = _run("""
        import jaxshuffle as js
        js.epsilon(js.stronger_clone_pair(1.0), 50, 1e-3)
        info = js.cache_info()
        assert info["files"] > 0 and info["bytes"] > 0, info
        print(info["dir"])
        assert js.clear_cache() == info["files"] and js.cache_info()["files"] == 0
    """, JAXSHUFFLE_CACHE=str(where))
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == str(where)
    res = _run("""
        import jax, jaxshuffle as js
        info = js.cache_info()
        assert info["dir"] is None and info["xla_dir"] is None and jax.config.jax_compilation_cache_dir is None
        print("off")
    """, JAXSHUFFLE_CACHE="off")
    assert res.returncode == 0 and res.stdout.strip() == "off", res.stderr[-2000:]


@pytest.mark.slow
def test_cli_info_and_cache_clear(tmp_path):
    env = {"JAXSHUFFLE_CACHE": str(tmp_path)}
    res = _run("""
        import sys, json
        from jaxshuffle.cli import main
        import jaxshuffle as js
        js.epsilon(js.stronger_clone_pair(1.0), 50, 1e-3)
        sys.exit(main(["info", "--json"]))
    """, **env)
    assert res.returncode == 0, res.stderr[-2000:]
    import json
    info = json.loads(res.stdout)
    assert info["cache_dir"] == str(tmp_path) and info["cache_files"] > 0 and info["float64"] is True
    res = _run("""
        import sys
        from jaxshuffle.cli import main
        sys.exit(main(["cache", "clear"]))
    """, **env)
    assert res.returncode == 0 and res.stdout.startswith("removed "), res.stderr[-2000:]
    assert int(res.stdout.split()[1]) == info["cache_files"]


def test_subpackages_are_reachable_as_attributes_in_a_fresh_process():
    """``import jaxshuffle as js`` then ``js.accountant``, ``js.exact``, ... (imported lazily on first use)."""
    import subprocess
    import sys
    code = ("import jaxshuffle as js; js.accountant.composed_epsilon; js.exact.sandwich; js.closed_forms; "
            "js.sweeps; js.blanket.krr_bounds; js.comparison.compare; js.metric; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_moved_module_path_still_imports_with_a_deprecation_warning():
    """``jaxshuffle.soundness`` (the sandwich reports' old home) imports, names the new path in a
    DeprecationWarning, and serves the same objects as ``jaxshuffle.exact.soundness``."""
    import importlib
    import sys
    import warnings

    from jaxshuffle.exact import soundness

    sys.modules.pop("jaxshuffle.soundness", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = importlib.import_module("jaxshuffle.soundness")
    assert [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)] == [
        "jaxshuffle.soundness is deprecated: import from jaxshuffle.exact.soundness (or jaxshuffle.exact)"]
    assert old.sandwich is soundness.sandwich and old.grr_matrix is soundness.grr_matrix


def test_cache_clear_leaves_a_users_jax_cache_and_other_files_alone(tmp_path):
    """``cache clear`` empties only jaxshuffle's own folders: a JAX compilation cache the user set
    elsewhere is reported and kept, and so are other files in the cache root."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "other-program-entry").write_text("keep")
    (theirs / f"jit_f-{'a' * 64}-cache").write_text("keep: named like an entry, but in the user's JAX cache")
    res = _run("import jaxshuffle", JAXSHUFFLE_CACHE=str(ours), JAX_COMPILATION_CACHE_DIR=str(theirs))
    assert res.returncode == 0, res.stderr[-2000:]  # jaxshuffle makes (and marks) its folders
    (ours / "notes.txt").write_text("keep")
    (ours / "programs" / f"epsilon-search-{'0' * 32}.bin").write_text("ours")
    res = _run("""
        import sys
        from jaxshuffle.cli import main
        sys.exit(main(["cache", "clear"]))
    """, JAXSHUFFLE_CACHE=str(ours), JAX_COMPILATION_CACHE_DIR=str(theirs))
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.startswith("removed 1 ") and f"left JAX's compilation cache at {theirs} alone" in res.stdout
    assert (theirs / "other-program-entry").read_text() == "keep" and (ours / "notes.txt").read_text() == "keep"
    assert (theirs / f"jit_f-{'a' * 64}-cache").exists()
    assert not (ours / "programs" / f"epsilon-search-{'0' * 32}.bin").exists()


def _tree(top) -> dict[str, tuple[str, bytes | str]]:
    """Every entry under ``top`` (links not followed): relative path -> ("file", bytes) / ("link", target) /
    ("dir", "")."""
    out: dict[str, tuple[str, bytes | str]] = {}
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, top)
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                out[rel] = ("dir", "")
            else:
                with open(path, "rb") as fh:
                    out[rel] = ("file", fh.read())
    return out


_FILL_CACHE = """
    import jax, numpy as np
    import jaxshuffle
    from jaxshuffle import _programs
    _programs.run("probe", lambda x: (x * 2.0,), ("cache-test",), [np.arange(3.0)])   # programs/probe-KEY.bin
    jax.jit(lambda x: x + 1.0)(np.float64(1.0))                                         # an xla/ entry
"""

_CLEAR = """
    import sys
    from jaxshuffle.cli import main
    import jaxshuffle as js
    code = main(["cache", "clear"])
    print("files after:", js.cache_info()["files"])
    sys.exit(code)
"""


def test_cache_clear_removes_only_the_entries_it_wrote_in_folders_it_made(tmp_path):
    """The confirmed trap: a user's files in the cache folders (also in a subfolder, named like an entry
    there, or behind a link to outside) survive byte for byte; the package's program files and JAX's real
    cache entries go, and the output names everything left."""
    cache, outside = tmp_path / "cache", tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_bytes(b"outside\n")
    (outside / f"jit_g-{'b' * 64}-cache").write_bytes(b"entry-like, outside")
    res = _run(_FILL_CACHE, JAXSHUFFLE_CACHE=str(cache))
    assert res.returncode == 0, res.stderr[-2000:]
    programs, xla = cache / "programs", cache / "xla"
    assert (programs / ".jaxshuffle-cache").is_file() and (xla / ".jaxshuffle-cache").is_file()
    own = sorted(p.name for p in programs.glob("probe-*.bin")) + sorted(p.name for p in xla.glob("jit_*-cache"))
    assert len(own) >= 2 and any(n.endswith("-cache") for n in own), own  # a real program file and JAX entry
    bin_name = next(n for n in own if n.endswith(".bin"))
    (programs / f"{bin_name}.4242.tmp").write_bytes(b"a torn write of _programs.run")  # its temporary name
    # the user's files, put there by hand
    (programs / "thesis.tex").write_bytes(b"\\documentclass{article}\n")
    (programs / "sub").mkdir()
    (programs / "sub" / "data.csv").write_bytes(b"a,b\n1,2\n")
    (programs / "sub" / bin_name).write_bytes(b"a copy in a subfolder: never entered")
    (programs / f"user-{'c' * 32}.bin.bak").write_bytes(b"almost our name")
    (xla / "notes.txt").write_bytes(b"notes\n")
    (xla / "sub").mkdir()
    (xla / "sub" / f"jit_h-{'d' * 64}-cache").write_bytes(b"entry-like in a subfolder")
    os.symlink(outside / "keep.txt", programs / "link.txt")
    os.symlink(outside / "keep.txt", programs / f"probe-{'e' * 32}.bin")  # a link with an entry's name
    os.symlink(outside, xla / "linked-folder")
    before = _tree(tmp_path)
    res = _run(_CLEAR, JAXSHUFFLE_CACHE=str(cache))
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.startswith(f"removed {len(own) + 1} cached program files from {cache}"), res.stdout
    assert "files after: 0" in res.stdout
    after = _tree(tmp_path)
    gone = {os.path.join("cache", "programs", n) if n.endswith(".bin") else os.path.join("cache", "xla", n)
            for n in own} | {os.path.join("cache", "programs", f"{bin_name}.4242.tmp")}
    assert set(before) - set(after) == gone
    assert after == {k: v for k, v in before.items() if k not in gone}  # everything else byte for byte
    for left in ("thesis.tex", "sub", "link.txt", f"probe-{'e' * 32}.bin", f"user-{'c' * 32}.bin.bak"):
        assert f"kept {programs / left}" in res.stdout, (left, res.stdout)
    for left in ("notes.txt", "sub", "linked-folder"):
        assert f"kept {xla / left}" in res.stdout, (left, res.stdout)
    assert ".jaxshuffle-cache" not in res.stdout + res.stderr  # the markers stay, unreported


def test_cache_clear_deletes_nothing_in_a_folder_without_the_marker(tmp_path):
    """Folders that were there before jaxshuffle used them (the user's ``programs/`` with a thesis in it,
    an ``xla/`` as a jaxshuffle 0.2.0 cache has it) get no marker and lose nothing, not even the files
    jaxshuffle wrote there later: the output names each folder and how many such files it holds."""
    cache = tmp_path / "cache"
    (cache / "programs" / "sub").mkdir(parents=True)
    (cache / "programs" / "thesis.tex").write_bytes(b"\\documentclass{article}\n")
    (cache / "programs" / "sub" / "data.csv").write_bytes(b"a,b\n1,2\n")
    (cache / "xla").mkdir()
    res = _run(_FILL_CACHE, JAXSHUFFLE_CACHE=str(cache))
    assert res.returncode == 0, res.stderr[-2000:]
    assert not list(cache.rglob(".jaxshuffle-cache"))  # a folder it did not make is never marked
    assert list((cache / "programs").glob("probe-*.bin")) and list((cache / "xla").glob("jit_*-cache"))
    before = _tree(cache)
    res = _run(_CLEAR, JAXSHUFFLE_CACHE=str(cache))
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.startswith(f"removed 0 cached program files from {cache}"), res.stdout
    assert _tree(cache) == before
    entries = {"programs": len(list((cache / "programs").glob("probe-*.bin"))),
               "xla": len(list((cache / "xla").glob("jit_*-cache")))}
    for sub, count in entries.items():
        assert (f"kept {cache / sub}: left alone, it has no .jaxshuffle-cache marker" in res.stdout
                and f"{count} of its files have names jaxshuffle or JAX writes" in res.stdout), res.stdout


@pytest.mark.parametrize("at_calls", [True, False], ids=["dir_fd", "paths"])
def test_clear_own_folder_contract(tmp_path, monkeypatch, at_calls):
    """The folder-level rule in-process, with the *at calls (POSIX) and with plain paths (Windows): the
    marker must be a regular file in a folder that is no link; only regular files with the folder's entry
    names directly inside are removed; JAX's lock file stays."""
    from jaxshuffle import _config

    monkeypatch.setattr(_config, "_AT_CALLS", at_calls and _config._AT_CALLS)
    names = _config._OWN_NAMES["programs"]
    entry, tmp_entry = f"epsilon-search-{'1' * 32}.bin", f"blanket-lanes-{'2' * 32}.bin.77.tmp"

    folder = tmp_path / "programs"
    _config._make_cache_folder(str(folder))
    assert (folder / ".jaxshuffle-cache").is_file()
    for name in (entry, tmp_entry, ".lockfile", "thesis.tex", f"x-{'g' * 32}.bin", f"x-{'1' * 31}.bin"):
        (folder / name).write_bytes(b"x")
    removed, left = _config._clear_own_folder(str(folder), names)
    assert removed == 2 and sorted(p.name for p in folder.iterdir()) == sorted(
        [".jaxshuffle-cache", ".lockfile", "thesis.tex", f"x-{'g' * 32}.bin", f"x-{'1' * 31}.bin"])
    assert sorted(left) == sorted(f"{folder / n}: not a name jaxshuffle or JAX writes here"
                                  for n in ("thesis.tex", f"x-{'g' * 32}.bin", f"x-{'1' * 31}.bin"))

    _config._make_cache_folder(str(folder))  # an existing folder: used as it is
    assert (folder / "thesis.tex").exists()

    linked = tmp_path / "linked"
    os.symlink(folder, linked)
    (folder / entry).write_bytes(b"x")
    assert _config._clear_own_folder(str(linked), names) == (0, [f"{linked}: a link, not followed"])
    assert (folder / entry).exists()

    (folder / ".jaxshuffle-cache").unlink()
    os.symlink(tmp_path / "elsewhere", folder / ".jaxshuffle-cache")  # a marker that is a link is none
    removed, left = _config._clear_own_folder(str(folder), names)
    assert removed == 0 and (folder / entry).exists() and "left alone" in left[0] and len(left) == 1

    assert _config._clear_own_folder(str(tmp_path / "absent"), names) == (0, [])


def test_clear_cache_warns_naming_what_it_left(tmp_path, monkeypatch):
    """The Python API removes the same files and names what it left in one UserWarning."""
    from jaxshuffle import _config

    root = tmp_path / "root"
    root.mkdir()
    for sub in ("xla", "programs"):
        _config._make_cache_folder(str(root / sub))
    (root / "xla" / f"jit_f-{'a' * 64}-cache").write_bytes(b"x")
    (root / "xla" / f"jit_f-{'a' * 64}-atime").write_bytes(b"x")
    (root / "programs" / "mine.txt").write_bytes(b"x")
    monkeypatch.setitem(_config._CACHE, "root", str(root))
    with pytest.warns(UserWarning, match=r"cache clear left 1 things in place:\n  .*mine\.txt: not a name"):
        assert _config.clear_cache() == 2
    assert (root / "programs" / "mine.txt").exists() and not list((root / "xla").glob("jit_*"))
    assert _config.clear_cache_report() == _config.CacheClear(0, (f"{root / 'programs' / 'mine.txt'}: not a name "
                                                                   "jaxshuffle or JAX writes here",))


def test_cache_folders_are_marked_only_when_jaxshuffle_creates_them(tmp_path):
    """A cache folder the package creates holds the ``.jaxshuffle-cache`` marker (what ``cache clear``
    requires before deleting anything); a folder that was there before is used as it is, never marked."""
    from jaxshuffle import _config

    _config._make_cache_folder(str(tmp_path / "new"))
    assert (tmp_path / "new" / ".jaxshuffle-cache").is_file()
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "thesis.tex").write_text("keep")
    _config._make_cache_folder(str(tmp_path / "old"))
    assert sorted(p.name for p in (tmp_path / "old").iterdir()) == ["thesis.tex"]
    (tmp_path / "a-file").write_text("keep")
    with pytest.raises(FileExistsError):
        _config._make_cache_folder(str(tmp_path / "a-file"))
