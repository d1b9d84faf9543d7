"""`kerncheck test` reads each file once: the readers defer the checksum and row checks to the judge's pass
(src/golden/golden.cpp SplitXxh3 / DeferredCheck, src/judge/judge.cpp accumulate). A damaged byte anywhere in
the golden, the candidate or a noise run (also outside the judged --positions range) must still be refused
with exit 3 naming the file and the checksum, and no report written; an intact pair gives the same report
for any KC_THREADS.
"""
import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

KC = os.environ.get("KC_BIN", "kerncheck")
N, V = 6000, 400  # golden ≈ 1.1 MB: the out-of-order hash path (streams ≥ 64 kB), several 2048-row groups


def run(*args, rc=None, env=None):
    p = subprocess.run([KC, *map(str, args)], capture_output=True, text=True, env=env)
    if rc is not None and p.returncode != rc:
        raise AssertionError(f"kerncheck {' '.join(map(str, args))} → {p.returncode} (want {rc})\n{p.stdout}\n{p.stderr}")
    return p


def tensor_range(path, name):
    """Absolute byte range of a tensor's data in a safetensors file."""
    with open(path, "rb") as f:
        hl = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(hl))
    s, e = header[name]["data_offsets"]
    return 8 + hl + s, 8 + hl + e


def damaged(src, dst, name, frac):
    raw = bytearray(Path(src).read_bytes())
    b, e = tensor_range(src, name)
    raw[b + int((e - b) * frac)] ^= 0x10
    Path(dst).write_bytes(bytes(raw))
    return dst


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("onepass")
    rng = np.random.default_rng(5)
    ref = (rng.standard_normal((N, V)) * 3).astype(np.float32)
    np.save(d / "ref.npy", ref)
    np.save(d / "tokens.npy", rng.integers(0, V, N).astype(np.int32))
    for name, seed in [("cand", 1), ("noise", 2)]:
        np.save(d / f"{name}.npy", (ref + np.random.default_rng(seed).normal(0, 0.02, ref.shape)).astype(np.float32))
    run("record", "--from-logits", d / "ref.npy", "--tokens", d / "tokens.npy", "-o", d / "g.st", rc=0)
    for name in ["cand", "noise"]:
        run("record", "--from-logits", d / f"{name}.npy", "--golden", d / "g.st", "-o", d / f"{name}.st", rc=0)
    return d


def test_intact_files_same_report_for_any_thread_count(files):
    d = files
    reports = []
    for threads in ["1", "2", "3"]:
        out = d / f"r{threads}.json"
        p = run("test", d / "g.st", d / "cand.st", "--noise", d / "noise.st", "--json", out,
                env={**os.environ, "KC_THREADS": threads})
        assert p.returncode in (0, 1, 2), p.stderr
        reports.append(json.loads(out.read_text()))
    assert reports[0] == reports[1] == reports[2]


@pytest.mark.parametrize("which,tensor,frac", [
    ("golden", "top_logprobs", 0.5),
    ("golden", "top_ids", 0.001),
    ("golden", "phase", 0.7),
    ("candidate", "logprobs_at_ref", 0.37),
    ("candidate", "flags", 0.99),
    ("noise", "top1_id", 0.5),
])
def test_damaged_byte_is_refused_and_nothing_written(files, tmp_path, which, tensor, frac):
    d = files
    g, c, n = d / "g.st", d / "cand.st", d / "noise.st"
    src = {"golden": g, "candidate": c, "noise": n}[which]
    bad = damaged(src, tmp_path / f"bad_{which}.st", tensor, frac)
    g, c, n = [bad if x == src else x for x in (g, c, n)]
    out, html = tmp_path / "r.json", tmp_path / "r.html"
    for threads in ["1", "2"]:
        p = run("test", g, c, "--noise", n, "--json", out, "--html", html, rc=3,
                env={**os.environ, "KC_THREADS": threads})
        assert "checksum" in p.stderr and str(bad) in p.stderr, p.stderr
        assert not out.exists() and not html.exists()


def test_damage_outside_the_judged_range_is_refused(files, tmp_path):
    """A shard judges positions 1000:2000 but the whole golden is still verified."""
    d = files
    bad = damaged(d / "g.st", tmp_path / "g_bad.st", "top_logprobs", 0.9)  # row ≈ 5400
    run("test", d / "g.st", d / "cand.st", "--positions", "1000:2000", "--partial", tmp_path / "ok.part", rc=0)
    p = run("test", bad, d / "cand.st", "--positions", "1000:2000", "--partial", tmp_path / "s.part", rc=3)
    assert "checksum" in p.stderr and not (tmp_path / "s.part").exists()
    bad_c = damaged(d / "cand.st", tmp_path / "c_bad.st", "logprobs_at_ref", 0.05)  # row ≈ 300
    p = run("test", d / "g.st", bad_c, "--positions", "1000:2000", "--partial", tmp_path / "s2.part", rc=3)
    assert "checksum" in p.stderr and str(bad_c) in p.stderr
