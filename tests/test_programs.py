"""Exported engine programs (jaxshuffle._programs): same numbers as jit, reused by a later process."""
import os
import subprocess
import sys
import textwrap

import jax.numpy as jnp
import numpy as np
import pytest

import jaxshuffle as js
from jaxshuffle.plan import bucket_plans, padded_lanes, plan_epsilon
from jaxshuffle.search import epsilon_with_plan


@pytest.mark.slow
def test_exported_program_gives_the_jitted_numbers_bit_for_bit(monkeypatch):
    from jaxshuffle import _programs
    monkeypatch.setattr(_programs, "QUICK_MAX_POINTS", 0)  # the optimised program (the quick one: next test)
    pair = js.stronger_clone_pair(jnp.array([1.0, 1.0 + 1e-9, 1.0 - 1e-9]))  # one bucket: one program
    n, d = np.full(3, 1e4), np.full(3, 1e-6)
    via_export = js.epsilon(pair, n, d)  # eager: through _programs
    fields = [np.asarray(x) for x in pair.broadcast().arrays()]
    L, c_lo, M = plan_epsilon(*fields, n, d)
    for plan, ix in bucket_plans(L, M, fields[3], fields[4], n).items():
        pad = padded_lanes(plan, ix.size)  # as run_buckets pads a chunk
        take = np.concatenate([ix, np.repeat(ix[:1], pad - ix.size)])
        direct = epsilon_with_plan(tuple(jnp.asarray(f[take]) for f in fields), jnp.asarray(n[take]),
                                   jnp.asarray(d[take]), jnp.asarray(c_lo[take]), plan)
        for a, b in zip(via_export, direct):
            np.testing.assert_array_equal(np.asarray(a)[ix], np.asarray(b)[:ix.size])


@pytest.mark.slow
def test_quick_program_agrees_with_the_optimised_one(monkeypatch):
    """A small batch's search is compiled without optimisation (_programs.QUICK_COMPILE_OPTIONS): the
    same computation up to the order of float operations, so its brackets agree with the optimised
    program's to rounding (the certificate's budgets are 1e-10 relative and more, section 4) and the
    two programs' certified brackets overlap. The quick program's brackets are checked against exact
    enumeration by tests/test_search.py (its batches are small). On another backend (a GPU) the
    option does not apply: every program is the optimised one."""
    import jax

    from jaxshuffle import _programs
    on_cpu = jax.default_backend() == "cpu"
    rng = np.random.default_rng(11)
    eps0 = rng.uniform(0.1, 6.0, 12)
    beta = rng.uniform(0.05, 0.95, 12) * (np.exp(eps0) - 1) / (np.exp(eps0) + 1)
    pair = js.vr_pair(np.exp(eps0), beta, np.exp(eps0))
    n = np.round(10 ** rng.uniform(1, 6, 12))
    delta = 10 ** rng.uniform(-10, -3, 12)
    _programs._CALLERS.clear()
    _programs._QUICK_SERVED.clear()
    quick = js.epsilon(pair, n, delta)
    # 12 points: quick programs only, on a CPU; none elsewhere
    assert _programs._CALLERS and all(q == on_cpu for _, q in _programs._CALLERS)
    monkeypatch.setattr(_programs, "QUICK_MAX_POINTS", 0)
    full = js.epsilon(pair, n, delta)
    assert not all(q for _, q in _programs._CALLERS)
    np.testing.assert_array_equal(np.asarray(quick.status), np.asarray(full.status))
    for a, b in ((quick.lower, full.lower), (quick.upper, full.upper)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=0)
    assert np.all(np.asarray(quick.lower) <= np.asarray(full.upper))
    assert np.all(np.asarray(full.lower) <= np.asarray(quick.upper))


@pytest.mark.slow
def test_a_second_process_reuses_the_program_files(tmp_path):
    code = textwrap.dedent("""
        import os, jaxshuffle as js
        r = js.epsilon(js.stronger_clone_pair(1.0), 1e4, 1e-6)
        print(repr(float(r.upper)), len(os.listdir(os.path.join(os.environ["JAXSHUFFLE_CACHE"], "programs"))))
    """)
    env = {**os.environ, "JAXSHUFFLE_CACHE": str(tmp_path), "JAX_PLATFORMS": "cpu"}
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0 and second.returncode == 0, first.stderr[-2000:] + second.stderr[-2000:]
    assert first.stdout == second.stdout  # same value, no new program written
    assert int(first.stdout.split()[1]) >= 1


