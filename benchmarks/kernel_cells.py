"""Per-cell cost of the blanket kernel, and of the binomial pmf inside it.

The blanket and matrix engines spend their time in one kernel (``engine.blanket.kernel.point_divergence``):
per lane, ``window x (lines + 1)`` cells, each with a few Loader pmfs, two walks of up to ``max_step``
pmf ratios, and the certificate's error terms. This script prints:

[1] nanoseconds per cell of one jitted, vmapped kernel evaluation (8 lanes, warm, best of 5) at five
    k-RR plans (the last two at eps0 = 8, whose lines move thousands of counts per step: the planner
    gives them the outward walk), again with no walk (``max_step = 1``, log-ratio walk: the walks'
    share is the difference, and per step of a walk the difference over the walk's length; the values
    of that run are not a bound, only its time is read), and with the baseline pmf of [2] compiled in;
[2] nanoseconds per value of ``_binomial.log_pmf`` (Loader's form) on 2^14 and 2^20 values, beside the
    same form with the division-per-term series of ``bd0`` and two divisions in ``stirlerr`` (the
    baseline: the package's form before its series lost their divisions), run in the same process, and
    the largest difference between the two in the log (ulps);
[3] [1]'s cost per cell at chunk sizes 1, 2, 4 and 8 (blocks evaluated together: memory, and how large
    the arrays of one step are); at the planner's own chunk it is [1]'s figure, not measured again;
[4] at each plan of [1], the log-ratio walk (``max_step`` terms) beside the outward walk (the planner's
    length, ``walk_steps`` of the binomial's spread, terms each way), per cell and per step: the
    planner's rule (outward where its length is below ``max_step``) assumes a step of each costs about
    the same; whichever [1] ran is not measured again.

Usage: python3 benchmarks/kernel_cells.py [--out benchmarks/results/kernel_cells_cpu.txt]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle import _binomial
from jaxshuffle.engine.blanket import kernel
from jaxshuffle.engine.blanket.plan import choose_walk, form_spread, plan_blanket

POINTS = ((2.0, 10.0, 1e5), (1.0, 10.0, 1e6), (0.5, 3.0, 1e4), (8.0, 10.0, 1e5), (8.0, 10.0, 1e7))  # delta = 1e-6
LANES = 8


def best_of(fn, repeats: int = 5) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def kernel_ns_per_cell(eps0: float, k: float, n: float, max_step: int | None = None, baseline: bool = False,
                       chunk: int | None = None, walk: int | None = None) -> tuple[float, object]:
    plan = plan_blanket(eps0, k, n, 1e-6)
    if max_step is not None:
        plan = plan._replace(max_step=max_step)
    if chunk is not None:
        plan = plan._replace(chunk=chunk)
    if walk is not None:
        plan = plan._replace(walk=walk)
    form = kernel.krr_sum_form(jnp.float64(eps0), jnp.float64(k), "blanket")
    s_lo = kernel.window_start(n, float(form.pS), plan.window)
    run = jax.jit(jax.vmap(lambda e: kernel.point_divergence(form, n, e, s_lo, plan)))
    eps = jnp.linspace(0.05, 0.5, LANES)
    with baseline_series() if baseline else contextlib.nullcontext():
        run(eps).upper.block_until_ready()  # traced here: the baseline's series are compiled in
    seconds = best_of(lambda: run(eps).upper.block_until_ready())
    return seconds * 1e9 / (plan.window * (plan.lines + 1) * LANES), plan


def _bd0_divisions(x, m_hi, m_lo):
    """The baseline ``bd0``: its series summed term by term, one division per term."""
    m = m_hi + m_lo
    diff = (x - m_hi) - m_lo
    near = jnp.abs(diff) < 0.1 * (x + m)
    v = diff / jnp.where(near, x + m, 1.0)
    v2 = v * v
    ej = 2.0 * x * v
    s = diff * v
    for j in range(1, 12):
        ej = ej * v2
        s = s + ej / (2 * j + 1)
    far = x * jnp.log(jnp.where(near, 1.0, x / jnp.where(m > 0, m, 1.0))) + m - x
    return jnp.where(near, s, far)


def _stirlerr_divisions(n):
    """The baseline ``stirlerr``: two divisions per value."""
    small = n <= 15
    nn = jnp.where(small, 16.0, n)
    inv2 = 1.0 / (nn * nn)
    series = _binomial._S[5]
    for s in _binomial._S[4::-1]:
        series = s + inv2 * series
    table = jnp.asarray(_binomial._STIRLERR_TABLE)
    return jnp.where(small, table[jnp.clip(n, 0, 15).astype(jnp.int32)], series / nn)


@contextlib.contextmanager
def baseline_series():
    """Inside: ``_binomial.log_pmf`` (and every program traced here) uses the baseline series."""
    saved = _binomial._bd0, _binomial.stirlerr
    _binomial._bd0, _binomial.stirlerr = _bd0_divisions, _stirlerr_divisions
    try:
        yield
    finally:
        _binomial._bd0, _binomial.stirlerr = saved


def baseline_log_pmf(n, x, p, q):
    with baseline_series():
        return _binomial.log_pmf(n, x, p, q)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None, help="also write the report here")
    args = ap.parse_args()
    lines = [f"blanket kernel per cell, {platform.machine()}, {os.cpu_count()} cores, "
             f"load {os.getloadavg()[0]:.1f}, jax {jax.__version__}, device {jax.devices()[0].platform}",
             "python3 benchmarks/kernel_cells.py", "[1] kernel (8 lanes, warm, best of 5)"]
    print(*lines, sep="\n", flush=True)

    def say(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    planned = {}  # [1]'s figure at each point's own plan, which [3] reports at the planned chunk
    no_walks = {}  # [1]'s figure with no walk (max_step 1), which [4] subtracts
    for eps0, k, n in POINTS:
        full, plan = kernel_ns_per_cell(eps0, k, n)
        planned[eps0, k, n] = full, plan
        one, _ = kernel_ns_per_cell(eps0, k, n, max_step=1, walk=0)
        no_walks[eps0, k, n] = one
        base, _ = kernel_ns_per_cell(eps0, k, n, baseline=True)
        step_count = max((plan.walk or plan.max_step) - 1, 1)
        say(f"  eps0 {eps0:4.1f} k {k:4.0f} n {n:7.0e}: window {plan.window:5d} lines {plan.lines:3d} max_step "
            f"{plan.max_step:3d} walk {plan.walk or 'log ratios'}: {full:4.0f} ns/cell ({one:4.0f} with no walk: "
            f"walks {full - one:3.0f}); baseline pmf {base:4.0f} ({base / full:.2f}x); a walk step "
            f"{(full - one) / step_count:.1f} ns")
    say("[2] Loader's pmf (jitted, warm, best of 5), ns per value: package | baseline (series with divisions)")
    for size in (2**14, 2**20):
        x = jnp.arange(1.0, size + 1.0)
        n = jnp.float64(2.0 * size)
        ours = jax.jit(lambda x: _binomial.log_pmf(n, x, 0.3, 0.7))
        base = jax.jit(lambda x: baseline_log_pmf(n, x, 0.3, 0.7))
        t_ours = best_of(lambda: ours(x).block_until_ready()) * 1e9 / size
        t_base = best_of(lambda: base(x).block_until_ready()) * 1e9 / size
        a, b = np.asarray(ours(x)), np.asarray(base(x))
        ulps = np.max(np.abs(a - b) / np.spacing(np.abs(b)))
        say(f"  {size:8d} values: {t_ours:5.1f} | {t_base:5.1f} ns ({t_base / t_ours:.2f}x); largest difference "
            f"{ulps:.0f} ulps of the log")
    say("[3] kernel per cell at each chunk size (blocks evaluated together; the planner takes the largest that "
        "fits memory, up to 8)")
    for eps0, k, n in POINTS[:3]:
        full, plan = planned[eps0, k, n]
        chunks = [c for c in (1, 2, 4, 8) if c <= plan.window // (2 * plan.block)]
        costs = [full if c == plan.chunk else kernel_ns_per_cell(eps0, k, n, chunk=c)[0] for c in chunks]
        say(f"  eps0 {eps0:4.1f} k {k:4.0f} n {n:7.0e} (planned chunk {plan.chunk}): "
            + ", ".join(f"chunk {c} {x:4.0f} ns" for c, x in zip(chunks, costs)))
    say("[4] the two walks at one plan: the log-ratio walk (max_step terms, one direction) and the outward walk "
        "(walk terms each way, linear ratios), ns per cell, and per step of each beyond the no-walk figure of [1]")
    for eps0, k, n in POINTS:
        plan = planned[eps0, k, n][1]
        steps = plan.walk or choose_walk(1 << 40, form_spread(kernel.krr_sum_form(eps0, k, "blanket"), n, plan.window))
        log_walk = planned[eps0, k, n][0] if not plan.walk else kernel_ns_per_cell(eps0, k, n, walk=0)[0]
        outward = planned[eps0, k, n][0] if plan.walk else kernel_ns_per_cell(eps0, k, n, walk=steps)[0]
        one = no_walks[eps0, k, n]
        say(f"  eps0 {eps0:4.1f} k {k:4.0f} n {n:7.0e}: log ratios ({plan.max_step} steps) {log_walk:5.0f} ns, "
            f"{(log_walk - one) / plan.max_step:.1f} per step | outward ({steps} steps) {outward:5.0f} ns, "
            f"{(outward - one) / steps:.1f} per step | planner: {'outward' if plan.walk else 'log ratios'}")
    if args.out:
        with open(args.out, "w") as fh:
            fh.write("# " + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()) + "\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
