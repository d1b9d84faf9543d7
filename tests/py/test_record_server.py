"""kerncheck record --server (docs/engines.md) against responses recorded from a real vLLM CPU server
(tests/data/server/, re-recorded by tests/tools/record_server_fixtures.sh), replayed by a local HTTP
server (engine_replay.py) on 127.0.0.1, with and without injected faults.

Checks: the prefill candidate is the file `kerncheck import vllm` makes from the same responses; decode
positions hold the decode steps' values (read here from the JSON) and agree with prefill, with `--phase
both` (the golden's decode positions) and `--phase decode` (every position, no prefill request); golden
mode's rows are the top-k of the engine's rows (numpy) for each phase, decode rows from the decode steps; HTTP 500, truncated JSON, a wrong token echo, a wrong
forced token and a hang each give exit 3, name the problem and write nothing; an interrupted run resumes
without asking again for the finished segments and gives the same file; transient errors are retried;
corpus prompts gives the corpus windows.
"""
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from engine_replay import ReplayServer, load_exchanges, port_of, same_tensors
from kc_env import kc

DATA = Path(os.environ.get("KC_TEST_DATA", Path(__file__).resolve().parents[1] / "data")) / "server"
GOLDEN = DATA / "golden.safetensors"
CORPUS = DATA / "corpus.kcc"
EX = load_exchanges(DATA / "vllm_f32.jsonl")


def record(url, out, *extra, env=None):
    return kc("record", "--server", url, "--golden", GOLDEN, "--top-logprobs", "8", "--concurrency", "1",
              "-o", out, *extra, env=env, check=False)


def prompts():
    return [json.loads(line)["prompt_token_ids"]
            for line in kc("corpus", "prompts", GOLDEN, "--jsonl").stdout.splitlines()]


def top_of(response):
    """The decode step's {id: log-prob} from a /v1/completions response with return_tokens_as_token_ids."""
    top = json.loads(response)["choices"][0]["logprobs"]["top_logprobs"][0]
    return {int(k.split(":")[1]): v for k, v in top.items()}


def test_corpus_prompts_are_the_windows():
    c = load_file(str(CORPUS))["tokens"]
    from safetensors import safe_open
    with safe_open(str(CORPUS), "np") as f:
        segs = json.loads(f.metadata()["segments"])
    want = [c[s["token_begin"]:s["token_begin"] + s["depth"] + 1].tolist() for s in segs]
    assert prompts() == want
    assert json.loads(kc("corpus", "prompts", CORPUS).stdout) == want


def test_prefill_candidate_is_the_imported_file(tmp_path):
    with ReplayServer(EX) as srv:
        r = record(srv.url, tmp_path / "c.st", "--phase", "prefill")
    assert r.returncode == 0, r.stderr
    assert "covered" in r.stdout and not (tmp_path / "c.st.partial").exists()
    dump = tmp_path / "dump.jsonl"
    dump.write_text("".join(EX[f"/v1/completions prefill {json.dumps(p)}"].replace("\n", " ") + "\n"
                            for p in prompts()))
    kc("import", "vllm", dump, "--golden", GOLDEN, "-o", tmp_path / "i.st")
    same_tensors(tmp_path / "c.st", tmp_path / "i.st")


def decoded(phase, golden_phase):
    """Whether a position is scored by a decode step under --phase (golden_phase: the golden's mark)."""
    return phase == "decode" or (phase == "both" and golden_phase == 1)


@pytest.mark.parametrize("phase,n_want", [("both", 16), ("decode", 96)])
def test_decode_positions_hold_the_decode_steps(tmp_path, phase, n_want):
    with ReplayServer(EX) as srv:
        assert record(srv.url, tmp_path / "p.st", "--phase", "prefill").returncode == 0
        before = len(srv.keys)
        r = record(srv.url, tmp_path / "b.st", "--phase", phase)
        asked = srv.keys[before:]
    assert r.returncode == 0, r.stderr
    assert f"decode steps: {n_want} requests, cached prompt tokens" in r.stdout
    # --phase decode sends no prefill request at all.
    assert sum(" prefill " in key for key in asked) == (4 if phase == "both" else 0)
    assert sum(" decode " in key for key in asked) == n_want
    g, b, p = load_file(str(GOLDEN)), load_file(str(tmp_path / "b.st")), load_file(str(tmp_path / "p.st"))
    windows = prompts()
    k = g["top_ids"].shape[1]
    n_decode = 0
    for n in range(len(g["token"])):
        if not decoded(phase, g["phase"][n]):  # prefill positions: the prefill request's values
            np.testing.assert_array_equal(b["logprobs_at_ref"][n], p["logprobs_at_ref"][n])
            continue
        n_decode += 1
        s, d = int(g["segment"][n]), int(g["depth"][n])
        top = top_of(EX[f"/v1/completions decode {json.dumps(windows[s][:d])}"])
        assert b["token_logprob"][n] == np.float32(top[int(g["token"][n])])
        best = min(top, key=lambda i: (-top[i], i))
        assert b["top1_id"][n] == best and b["top1_logprob"][n] == np.float32(top[best])
        for j in range(k):
            i = int(g["top_ids"][n, j])
            if i in top:
                assert b["logprobs_at_ref"][n, j] == np.float32(top[i])
        # The decode step on the cached prefix computes (nearly) what the prefill computed: f32 engine.
        assert abs(float(b["token_logprob"][n]) - float(p["token_logprob"][n])) < 1e-3
    assert n_decode == n_want


