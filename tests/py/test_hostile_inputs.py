"""Issue 20: every byte that decides a verdict is checked, every write is safe.

One test per hole the probe found. Edited files are made here with numpy and the stock safetensors
writer; where a hole needs a file whose checksum is valid (an edit a user could make on purpose), the
checksum is recomputed here, independently of kerncheck, from docs/golden-format.md (XXH3-64 through the
system libxxhash). Each case must now give exit 3 naming the file and field, or the right verdict.
"""
import ctypes
import json
import os
import stat
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from kc_env import write_tokenizer

KC = os.environ.get("KC_BIN", "kerncheck")
N, V = 3000, 300

_xxh = ctypes.CDLL("libxxhash.so.0")
_xxh.XXH3_64bits.restype = ctypes.c_uint64
_xxh.XXH3_64bits.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
GOLDEN_ORDER = ["top_ids", "top_logprobs", "other_logprob", "token", "token_logprob", "segment", "depth", "phase",
                "flags"]
CAND_ORDER = ["logprobs_at_ref", "other_logprob", "top1_id", "top1_logprob", "token_logprob", "flags", "covered"]


def xxh3(b):
    return _xxh.XXH3_64bits(b, len(b))


def seal(meta, tensors, order):
    """The golden/candidate checksum of docs/golden-format.md, computed independently."""
    data = b"".join(np.ascontiguousarray(tensors[k]).tobytes() for k in order if k in tensors)
    m = b""
    for key, value in sorted(meta.items()):
        if key != "checksum":
            for s in (key.encode(), value.encode()):
                m += struct.pack("<Q", len(s)) + s
    m += struct.pack("<Q", xxh3(data))
    return "xxh3:%016x" % xxh3(m)


def load(path):
    with safe_open(path, "np") as f:
        return dict(f.metadata()), {k: f.get_tensor(k) for k in f.keys()}


def save(path, meta, tensors, order=None):
    """Writes with the stock writer; order given: re-sealed with a valid checksum."""
    meta = dict(meta)
    if order:
        meta["checksum"] = seal(meta, tensors, order)
    save_file(tensors, path, meta)
    return path


