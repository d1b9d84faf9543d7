"""record --server against a hostile server, a hostile disk and a second recording (docs/engines.md).

The servers are stdlib HTTP servers on 127.0.0.1 (engine_replay.py: responses recorded from a real vLLM,
edited here). Each case gives exit 3 naming the URL, segment and field, or the file an honest run writes:
a response that never ends or trickles; rows no distribution has (an id twice, an id outside the
vocabulary, log-probs above 0, a mass of 9); an echo of the sent ids that is truncated or extended (not
only different); a checkpoint that was edited, holds a response no server may send, belongs to another
server, variant or model, or carries no checksum; a second recording onto the same output; a model name
with terminal escapes. Checkpoint seals are recomputed here from docs/golden-format.md (XXH3-64 through the
system libxxhash), independently of kerncheck.
"""
import ctypes
import json
import os
import struct
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

from engine_replay import LocalServer, ReplayServer, load_exchanges, port_of, same_tensors, send_json
from kc_env import KC_BIN, kc

DATA = Path(os.environ.get("KC_TEST_DATA", Path(__file__).resolve().parents[1] / "data")) / "server"
GOLDEN = DATA / "golden.safetensors"
CORPUS = DATA / "corpus.kcc"
EX = load_exchanges(DATA / "vllm_f32.jsonl")
with safe_open(str(GOLDEN), "np") as _f:
    VOCAB = int(_f.metadata()["vocab"])

_xxh = ctypes.CDLL("libxxhash.so.0")
_xxh.XXH3_64bits.restype = ctypes.c_uint64
_xxh.XXH3_64bits.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_ST_CODE = {np.dtype(np.uint8): "U8", np.dtype(np.int64): "I64"}


def record(url, out, *extra, env=None):
    return kc("record", "--server", url, "--golden", GOLDEN, "--top-logprobs", "8", "--concurrency", "1",
              "-o", out, *extra, env=env, check=False)


def refused(r, *parts):
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
    for p in parts:
        assert str(p) in r.stderr, (p, r.stderr)


def edit(fn):
    def f(text):
        doc = json.loads(text)
        fn(doc)
        return json.dumps(doc)
    return f


def on(kind, body):
    """A fault for ReplayServer: every `kind` ("prefill"/"decode") request gets `body` (a text → text)."""
    return lambda key, n: ("body", body) if f" {kind} " in key else None


def sealed(meta, tensors):
    """The checksum of a sealed safetensors file (docs/golden-format.md, shards and checkpoints)."""
    def put(b):
        return struct.pack("<Q", len(b)) + b
    m = b""
    for k in sorted(meta):
        if k != "checksum":
            m += put(k.encode()) + put(meta[k].encode())
    for name in sorted(tensors):
        t = np.ascontiguousarray(tensors[name])
        m += put(name.encode()) + put(_ST_CODE[t.dtype].encode())
        m += put(("[" + ", ".join(str(s) for s in t.shape) + "]").encode()) + put(t.tobytes())
    return "xxh3:%016x" % _xxh.XXH3_64bits(m, len(m))


def read_checkpoint(path):
    with safe_open(str(path), "np") as f:
        meta = dict(f.metadata())
        t = {k: f.get_tensor(k) for k in f.keys()}
    data, ends = t["responses"].tobytes(), t["response_ends"].tolist()
    return meta, [data[a:b].decode() for a, b in zip([0] + ends[:-1], ends)]


def write_checkpoint(path, meta, responses, reseal=True):
    data = b"".join(r.encode() for r in responses)
    ends = np.cumsum([len(r.encode()) for r in responses]).astype(np.int64)
    tensors = {"responses": np.frombuffer(data, np.uint8).copy(), "response_ends": ends}
    meta = dict(meta)
    if reseal:
        meta["checksum"] = sealed(meta, tensors)
    save_file(tensors, str(path), meta)