@pytest.mark.parametrize("phase", ["prefill", "both", "decode"])
def test_golden_mode_rows_are_the_engines_top_k(tmp_path, phase):
    with ReplayServer(EX) as srv:
        r = kc("record", "--server", srv.url, "--corpus", CORPUS, "--top-logprobs", "8", "-k", "8",
               "--phase", phase, "-o", tmp_path / "g.st", check=False)
    assert r.returncode == 0, r.stderr
    g = load_file(str(tmp_path / "g.st"))
    marks = load_file(str(GOLDEN))["phase"]  # the corpus's decode positions (golden from the same corpus)
    np.testing.assert_array_equal(g["phase"], marks)
    n = n_decode = 0
    for w in prompts():
        plp = json.loads(EX[f"/v1/completions prefill {json.dumps(w)}"])["choices"][0]["prompt_logprobs"]
        for d in range(1, len(w)):
            if decoded(phase, marks[n]):  # the decode step's top-K' (and the forced token)
                n_decode += 1
                top = top_of(EX[f"/v1/completions decode {json.dumps(w[:d])}"])
            else:
                top = {int(i): v["logprob"] for i, v in plp[d].items()}
            row = sorted(((v, i) for i, v in top.items()), key=lambda t: (-t[0], t[1]))[:8]
            assert g["top_ids"][n].tolist() == [i for _, i in row]
            np.testing.assert_array_equal(g["top_logprobs"][n], np.float32([v for v, _ in row]))
            mass = sum(math.exp(v) for v, _ in row)
            assert abs(float(g["other_logprob"][n]) - math.log(max(1 - mass, 1e-30))) < 1e-5
            assert g["token"][n] == w[d] and g["token_logprob"][n] == np.float32(top[w[d]])
            n += 1
    assert n == len(g["token"])
    assert n_decode == {"prefill": 0, "both": 16, "decode": 96}[phase]


def cut(text):
    return text[: len(text) // 2]


def wrong_echo(text):
    doc = json.loads(text)
    doc["choices"][0]["prompt_token_ids"][3] += 1
    return json.dumps(doc)


def wrong_forced_token(text):
    doc = json.loads(text)
    doc["choices"][0]["logprobs"]["tokens"][0] = "token_id:7"
    return json.dumps(doc)


@pytest.mark.parametrize("fault,kind,message", [
    (("status", 500), "prefill", "HTTP 500"),
    (("body", cut), "prefill", "a complete JSON document"),
    (("body", wrong_echo), "prefill", "prompt_token_ids[3]"),
    (("body", wrong_forced_token), "decode", "the forced corpus token"),
    (("hang", 20), "prefill", "Timeout"),
])
def test_hostile_server_exit_3_and_nothing_written(tmp_path, fault, kind, message):
    with ReplayServer(EX, fault=lambda key, n: fault if f" {kind} " in key else None) as srv:
        r = record(srv.url, tmp_path / "c.st", "--phase", "both", "--timeout", "2", "--retries", "0")
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert message in r.stderr and "rerun the same command to resume" in r.stderr
    assert not (tmp_path / "c.st").exists()


def test_interrupted_run_resumes_without_asking_again(tmp_path):
    third = json.dumps(prompts()[2])
    with ReplayServer(EX, fault=lambda key, n: ("status", 503) if third in key else None) as srv:
        r = record(srv.url, tmp_path / "c.st", "--retries", "0")
    assert r.returncode == 3 and "HTTP 503" in r.stderr
    assert sorted(os.listdir(tmp_path / "c.st.partial")) == ["lock", "manifest.json", "seg-00000.safetensors",
                                                           "seg-00001.safetensors"]
    with ReplayServer(EX, port=port_of(srv.url)) as srv:
        assert record(srv.url, tmp_path / "c.st").returncode == 0
        asked = srv.keys
    want = {"/v1/models"}
    for w in prompts()[2:]:
        want.add(f"/v1/completions prefill {json.dumps(w)}")
        want |= {f"/v1/completions decode {json.dumps(w[:d])}" for d in range(len(w) - 4, len(w))}
    assert sorted(asked) == sorted(want)  # segments 0 and 1 came from the checkpoints
    with ReplayServer(EX) as srv:
        assert record(srv.url, tmp_path / "ref.st").returncode == 0
    same_tensors(tmp_path / "c.st", tmp_path / "ref.st")
    assert not (tmp_path / "c.st.partial").exists()


def test_transient_errors_are_retried(tmp_path):
    with ReplayServer(EX, fault=lambda key, n: ("status", 500) if n in (2, 3) else None) as srv:
        r = record(srv.url, tmp_path / "c.st", "--retries", "2", "--phase", "prefill")
    assert r.returncode == 0, r.stderr
    with ReplayServer(EX) as srv:
        assert record(srv.url, tmp_path / "ref.st", "--phase", "prefill").returncode == 0
    same_tensors(tmp_path / "c.st", tmp_path / "ref.st")


def test_llamacpp_api_is_not_supported_yet(tmp_path):
    r = kc("record", "--server", "http://127.0.0.1:9", "--api", "llamacpp", "--golden", GOLDEN, "-o",
           tmp_path / "c.st", check=False)
    assert r.returncode == 3 and "not supported yet" in r.stderr