@pytest.mark.slow
def test_krr_bounds_program_gives_the_differentiable_programs_numbers_bit_for_bit():
    """krr_bounds runs the blanket search exported and without its implicit-gradient root; the jitted
    program with the root (what blanket_epsilon_with_plan runs under grad) gives the same numbers."""
    from jaxshuffle import blanket as bl
    plan = bl.BlanketPlan(window=16, block=8, lines=16, max_step=16, chunk=1)
    eps0, k, n, d = np.array([0.5, 1.0, 2.0]), np.array([3.0, 4.0, 10.0]), np.array([2.0, 5.0, 4.0]), np.full(3, 0.01)
    via_export = bl.krr_bounds(eps0, k, n, d, plan=plan)
    kinds = ("blanket",) + bl.LOWER_KINDS
    codes = np.concatenate([np.full(3, bl.KINDS.index(kind)) for kind in kinds]).astype(np.int32)
    direct = bl.coded_brackets(*(jnp.asarray(np.tile(x, 4)) for x in (eps0, k, n, d)), jnp.asarray(codes),
                                plan=plan, rtol=1e-6, max_iter=40, gradients=True)
    np.testing.assert_array_equal(np.asarray(via_export.upper), np.asarray(direct.upper)[:3])
    np.testing.assert_array_equal(np.asarray(via_export.status), np.asarray(direct.status)[:3])
    np.testing.assert_array_equal(np.asarray(via_export.lower), np.asarray(direct.lower)[3:].reshape(3, 3).max(axis=0))


def test_program_key_follows_the_package_source(tmp_path, monkeypatch):
    """Exported programs are keyed by a digest of the package's source: an edited file (a fixed kernel
    under the same version number) gives a new key, so a program exported by other code is never loaded."""
    import shutil

    from jaxshuffle import _programs
    pkg = tmp_path / "pkg"
    shutil.copytree(os.path.dirname(_programs.__file__), pkg, ignore=shutil.ignore_patterns("__pycache__"))
    before = _programs.source_digest(str(pkg))
    assert before == _programs.source_digest(str(pkg))
    kernel = pkg / "engine" / "blanket" / "kernel.py"
    kernel.write_text(kernel.read_text() + "\n# an edit\n")
    assert _programs.source_digest(str(pkg)) != before
    key = _programs._key("epsilon-search", ("plan",), [np.zeros(3)])
    monkeypatch.setattr(_programs, "_SOURCE", ["another source"])
    assert _programs._key("epsilon-search", ("plan",), [np.zeros(3)]) != key


