"""kerncheck record --server --api sglang (docs/engines.md) against sglang_server.py: a local HTTP server
that speaks SGLang's native POST /generate protocol as SGLang's source defines it, with real numbers
(kerncheck's f32 engine on the SmolLM2 GGUF, tests/kc_llama_logits), not a real SGLang (it needs CUDA).

Checks: the candidate's values are f32(log_softmax) of exactly the logits the server computed for each
request (prefill rows from the prefill request, decode rows from the decode steps, which the server
computes as one decode step over its cached prefix), with full coverage (the golden's ids asked for by
name in token_ids_logprob); the f32 candidate PASSes the f32 golden; golden mode's rows are the top-k of
the server's rows; the decode steps' cached-token counts are reported; HTTP errors, truncated JSON, a
wrong echo and missing meta_info fields give exit 3, name the field and write nothing; HTTP 500 is
retried; an interrupted run resumes from OUT.partial without asking again; --repeat N writes OUT.1 … OUT.N
with their repetition in the metadata (SGLang and vLLM), and a rerun after a failure keeps the repetitions
already written; --prefill-window W asks for a segment's prefill rows W depths per request.
"""
import json
import os
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file

from engine_replay import ReplayServer, load_exchanges, port_of, same_tensors
from kc_env import kc, log_softmax, smollm2_path
from sglang_server import SglangServer