def interrupted(url, out, *extra):
    """A recording stopped after its first segment: OUT.partial holds segment 0's checkpoint."""
    r = record(url, out, *extra, env={"KC_RECORD_STOP_AFTER": "1"})
    assert r.returncode == 3 and "interrupted" in r.stderr, r.stderr
    return Path(f"{out}.partial") / "seg-00000.safetensors"


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The file an honest, uninterrupted run writes (prefill and both phases)."""
    d = tmp_path_factory.mktemp("ref")
    with ReplayServer(EX) as srv:
        for phase in ("prefill", "both"):
            assert record(srv.url, d / f"{phase}.st", "--phase", phase).returncode == 0
    return d


# ---- responses without end --------------------------------------------------------------------------------
class EndlessServer(LocalServer):
    """Answers every request with 200 and a body that never ends: `rate` None streams as fast as it can
    (no Content-Length), a number sends one byte every `rate` seconds; `length` declares a Content-Length."""

    def __init__(self, rate=None, length=None):
        srv = self
        self.rate, self.length = rate, length

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *a):
                pass

            def do_GET(self):
                if self.path == "/v1/models":
                    return send_json(self, 200, json.dumps({"data": [{"id": "m"}]}))
                self._endless()

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self._endless()

            def _endless(self):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if srv.length:
                    self.send_header("Content-Length", str(srv.length))
                self.end_headers()
                chunk = b'{"choices": [' + b" " * 65536
                try:
                    while True:
                        if srv.rate:
                            self.wfile.write(b" ")
                            self.wfile.flush()
                            time.sleep(srv.rate)
                        else:
                            self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError, OSError):
                    pass

        self.listen(Handler)


@pytest.mark.parametrize("length", [None, 10 << 30])
def test_an_endless_response_stops_at_the_size_limit(tmp_path, length):
    t0 = time.monotonic()
    with EndlessServer(length=length) as srv:
        r = record(srv.url, tmp_path / "c.st", "--max-response-mb", "2", "--retries", "2")
    refused(r, srv.url + "/v1/completions", "POST response size: expected at most 2 MiB",
            "--max-response-mb")
    assert time.monotonic() - t0 < 60  # not retried: the same request gets the same answer
    assert not (tmp_path / "c.st").exists()


def test_the_size_limit_default_is_a_bound(tmp_path):
    """Without the flag, an endless stream ends at the default (256 MiB), not at the machine's memory."""
    with EndlessServer() as srv:
        r = record(srv.url, tmp_path / "c.st", "--retries", "0")
    refused(r, "expected at most 256 MiB")


def test_a_trickling_response_ends_at_the_timeout(tmp_path):
    t0 = time.monotonic()
    with EndlessServer(rate=0.2) as srv:
        r = record(srv.url, tmp_path / "c.st", "--timeout", "2", "--retries", "1")
    refused(r, srv.url + "/v1/completions", "Timeout")
    assert time.monotonic() - t0 < 30  # two tries of 2 s and a back-off of 1 s, not the trickle's pace


# ---- rows no distribution has -----------------------------------------------------------------------------
def first_other(row, token):
    return next(k for k in row if int(k) != token)


def prefill_row(fn, d=3):
    """Edits prompt_logprobs[d] of every prefill response: fn(row, prompt token at d)."""
    def f(doc):
        ch = doc["choices"][0]
        fn(ch["prompt_logprobs"][d], ch["prompt_token_ids"][d])
    return edit(f)


def decode_top(fn):
    return edit(lambda doc: fn(doc["choices"][0]["logprobs"]["top_logprobs"][0]))


def dup_prefill_id(row, token):
    k = first_other(row, token)
    row["0" + k] = dict(row[k], logprob=row[k]["logprob"] - 1)


def id_outside_vocab(row, token):
    k = first_other(row, token)
    row[str(VOCAB)] = row.pop(k)


def mass_of_nine(row, token):
    for v in row.values():
        v["logprob"] = -0.01


def positive_logprob(top):
    top[next(iter(top))] = 0.5


def dup_decode_id(top):
    k = [k for k in top][1]
    top["token_id:0" + k.split(":")[1]] = top[k] - 1


def dup_decode_key(text):
    """The same key twice in one JSON object (json.dumps cannot write it: spliced into the text)."""
    doc = json.loads(text)
    top = doc["choices"][0]["logprobs"]["top_logprobs"][0]
    k = [k for k in top][1]
    text = json.dumps(doc)
    inner = json.dumps(top)
    return text.replace(inner, inner[:-1] + f', "{k}": -0.5}}')


@pytest.mark.parametrize("kind,body,message", [
    ("prefill", prefill_row(dup_prefill_id), "listed once"),
    ("prefill", prefill_row(id_outside_vocab), f"an id in [0, {VOCAB})"),
    ("prefill", prefill_row(mass_of_nine), "probability mass: expected at most 1 (+0.001)"),
    ("decode", decode_top(dup_decode_id), "listed once"),
    ("decode", dup_decode_key, "each key once per JSON object"),
    ("decode", decode_top(positive_logprob), "a log-prob ≤ 0"),
])
def test_impossible_rows_are_refused_at_the_response(tmp_path, kind, body, message):
    with ReplayServer(EX, fault=on(kind, body)) as srv:
        r = record(srv.url, tmp_path / "c.st", "--phase", "both", "--retries", "0")
    refused(r, f"{srv.url} segment 0 ({kind}", message)
    assert not (tmp_path / "c.st").exists()


