"""Grid sweeps at scale: certified amplified epsilon over cartesian parameter grids.

Modules: :mod:`~jaxshuffle.sweeps.grid` (the grid syntax: the only parser), :mod:`~jaxshuffle.sweeps.jobs`
(the searches behind each point), :mod:`~jaxshuffle.sweeps.schedule` (buckets, chunks, the runner),
:mod:`~jaxshuffle.sweeps.sampled` and :mod:`~jaxshuffle.sweeps.grids` (the sample-rate grid; which grid a spec
makes), :mod:`~jaxshuffle.sweeps.store` (files, load), :mod:`~jaxshuffle.sweeps.merge` (shards),
:mod:`~jaxshuffle.sweeps.run` (the driver :func:`sweep`: planning, the output directory) and
:mod:`~jaxshuffle.sweeps.execution` (a run's state, chunks and final files),
:mod:`~jaxshuffle.sweeps.distributed` (chunks on a Dask cluster or any executor),
:mod:`~jaxshuffle.sweeps.frames` (results as pandas, xarray, Parquet: the ``frames`` extra). The command line
is in :mod:`jaxshuffle.cli.sweep`.

:func:`sweep` evaluates every combination of a randomizer's options (``eps0``, ``k``, ...),
the number of users ``n`` and ``delta`` (a number or a rule in ``n`` such as ``0.01/n``)
and returns, per grid point, the same numbers as :func:`jaxshuffle.accountant.amplify` (with
the catalog's lower-bound parameters, as the CLI passes them): ``upper`` (certified upper
bound), ``lower`` (Theorem 5.1 lower bound where the catalog has lower-bound parameters, and
for k-ary RR the exact datasets', else 0), ``blanket`` (k-ary RR's blanket pair), ``upper_source``,
``paper`` (the paper's Theorem 4.7 value: a guarantee only where
``paper_certified``), ``certified`` and ``status``. The package exports it as
``jaxshuffle.sweep``; this module (``jaxshuffle.sweeps``) also has :func:`merge`, :func:`load`
and the grid parsers::

    from jaxshuffle import sweep
    res = sweep("grr", k=10, eps0="0.5..8:16", n="1e3..1e6:7", delta="0.01/n", out="runs/grr")
    res["upper"], res["lower"], res["paper"]          # numpy columns, one entry per grid point
    res.to_pandas(), res.to_xarray()                  # a DataFrame; a Dataset over the grid axes

How it runs
-----------
Each grid point needs a few epsilon searches on two-count pairs ("jobs": the worst-case-beta
pair, the (u+v)-scaled pair, the paper's pair, the lower-bound pairs), exactly those of
:func:`jaxshuffle.accountant.amplify`: the sweep takes them from
:func:`~jaxshuffle.accountant.amplification_jobs` and combines their results with
:func:`~jaxshuffle.accountant.combine_amplification`, running the searches itself. Identical
jobs are computed once (for a worst-case randomizer such as ``general`` the paper's pair *is*
the worst-case pair). Jobs are grouped over the whole
grid into window-size buckets (:func:`jaxshuffle.plan.bucket_plans`), each bucket is cut
into fixed-size chunks (padded), so each bucket is ONE compiled XLA program; small buckets are
merged into the next larger window when that is cheaper than compiling another program
(the larger window is still certified; ``merge_buckets=False`` reproduces ``amplify`` exactly).
With several devices each chunk is sharded over a 1-D mesh (``jax.shard_map``): the results
are identical to the single-device run.

Files (``out=DIR``)
-------------------
* ``DIR/sweep.json``      manifest: the grid, settings, fingerprint and chunk layout.
* ``DIR/chunks/cNNNNNN.npz`` one file per finished chunk, written to a temporary name, fsync'd
  and renamed (atomic): a chunk file is either complete or absent, so a SIGKILL at any moment
  loses at most the chunk in flight. Rerunning the same command skips finished chunks.
* ``DIR/results.csv``     long format, one row per grid point; rows of finished points are
  appended (and fsync'd) while the sweep runs, and the file is rewritten sorted by ``index``
  (atomically) when the sweep completes. On a rerun it is rebuilt from the chunk files first.
* ``DIR/results.npz``     the same columns as arrays (written when complete).
* ``DIR/results.json``    sidecar: library/JAX versions, methods, tolerances, devices,
  float64 flag, grid, layout, timing, ``complete``.
* ``DIR/chunks/sweep.lock`` (``shard-i-of-N.lock`` per shard): a second writer is refused
  (or waits with ``wait=True`` / ``--wait``). A torn last row of ``results.csv`` is warned
  about by :func:`load` and repaired by a resumed sweep.

Grid syntax (CLI and string arguments)
--------------------------------------
* ``1,2,5``          a list;
* ``0.5:4:8``        8 evenly spaced values from 0.5 to 4 (``numpy.linspace``, ends included);
* ``1e3..1e6:7``     7 log-spaced values from 1e3 to 1e6 (``numpy.geomspace``, ends included);
* pieces combine: ``0.1,1:5:5,1e2..1e3:3``. ``n`` and integer options are rounded to integers
  and duplicates dropped (order kept).
* an option may instead be a rule in the randomizer's other (grid) options, evaluated per point:
  ``k="max(1, round(d/(exp(eps0)+1)))"`` (the optimal subset size), ``l="round(exp(eps0)+1)"``;
  integer options are rounded.
* ``delta`` also accepts rules in ``n``: ``0.01/n``, ``1/n**1.1``, ``min(1e-6, 1/n)``
  (numbers, ``n``, ``+ - * / **``, ``log``, ``log10``, ``exp``, ``sqrt``, ``min``, ``max``),
  and lists mixing both (``1e-6,0.01/n``); the CSV has both ``delta_rule`` and ``delta``.

Multi-host recipe
-----------------
Run the same command on every host with ``--shard i/N`` (``i = 0..N-1``)::

    host i:  jaxshuffle sweep --randomizer grr --k 10 --eps0 0.5..8:64 --n 1e3..1e8:64 \\
                 --delta 0.01/n --shard i/N --out run-i        # or one shared --out directory
    then:    jaxshuffle sweep merge run-0 run-1 ... run-(N-1) --out merged

Process ``i`` takes every N-th chunk of the global layout (interleaved, so large and small
windows are spread evenly), uses all of its local devices, and on completion writes its shard
file ``shard-i-of-N.npz`` (job results + manifest). With ``--shard`` the buckets and chunks are
derived from the grid alone (a CPU cost model and 1 GiB chunks), so every host, CPU or GPU,
cuts the grid the same way; give the same ``--chunk-size``/``--memory`` on every host if you
set them. A shared ``--out`` directory works too (chunk files are written atomically); the
process that completes the last chunk also writes ``results.*``. ``merge`` checks that the inputs are
shards of the same sweep (fingerprint), that every job is present exactly once (or with
identical values), and writes ``results.csv/.npz/.json``. Inputs may be sweep directories
(finished or not: ``--allow-partial`` writes the points finished so far) or shard files.

On a Dask cluster (or any executor)
-----------------------------------
``sweep(..., executor=client)`` (a ``dask.distributed.Client`` or any
``concurrent.futures.Executor``; CLI: ``--scheduler tcp://host:8786`` or ``--scheduler-file FILE``,
``pip install "jaxshuffle[distributed]"``) sends each chunk to a worker, which runs it on its own
local devices and returns the arrays; this process alone writes the files above, so resume, the
fingerprint and the values are those of a local run. Chunks are cut as with ``--shard`` (a CPU
cost model); a bounded window of futures is in flight; chunks of one program go to a worker that
already compiled it where it has room; a chunk that failed (task error or lost worker) runs once
more, and one that fails twice is left out with a warning naming its points (rerun to compute
them). Both routes combine: ``--shard i/N --scheduler ...`` sends one shard's chunks to a cluster.
See the README's "Sweeps on a cluster" for the commands (local, SLURM, GPUs).

Rounds axis (composition over T rounds)
---------------------------------------
``sweep(..., rounds="1..1000:20")`` (CLI ``--rounds``, the same grid syntax, rounded to integers
>= 1) adds the number of rounds ``T`` on the same users as an axis. Each point then holds the
certified epsilon of its ``T`` rounds at its (total) ``delta``, exactly
:func:`jaxshuffle.accountant.rounds.composed_epsilon`'s: ``upper`` (the smallest certified bound)
and ``upper_source`` (``basic``, ``advanced``, ``PLD`` or ``blanket PLD``), with the candidates
``pld``, ``blanket_pld``, ``basic``, ``advanced``, ``pld_lower`` (the worst-case pair from below,
not a bound on the mechanism) and ``discretization`` as columns; the single-round columns
(``lower``, ``paper``, statuses) are not computed. The points of one ``(randomizer options, n)``
are one chunk: ONE ``composed_epsilon`` call builds the round's PLD once and composes it for all
of their ``T`` and ``delta`` (its default loss grid depends on the largest ``T``), stored, resumed,
sharded and merged like the other chunks (their files carry an ``extra`` array; store schema 3).
``blanket_points=`` / ``discretization=`` (``--blanket-points`` / ``--discretization``) are passed
to it. ``jaxshuffle plot`` draws such a sweep as composed eps against T, one panel per
``(randomizer options, n)`` (:func:`jaxshuffle.plot.composition_figure`).

Sample-rate axis (clients sampled per round)
--------------------------------------------
``sweep(..., sample_rate="0.01,0.1,1")`` (CLI ``--sample-rate``) adds the probability ``g`` that each
user takes part in a round (Poisson client sampling; ``n`` counts every user) as an axis, between
``n`` and ``delta``. Each point is then :func:`~jaxshuffle.accountant.amplify`'s report at
``sample_rate=g`` (:mod:`jaxshuffle.sweeps.sampled`: a few points per amplify call, bucketed so that
``g = 1`` and ``g < 1`` are never batched together): where ``g < 1`` the sampled round's certified
bound (docs/math.md 12.10), ``worst_case`` inf and ``paper`` NaN, since no two-count pair bounds a
sampled round. With a ``rounds`` axis too, each point is ``composed_epsilon(..., sample_rate=g)``'s.
Multi-message randomizers take ``g = 1`` only; ``upper_from="worst-case"`` is refused where ``g < 1``.

Progress: a one-line summary on stderr, then a tqdm bar when stderr is a terminal (a compile phase
shown as such, rate and ETA from evaluation time); ``quiet=True`` silences both. Ctrl-C or SIGTERM
keeps every finished chunk and its CSV rows (:class:`~jaxshuffle.sweeps.run.SweepInterrupted`);
rerunning the same command resumes.

Which upper bound
-----------------
``upper_from`` (CLI ``--upper-from``) is :func:`jaxshuffle.amplify`'s: ``"best"`` (default) the
smallest certified source per point, ``"worst-case"`` the two-count rules only, ``"blanket"`` the
blanket pair only. Points whose randomizer carries its mechanism (k-ary RR; the subset-selection,
Hadamard-response and binary-RR rows' matrices, docs/math.md 11.6) get one more search
per distinct point, through :func:`jaxshuffle.accountant.with_mechanism_bounds` (the blanket pair's
certified upper bound, column ``blanket``, and the exact datasets' certified lower bound, folded
into ``lower``); ``upper_source`` names the source of ``upper``. These searches are chunked like the
others (a few points per chunk: the blanket engine's memory grows with the batch; one bucket per
n band), stored in the same chunk files, resumed, sharded and sent to an executor alike.
The files carry a schema number (``sweep.json``): a directory written under a schema this
jaxshuffle does not resume (before 2, or a newer one) is refused with a clear error
(``overwrite=True`` recomputes it), and its results still load. Schema 3 added the rounds axis; a
schema-2 directory (no rounds axis, the same files) is resumed.
"""

from jaxshuffle.sweeps.grid import default_grid, parse_delta, parse_grid, parse_rounds
from jaxshuffle.sweeps.merge import merge
from jaxshuffle.sweeps.run import sweep
from jaxshuffle.sweeps.store import COLUMNS, SOURCE_NAMES, STATUS_NAMES, SweepResult, load, read_csv

__all__ = ["SweepResult", "sweep", "merge", "load", "read_csv", "parse_grid", "parse_delta", "parse_rounds",
           "default_grid", "COLUMNS", "STATUS_NAMES", "SOURCE_NAMES"]
