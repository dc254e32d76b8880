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
    ours.mkdir()
    (ours / "notes.txt").write_text("keep")
    (ours / "programs").mkdir()
    (ours / "programs" / "engine.bin").write_text("ours")
    res = _run("""
        import sys
        from jaxshuffle.cli import main
        sys.exit(main(["cache", "clear"]))
    """, JAXSHUFFLE_CACHE=str(ours), JAX_COMPILATION_CACHE_DIR=str(theirs))
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.startswith("removed 1 ") and f"left JAX's compilation cache at {theirs} alone" in res.stdout
    assert (theirs / "other-program-entry").read_text() == "keep" and (ours / "notes.txt").read_text() == "keep"
    assert not (ours / "programs" / "engine.bin").exists()


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
