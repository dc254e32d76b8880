"""A sweep deletes and replaces only the files it wrote: one trap per case.

Files the package owns are named by its patterns (sweep.json, results.*, shard-I-of-N.npz,
chunks/cNNNNNN.{npz,sha256} and their temporary names), regular files only, and only in a directory
that is a sweep it wrote (a manifest that reads, or a chunk that verifies): elsewhere a results.csv is
the user's and is never replaced, --overwrite or not; symbolic links are not followed out of the output
directory; a non-empty directory without a sweep is refused unless --overwrite; merge never writes into
its inputs nor over a results.csv an earlier merge did not write.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from small_sweep import SMALL, copy_sweep, finished_sweep

from jaxshuffle import cli
from jaxshuffle import sweeps as sw
from jaxshuffle.sweeps import store

OTHER = dict(SMALL, delta="2e-3")  # a different sweep (fingerprint)


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    return finished_sweep(tmp_path_factory, "ours")


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (os.readlink(p) if p.is_symlink() else p.read_bytes())
            for p in sorted(folder.rglob("*")) if p.is_symlink() or p.is_file()}


@pytest.mark.slow
def test_overwrite_keeps_the_users_files(clean, tmp_path):
    out = copy_sweep(clean, tmp_path)
    notes = {out / "chunks" / "MY_NOTES.txt": "my notes", out / "notes.txt": "top notes",
             out / "chunks" / "cool.npz": "looks like a chunk, is not ours", out / "chunks" / ".keep": "",
             out / "results-backup.csv": "index\n", out / "chunks" / "c12.npz": "too few digits"}
    for p, text in notes.items():
        p.write_text(text)
    redone = sw.sweep(**OTHER, out=out, overwrite=True)
    assert redone.complete and redone["delta"][0] == 2e-3
    for p, text in notes.items():
        assert p.read_text() == text, p
    # the old sweep's chunk files were replaced by the new one's (same names, new fingerprint)
    for p in sorted((out / "chunks").glob("c??????.npz")):
        with np.load(p) as z:
            assert str(z["fingerprint"]) == json.loads((out / "sweep.json").read_text())["fingerprint"]


@pytest.mark.slow
def test_resume_keeps_foreign_dotfiles_and_removes_our_leftovers(clean, tmp_path):
    out = copy_sweep(clean, tmp_path)
    foreign = out / "chunks" / ".my-hidden-notes"
    foreign.write_text("keep me")
    leftover = out / "chunks" / ".c000001.npz.tmp-12345"  # a killed atomic write of ours
    leftover.write_bytes(b"partial")
    assert sw.sweep(**SMALL, out=out).meta["timing"]["chunks_run"] == 0
    assert foreign.read_text() == "keep me"
    assert not leftover.exists()


def test_non_empty_foreign_directory_is_refused_unless_overwrite(tmp_path, capsys):
    out = tmp_path / "mine"
    (out / "chunks").mkdir(parents=True)
    (out / "thesis.tex").write_text("\\documentclass{article}")
    (out / "chunks" / "MY_NOTES.txt").write_text("notes")
    before = _snapshot(out)
    with pytest.raises(ValueError, match=r"out: .*mine is not empty and holds no sweep \(no sweep.json; it has "
                                         r"chunks/MY_NOTES.txt, thesis.tex\).*--overwrite"):
        sw.sweep(**SMALL, out=out)
    assert _snapshot(out) == before and sorted(p.name for p in out.iterdir()) == ["chunks", "thesis.tex"]
    argv = ["sweep", "--randomizer", "general", "--eps0", "0.5:4:12", "--n", "12", "--delta", "1e-3",
            "--chunk-size", "8", "--devices", "1", "--no-plot", "--quiet", "--out", str(out)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not empty and holds no sweep" in err
    res = sw.sweep(**SMALL, out=out, overwrite=True)  # writes its files next to the user's
    assert res.complete
    assert (out / "thesis.tex").read_text() == "\\documentclass{article}"
    assert (out / "chunks" / "MY_NOTES.txt").read_text() == "notes"
    # an empty directory, or one left with only a lock by a sweep killed before its manifest, is fine
    (tmp_path / "empty").mkdir()
    assert sw.sweep(**SMALL, out=tmp_path / "empty").complete
    (tmp_path / "lockonly" / "chunks").mkdir(parents=True)
    (tmp_path / "lockonly" / "chunks" / "sweep.lock").write_text("")
    assert sw.sweep(**SMALL, out=tmp_path / "lockonly").complete


def test_symlinked_chunks_folder_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "c000000.npz").write_bytes(b"the user's file, named like a chunk")
    (outside / "sweep.lock").write_text("")
    out = tmp_path / "run"
    out.mkdir()
    (out / "chunks").symlink_to(outside, target_is_directory=True)
    before = _snapshot(outside)
    for overwrite in (False, True):
        with pytest.raises(ValueError, match=r"chunks is a symbolic link .*remove the link or use another --out"):
            sw.sweep(**SMALL, out=out, overwrite=overwrite)
    assert _snapshot(outside) == before


def test_symlinked_files_are_neither_followed_nor_deleted(clean, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.csv").write_text("index,upper\n0,1.0\n")
    (outside / "precious.npz").write_bytes(b"not a chunk")
    out = copy_sweep(clean, tmp_path)
    (out / "results.csv").unlink()
    (out / "results.csv").symlink_to(outside / "precious.csv")
    (out / "chunks" / "c000001.npz").unlink()
    (out / "chunks" / "c000001.npz").symlink_to(outside / "precious.npz")
    (out / "chunks" / "link-to-outside").symlink_to(outside, target_is_directory=True)
    before = _snapshot(outside)
    resumed = sw.sweep(**SMALL, out=out)  # the linked chunk is not read: computed again
    assert resumed.meta["timing"]["chunks_run"] == 1
    assert (out / "results.csv").read_bytes() == (clean / "results.csv").read_bytes()
    assert not (out / "results.csv").is_symlink()  # replaced by rename: the link, not its target
    sw.sweep(**OTHER, out=out, overwrite=True)
    assert _snapshot(outside) == before
    assert (out / "chunks" / "link-to-outside").is_symlink()


def test_clear_store_matches_only_our_names(tmp_path):
    out = tmp_path / "d"
    (out / "chunks").mkdir(parents=True)
    ours = ["sweep.json", "results.csv", "results.npz", "results.json", "shard-0-of-2.npz", ".results.csv.tmp-7",
            "chunks/c000000.npz", "chunks/c000000.sha256", "chunks/c1234567.npz", "chunks/.c000003.npz.tmp-9"]
    theirs = ["sweep.json.bak", "results.parquet", "shard-a-of-b.npz", ".hidden", "sweep.png", "chunks/MY_NOTES.txt",
              "chunks/c00000.npz", "chunks/cx00000.npz", "chunks/sweep.lock", "chunks/.notes.tmp-3", "chunks/x.npz"]
    for name in ours + theirs:
        (out / name).write_text(name)
    # the names alone prove nothing: sweep.json does not read as a manifest, no chunk verifies
    before = _snapshot(out)
    with pytest.raises(store.SweepStoreError, match=r"out: .*d is not a sweep directory jaxshuffle wrote.*nothing "
                                                    r"was removed"):
        store.clear_store(out)
    assert _snapshot(out) == before
    (out / "sweep.json").write_text(json.dumps({"fingerprint": "f", "chunks": 4}))  # our manifest: ours
    store.clear_store(out)
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == sorted(theirs)


def test_chunk_repair_deletes_only_in_a_sweep_of_ours(tmp_path):
    """load_chunks' repair removes a chunk that fails, and a killed write's temporary file, through the same
    ownership check as clear_store: not in a directory without a manifest of ours."""
    out = tmp_path / "d"
    (out / "chunks").mkdir(parents=True)
    names = {"chunks/c000000.npz": b"not an npz", "chunks/c000000.sha256": b"{}", "chunks/.c000001.npz.tmp-9": b"x",
             "chunks/MY_NOTES.txt": b"notes", "chunks/sweep.lock": b""}
    for name, data in names.items():
        (out / name).write_bytes(data)
    before = _snapshot(out)
    with pytest.warns(RuntimeWarning, match="c000000.npz: unreadable"), \
            pytest.raises(store.SweepStoreError, match="is not a sweep directory jaxshuffle wrote"):
        store.load_chunks(out / "chunks", 2, repair=True)
    assert _snapshot(out) == before
    (out / "sweep.json").write_text(json.dumps({"fingerprint": "f", "chunks": 2}))
    with pytest.warns(RuntimeWarning, match="c000000.npz: unreadable"):
        assert store.load_chunks(out / "chunks", 2, repair=True) == {}
    assert sorted(p.name for p in (out / "chunks").iterdir()) == ["MY_NOTES.txt", "sweep.lock"]


TRAP_ARGV = ["sweep", "--randomizer", "grr", "--eps0", "1", "--k", "3", "--n", "1e3", "--delta", "1e-6",
             "--upper-from", "worst-case", "--devices", "1", "--no-plot", "--quiet"]
TRAP = dict(randomizer="grr", eps0="1", k="3", n="1e3", delta="1e-6", upper_from="worst-case", devices=1, quiet=True)


@pytest.mark.parametrize("overwrite", [False, True])
def test_the_users_results_csv_in_a_folder_without_a_sweep_is_never_replaced(tmp_path, capsys, overwrite):
    """A folder holding only the user's own results.csv and results.json (no sweep.json, no chunks/): the names
    are the package's, the files are not. The sweep refuses the folder (API and CLI, with or without
    --overwrite): one line naming the folder and the files, which keep their bytes; nothing is created."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "results.csv").write_bytes(b"trial,score\n1,0.93\n")
    (out / "results.json").write_bytes(b'{"experiment": "mine"}')
    before = _snapshot(out)
    assert store.holds_other_files(out) == [out / "results.csv", out / "results.json"]
    with pytest.raises(ValueError, match=r"^out: .*mine is not empty and holds no sweep \(no sweep.json; it has "
                                         r"results.csv, results.json\): the sweep would replace results.csv, "
                                         r"results.json, which jaxshuffle did not write; nothing was changed"):
        sw.sweep(**TRAP, out=out, overwrite=overwrite)
    assert _snapshot(out) == before and sorted(p.name for p in out.iterdir()) == ["results.csv", "results.json"]
    code = cli.main(TRAP_ARGV + ["--out", str(out)] + (["--overwrite"] if overwrite else []))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"jaxshuffle: error: out: {out} is not empty and holds no sweep") and \
        "would replace results.csv, results.json, which jaxshuffle did not write" in err, err
    assert _snapshot(out) == before and sorted(p.name for p in out.iterdir()) == ["results.csv", "results.json"]


