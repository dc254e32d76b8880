"""Faults of the sweep store get one line: a full disk, a read-only directory, a damaged sweep.json.

Each one: CLI exit status 2 (or 0 where reading is all that was asked), one line on stderr naming the
path and what to do, no traceback, nothing lost (finished chunks kept, files unchanged) and, where
the sweep can go on, the command that resumes it. The CLI runs in-process as in tests/test_cli.py.
"""
from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest
from small_sweep import SMALL

from jaxshuffle import cli
from jaxshuffle import sweeps as sw
from jaxshuffle.sweeps import files, store
from jaxshuffle.sweeps import run as run_mod

ARGV = ["sweep", "--randomizer", "general", "--eps0", "0.5:4:12", "--n", "12", "--delta", "1e-3",
        "--chunk-size", "8", "--devices", "1", "--no-plot", "--quiet"]


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("faults") / "clean"
    assert sw.sweep(**SMALL, out=out).complete
    return out


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _run(capsys, argv):
    code = cli.main(argv)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


# ------------------------------------------------------------------------------ disk full


def _disk_full_at(monkeypatch, victim: str) -> None:
    """The disk fills while the package writes ``victim``: half of it lands, then ENOSPC."""
    real = files._write_synced

    def write(tmp, data):
        if tmp.name.startswith(f".{victim}.tmp-"):
            with open(tmp, "wb") as f:
                f.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC)
        return real(tmp, data)

    monkeypatch.setattr(files, "_write_synced", write)


@pytest.mark.parametrize("victim", ["c000001.sha256", "c000001.npz", "results.npz"])
def test_disk_full_is_one_line_keeps_every_finished_chunk_and_resumes(clean, tmp_path, monkeypatch, capsys, victim):
    out = tmp_path / "full"
    _disk_full_at(monkeypatch, victim)
    argv = ARGV + ["--out", str(out)]
    code, stdout, err = _run(capsys, argv)
    assert code == 2 and stdout == ""
    assert err.count("\n") == 1 and "Traceback" not in err, err
    where = out / "chunks" / victim if victim.startswith("c") else out / victim
    assert err.startswith(f"jaxshuffle: error: out: cannot write {where}: No space left on device (ENOSPC); "
                          "free disk space (or use another --out), then rerun the same command to resume "
                          "(every finished chunk is kept): jaxshuffle sweep "), err
    assert err.rstrip().endswith(f"--out {out}")
    assert not [p for p in out.rglob(".*") if ".tmp-" in p.name]  # no temporary file left behind
    # nothing lost: the chunks finished before the fault verify, and the CSV holds their rows
    kept = sorted(p.name for p in (out / "chunks").glob("c*.npz"))
    assert kept == (["c000000.npz"] if victim.startswith("c") else ["c000000.npz", "c000001.npz", "c000002.npz"])
    for name in kept:
        assert (out / "chunks" / name).read_bytes() == (clean / "chunks" / name).read_bytes()
    assert len(sw.read_csv(out / "results.csv")["index"]) == 4 * len(kept)

    monkeypatch.undo()
    code, _, err = _run(capsys, argv)  # the printed command resumes
    assert code == 0, err
    for name in ("results.csv", "results.npz"):
        assert (out / name).read_bytes() == (clean / name).read_bytes(), name


def test_disk_full_through_the_api_names_the_file(tmp_path, monkeypatch):
    def write(tmp, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files, "_write_synced", write)
    with pytest.raises(store.SweepStoreError, match=r"cannot write .*sweep.json: No space left on device \(ENOSPC\)"
                                                    r".*call the same sweep again to resume") as info:
        sw.sweep(**SMALL, out=tmp_path / "api")
    assert info.value.resumable and isinstance(info.value, ValueError)


@pytest.mark.parametrize("victim", ["results.csv", "results.npz", "results.json"])
def test_merge_disk_full_is_one_line_naming_the_file_and_leaves_the_inputs_alone(clean, tmp_path, monkeypatch,
                                                                                 capsys, victim):
    """``sweep merge`` with the disk full while it writes its results: one line naming the file, the inputs
    unchanged (bytes and times), no temporary file left; merging again once there is space works."""
    out = tmp_path / "merged"
    before = _snapshot(clean)
    _disk_full_at(monkeypatch, victim)
    argv = ["sweep", "merge", str(clean), "--out", str(out), "--quiet"]
    code, stdout, err = _run(capsys, argv)
    assert code == 2 and stdout == ""
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"jaxshuffle: error: out: cannot write {out / victim}: No space left on device (ENOSPC); "
                          "free disk space (or use another --out), then merge again"), err
    assert _snapshot(clean) == before
    assert not [p for p in out.rglob(".*") if ".tmp-" in p.name]
    assert not (out / victim).exists()  # a file is written whole or not at all
    with pytest.raises(store.SweepStoreError, match=rf"^out: cannot write {out / victim}: No space left on device"):
        sw.merge([clean], out, quiet=True)  # the API: the same line (the partial outputs are the merge's own)
    assert _snapshot(clean) == before

    monkeypatch.undo()
    code, _, err = _run(capsys, argv)
    assert code == 0, err
    for name in ("results.csv", "results.npz"):
        assert (out / name).read_bytes() == (clean / name).read_bytes(), name
    assert _snapshot(clean) == before