def test_repeated_eager_brackets_are_served_from_memory(monkeypatch):
    """A repeated eager blanket evaluation (amplify re-certifying a calibration's answer, then the CLI
    reporting it) runs its program once: the same inputs, plan and tolerance give the stored result;
    any other input, plan or tolerance runs again, and batches above RECENT_MAX_LANES are not kept. (The
    program is replaced by a counter: this checks the keying, the test above checks the program's numbers.)"""
    from jaxshuffle import _programs
    from jaxshuffle import blanket as bl
    from jaxshuffle.blanket import search
    monkeypatch.setattr(search, "_RECENT", {})
    runs = []

    def fake_run(name, fn, static, args):
        runs.append(name)
        return tuple(np.full(args[0].shape, float(len(runs))) for _ in range(4))

    monkeypatch.setattr(_programs, "run", fake_run)
    plan = bl.BlanketPlan(window=16, block=8, lines=16, max_step=16, chunk=1)
    pts = (np.array([0.5, 1.0, 2.0]), np.array([3.0, 4.0, 10.0]), np.array([2.0, 5.0, 4.0]), np.full(3, 0.01))
    first = bl.krr_bounds(*pts, plan=plan)
    again = bl.krr_bounds(*(x.copy() for x in pts), plan=plan)
    assert runs == ["blanket-lanes"] and float(first.upper[0]) == float(again.upper[0]) == 1.0
    bl.krr_bounds(np.array([0.5, 1.1, 2.0]), *pts[1:], plan=plan)
    bl.krr_bounds(*pts, plan=plan, rtol=1e-5)
    bl.krr_bounds(*pts, plan=plan._replace(lines=32))
    bl.krr_bounds(*pts, plan=plan, max_iter=41)
    assert len(runs) == 5
    for _ in range(search.RECENT_RESULTS + 1):  # bounded: the oldest entries go first
        bl.krr_bounds(pts[0] + 0.01 * len(runs), *pts[1:], plan=plan)
    assert len(search._RECENT) == search.RECENT_RESULTS
    bl.krr_bounds(*pts, plan=plan)
    assert len(runs) == 5 + search.RECENT_RESULTS + 2  # the first result was dropped, so it ran again
    big = [np.resize(x, search.RECENT_MAX_LANES // 4 + 1) for x in pts]  # 4 lanes per point: above the limit
    bl.krr_bounds(*big, plan=plan)
    bl.krr_bounds(*big, plan=plan)
    assert len(runs) == 5 + search.RECENT_RESULTS + 4  # large batches are not kept (bounded memory)


def test_the_quick_program_serves_the_first_call_only(monkeypatch):
    """Warm calls of one shape run the optimised program: the quick one answers the first call of a
    program in the process (a fast first answer), the next calls of the same key the optimised one."""
    import jax

    from jaxshuffle import _programs
    monkeypatch.setattr(_programs, "_QUICK_SERVED", {})
    monkeypatch.setattr(_programs, "_CALLERS", {})
    used = []
    real_jit = jax.jit

    def spy(fn, **kw):  # which compile options each new caller gets
        used.append(kw.get("compiler_options") is not None)
        return real_jit(fn, **kw)

    monkeypatch.setattr(_programs.jax, "jit", spy)
    pair = js.stronger_clone_pair(1.0)
    first = js.epsilon(pair, 1e4, 1e-6)
    second = js.epsilon(pair, 1e4, 1e-6)
    third = js.epsilon(pair, 1e4, 1e-6)
    on_cpu = jax.default_backend() == "cpu"
    keys = {k for k, _ in _programs._CALLERS}
    assert len(keys) == 1
    assert sorted(q for _, q in _programs._CALLERS) == ([False, True] if on_cpu else [False])
    assert used[-1] is False  # the last caller built is the optimised one
    # both programs bracket the same point; the second and third calls ran the same program
    np.testing.assert_array_equal(np.asarray(second.upper), np.asarray(third.upper))
    assert float(first.lower) <= float(second.upper) and float(second.lower) <= float(first.upper)


def test_quick_while_widens_the_quick_program_to_the_calls_its_rule_accepts(monkeypatch):
    """Inside a quick_while block (calibrate_n's search), every call its rule accepts runs the quick
    program, not only a process's first, without counting against QUICK_CALLS; a call it refuses, a
    call after the block and a call from another thread follow the usual rule; the innermost block decides.
    A later block runs the optimised program of a program an earlier block ran quick (repeated calls are
    as fast as the optimised program), and the quick one of a program it meets first."""
    import threading

    import jax

    from jaxshuffle import _programs
    monkeypatch.setattr(_programs, "_QUICK_SERVED", {})
    monkeypatch.setattr(_programs, "_CALLERS", {})
    monkeypatch.setattr(_programs, "_QUICK_BLOCK", {})
    ran: list = []  # per call: whether the quick program ran it
    real_jit = jax.jit

    def spy(fn, **kw):
        compiled = real_jit(fn, **kw)
        if getattr(fn, "__name__", "") != "call":  # exporting a new program: jax.export needs the jitted function
            return compiled

        def caller(*args):
            ran.append(kw.get("compiler_options") is not None)
            return compiled(*args)
        return caller

    monkeypatch.setattr(_programs.jax, "jit", spy)
    on_cpu = jax.default_backend() == "cpu"
    pair = js.stronger_clone_pair(1.0)
    other: list = []
    with _programs.quick_while(lambda name, static, arrays: name == "epsilon-search"):
        js.epsilon(pair, 1e4, 1e-6)
        js.epsilon(pair, 1e4 + 1, 1e-6)
        with _programs.quick_while(lambda *a: False):  # the innermost refuses: the usual rule (a first call)
            js.epsilon(pair, 1e4 + 2, 1e-6)
        thread = threading.Thread(target=lambda: other.append(_programs._scoped_quick("epsilon-search", None, [])))
        thread.start()
        thread.join()
    js.epsilon(pair, 1e4 + 3, 1e-6)  # after the block: the usual rule, its one quick call already served
    assert other == [False]  # a block is its thread's
    assert len({key for key, _ in _programs._CALLERS}) == 1  # one program (key) throughout
    assert ran == ([True, True, True, False] if on_cpu else [False] * 4)
    with _programs.quick_while(lambda name, static, arrays: name == "epsilon-search"):
        js.epsilon(pair, 1e4 + 4, 1e-6)  # the first block ran this program quick: the optimised one now
        js.epsilon(pair, 1e6, 1e-6)  # a wider window, another program: met first here
    assert len({key for key, _ in _programs._CALLERS}) == 2
    assert ran[4:] == ([False, True] if on_cpu else [False] * 2)


@pytest.mark.slow
def test_quick_blanket_program_agrees_with_the_optimised_one(monkeypatch):
    """The blanket kernel runs its quick program inside calibrate_n's search (count_search.quick_probes):
    the same computation up to the order of float operations, so its brackets agree with the optimised
    program's to rounding and the two programs' certified brackets overlap (as the two-count search's, above)."""
    import jax

    from jaxshuffle import _programs
    from jaxshuffle.blanket import search
    from jaxshuffle.engine.blanket import KINDS, eager_brackets, plan_blanket, shared_plan
    if jax.default_backend() != "cpu":
        pytest.skip("quick programs are a CPU option")
    monkeypatch.setattr(search, "_RECENT", {})
    monkeypatch.setattr(_programs, "_CALLERS", {})
    e, k = np.array([0.5, 1.0, 1.0, 2.0]), np.array([10.0, 10.0, 4.0, 20.0])
    n, d = np.array([2000.0, 661.0, 5000.0, 20000.0]), np.array([1e-6, 1e-6, 1e-8, 1e-5])
    plan = shared_plan(plan_blanket(e, k, n, d), n)
    code = np.full(4, KINDS.index("blanket"), np.int32)
    with _programs.quick_while(lambda *a: True):
        quick = eager_brackets(e, k, n, d, code, plan=plan)
    search._RECENT.clear()
    full = eager_brackets(e, k, n, d, code, plan=plan)
    assert sorted(q for _, q in _programs._CALLERS) == [False, True]  # two programs of one key ran
    np.testing.assert_array_equal(np.asarray(quick.status), np.asarray(full.status))
    for a, b in ((quick.lower, full.lower), (quick.upper, full.upper)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=0)
    assert np.all(np.isfinite(np.asarray(quick.upper)))
    assert np.all(np.asarray(quick.lower) <= np.asarray(full.upper))
    assert np.all(np.asarray(full.lower) <= np.asarray(quick.upper))


def test_one_to_four_points_of_a_small_window_share_one_program():
    """padded_lanes pads a chunk to MIN_CHUNK_COUNTS window counts: up to window 4096, 1-4 points run the
    4-lane program (a calibration probe's 1 to 4 two-count searches share it); a wide window keeps one lane."""
    from jaxshuffle.engine.two_count.plan import Plan
    for window in (512, 4096):
        plan = Plan(window, 512, 2, True, True)
        assert {padded_lanes(plan, p) for p in (1, 2, 3, 4)} == {max(4, 16384 // window)}
    assert padded_lanes(Plan(131072, 512, 2, True, True), 1) == 1


def test_optimised_programs_overrides_every_quick_allowance_and_quick_never_follows_optimised(monkeypatch):
    """Inside optimised_programs() a call runs the optimised program, even a process's first call and
    even where a quick_while block's rule accepts it (a calibration's re-certification: the value it
    reports is what later calls return, bit for bit); once a program's optimised version exists, no
    later call runs its quick one, inside a block or not."""
    import jax

    from jaxshuffle import _programs
    if jax.default_backend() != "cpu":
        pytest.skip("the quick program exists on a CPU only")
    monkeypatch.setattr(_programs, "_QUICK_SERVED", {})
    monkeypatch.setattr(_programs, "_CALLERS", {})
    monkeypatch.setattr(_programs, "_QUICK_BLOCK", {})
    pair = js.stronger_clone_pair(1.0)
    with _programs.quick_while(lambda *a: True), _programs.optimised_programs():
        first = js.epsilon(pair, 1e4, 1e-6)
    assert sorted(q for _, q in _programs._CALLERS) == [False]  # the first call, optimised
    with _programs.quick_while(lambda *a: True):
        again = js.epsilon(pair, 1e4, 1e-6)
    later = js.epsilon(pair, 1e4, 1e-6)
    assert sorted(q for _, q in _programs._CALLERS) == [False]  # never the quick one after it
    np.testing.assert_array_equal(np.asarray(first.upper), np.asarray(again.upper))
    np.testing.assert_array_equal(np.asarray(first.upper), np.asarray(later.upper))
    other = js.stronger_clone_pair(2.0)  # the same program: shapes and plan
    with _programs.quick_while(lambda *a: True):
        js.epsilon(other, 1e4, 1e-6)
    assert sorted(q for _, q in _programs._CALLERS) == [False]
    # outside the block the flag is off again: a new program's first call is quick as before
    js.epsilon(js.stronger_clone_pair(1.0), 1e8, 1e-6)
    assert sorted(q for _, q in _programs._CALLERS) == [False, True]