def run(*args, rc=None, env=None, timeout=60):
    p = subprocess.run([KC, *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout)
    if rc is not None and p.returncode != rc:
        raise AssertionError(f"kerncheck {' '.join(map(str, args))} → {p.returncode} (want {rc})\n{p.stdout}\n{p.stderr}")
    return p


def refused(p, *parts):
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
    for s in parts:
        assert str(s) in p.stderr, (s, p.stderr)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    rng = np.random.default_rng(20)
    ref = (rng.standard_normal((N, V)) * 3).astype(np.float32)
    np.save(d / "ref.npy", ref)
    np.save(d / "tokens.npy", rng.integers(0, V, N).astype(np.int32))
    # Two domains: a candidate damaged only on "code" fails there; relabelling hides it.
    segs = [{"name": f"s{i}", "domain": "code" if i % 2 else "prose", "depth": 500, "start": i * 500} for i in range(6)]
    (d / "segs.json").write_text(json.dumps(segs))
    cand = ref + rng.normal(0, 0.01, ref.shape).astype(np.float32)
    bad = cand.copy()
    code_rows = np.concatenate([np.arange(i * 500, i * 500 + 500) for i in range(1, 6, 2)])
    bad[code_rows] += rng.normal(0, 1.5, (len(code_rows), V)).astype(np.float32)
    np.save(d / "cand.npy", cand)
    np.save(d / "bad.npy", bad)
    run("record", "--from-logits", d / "ref.npy", "--tokens", d / "tokens.npy", "--segments", d / "segs.json",
        "-o", d / "g.st", rc=0)
    for name in ["cand", "bad"]:
        run("record", "--from-logits", d / f"{name}.npy", "--golden", d / "g.st", "-o", d / f"{name}.st", rc=0)
    return d


# ---- 1. metadata outside the checksum ---------------------------------------------------------------------
def test_relabelled_domains_are_refused(files, tmp_path):
    d = files
    meta, t = load(d / "g.st")
    segs = json.loads(meta["segments"])
    for s in segs:
        s["domain"] = "prose"
    meta["segments"] = json.dumps(segs)
    g2 = save(tmp_path / "g2.st", meta, t)  # checksum kept: it no longer matches
    refused(run("test", g2, d / "bad.st"), g2, "metadata checksum")


@pytest.mark.parametrize("key,value", [("kerncheck.corpus_first_tokens", "[1, 2, 3]"), ("model", "other"),
                                       ("k", "20"), ("positions", str(N))])
def test_any_edited_metadata_key_is_refused(files, tmp_path, key, value):
    d = files
    meta, t = load(d / "cand.st")
    meta[key] = value if meta.get(key) != value else value + "0"
    c2 = save(tmp_path / "c2.st", meta, t)
    p = run("test", d / "g.st", c2)
    assert p.returncode == 3, p.stderr
    assert str(c2) in p.stderr


def test_resealed_metadata_is_accepted_and_old_version_is_refused(files, tmp_path):
    d = files
    meta, t = load(d / "g.st")
    # The checksum computed here from the documented recipe is the one kerncheck wrote.
    assert seal(meta, t, GOLDEN_ORDER) == meta["checksum"]
    meta["kerncheck.version"] = "1"
    old = save(tmp_path / "old.st", meta, t, GOLDEN_ORDER)
    refused(run("test", old, d / "cand.st"), old, "kerncheck.version", "re-record")


# ---- 2. impossible values ---------------------------------------------------------------------------------
def edited_candidate(d, tmp_path, edit):
    meta, t = load(d / "cand.st")
    edit(t)
    return save(tmp_path / "edited.st", meta, t, CAND_ORDER)


def test_positive_logprobs_are_refused(files, tmp_path):
    def edit(t):
        t["logprobs_at_ref"] = t["logprobs_at_ref"] + np.float32(5)
    c = edited_candidate(files, tmp_path, edit)
    refused(run("test", files / "g.st", c), c, "logprobs_at_ref[0, 0]", "expected a log-prob ≤ 0")


@pytest.mark.parametrize("name", ["token_logprob", "top1_logprob", "other_logprob"])
def test_positive_row_logprobs_are_refused(files, tmp_path, name):
    def edit(t):
        t[name] = t[name].copy()
        t[name][17] = 0.5
    c = edited_candidate(files, tmp_path, edit)
    refused(run("test", files / "g.st", c), c, f"{name}[17]", "≤ 0")


def test_candidate_mass_above_one_is_refused(files, tmp_path):
    def edit(t):
        lp = t["logprobs_at_ref"].copy()
        lp[42, :] = np.float32(-0.01)  # 20 ids with p ≈ 0.99 each
        t["logprobs_at_ref"] = lp
    c = edited_candidate(files, tmp_path, edit)
    refused(run("test", files / "g.st", c), c, "logprobs_at_ref[42]", "mass ≤ 1")


@pytest.mark.parametrize("value", [-np.inf, np.inf])
def test_infinite_token_logprob_is_counted_nonfinite(files, tmp_path, value):
    def edit(t):
        t["token_logprob"] = t["token_logprob"].copy()
        t["token_logprob"][100] = value
    c = edited_candidate(files, tmp_path, edit)
    p = run("test", files / "g.st", c, "--json", tmp_path / "r.json")
    if value > 0:  # +inf is not a log-prob
        refused(p, c, "token_logprob[100]")
        return
    assert p.returncode == 1, p.stderr  # FAIL: one position with p(token) = 0
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["nonfinite"] == 1 and r["verdict"] == "FAIL", r["nonfinite"]


def token_in_topk_rows(d):
    """Rows where the golden's token is among its top-k, with its column (computed here from the golden)."""
    g = load_file(d / "g.st")
    hit = g["top_ids"] == g["token"][:, None]
    rows = np.flatnonzero(hit.any(axis=1))
    return rows, hit[rows].argmax(axis=1)


@pytest.mark.parametrize("value", [0.0, "shifted"])
def test_token_logprob_inconsistent_with_logprobs_at_ref_is_refused(files, tmp_path, value):
    """token_logprob = 0 (or off by 0.5) where the golden's token is in the top-k contradicts the
    candidate's own logprobs_at_ref there: exit 3 naming the file, row, field and the expected value."""
    rows, cols = token_in_topk_rows(files)
    assert len(rows) > 10
    meta, t = load(files / "cand.st")
    lq = t["logprobs_at_ref"][rows, cols]
    np.testing.assert_allclose(t["token_logprob"][rows], lq, atol=1e-3, rtol=1e-3)  # consistent as recorded
    r = int(rows[3])
    t["token_logprob"] = t["token_logprob"].copy()
    t["token_logprob"][r] = 0.0 if value == 0.0 else t["token_logprob"][r] - np.float32(0.5)
    if value == 0.0:  # every row: the first one is named
        t["token_logprob"][:] = 0.0
        r = int(rows[0])
    c = save(tmp_path / "edited.st", meta, t, CAND_ORDER)
    p = run("test", files / "g.st", c)
    refused(p, c, f"token_logprob[{r}]", "expected", f"logprobs_at_ref[{r}, {int(cols[list(rows).index(r)])}]",
            str(np.float32(lq[list(rows).index(r)])))


def test_token_logprob_rounding_is_accepted(files, tmp_path):
    """A token log-prob that differs from logprobs_at_ref by f32/bf16-level rounding is not refused."""
    rows, cols = token_in_topk_rows(files)
    meta, t = load(files / "cand.st")
    t["token_logprob"] = t["token_logprob"].copy()
    lq = t["logprobs_at_ref"][rows, cols]
    t["token_logprob"][rows] = lq + np.float32(4e-4) * (1 + np.abs(lq))
    c = save(tmp_path / "edited.st", meta, t, CAND_ORDER)
    p = run("test", files / "g.st", c)
    assert p.returncode in (0, 1, 2), p.stderr  # a verdict, not a refusal


def edited_golden(d, tmp_path, edit):
    """The edited golden (re-sealed) and the candidate re-sealed for it (its golden_checksum)."""
    meta, t = load(d / "g.st")
    edit(t)
    g = save(tmp_path / "gedit.st", meta, t, GOLDEN_ORDER)
    cmeta, ct = load(d / "cand.st")
    cmeta["golden_checksum"] = load(g)[0]["checksum"]
    return g, save(tmp_path / "cedit.st", cmeta, ct, CAND_ORDER)


@pytest.mark.parametrize("cols", [(2, 5), (3, 17), (16, 19), (0, 19)])  # within and across blocks of 16
def test_duplicate_topk_ids_are_refused(files, tmp_path, cols):
    def edit(t):
        ids = t["top_ids"].copy()
        ids[7, cols[1]] = ids[7, cols[0]]  # not neighbours
        t["top_ids"] = ids
    g, c = edited_golden(files, tmp_path, edit)
    refused(run("test", g, c), g, "top_ids[7]", "distinct ids")


# Row 9 inside the judged positions (the judge checks the mass from its scores), outside --positions (the
# reader's check on the rows the judge does not score) and read by record --golden (not the judge).
@pytest.mark.parametrize("how", ["judged", "outside", "record"])
def test_golden_mass_above_one_is_refused(files, tmp_path, how):
    def edit(t):
        lp = t["top_logprobs"].copy()
        lp[9, :] = np.float32(-0.001)  # mass ≈ 20
        t["top_logprobs"] = lp
    g, c = edited_golden(files, tmp_path, edit)
    if how == "judged":
        p = run("test", g, c)
    elif how == "outside":
        p = run("test", g, c, "--positions", "100:3000")
    else:
        p = run("record", "--from-logits", files / "cand.npy", "--golden", g, "-o", tmp_path / "o.st")
    refused(p, g, "top_logprobs[9]", "mass ≤ 1")


# ---- 3. shards --------------------------------------------------------------------------------------------
def test_edited_shard_counts_are_refused(files, tmp_path):
    d = files
    run("test", d / "g.st", d / "cand.st", "--positions", "0:1500", "--partial", tmp_path / "a.part")
    run("test", d / "g.st", d / "cand.st", "--positions", "1500:3000", "--partial", tmp_path / "b.part")
    assert run("merge", tmp_path / "a.part", tmp_path / "b.part").returncode in (0, 1, 2)
    meta, t = load(tmp_path / "a.part")
    r0 = json.loads(meta["run0"])
    r0["n_positions_edited"] = 1  # any edit: the checksum is over the whole content
    meta["run0"] = json.dumps(r0)
    save(tmp_path / "e.part", meta, t)
    refused(run("merge", tmp_path / "e.part", tmp_path / "b.part"), tmp_path / "e.part", "metadata checksum")


def test_random_byte_flips_in_shards_are_refused(files, tmp_path):
    d = files
    run("test", d / "g.st", d / "cand.st", "--positions", "0:1500", "--partial", tmp_path / "a.part")
    raw = (tmp_path / "a.part").read_bytes()
    hl = struct.unpack("<Q", raw[:8])[0]
    rng = np.random.default_rng(3)
    for i in range(20):
        b = bytearray(raw)
        # Data bytes and metadata bytes inside JSON strings (digits of the counts): flip a low bit.
        at = int(rng.integers(8 + hl, len(raw))) if i % 2 else 8 + int(rng.integers(0, hl))
        b[at] ^= 0x01
        (tmp_path / "f.part").write_bytes(bytes(b))
        p = run("merge", tmp_path / "f.part")
        assert p.returncode == 3, (at, p.stdout, p.stderr)


def test_shard_runs_of_another_shape_are_refused(files, tmp_path):
    """A re-sealed shard whose noise run has fewer segments than its candidate (the floor test and the depth
    profile pair them segment by segment) is refused naming the run, not read out of bounds."""
    import re
    d = files
    run("test", d / "g.st", d / "cand.st", "--noise", d / "bad.st", "--noise", d / "cand.st", "--positions",
        "0:3000", "--partial", tmp_path / "a.part")
    meta, t = load(tmp_path / "a.part")
    r1 = json.loads(meta["run1"])
    r1["n_segments"] = 2
    for key in ("segments", "segment_cells", "segment_depths"):
        r1[key] = r1[key][:2]
    meta["run1"] = json.dumps(r1)
    save(tmp_path / "s.part", meta, t)
    p = run("merge", tmp_path / "s.part", rc=3)
    meta["checksum"] = re.search(r"metadata checksum: expected (xxh3:[0-9a-f]+)", p.stderr).group(1)
    save(tmp_path / "s.part", meta, t)
    refused(run("merge", tmp_path / "s.part"), tmp_path / "s.part", "metadata run1 k, domains, n_segments")


# ---- 4. outputs that destroy inputs ------------------------------------------------------------------------
def test_outputs_that_are_inputs_are_refused(files, tmp_path):
    d = files
    for f in ["g.st", "cand.st"]:
        (tmp_path / f).write_bytes((d / f).read_bytes())
    g, c = tmp_path / "g.st", tmp_path / "cand.st"
    before = g.read_bytes(), c.read_bytes()
    for flag, target in [("--json", g), ("--html", c), ("--junit", g), ("--partial", c)]:
        refused(run("test", g, c, flag, target), target, "one of the inputs")
    os.link(g, tmp_path / "hard.st")  # another name, the same inode
    refused(run("test", g, c, "--json", tmp_path / "hard.st"), "one of the inputs")
    refused(run("record", "--from-logits", d / "cand.npy", "--golden", g, "-o", g), "one of the inputs")
    assert (g.read_bytes(), c.read_bytes()) == before


def test_special_outputs_are_refused_unless_told(files, tmp_path):
    d = files
    p = run("test", d / "g.st", d / "cand.st", "--json", "/dev/full")
    refused(p, "/dev/full", "--write-special")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    refused(run("test", d / "g.st", d / "cand.st", "--json", fifo), fifo, "--write-special")
    # Told: written in place (a reader on the FIFO gets the report; /dev/full says it is full).
    p = run("test", d / "g.st", d / "cand.st", "--json", "/dev/full", "--write-special")
    refused(p, "/dev/full")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    out = tmp_path / "stdout.json"
    p = subprocess.run(f"{KC} test {d / 'g.st'} {d / 'cand.st'} --json /dev/stdout --write-special > {out}",
                       shell=True, capture_output=True, text=True)
    assert p.returncode in (0, 1, 2), p.stderr
    assert '"overall"' in out.read_text()
    p = subprocess.run(f"{KC} test {d / 'g.st'} {d / 'cand.st'} --json /dev/stdout > {out}", shell=True,
                       capture_output=True, text=True)
    assert p.returncode == 3 and "--write-special" in p.stderr, p.stderr


def test_stale_temporaries_are_removed(files, tmp_path):
    d = files
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"r.json.tmp.{dead.pid}"
    stale.write_text("left by kill -9")
    alive = tmp_path / f"r.json.tmp.{os.getpid()}"  # a live process's: kept
    alive.write_text("in use")
    run("test", d / "g.st", d / "cand.st", "--json", tmp_path / "r.json")
    assert (tmp_path / "r.json").exists() and not stale.exists() and alive.exists()


# ---- 5. hangs and unbounded reads -------------------------------------------------------------------------
def test_fifo_inputs_do_not_hang(files, tmp_path):
    d = files
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    refused(run("test", fifo, d / "cand.st", timeout=30), fifo, "file type: expected a regular file, got a FIFO")
    refused(run("test", d / "g.st", fifo, timeout=30), fifo, "regular file")
    refused(run("test", d / "g.st", d / "cand.st", "--thresholds", fifo, timeout=30), fifo, "regular file")
    refused(run("record", "--from-logits", d / "ref.npy", "--tokens", d / "tokens.npy", "--segments", fifo,
                "-o", tmp_path / "x.st", timeout=30), fifo, "regular file")
    refused(run("merge", fifo, timeout=30), fifo, "regular file")


def test_devices_and_directories_are_refused(files, tmp_path):
    d = files
    refused(run("test", d / "g.st", d / "cand.st", "--thresholds", "/dev/zero", timeout=30), "/dev/zero",
            "character device")
    refused(run("record", "--from-logits", d / "ref.npy", "--tokens", d / "tokens.npy", "--segments", "/dev/zero",
                "-o", tmp_path / "x.st", timeout=30), "/dev/zero", "character device")
    refused(run("test", d / "g.st", d / "cand.st", "--thresholds", tmp_path, timeout=30), "directory")


def test_oversized_config_is_refused(files, tmp_path):
    d = files
    big = tmp_path / "big.toml"
    with open(big, "wb") as f:
        f.truncate(17 << 20)  # sparse: over the 16 MiB cap for configuration files
    refused(run("test", d / "g.st", d / "cand.st", "--thresholds", big), big, "at most 16 MiB")


# ---- 6. silently ignored configuration --------------------------------------------------------------------
@pytest.mark.parametrize("key,hint", [("kl_maen", "kl_mean"), ("domain.code.kl_p99x", "domain.code.kl_p99"),
                                      ("phase.prefil.kl_mean", "phase.prefill. or phase.decode.")])
def test_misspelt_statistic_is_an_error(files, tmp_path, key, hint):
    th = tmp_path / "th.toml"
    th.write_text(f'[kerncheck]\nformat = "thresholds"\nversion = 1\n[limits]\n"{key}" = 0.5\n')
    refused(run("test", files / "g.st", files / "cand.st", "--thresholds", th), th, key, hint)


def test_unknown_thresholds_table_is_an_error(files, tmp_path):
    th = tmp_path / "th.toml"
    th.write_text('[kerncheck]\nformat = "thresholds"\nversion = 1\n[limit]\nkl_mean = 0.5\n')
    refused(run("test", files / "g.st", files / "cand.st", "--thresholds", th), th, 'did you mean "limits"')


# ---- 7. safetensors as strict as the stock loader ---------------------------------------------------------
def stock_refuses(path):
    try:
        load_file(path)
        return False
    except Exception:
        return True


@pytest.mark.parametrize("suffix,trailing,stock_ok", [(b"    ", b"", True), (b"\n\t ", b"", True),
                                                      (b"\0garbage", b"", False), (b"xyz", b"", False),
                                                      (b"", b"\0\0\0\0", False)])
def test_safetensors_header_and_trailing_bytes_like_stock(files, tmp_path, suffix, trailing, stock_ok):
    raw = (files / "cand.st").read_bytes()
    hl = struct.unpack("<Q", raw[:8])[0]
    header = raw[8:8 + hl].rstrip(b" ") + suffix
    f = tmp_path / "h.st"
    f.write_bytes(struct.pack("<Q", len(header)) + header + raw[8 + hl:] + trailing)
    assert stock_refuses(f) == (not stock_ok)
    p = run("test", files / "g.st", f)
    if stock_ok:
        assert p.returncode in (0, 1, 2), p.stderr
    else:
        refused(p, f)


# ---- every refusal names the file, the field and what was expected ----------------------------------------
def test_refusal_messages_name_file_field_and_expected(files, tmp_path):
    """Walks the error paths added for issue 20 and checks the shape "FILE: FIELD: expected …, got …"."""
    import re
    d = files
    fifo = tmp_path / "p.fifo"
    os.mkfifo(fifo)
    th = tmp_path / "th.toml"
    th.write_text('[kerncheck]\nformat = "thresholds"\nversion = 1\n[limits]\nkl_maen = 1\n')
    meta, t = load(d / "g.st")
    meta["kerncheck.version"] = "1"
    old = save(tmp_path / "old.st", meta, t, GOLDEN_ORDER)
    meta, t = load(d / "cand.st")
    t["logprobs_at_ref"] = t["logprobs_at_ref"] + np.float32(1)
    pos = save(tmp_path / "pos.st", meta, t, CAND_ORDER)
    cases = [
        (["test", fifo, d / "cand.st"], fifo),
        (["test", d / "g.st", d / "cand.st", "--thresholds", "/dev/zero"], "/dev/zero"),
        (["test", d / "g.st", d / "cand.st", "--thresholds", th], th),
        (["test", old, d / "cand.st"], old),
        (["test", d / "g.st", pos], pos),
        (["test", d / "g.st", d / "cand.st", "--json", d / "g.st"], d / "g.st"),
        (["test", d / "g.st", d / "cand.st", "--json", "/dev/full"], "/dev/full"),
    ]
    shape = re.compile(r"error: (?P<file>\S+): (?P<field>[^:]+): expected .+, got .+")
    for args, f in cases:
        p = run(*args, timeout=30)
        assert p.returncode == 3, (args, p.stderr)
        m = shape.search(p.stderr)
        assert m and m.group("file") == str(f), (args, p.stderr)


def test_terminal_escapes_from_corpus_text_are_not_printed_raw(files, tmp_path):
    d = files
    text = "ab\x1b[2J\x1b]0;pwned\x07cd\x9b" * (N // 4 + 1)
    segs = [{"name": "esc", "domain": "prose", "depth": N, "start": 0, "text": text,
             "offsets": list(range(1, N + 1))}]
    (tmp_path / "segs.json").write_text(json.dumps(segs))
    run("record", "--from-logits", d / "ref.npy", "--tokens", d / "tokens.npy", "--segments", tmp_path / "segs.json",
        "-o", tmp_path / "g.st", rc=0)
    run("record", "--from-logits", d / "bad.npy", "--golden", tmp_path / "g.st", "-o", tmp_path / "c.st", rc=0)
    p = run("test", tmp_path / "g.st", tmp_path / "c.st", "--junit", tmp_path / "j.xml")
    assert p.returncode in (0, 1, 2), p.stderr
    assert "worst positions" in p.stdout and "\\x1b" in p.stdout, p.stdout
    assert "\x1b" not in p.stdout and "\x07" not in p.stdout and "\x9b" not in p.stdout


# One bad input for each reader a subcommand option feeds (golden, candidate, shard, corpus, thresholds,
# spec, CSV cases, npy, safetensors, importer JSON, segments, tokens, tokenizer, GGUF, HF config) and for
# merge and corpus build: every refusal is exit 3 and "FILE: FIELD: expected …".
TINY = Path(__file__).resolve().parents[1] / "data" / "fixtures" / "llama-tiny"


def _bad_inputs(d, t):
    """(case id, argv, the file the message must name), made in folder t from the valid files in d."""
    def w(name, data):
        (t / name).write_bytes(data if isinstance(data, bytes) else data.encode())
        return t / name

    g, c = d / "g.st", d / "cand.st"
    raw_g, raw_c = g.read_bytes(), c.read_bytes()
    good = t / "good.npy"
    np.save(good, np.zeros((4, 3), np.float32))
    np.save(t / "wrongshape.npy", np.zeros((5, 3), np.float32))
    save_file({"x": np.zeros((4, 3), np.float32)}, str(t / "t.safetensors"))
    st = bytearray((t / "t.safetensors").read_bytes())
    run("test", g, c, "--positions", "0:1500", "--partial", t / "a.part", rc=0)
    run("test", g, c, "--positions", "1000:3000", "--partial", t / "b.part", rc=0)  # overlaps a.part
    tok_dir = t / "tok"
    tok_dir.mkdir()
    write_tokenizer(tok_dir / "good.json")
    cfg_dir = t / "hf"
    cfg_dir.mkdir()
    for f in TINY.iterdir():
        (cfg_dir / f.name).symlink_to(f)
    (cfg_dir / "config.json").unlink()
    cfg = json.loads((TINY / "config.json").read_text())
    cfg["num_hidden_layers"] = "two"
    (cfg_dir / "config.json").write_text(json.dumps(cfg))
    # A candidate and a noise run of one engine in two base precisions: the floor does not match.
    cand_e, noise_bf16 = t / "cand_e.st", t / "noise_bf16.st"
    for out, variant in [(cand_e, "f32"), (noise_bf16, "bf16")]:
        run("record", "--from-logits", d / "cand.npy", "--golden", g, "--engine", "myengine", "--variant", variant,
            "-o", out, rc=0)
    (t / "nocorpus").mkdir()
    prose = w("prose.txt", "In the beginning was the word. " * 40)
    code = w("code.py", "def f(x):\n    return x + 1\n" * 40)
    return [
        ("golden-truncated", ["test", w("g_trunc.st", raw_g[: len(raw_g) // 2]), c], t / "g_trunc.st"),
        ("golden-header", ["test", w("g_hdr.st", struct.pack("<Q", 9) + b'{"a": 1,x'), c], t / "g_hdr.st"),
        ("golden-not-golden", ["test", t / "t.safetensors", c], t / "t.safetensors"),
        ("candidate-truncated", ["test", g, w("c_trunc.st", raw_c[:-7])], t / "c_trunc.st"),
        ("candidate-is-golden", ["test", g, g], g),
        ("shard-truncated", ["merge", w("s_trunc.part", (t / "a.part").read_bytes()[:200])], t / "s_trunc.part"),
        ("merge-overlap", ["merge", t / "a.part", t / "b.part"], t / "b.part"),
        ("corpus", ["corpus", "show", w("bad.kcc", raw_g)], t / "bad.kcc"),
        ("thresholds-type", ["test", g, c, "--thresholds",
                             w("th.toml", '[kerncheck]\nformat = "thresholds"\nversion = 1\n[limits]\nkl_mean = "x"\n')],
         t / "th.toml"),
        ("thresholds-syntax", ["test", g, c, "--thresholds", w("th2.toml", "[limits\n")], t / "th2.toml"),
        ("spec", ["compare", good, good, "--spec", w("spec.toml", '[matmul]\nstandrd = "x"\n')], t / "spec.toml"),
        ("csv-cases", ["compare", "-i", w("cases.csv", "name,op,shape\nc1,nosuchop,4x4\n")], t / "cases.csv"),
        ("npy-header", ["compare", w("bad.npy", b"\x93NUMPY\x01\x00\x10\x00{'descr': 'x'}\n"), good], t / "bad.npy"),
        ("npy-shape", ["compare", t / "wrongshape.npy", good], t / "wrongshape.npy"),
        ("safetensors-header", ["compare", f'{w("bad.safetensors", bytes(st[:8]) + b"[" + bytes(st[9:]))}:x', good],
         t / "bad.safetensors"),
        ("importer-json", ["import", "vllm", w("vllm.json", '{"prompt_logprobs": 3}'), "-g", g, "-o", t / "o.st"],
         t / "vllm.json"),
        ("segments", ["record", "--from-logits", d / "ref.npy", "--tokens", d / "tokens.npy", "--segments",
                      w("segs.json", '[{"name": "s", "domain": "prose", "depth": "x", "start": 0}]'), "-o", t / "o.st"],
         t / "segs.json"),
        ("tokens", ["record", "--from-logits", d / "ref.npy", "--tokens", good, "--segments", d / "segs.json",
                    "-o", t / "o.st"], good),
        ("tokenizer", ["corpus", "build", "--tokenizer", w("tok/tokenizer.json", '{"model": {"type": "Unigram"}}'),
                       "--prose", prose, "--code", code, "-o", t / "o.kcc"], t / "tok" / "tokenizer.json"),
        ("corpus-build-source", ["corpus", "build", "--tokenizer", tok_dir / "good.json", "--prose",
                                 w("empty.txt", ""), "--code", code, "-o", t / "o2.kcc"], t / "empty.txt"),
        ("gguf", ["generate", "--model", w("bad.gguf", b"GGUF\x03\x00\x00\x00" + b"\xff" * 64), "--text", "hi"],
         t / "bad.gguf"),
        ("hf-config", ["generate", "--model", cfg_dir, "--ids", "1,2"], cfg_dir / "config.json"),
        # Sites reworded from free-form messages (tests/py/test_error_sites.py keeps every site shaped).
        ("importer-json-duplicate-key", ["import", "vllm", w("dup.json", '{"choices": [{"prompt_logprobs": [], '
                                                                      '"prompt_logprobs": []}]}'), "-g", g, "-o",
                                         t / "o.st"], t / "dup.json"),
        ("importer-json-depth", ["import", "vllm", w("deep.json", "[" * 100), "-g", g, "-o", t / "o.st"],
         t / "deep.json"),
        ("importer-json-syntax", ["import", "sglang", w("trunc.json", '[{"meta_info": {'), "-g", g, "-o", t / "o.st"],
         t / "trunc.json"),
        ("segments-syntax", ["record", "--from-logits", d / "ref.npy", "--tokens", d / "tokens.npy", "--segments",
                             w("segs2.json", '[{"name": '), "-o", t / "o.st"], t / "segs2.json"),
        ("shard-structure", ["merge", _resealed_shard(t, "a.part", "st.part", "fine_margin_sum", [])], t / "st.part"),
        ("shard-ranges", ["merge", _resealed_shard(t, "a.part", "rg.part", "ranges", [[0, 1500], [1000, 1200]])],
         t / "rg.part"),
        ("noise-variant", ["test", g, cand_e, "--noise", noise_bf16], noise_bf16),
        ("default-corpus-manifest", ["corpus", "build", "--tokenizer", tok_dir / "good.json", "-o", t / "o3.kcc"],
         t / "nocorpus" / "manifest.tsv"),
        # Usage errors name the flag: "FLAG: [FIELD: ]expected …".
        ("variant-grammar", ["generate", "--model", TINY, "--ids", "1,2", "--variant", "f32+bf16"], "--variant"),
        ("record-two-sources", ["record", "--from-logits", d / "ref.npy", "--model", TINY, "--corpus", g, "-o",
                                t / "o.st"], "--model"),
        ("record-positions-golden-mode", ["record", "--from-logits", d / "ref.npy", "--tokens", d / "tokens.npy",
                                          "--positions", "0:10", "-o", t / "o.st"], "--positions"),
        ("generate-chat-ids", ["generate", "--model", TINY, "--ids", "1,2", "--chat"], "--chat"),
    ]


def _resealed_shard(t, src, dst, key, value):
    """Shard `src` with run0's accumulator field `key` set to `value`, re-sealed: the structure checks, not the
    checksum, must refuse it. The checksum is the one the reader names as expected (the walk checks messages,
    not the checksum formula, which test_edited_shard_counts_are_refused covers)."""
    import re
    meta, tensors = load(t / src)
    r0 = json.loads(meta["run0"])
    r0[key] = value
    meta["run0"] = json.dumps(r0)
    save(t / dst, meta, tensors)
    p = run("merge", t / dst, rc=3)
    meta["checksum"] = re.search(r"metadata checksum: expected (xxh3:[0-9a-f]+)", p.stderr).group(1)
    save(t / dst, meta, tensors)
    return t / dst


def test_every_reader_refusal_names_file_field_and_expected(files, tmp_path):
    import re
    bad = []
    env = dict(os.environ, KC_CORPUS_DIR=str(tmp_path / "nocorpus"))
    for name, args, f in _bad_inputs(files, tmp_path):
        p = run(*args, timeout=60, env=env)
        err = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
        # "error: FILE[:LINE:COL]: FIELD: expected …"; a flag: "error: FLAG: [FIELD: ]expected …"
        field = r"(?:(?P<field>.+?): )?" if str(f).startswith("--") else r"(?P<field>.+?): "
        m = re.search(r"error: " + re.escape(str(f)) + r"(:\d+)*: " + field + r"expected \S", err)
        if p.returncode != 3 or not m:
            bad.append(f"{name}: exit {p.returncode}: {err}")
    assert not bad, "\n".join(bad)