def test_files_named_like_ours_in_a_folder_without_a_sweep_are_the_users(tmp_path):
    """The same for a chunk-like file and a results.csv beside a sweep.json that is not a manifest and no chunk
    that verifies: refused, --overwrite or not, nothing changed; the message says --overwrite will not help."""
    chunky = tmp_path / "chunky"
    (chunky / "chunks").mkdir(parents=True)
    (chunky / "chunks" / "c000000.npz").write_bytes(b"my own archive")
    before = _snapshot(chunky)
    for overwrite in (False, True):
        with pytest.raises(ValueError, match=r"would replace chunks/c000000.npz, which jaxshuffle did not write"):
            sw.sweep(**SMALL, out=chunky, overwrite=overwrite)
    assert _snapshot(chunky) == before
    other_tool = tmp_path / "other-tool"
    other_tool.mkdir()
    (other_tool / "sweep.json").write_text('{"method": "bayes", "parameters": {}}')  # another tool's sweep config
    (other_tool / "results.csv").write_text("run,loss\n1,0.5\n")
    before = _snapshot(other_tool)
    for overwrite in (False, True):
        with pytest.raises(ValueError, match=r"sweep.json is damaged \(not a sweep manifest.*nothing was changed: "
                                             r"restore it from a copy, or use another --out \(no chunk file in .* "
                                             r"verifies.*--overwrite leaves it alone\)"):
            sw.sweep(**SMALL, out=other_tool, overwrite=overwrite)
    assert _snapshot(other_tool) == before and sorted(p.name for p in other_tool.iterdir()) == [
        "results.csv", "sweep.json"]


