"""Privacy-loss distributions in a package of their own, jaxshuffle.pld: the old import paths under
jaxshuffle.accountant are the very modules, the package's own code imports the new paths, and jaxshuffle.pld
stands below the accountant (importing it loads no accountant module)."""
import importlib
import pathlib
import re
import subprocess
import sys

import jaxshuffle as js

ALIASES = {
    "jaxshuffle.accountant.loss_distribution": "jaxshuffle.pld.distribution",
    "jaxshuffle.accountant.pld": "jaxshuffle.pld.two_count",
    "jaxshuffle.accountant.profile_pld": "jaxshuffle.pld.profile",
    "jaxshuffle.accountant.blanket_pld": "jaxshuffle.pld.blanket",
    "jaxshuffle.accountant.compose": "jaxshuffle.pld.composition",
    "jaxshuffle.accountant.interop": "jaxshuffle.pld.interop",
}
PACKAGE = pathlib.Path(js.__file__).parent
OLD = "|".join(old.rsplit(".", 1)[1] for old in ALIASES)
# ``from jaxshuffle.accountant import compose`` is the accountant's function, not the module: only the
# dotted path names the composition module.
OLD_IMPORT = re.compile(rf"^\s*(from|import) jaxshuffle\.accountant(\.({OLD})\b| import .*\b"
                        rf"(loss_distribution|pld|profile_pld|blanket_pld|interop)\b)")


def test_old_import_paths_are_the_pld_modules():
    for old, new in ALIASES.items():
        assert importlib.import_module(old) is importlib.import_module(new), old
    from jaxshuffle.accountant.pld import DiscretePLD, RoundPLD, shuffled_round  # names through the old path
    assert DiscretePLD is js.pld.DiscretePLD and RoundPLD is js.pld.RoundPLD
    assert shuffled_round is js.pld.shuffled_round is js.accountant.shuffled_round


def test_names_that_moved_out_of_the_round_pld_module_warn_and_still_resolve():
    """The neighbouring relations and the rounds limit live in jaxshuffle.pld.distribution; the old paths
    (jaxshuffle.pld.two_count, jaxshuffle.accountant.pld) still give them, with a DeprecationWarning naming
    the new one."""
    import pytest

    distribution = importlib.import_module("jaxshuffle.pld.distribution")
    for path in ("jaxshuffle.pld.two_count", "jaxshuffle.accountant.pld"):
        module = importlib.import_module(path)
        for name in ("ADD_OR_REMOVE_ONE", "MAX_DEFAULT_ROUNDS", "RELATIONS", "REPLACE_ONE", "neighboring_relation"):
            with pytest.warns(DeprecationWarning, match=rf"{name} moved: import it from jaxshuffle\.pld\.distribution"):
                assert getattr(module, name) is getattr(distribution, name)
        with pytest.raises(AttributeError, match="no attribute 'REPLACE_TWO'"):
            _ = module.REPLACE_TWO


def test_a_patch_through_the_old_path_is_seen_through_the_new(monkeypatch):
    old = importlib.import_module("jaxshuffle.accountant.blanket_pld")
    monkeypatch.setattr(old, "BLANKET_PLD_MAX_N", 7.0)
    assert importlib.import_module("jaxshuffle.pld.blanket").BLANKET_PLD_MAX_N == 7.0
    new = importlib.import_module("jaxshuffle.pld.two_count")
    monkeypatch.setattr(new, "MAX_CELLS", 3)
    assert importlib.import_module("jaxshuffle.accountant.pld").MAX_CELLS == 3


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_old_paths_in_a_fresh_process_share_one_module_object():
    """Imported first by the old names, before the user's code names jaxshuffle.pld."""
    code = ("import sys\n"
            "import jaxshuffle.accountant.profile_pld as a, jaxshuffle.accountant.loss_distribution as d\n"
            "import jaxshuffle.accountant.compose, jaxshuffle.accountant.pld, jaxshuffle.accountant.interop\n"
            "import jaxshuffle.accountant.blanket_pld\n"
            "import jaxshuffle.pld.profile as b, jaxshuffle.pld.distribution as e\n"
            "assert a is b and d is e and a.RoundPLD is e.RoundPLD\n"
            "m = sys.modules\n"
            f"for old, new in {ALIASES!r}.items(): assert m[old] is m[new], old\n")
    res = _run(code)
    assert res.returncode == 0, res.stderr[-2000:]


def test_compose_stays_the_function_after_its_old_module_path_is_imported():
    """``jaxshuffle.accountant.compose`` is both the function and the module's old path; importing the path
    (first, or after the accountant) must not rebind the package attribute to the module."""
    for code in ("import jaxshuffle.accountant.compose\nimport jaxshuffle.accountant as a\n",
                 "import jaxshuffle.accountant as a\nimport jaxshuffle.accountant.compose\n",
                 "import jaxshuffle.pld\nfrom jaxshuffle.accountant.compose import compose_delta\n"
                 "import jaxshuffle.accountant as a\n"):
        res = _run(code + "import jaxshuffle as js, jaxshuffle.pld as p\n"
                          "assert a.compose is js.compose is p.compose and callable(a.compose)\n")
        assert res.returncode == 0, (code, res.stderr[-2000:])


def test_pld_loads_lazily_and_without_the_accountant():
    code = ("import sys, jaxshuffle as js\n"
            "assert 'jaxshuffle.pld' not in sys.modules\n"
            "js.pld.compose, js.pld.RoundPLD, js.pld.blanket_round\n"
            "assert not [m for m in sys.modules if m.startswith('jaxshuffle.accountant')], 'accountant loaded'\n"
            "assert js.accountant.RoundPLD is js.pld.RoundPLD and js.accountant.compose is js.pld.compose\n")
    res = _run(code)
    assert res.returncode == 0, res.stderr[-2000:]


def test_the_package_imports_the_pld_modules_by_their_new_paths():
    """The old paths are for users; inside the package each module is imported under one name only."""
    shims = {PACKAGE / "accountant" / f"{old.rsplit('.', 1)[1]}.py" for old in ALIASES}
    offenders: dict[str, list[int]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path in shims:
            continue
        lines = [i for i, line in enumerate(path.read_text().splitlines(), 1) if OLD_IMPORT.match(line)]
        if lines:
            offenders[path.relative_to(PACKAGE).as_posix()] = lines
    assert not offenders, offenders


def test_every_public_name_of_the_package_is_exported():
    pld = importlib.import_module("jaxshuffle.pld")
    assert sorted(pld.__all__) == sorted(set(pld.__all__))
    for name in pld.__all__:
        assert getattr(pld, name) is not None, name
    # what the accountant re-exports of the PLDs is the package's own objects
    for name in ("DiscretePLD", "RoundPLD", "CompositionBound", "compose", "compose_delta", "epsilon_over_rounds",
                 "rdp", "round_pld", "shuffled_round", "from_dp_accounting", "to_dp_accounting"):
        assert getattr(js.accountant, name) is getattr(pld, name), name
