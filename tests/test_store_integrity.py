"""Verified chunk files: each chunk's arrays carry a SHA-256 sidecar, checked on resume and on merge.

One small sweep (tests/small_sweep.py: the general randomizer at n = 12, 12 points in 2 chunks) is run
once; each test works on a copy of its directory.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from small_sweep import SMALL, copy_sweep, finished_sweep

from jaxshuffle import sweeps as sw
from jaxshuffle.sweeps import store


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    return finished_sweep(tmp_path_factory, "integrity")


def _tamper(chunk: Path) -> None:
    """Rewrite ``chunk`` as a valid npz with ``upper`` halved (every other array as it was)."""
    with np.load(chunk, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["upper"] = arrays["upper"] / 2
    with open(chunk, "wb") as f:
        np.savez(f, **arrays)


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _same(a, b) -> None:
    assert list(a.keys()) == list(b.keys())
    for key in a.keys():
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.slow
def test_every_chunk_has_a_matching_sidecar(clean):
    manifest = json.loads((clean / "sweep.json").read_text())
    assert manifest["chunk_checksum"] == "sha256"
    chunks = sorted((clean / "chunks").glob("c*.npz"))
    assert [p.name for p in chunks] == ["c000000.npz", "c000001.npz", "c000002.npz"]
    for p in chunks:
        side = json.loads(p.with_suffix(".sha256").read_text())
        with np.load(p, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        assert side == {"chunk": p.name, "keys": sorted(arrays), "sha256": store.arrays_digest(arrays)}


def test_digest_covers_values_dtype_shape_and_names():
    base = {"a": np.arange(4, dtype=np.float64), "b": np.zeros(2, np.int8)}
    d = store.arrays_digest(base)
    assert store.arrays_digest(dict(reversed(list(base.items())))) == d  # fixed key order
    for other in ({"a": np.arange(4, dtype=np.float32), "b": base["b"]},
                  {"a": np.arange(4.0).reshape(2, 2), "b": base["b"]},
                  {"a": np.arange(4.0) / 2, "b": base["b"]},
                  {"c": base["a"], "b": base["b"]}):
        assert store.arrays_digest(other) != d


def test_tampered_chunk_is_named_and_recomputed(clean, tmp_path):
    out = copy_sweep(clean, tmp_path)
    bad = out / "chunks" / "c000001.npz"
    _tamper(bad)
    with np.load(bad) as z:  # a valid npz: only the checksum tells
        assert set(z.files) >= {"jobs", "lower", "upper", "status", "iterations", "fingerprint"}
    with pytest.warns(RuntimeWarning, match=rf"chunk file {bad}: its arrays do not match the checksum in "
                                            r"c000001.sha256 .*computed again") as rec:
        resumed = sw.sweep(**SMALL, out=out)
    assert len([w for w in rec if "chunk file" in str(w.message)]) == 1  # only the tampered one
    assert resumed.meta["timing"]["chunks_run"] == 1
    _same(resumed, sw.load(clean))
    for name in ("results.csv", "results.npz"):
        assert (out / name).read_bytes() == (clean / name).read_bytes(), name
    assert (out / "chunks" / "c000001.npz").read_bytes() == (clean / "chunks" / "c000001.npz").read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # repaired: the next resume is quiet and runs nothing
        assert sw.sweep(**SMALL, out=out).meta["timing"]["chunks_run"] == 0


def test_missing_or_garbage_sidecar_is_recomputed(clean, tmp_path):
    out = copy_sweep(clean, tmp_path)
    (out / "chunks" / "c000000.sha256").unlink()
    (out / "chunks" / "c000002.sha256").write_text("not json")
    with pytest.warns(RuntimeWarning) as rec:
        resumed = sw.sweep(**SMALL, out=out)
    msgs = [str(w.message) for w in rec if "chunk file" in str(w.message)]
    assert any("c000000.npz: its checksum file c000000.sha256 is missing" in m for m in msgs), msgs
    assert any("c000002.npz: its arrays do not match" in m for m in msgs), msgs
    assert resumed.meta["timing"]["chunks_run"] == 2
    assert (out / "results.csv").read_bytes() == (clean / "results.csv").read_bytes()


def test_directory_from_before_checksums_resumes_unverified(clean, tmp_path):
    """No ``chunk_checksum`` in the manifest and no sidecars (an older jaxshuffle): resumed as before."""
    out = copy_sweep(clean, tmp_path)
    manifest = json.loads((out / "sweep.json").read_text())
    del manifest["chunk_checksum"]
    (out / "sweep.json").write_text(json.dumps(manifest))
    for p in (out / "chunks").glob("*.sha256"):
        p.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resumed = sw.sweep(**SMALL, out=out)
    assert resumed.meta["timing"]["chunks_run"] == 0
    _same(resumed, sw.load(clean))


def test_merge_refuses_a_tampered_chunk_and_leaves_the_input_alone(clean, tmp_path):
    out = copy_sweep(clean, tmp_path)
    bad = out / "chunks" / "c000002.npz"
    _tamper(bad)
    before = _snapshot(out)
    with pytest.raises(store.SweepStoreError, match=rf"inputs: chunk file {bad}: its arrays do not match the "
                                                    r"checksum .*rerun the sweep in .* to recompute it"):
        sw.merge([out], tmp_path / "merged", quiet=True)
    assert _snapshot(out) == before
    assert not (tmp_path / "merged" / "results.csv").exists()
    merged = sw.merge([clean], tmp_path / "merged", quiet=True)  # the untouched copy merges
    _same(merged, sw.load(clean))


def test_cli_resume_recomputes_a_tampered_chunk(clean, tmp_path, capsys):
    from jaxshuffle import cli

    out = copy_sweep(clean, tmp_path)
    _tamper(out / "chunks" / "c000000.npz")
    argv = ["sweep", "--randomizer", "general", "--eps0", "0.5:4:12", "--n", "12", "--delta", "1e-3",
            "--chunk-size", "8", "--devices", "1", "--no-plot", "--quiet", "--out", str(out)]
    with pytest.warns(RuntimeWarning, match="c000000.npz"):
        assert cli.main(argv) == 0
    assert (out / "results.csv").read_bytes() == (clean / "results.csv").read_bytes()


def test_shard_files_carry_a_checksum_and_merge_refuses_a_tampered_or_unverified_one(tmp_path):
    """A shard's ``shard-i-of-N.npz`` gets a ``.sha256`` sidecar written before it; merge verifies it: a shard
    whose values changed after it was written, or whose sidecar is gone, is refused with its name."""
    shards = [tmp_path / f"s{i}" for i in range(2)]
    for i, folder in enumerate(shards):
        sw.sweep(**SMALL, out=folder, shard=(i, 2))
    files = [folder / f"shard-{i}-of-2.npz" for i, folder in enumerate(shards)]
    for f in files:
        side = json.loads(store.checksum_path(f).read_text())
        with np.load(f, allow_pickle=False) as z:
            assert side["sha256"] == store.arrays_digest({k: z[k] for k in z.files}) and side["chunk"] == f.name
    whole = sw.merge(files, tmp_path / "merged", quiet=True)
    _same(whole, sw.sweep(**SMALL))
    _tamper(files[1])
    with pytest.raises(ValueError, match=rf"inputs: {files[1]}: its arrays do not match the checksum"):
        sw.merge(files, tmp_path / "merged2", quiet=True)
    store.checksum_path(files[1]).unlink()
    with pytest.raises(ValueError, match=rf"inputs: {files[1]}: its checksum file shard-1-of-2.sha256 is missing"):
        sw.merge(files, tmp_path / "merged3", quiet=True)