def test_merge_never_writes_into_its_inputs(clean, tmp_path):
    s0, s1 = tmp_path / "s0", tmp_path / "s1"
    sw.sweep(**SMALL, out=s0, shard="0/2")
    sw.sweep(**SMALL, out=s1, shard="1/2")
    before = {p: _snapshot(p) for p in (s0, s1)}
    for target, why in ((s0, "is \\(inside\\) the input"), (s1 / "merged", "is \\(inside\\) the input"),
                        (clean, "is a sweep directory")):
        with pytest.raises(ValueError, match=f"out: .*{why}.*merge never writes into"):
            sw.merge([s0, s1], target, quiet=True)
    assert {p: _snapshot(p) for p in (s0, s1)} == before
    assert not (s1 / "merged").exists()
    merged = sw.merge([s0, s1 / "shard-1-of-2.npz"], tmp_path / "m", quiet=True)
    assert {p: _snapshot(p) for p in (s0, s1)} == before
    ref = sw.load(clean)
    for key in ref.keys():
        np.testing.assert_array_equal(merged[key], ref[key], err_msg=key)
    # a partial merge over that complete one writes no npz and removes the earlier merge's: load reads its rows
    partial = sw.merge([s0], tmp_path / "m", quiet=True, allow_partial=True)
    assert not partial.complete and not (tmp_path / "m" / "results.npz").exists()
    np.testing.assert_array_equal(sw.load(tmp_path / "m")["index"], partial["index"])