def test_a_response_nested_without_end_is_refused(tmp_path):
    deep = '{"choices": ' + "[" * 100000 + "]" * 100000 + "}"
    with ReplayServer(EX, fault=on("prefill", lambda text: deep)) as srv:
        r = record(srv.url, tmp_path / "c.st", "--phase", "prefill", "--retries", "0")
    refused(r, f"{srv.url} segment 0 (prefill)", "JSON nested at most 64 levels")


def test_a_number_beyond_a_double_is_refused(tmp_path):
    body = lambda text: '{"x": 1e999, ' + text.lstrip()[1:]  # the parser cannot hold it: refused, not a crash
    with ReplayServer(EX, fault=on("prefill", body)) as srv:
        r = record(srv.url, tmp_path / "c.st", "--phase", "prefill", "--retries", "0")
    refused(r, f"{srv.url} segment 0 (prefill)", "a complete JSON document")


def test_the_position_is_named(tmp_path):
    with ReplayServer(EX, fault=on("prefill", prefill_row(mass_of_nine, d=5))) as srv:
        r = record(srv.url, tmp_path / "c.st", "--phase", "prefill", "--retries", "0")
    refused(r, f"{srv.url} segment 0 (prefill): position 4 (depth 5): probability mass")


# ---- the echo of the sent ids: different, truncated or extended ---------------------------------------------
def prefill_echo(fn):
    return edit(lambda doc: fn(doc["choices"][0]["prompt_token_ids"]))


def decode_echo(fn):
    return edit(lambda doc: fn(doc["choices"][0]["prompt_token_ids"]))


def extend(ids):
    ids.append(ids[-1])


def truncate(ids):
    ids.pop()


def change(ids):
    ids[3] += 1


@pytest.mark.parametrize("kind", ["prefill", "decode"])
@pytest.mark.parametrize("fn,field", [(change, "prompt_token_ids[3]"), (truncate, "got end after"),
                                      (extend, "(end at index")])
def test_an_echo_that_is_not_the_sent_ids_is_refused(tmp_path, kind, fn, field):
    body = prefill_echo(fn) if kind == "prefill" else decode_echo(fn)
    with ReplayServer(EX, fault=on(kind, body)) as srv:
        r = record(srv.url, tmp_path / "c.st", "--phase", "both", "--retries", "0")
    refused(r, f"{srv.url} segment 0 ({kind}", "prompt_token_ids", field)
    assert not (tmp_path / "c.st").exists()


# ---- checkpoints ----------------------------------------------------------------------------------------------
def test_an_edited_checkpoint_is_not_used(tmp_path, reference):
    """One log-prob digit changed on disk: the seal no longer matches, the segment is asked for again."""
    with ReplayServer(EX) as srv:
        ck = interrupted(srv.url, tmp_path / "c.st", "--phase", "prefill")
        [seg] = [p for p in ck.parent.iterdir() if p.name.startswith("seg-00000")]
        b = bytearray(seg.read_bytes())
        at = b.index(b'"logprob":-') + len(b'"logprob":-')
        b[at] = ord("9") if b[at] != ord("9") else ord("8")
        seg.write_bytes(bytes(b))
        r = record(srv.url, tmp_path / "c.st", "--phase", "prefill")
    assert r.returncode == 0, r.stderr
    assert "is unusable" in r.stderr and "segment 0 is requested again" in r.stderr
    same_tensors(tmp_path / "c.st", reference / "prefill.st")


@pytest.mark.parametrize("responses", [['{"choices":[]}'], ['{"choices":[{}]}'], ["[]"], [], ["{}", "{}"]])
def test_a_sealed_checkpoint_is_read_like_a_response(tmp_path, reference, responses):
    """A checkpoint with a valid seal but a response no server may send: refused like that response
    (discarded, asked for again), never a crash."""
    with ReplayServer(EX) as srv:
        ck = interrupted(srv.url, tmp_path / "c.st", "--phase", "prefill")
        meta, _ = read_checkpoint(ck)
        write_checkpoint(ck, meta, responses)
        r = record(srv.url, tmp_path / "c.st", "--phase", "prefill")
    assert r.returncode == 0, r.stderr
    assert "segment 0 is requested again" in r.stderr
    same_tensors(tmp_path / "c.st", reference / "prefill.st")