DATA = Path(os.environ.get("KC_TEST_DATA", Path(__file__).resolve().parents[1] / "data")) / "server"
GOLDEN = DATA / "golden.safetensors"
CORPUS = DATA / "corpus.kcc"
BUILD = Path(os.environ.get("KC_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
TOOL = BUILD / "tests" / "kc_llama_logits"
MODEL = smollm2_path()

pytestmark = pytest.mark.skipif(not MODEL.exists() or not TOOL.exists(),
                                reason=f"needs the SmolLM2 GGUF ({MODEL}) and {TOOL}")


def server(fault=None, port=0):
    return SglangServer(TOOL, MODEL, fault=fault, port=port)


def record(url, out, *extra):
    return kc("record", "--server", url, "--api", "sglang", "--golden", GOLDEN, "--top-logprobs", "8",
              "--concurrency", "1", "-o", out, *extra, check=False)


def windows():
    return [json.loads(line)["prompt_token_ids"]
            for line in kc("corpus", "prompts", GOLDEN, "--jsonl").stdout.splitlines()]


def row_of(srv, prompt, d, prefill):
    """f32 log-probs at depth d as the server computed them for the prefill (or decode) request whose prompt
    was `prompt` (a window's prompt can be a decode step's too: t_0 … t_b for both)."""
    return log_softmax(srv.rows[(tuple(prompt), prefill)][d - 1]).astype(np.float32)


def metadata(path):
    with safe_open(str(path), "np") as f:
        return f.metadata()


def prefill_windows(g, ws, phase, w):
    """Per segment, the [a, b] depth windows record --server asks SGLang for (w None: the default 64)."""
    w = w or 64
    out = []
    for s, seg in enumerate(ws):
        last = len(seg) - 1 if phase == "prefill" else int(((g["segment"] == s) & (g["phase"] == 0)).sum())
        out.append([(a, min(last, a + w - 1)) for a in range(1, last + 1, w)])
    return out


@pytest.mark.parametrize("phase,window", [("prefill", None), ("both", None), ("prefill", 5), ("both", 7)])
def test_candidate_is_log_softmax_of_the_servers_logits(tmp_path, phase, window):
    """With --prefill-window W each segment's prefill is asked W depths at a time: the prompt up to the
    window's last depth b, logprob_start_len a − 1; the server's cache serves the first a − 1 tokens of every
    window after the first, and no request names more than (k+1)·W ids."""
    with server() as srv:
        r = record(srv.url, tmp_path / "c.st", "--phase", phase,
                   *(["--prefill-window", str(window)] if window else []))
        asked = list(srv.requests)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "c.st.partial").exists()
    assert "covered 100.00%" in r.stdout and "fully covered positions 100.00%" in r.stdout
    g, c = load_file(str(GOLDEN)), load_file(str(tmp_path / "c.st"))
    ws = windows()
    wins = prefill_windows(g, ws, phase, window)
    if window:
        assert max(len(x) for x in wins) > 1  # the windows are exercised
    pre = [(kind, ids, req, t) for kind, ids, req, t in asked if kind == "prefill"]
    assert [(len(ids) - 1, req["logprob_start_len"] + 1) for _, ids, req, _ in pre] == \
        [(b, a) for x in wins for a, b in x]
    k = int(g["top_ids"].shape[1])
    for _, ids, req, t in pre:
        a, b = req["logprob_start_len"] + 1, len(ids) - 1
        assert len(req["token_ids_logprob"]) <= (k + 1) * (b - a + 1)
        assert json.loads(t)["meta_info"]["cached_tokens"] == a - 1  # the earlier windows' tokens, from the cache
    n_decode = sum(kind == "decode" for kind, *_ in asked)
    want_decode = 0 if phase == "prefill" else int((g["phase"] == 1).sum())
    assert n_decode == want_decode
    # Each request asked for the golden's ids by name (SGLang's token_ids_logprob).
    for kind, ids, req, _ in asked:
        assert req["top_logprobs_num"] == 8 and req["return_logprob"] is True
        assert req["sampling_params"] == {"max_new_tokens": 1, "temperature": 0}
        assert ("logprob_start_len" in req) == (kind == "prefill")
    for n in range(len(g["token"])):
        s, d = int(g["segment"][n]), int(g["depth"][n])
        decoded = phase == "both" and g["phase"][n] == 1
        prompt = ws[s][:d] if decoded else ws[s][:next(b for a, b in wins[s] if a <= d <= b) + 1]
        lp = row_of(srv, prompt, d, not decoded)
        np.testing.assert_array_equal(c["logprobs_at_ref"][n], lp[g["top_ids"][n]], err_msg=f"position {n}")
        assert c["token_logprob"][n] == lp[g["token"][n]]
        assert "covered" not in c or c["covered"][n].all()  # no "covered" tensor: every id covered
        if decoded:  # the decode step's request: prompt t_0 … t_{d-1}, t_d and the golden's ids by name
            req = next(q for kind, ids, q, _ in asked if kind == "decode" and ids == ws[s][:d])
            assert set(req["token_ids_logprob"]) == {int(g["token"][n])} | set(g["top_ids"][n].tolist())
    if phase == "both":
        # Decode steps follow their segment's prefill: every prompt token but the last comes from the cache.
        dec = [(len(ids), json.loads(t)["meta_info"]["cached_tokens"]) for kind, ids, _, t in asked if kind == "decode"]
        assert all(cached == m - 1 for m, cached in dec)
        total, cached = sum(m for m, _ in dec), sum(cd for _, cd in dec)
        assert f"decode steps: {len(dec)} requests, cached prompt tokens {cached} of {total}" in r.stdout
    # The f32 candidate from the f32 engine PASSes the f32 golden at f32 level (its own floor, twice: only
    # the judge's fixed limits apply; 96 positions, so --min-positions).
    t = kc("test", GOLDEN, tmp_path / "c.st", "--noise", tmp_path / "c.st", "--noise", tmp_path / "c.st",
           "--min-positions", "90", "--json", tmp_path / "r.json", check=False)
    rep = json.loads((tmp_path / "r.json").read_text())
    assert t.returncode == 0 and rep["verdict"] == "PASS", (t.stdout, t.stderr)
    assert rep["kl"]["max"] < 1e-6 and rep["flips"]["count"] == 0


def test_golden_mode_rows_are_the_servers_top_k(tmp_path):
    with server() as srv:
        r = kc("record", "--server", srv.url, "--api", "sglang", "--corpus", CORPUS, "--top-logprobs", "8",
               "-k", "8", "--phase", "both", "--concurrency", "2", "-o", tmp_path / "g.st", check=False)
        assert r.returncode == 0, r.stderr
    g = load_file(str(tmp_path / "g.st"))
    marks = load_file(str(GOLDEN))["phase"]
    np.testing.assert_array_equal(g["phase"], marks)
    n = 0
    for s, w in enumerate(windows()):
        last = int(((g["segment"] == s) & (marks == 0)).sum())  # the prefill request's last depth (one window)
        for d in range(1, len(w)):
            lp = row_of(srv, w[:d], d, False) if marks[n] == 1 else row_of(srv, w[:last + 1], d, True)
            top = np.argsort(-lp, kind="stable")[:8]  # log-prob descending, ties by lower id
            assert g["top_ids"][n].tolist() == top.tolist(), n
            np.testing.assert_array_equal(g["top_logprobs"][n], lp[top])
            assert g["token"][n] == w[d] and g["token_logprob"][n] == lp[w[d]]
            mass = np.exp(lp[top].astype(np.float64)).sum()
            assert abs(float(g["other_logprob"][n]) - np.log(max(1 - mass, 1e-30))) < 1e-5
            n += 1
    assert n == len(g["token"])
    assert metadata(tmp_path / "g.st")["model"] == "sglang:SmolLM2-135M-Instruct"


def cut(text):
    return text[: len(text) // 2]


def edit(fn):
    def f(text):
        doc = json.loads(text)
        fn(doc)
        return json.dumps(doc)
    return f


def wrong_echo(doc):
    doc["meta_info"]["input_token_logprobs"][3][1] += 1


def wrong_prompt_ids(doc):
    doc["prompt_token_ids"][2] += 1


def drop(key):
    return lambda doc: doc["meta_info"].pop(key)


def drop_named(doc):
    doc["meta_info"]["output_token_ids_logprobs"] = [[]]


@pytest.mark.parametrize("fault,kind,message", [
    (("status", 500), "prefill", "HTTP 500"),
    (("body", cut), "prefill", "a complete JSON document"),
    (("body", edit(wrong_echo)), "prefill", "meta_info.input_token_logprobs[3][1]"),
    (("body", edit(wrong_prompt_ids)), "prefill", "prompt_token_ids[2]"),
    (("body", edit(drop("input_token_logprobs"))), "prefill", "meta_info.input_token_logprobs"),
    (("body", edit(drop("prompt_tokens"))), "prefill", "meta_info.prompt_tokens"),
    (("body", edit(lambda doc: doc.pop("meta_info"))), "prefill", "meta_info"),
    (("body", edit(drop("cached_tokens"))), "decode", "meta_info.cached_tokens"),
    (("body", edit(drop("output_token_logprobs"))), "decode", "meta_info.output_token_logprobs"),
    (("body", edit(drop_named)), "decode", "an entry for the corpus token"),
])
def test_hostile_server_exit_3_and_nothing_written(tmp_path, fault, kind, message):
    with server(fault=lambda k, n: fault if k == kind else None) as srv:
        r = record(srv.url, tmp_path / "c.st", "--phase", "both", "--retries", "0")
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert message in r.stderr and "rerun the same command to resume" in r.stderr, r.stderr
    assert not (tmp_path / "c.st").exists()


def test_http_500_is_retried(tmp_path):
    with server(fault=lambda k, n: ("status", 500) if n in (1, 2) else None) as srv:
        r = record(srv.url, tmp_path / "c.st", "--retries", "2", "--phase", "prefill")
    assert r.returncode == 0, r.stderr
    with server() as srv:
        assert record(srv.url, tmp_path / "ref.st", "--phase", "prefill").returncode == 0
    same_tensors(tmp_path / "c.st", tmp_path / "ref.st")


def test_interrupted_run_resumes_without_asking_again(tmp_path):
    third = windows()[2]
    with server(fault=lambda k, n: ("status", 503) if n == 3 else None) as srv:
        r = record(srv.url, tmp_path / "c.st", "--retries", "0", "--phase", "prefill")
    assert r.returncode == 3 and "HTTP 503" in r.stderr and not (tmp_path / "c.st").exists()
    assert sorted(os.listdir(tmp_path / "c.st.partial")) == ["lock", "manifest.json", "seg-00000.safetensors",
                                                           "seg-00001.safetensors"]
    with server(port=port_of(srv.url)) as srv:
        assert record(srv.url, tmp_path / "c.st", "--phase", "prefill").returncode == 0
        assert [ids for _, ids, _, _ in srv.requests] == [third, windows()[3]]  # segments 0, 1: checkpoints
    with server() as srv:
        assert record(srv.url, tmp_path / "ref.st", "--phase", "prefill").returncode == 0
    same_tensors(tmp_path / "c.st", tmp_path / "ref.st")
    assert not (tmp_path / "c.st.partial").exists()


def test_repeat_writes_numbered_runs(tmp_path):
    with server() as srv:
        r = record(srv.url, tmp_path / "c.st", "--phase", "prefill", "--repeat", "2")
        n_requests = len(srv.requests)
    assert r.returncode == 0, r.stderr
    assert n_requests == 2 * len(windows())  # each repetition asks the server again
    assert not (tmp_path / "c.st").exists()
    for i in (1, 2):
        md = metadata(tmp_path / f"c.{i}.st")
        assert (md["repetition"], md["repetitions"]) == (str(i), "2") and md["engine"] == "sglang"
    same_tensors(tmp_path / "c.1.st", tmp_path / "c.2.st")  # the server is deterministic
    assert "repetition 2 of 2" in r.stdout
    # Golden mode has no repetitions.
    r = kc("record", "--server", "http://127.0.0.1:9", "--api", "sglang", "--corpus", CORPUS, "--repeat", "2",
           "-o", tmp_path / "g.st", check=False)
    assert r.returncode == 3 and "--repeat" in r.stderr


def test_repeat_resumes_after_a_failure(tmp_path):
    """A failure in repetition 2 keeps repetition 1: the rerun asks only for what repetition 2 still lacks."""
    w = len(windows())
    with server(fault=lambda k, n: ("status", 503) if n == w + 2 else None) as srv:
        r = record(srv.url, tmp_path / "c.st", "--phase", "prefill", "--repeat", "2", "--retries", "0")
    assert r.returncode == 3 and "HTTP 503" in r.stderr
    assert (tmp_path / "c.1.st").exists() and not (tmp_path / "c.2.st").exists()
    first = (tmp_path / "c.1.st").read_bytes()
    with server(port=port_of(srv.url)) as srv:
        r = record(srv.url, tmp_path / "c.st", "--phase", "prefill", "--repeat", "2")
        n_requests = len(srv.requests)
    assert r.returncode == 0, r.stderr
    assert "already recorded by this command (repetition 1 of 2); kept" in r.stdout
    assert n_requests == w - 1  # repetition 2's segment 0 came from its checkpoint
    assert (tmp_path / "c.1.st").read_bytes() == first
    same_tensors(tmp_path / "c.1.st", tmp_path / "c.2.st")
    # Another request (here the phase) is another recording: both repetitions are asked for again.
    with server(port=port_of(srv.url)) as srv:
        r = record(srv.url, tmp_path / "c.st", "--phase", "both", "--repeat", "2")
        assert r.returncode == 0, r.stderr
        assert "kept" not in r.stdout and sum(kind == "prefill" for kind, *_ in srv.requests) == 2 * w
    assert json.loads(metadata(tmp_path / "c.1.st")["server_record"])["phase"] == "both"


def test_repeat_with_the_vllm_fixtures(tmp_path):
    ex = load_exchanges(DATA / "vllm_f32.jsonl")
    with ReplayServer(ex) as srv:
        r = kc("record", "--server", srv.url, "--golden", GOLDEN, "--top-logprobs", "8", "--phase", "both",
               "--repeat", "3", "-o", tmp_path / "v.safetensors", check=False)
        assert r.returncode == 0, r.stderr
        assert kc("record", "--server", srv.url, "--golden", GOLDEN, "--top-logprobs", "8", "--phase", "both",
                  "-o", tmp_path / "one.safetensors", check=False).returncode == 0
    assert "repetition" not in metadata(tmp_path / "one.safetensors")
    for i in (1, 2, 3):
        f = tmp_path / f"v.{i}.safetensors"
        assert metadata(f)["repetition"] == str(i) and metadata(f)["repetitions"] == "3"
        same_tensors(f, tmp_path / "one.safetensors")


def test_prefill_windows_are_checked_and_only_for_sglang(tmp_path):
    """A server that ignores logprob_start_len (its rows start elsewhere than the window asked for) is
    refused, naming the window; --prefill-window is an SGLang option (vLLM's rows come one request per
    segment) and must be ≥ 0."""
    def from_zero(doc):  # rows from prompt token 0, as if logprob_start_len were 0
        for key in ("input_token_logprobs", "input_top_logprobs", "input_token_ids_logprobs"):
            doc["meta_info"][key] = doc["meta_info"][key][:1] * 3 + doc["meta_info"][key][1:]
    with server(fault=lambda k, n: ("body", edit(from_zero)) if k == "prefill" and n == 2 else None) as srv:
        r = record(srv.url, tmp_path / "c.st", "--phase", "prefill", "--prefill-window", "5", "--retries", "0")
    assert r.returncode == 3 and "(prefill depths 6…10)" in r.stderr, r.stderr
    assert "meta_info.input_token_logprobs: expected 6 entries from prompt token 5 (logprob_start_len 5)" in r.stderr
    assert not (tmp_path / "c.st").exists()
    for api, w, message in (("vllm", "5", "--prefill-window: W: expected only with --api sglang"),
                            ("sglang", "-2", "--prefill-window: W: expected 0 (the whole segment at once)")):
        r = kc("record", "--server", "http://127.0.0.1:9", "--api", api, "--golden", GOLDEN, "--prefill-window", w,
               "-o", tmp_path / "x.st", check=False)
        assert r.returncode == 3 and message in r.stderr, r.stderr