def test_merge_refuses_a_directory_holding_the_users_files(clean, tmp_path, capsys):
    """merge writes into a new or empty directory, or over an earlier merge's own files; a directory
    holding anything else is refused (API and CLI: one line naming --out and the files), untouched."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("precious")
    with pytest.raises(ValueError, match=r"^out: .* holds files merge did not write \(notes.txt\)"):
        sw.merge([clean], mine, quiet=True)
    assert cli.main(["sweep", "merge", str(clean), "--out", str(mine)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds files merge did not write (notes.txt)" in err, err
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and (mine / "notes.txt").read_text() == "precious"
    again = tmp_path / "again"
    first = sw.merge([clean], again, quiet=True)
    second = sw.merge([clean], again, quiet=True)  # an earlier merge's files are replaced
    np.testing.assert_array_equal(first["upper"], second["upper"])
    # the names are no proof: a results.csv without an earlier merge's results.json beside it is the user's
    for name, extra in (("only-csv", {}), ("their-json", {"results.json": '{"experiment": "mine"}'})):
        folder = tmp_path / name
        folder.mkdir()
        for fname, text in {"results.csv": "trial,score\n1,0.93\n", **extra}.items():
            (folder / fname).write_text(text)
        before = _snapshot(folder)
        with pytest.raises(ValueError, match=r"^out: .* holds files merge did not write \(results.csv"):
            sw.merge([clean], folder, quiet=True)
        assert _snapshot(folder) == before


def test_the_default_figure_never_replaces_a_users_sweep_png(tmp_path, capsys):
    """``sweep --overwrite`` into a folder of the user's writes its results beside their files; their own
    ``sweep.png`` is left byte for byte (one stderr line says so), while a figure a sweep drew (PNG with the
    sweep's mark) is redrawn, and an explicit ``--plot`` path is the user's choice."""
    pytest.importorskip("matplotlib")
    out = tmp_path / "mine"
    out.mkdir()
    theirs = b"\x89PNG\r\n\x1a\n the user's own figure"
    (out / "sweep.png").write_bytes(theirs)
    argv = ["sweep", "--randomizer", "general", "--eps0", "0.5:4:12", "--n", "12", "--delta", "1e-3",
            "--chunk-size", "8", "--devices", "1", "--quiet", "--out", str(out)]
    assert cli.main(argv + ["--overwrite"]) == 0
    assert (out / "sweep.png").read_bytes() == theirs
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no figure: {out / 'sweep.png'} exists and jaxshuffle did not write it" in err
    (out / "sweep.png").unlink()  # the user moves theirs away: the sweep draws its own, then redraws it
    assert cli.main(argv) == 0
    drawn = (out / "sweep.png").read_bytes()
    assert drawn.startswith(b"\x89PNG") and b"jaxshuffle sweep" in drawn[:4096]
    (out / "sweep.png").write_bytes(drawn[:-10] + b"0123456789")  # still ours (the mark), content changed
    assert cli.main(argv) == 0
    assert (out / "sweep.png").read_bytes() == drawn
    named = tmp_path / "named.png"
    named.write_bytes(theirs)
    assert cli.main(argv + ["--plot", str(named)]) == 0
    assert named.read_bytes().startswith(b"\x89PNG") and named.read_bytes() != theirs