def test_a_checkpoint_without_checksum_is_refused_like_a_wrong_one(tmp_path, reference):
    with ReplayServer(EX) as srv:
        ck = interrupted(srv.url, tmp_path / "c.st", "--phase", "prefill")
        meta, responses = read_checkpoint(ck)
        doc = json.loads(responses[0])
        row = doc["choices"][0]["prompt_logprobs"][2]
        for v in row.values():
            v["logprob"] -= 0.25  # still a distribution: only the seal can tell
        meta.pop("checksum")
        write_checkpoint(ck, meta, [json.dumps(doc)], reseal=False)
        r = record(srv.url, tmp_path / "c.st", "--phase", "prefill")
    assert r.returncode == 0, r.stderr
    assert "metadata checksum: expected xxh3:" in r.stderr and "got nothing" in r.stderr
    same_tensors(tmp_path / "c.st", reference / "prefill.st")


def shifted(ex, delta):
    """Another server's answers: every log-prob `delta` lower (still distributions)."""
    out = {}
    for key, text in ex.items():
        doc = json.loads(text)
        for ch in doc.get("choices", []):
            for row in ch.get("prompt_logprobs") or []:
                for v in (row or {}).values():
                    v["logprob"] -= delta
            lp = ch.get("logprobs")
            if lp:
                top = lp["top_logprobs"][0]
                for k in top:
                    top[k] -= delta
        out[key] = json.dumps(doc)
    return out


@pytest.mark.parametrize("change", ["server", "variant", "served-model"])
def test_checkpoints_of_another_run_are_not_resumed(tmp_path, change):
    """Resuming the same -o against another server, with another variant or another served model: every
    row comes from the second run and the file carries its label."""
    other = shifted(EX, 0.125)
    out = tmp_path / "c.st"
    first = ["--variant", "bf16"]
    second = ["--variant", "bf16-other"] if change == "variant" else first
    if change == "served-model":
        first, second = first + ["--served-model", "a"], second + ["--served-model", "b"]
    with ReplayServer(EX) as a:
        interrupted(a.url, out, "--phase", "prefill", *first)
        port = port_of(a.url)
    with ReplayServer(other, port=0 if change == "server" else port) as b:
        r = record(b.url, out, "--phase", "prefill", *second)
        assert r.returncode == 0, r.stderr
        assert record(b.url, tmp_path / "fresh.st", "--phase", "prefill", *second).returncode == 0
    same_tensors(out, tmp_path / "fresh.st")
    with safe_open(str(out), "np") as f:
        assert f.metadata()["variant"] == second[1]


def test_a_second_recording_onto_the_same_output_is_refused(tmp_path, reference):
    hold = threading.Event()  # the first recording waits in its first prefill until the second was refused

    def fault(key, n):
        if " prefill " in key:
            hold.wait(60)
        return None

    with ReplayServer(EX, fault=fault) as srv:
        first = subprocess.Popen([KC_BIN, "record", "--server", srv.url, "--golden", str(GOLDEN), "--top-logprobs",
                                  "8", "--concurrency", "1", "--phase", "prefill", "-o", str(tmp_path / "c.st")],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lock = tmp_path / "c.st.partial" / "lock"
        for _ in range(300):
            if lock.exists() and len(srv.keys) > 1:
                break
            time.sleep(0.05)
        r = record(srv.url, tmp_path / "c.st", "--phase", "prefill")
        hold.set()
        out, err = first.communicate(timeout=60)
    refused(r, str(tmp_path / "c.st"), "another kerncheck record")
    assert first.returncode == 0, err
    same_tensors(tmp_path / "c.st", reference / "prefill.st")
    assert not (tmp_path / "c.st.partial").exists()


# ---- terminal escapes from the server -----------------------------------------------------------------------
def test_a_model_name_with_terminal_escapes_is_printed_escaped(tmp_path):
    name = "evil\x1b]0;owned\x07\x1b[2J"
    ex = dict(EX)
    ex["/v1/models"] = json.dumps({"data": [{"id": name}]})
    with ReplayServer(ex) as srv:
        r = record(srv.url, tmp_path / "c.st", "--phase", "prefill")
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout + r.stderr and "\x07" not in r.stdout + r.stderr
    assert "evil\\x1b]0;owned\\x07\\x1b[2J" in r.stdout
