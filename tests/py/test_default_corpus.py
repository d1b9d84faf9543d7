"""The default corpus (docs/corpus.md, "Default sources"): every source pinned by size and SHA-256 in
data/corpus/manifest.tsv, prose from the Debian packages, code from data/corpus/code.

Checks, with the trained hybrid's tokenizer.json (any tokenizer would do):
- the manifest's hashes are the bytes: the shipped code files and the packages' texts hashed here (hashlib);
- `corpus build` twice gives the same file; `corpus show` prints the sources identity, which equals the one
  computed here from the manifest (sha256 over "domain sha256(text)" lines: the texts are valid UTF-8, so
  kerncheck's cleaning leaves them as they are); segment sources are manifest names, not machine paths;
- the quick preset keeps its shape: depths 256, 512 x 12 segments (prose, code alternating), decode_last 128;
- a changed source (a shipped file edited in a copy of the folder, KC_CORPUS_DIR) is refused with exit 3
  naming the file, the expected and the actual hash; a missing manifest too.
"""
import gzip
import json
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from safetensors import safe_open

from kc_env import kc

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "data" / "corpus"
DATA = Path(os.environ.get("KC_TEST_DATA", ROOT / "tests" / "data"))
TOK = DATA / "models" / "hybrid-tiny" / "tokenizer.json"


def manifest():
    rows = []
    for line in (CORPUS / "manifest.tsv").read_text().splitlines():
        if line and not line.startswith("#"):
            dom, name, size, sha, origin = line.split("\t")
            rows.append((dom, name, int(size), sha))
    return rows


def source_bytes(dom, name):
    if dom == "code":
        return (CORPUS / name).read_bytes()
    if name == "kjv":
        return subprocess.run(["bible", "gen1:1-rev22:21"], capture_output=True, check=True).stdout
    return gzip.decompress(Path("/usr/share/dictd/devil.dict.dz").read_bytes())


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if shutil.which("bible") is None or not TOK.exists():
        pytest.skip("needs bible-kjv, dict-devil (scripts/test.sh installs them) and tests/data/models/hybrid-tiny")
    d = tmp_path_factory.mktemp("default")
    for n in ("a", "b"):
        kc("corpus", "build", "--tokenizer", TOK, "-o", d / f"{n}.kcc")
    return d


def test_manifest_hashes_are_the_bytes(built):
    rows = manifest()
    assert [r[0] for r in rows[:2]] == ["prose", "prose"] and {r[0] for r in rows[2:]} == {"code"}
    for dom, name, size, sha in rows:
        b = source_bytes(dom, name)
        assert (len(b), hashlib.sha256(b).hexdigest()) == (size, sha), name


def test_build_is_reproducible_and_prints_the_sources_identity(built):
    assert (built / "a.kcc").read_bytes() == (built / "b.kcc").read_bytes()
    for dom, name, _, _ in manifest():
        source_bytes(dom, name).decode("utf-8")  # valid UTF-8: the cleaned text is the text
    want = "src-sha256:" + hashlib.sha256("".join(f"{d} {s}\n" for d, _, _, s in manifest()).encode()).hexdigest()
    show = kc("corpus", "show", built / "a.kcc").stdout
    assert f"sources {want}" in show
    with safe_open(str(built / "a.kcc"), "np") as f:
        md = f.metadata()
    assert md["sources"] == want
    segs = json.loads(md["segments"])
    names = {n for _, n, _, _ in manifest()}
    assert all(s["source"] in names for s in segs)
    assert [(s["domain"], s["depth"], s["decode_last"]) for s in segs] == \
        [(dom, d, 128) for d in (256, 512) for dom in ("prose", "code") * 6]


def test_decode_last_default_with_other_depths(built, tmp_path):
    """--depths without --decode-last: the preset's 128, but at most half the shallowest depth (never refused
    for being the default); an explicit value is used as given."""
    def shape(*args):
        kc("corpus", "build", "--tokenizer", TOK, "--segments-per-depth", "1", *args, "-o", tmp_path / "c.kcc")
        with safe_open(str(tmp_path / "c.kcc"), "np") as f:
            return [(s["depth"], s["decode_last"]) for s in json.loads(f.metadata()["segments"])]
    assert shape("--depths", "64,1024") == [(64, 32), (1024, 32)]
    assert shape("--depths", "300") == [(300, 128)]
    assert shape("--depths", "64", "--decode-last", "63") == [(64, 63)]


def test_changed_source_is_refused(built, tmp_path):
    copy = tmp_path / "corpus"
    shutil.copytree(CORPUS, copy)
    f = copy / "code" / "python" / "heapq.py"
    f.write_bytes(f.read_bytes().replace(b"heap", b"heaq", 1))
    r = kc("corpus", "build", "--tokenizer", TOK, "-o", tmp_path / "c.kcc", env={"KC_CORPUS_DIR": str(copy)},
           check=False)
    sha = next(s for _, n, _, s in manifest() if n == "code/python/heapq.py")
    assert r.returncode == 3, r.stderr
    assert "code/python/heapq.py" in r.stderr and sha in r.stderr
    assert hashlib.sha256(f.read_bytes()).hexdigest() in r.stderr
    assert not (tmp_path / "c.kcc").exists()
    (copy / "manifest.tsv").unlink()
    r = kc("corpus", "build", "--tokenizer", TOK, "-o", tmp_path / "c.kcc", env={"KC_CORPUS_DIR": str(copy)},
           check=False)
    assert r.returncode == 3 and "manifest.tsv" in r.stderr and "KC_CORPUS_DIR" in r.stderr, r.stderr