# ------------------------------------------------------------------------------ read-only directory


@pytest.fixture
def read_only(monkeypatch):
    """Make folders read-only (and, for root, whom permissions do not stop, report them so as a read-only
    mount does); restores the permissions afterwards."""
    made: list[tuple[Path, int]] = []

    def freeze(folder: Path) -> None:
        for p in [folder, *folder.rglob("*")]:
            mode = p.stat().st_mode
            made.append((p, mode))
            p.chmod(stat.S_IMODE(mode) & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        if os.geteuid() == 0:
            frozen = folder.resolve()
            real = run_mod._writable
            monkeypatch.setattr(run_mod, "_writable", lambda f: real(f) and frozen not in [Path(f).resolve(),
                                                                                       *Path(f).resolve().parents])

    yield freeze
    for p, mode in reversed(made):
        p.chmod(stat.S_IMODE(mode))


def test_finished_sweep_is_read_from_a_read_only_directory_without_writing(clean, tmp_path, read_only, capsys):
    out = tmp_path / "ro"
    shutil.copytree(clean, out)
    (out / "chunks" / "sweep.lock").unlink()  # must not be created again
    read_only(out)
    before = _snapshot(out)
    res = sw.sweep(**SMALL, out=out)
    assert res.complete and res.meta["timing"]["chunks_run"] == 0
    ref = sw.load(clean)
    for key in ref.keys():
        np.testing.assert_array_equal(res[key], ref[key], err_msg=key)
    code, stdout, err = _run(capsys, ARGV + ["--out", str(out)])
    assert code == 0 and stdout.strip() == f"12 points -> {out / 'results.csv'}" and err == ""
    assert _snapshot(out) == before
    assert not (out / "chunks" / "sweep.lock").exists()
    assert len(sw.load(out)) == 12


def test_unfinished_sweep_in_a_read_only_directory_is_one_line(clean, tmp_path, read_only, capsys):
    out = tmp_path / "ro"
    shutil.copytree(clean, out)
    for name in ("c000002.npz", "c000002.sha256", "results.npz"):
        (out / "chunks" / name if name.startswith("c") else out / name).unlink()
    read_only(out)
    before = _snapshot(out)
    code, stdout, err = _run(capsys, ARGV + ["--out", str(out)])
    assert code == 2 and stdout == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err == (f"jaxshuffle: error: out: {out} is not writable and its sweep is not finished (2 of 3 chunks "
                   "done): make it writable, or copy it to a writable directory and run the same sweep there to "
                   "resume\n")
    assert _snapshot(out) == before


# ------------------------------------------------------------------------------ damaged sweep.json


@pytest.mark.parametrize("garbage", [b"{not json", b"", b"\x00\x01binary", b"[1, 2, 3]"])
def test_garbage_manifest_is_one_line_and_nothing_is_lost(clean, tmp_path, capsys, garbage):
    out = tmp_path / "bad"
    shutil.copytree(clean, out)
    (out / "sweep.json").write_bytes(garbage)
    before = _snapshot(out)
    code, stdout, err = _run(capsys, ARGV + ["--out", str(out)])
    assert code == 2 and stdout == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"jaxshuffle: error: out: {out / 'sweep.json'} is damaged ("), err
    assert "nothing was changed: restore it from a copy, or rerun with --overwrite to recompute" in err
    assert _snapshot(out) == before
    code, _, err = _run(capsys, ["sweep", "merge", str(out), "--out", str(tmp_path / "m")])
    assert code == 2 and err.count("\n") == 1 and f"{out / 'sweep.json'} is not a readable sweep manifest" in err
    assert _snapshot(out) == before and not (tmp_path / "m").exists()
    code, _, err = _run(capsys, ARGV + ["--out", str(out), "--overwrite"])  # what the line says to do
    assert code == 0, err
    for name in ("results.csv", "results.npz"):
        assert (out / name).read_bytes() == (clean / name).read_bytes(), name
