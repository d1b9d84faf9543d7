#!/usr/bin/env python3
"""What a deep segment costs through a running vLLM: kerncheck's record against the same requests sent
by a plain HTTP client, prefill and decode steps, and a golden recorded from vLLM, in one run.

For each depth D: a one-segment corpus (its last --decode-last positions decode steps) and its f32 golden
from kerncheck's engine; then against the server at --url (scripts/vllm_cpu.sh start --max-model-len 8192):
  anchor   the requests `record --server --phase both` sends (one prefill with prompt_logprobs K', one decode
           step per decode depth), sent one after another by Python's urllib: time and response bytes;
  ours     `kerncheck record --server --golden G --phase both --concurrency 1`: wall, kerncheck's own CPU
           time, its peak RSS (VmHWM), the decode steps' cached prompt tokens (what it prints);
  golden   `kerncheck record --server --corpus C --phase both` (the reference recorded from vLLM itself);
and prints ours ÷ anchor. Positions D ≤ 8 190 fit SmolLM2's 8 192 context with the generated token.

Usage: bench/vllm_deep.py --url http://127.0.0.1:8321 [--kerncheck build/src/kerncheck] [--model GGUF]
                          [--depths 512,2048,8190] [--decode-last 16] [-k 20] [--work DIR]
"""
import argparse
import json
import os
import re
import tempfile
import time
import urllib.request

from _common import DEFAULT_CLI, DEFAULT_GGUF, executable, gguf, measured, missing, one_segment_golden, run


def post(url, body):
    """(seconds, response bytes) of one POST."""
    t = time.perf_counter()
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        n = len(r.read())
    return time.perf_counter() - t, n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True, help="a running vLLM (OpenAI API), e.g. http://127.0.0.1:8321")
    ap.add_argument("--kerncheck", default=DEFAULT_CLI)
    ap.add_argument("--model", default=DEFAULT_GGUF)
    ap.add_argument("--depths", default="512,2048,8190")
    ap.add_argument("--decode-last", type=int, default=16)
    ap.add_argument("-k", type=int, default=20, help="the golden's top-k and K' (prompt_logprobs, logprobs)")
    ap.add_argument("--work", help="folder for the files (default: a temporary one)")
    a = ap.parse_args()
    cli = executable(a.kerncheck, "--kerncheck", "the kerncheck CLI")
    gguf(a.model)
    with urllib.request.urlopen(a.url + "/v1/models", timeout=30) as r:
        served = json.loads(r.read())["data"][0]["id"]
    work = a.work or tempfile.mkdtemp(prefix="kc-vllm-deep-")
    os.makedirs(work, exist_ok=True)
    print(f"vLLM at {a.url} ({served}); one segment per depth, the last {a.decode_last} positions decode steps, "
          f"K' = {a.k}, one request at a time")
    for depth in [int(d) for d in a.depths.split(",")]:
        corpus, golden = one_segment_golden(cli, a.model, depth, a.decode_last, a.k, work)
        tokens = json.loads(run(cli, "corpus", "prompts", golden, "--jsonl").splitlines()[0])["prompt_token_ids"]
        n_prefill = len(tokens) - 1 - a.decode_last
        # The anchor: the same requests by urllib, one after another.
        url = a.url + "/v1/completions"
        prefill = {"model": served, "prompt": tokens, "max_tokens": 1, "temperature": 0, "prompt_logprobs": a.k,
                   "return_token_ids": True}
        post(url, prefill)  # warm-up at this shape: a fresh server's first long prompt is slower
        t_pre, b_pre = post(url, prefill)
        t_dec, b_dec = 0.0, 0
        for d in range(n_prefill + 1, len(tokens)):
            t, b = post(url, {"model": served, "prompt": tokens[:d], "max_tokens": 1, "temperature": 0,
                              "logprobs": a.k, "allowed_token_ids": [tokens[d]], "return_token_ids": True,
                              "return_tokens_as_token_ids": True})
            t_dec, b_dec = t_dec + t, b_dec + b
        anchor = t_pre + t_dec
        # Ours: the candidate, then a golden from vLLM.
        outs = {}
        for name, flags in (("candidate", ["--golden", golden]), ("golden", ["--corpus", corpus, "-k", a.k])):
            out = os.path.join(work, f"{name}{depth}.st")
            if os.path.exists(out):
                os.remove(out)
            rc, *outs[name] = measured(cli, "record", "--server", a.url, *flags, "--phase", "both", "--top-logprobs",
                                       a.k, "--concurrency", 1, "--max-response-mb", 1024, "-o", out)
            if rc != 0:
                missing(f"record --server ({name}) at depth {depth}: exit {rc}\n{outs[name][0][-2000:]}")
        log, rss, cpu, wall = outs["candidate"]
        m = re.search(r"cached prompt tokens (\d+) of (\d+)", log)
        cached = f"{int(m[1]) / int(m[2]):.0%}" if m else "not reported"
        print(f"depth {depth}: prefill request {len(json.dumps(tokens)) / 1e3:.0f} kB, response {b_pre / 1e6:.2f} MB, "
              f"{t_pre:.1f} s; {len(tokens) - 1 - n_prefill} decode steps {t_dec:.1f} s "
              f"({t_dec / max(1, a.decode_last):.2f} s each, {b_dec / max(1, a.decode_last) / 1e3:.1f} kB each)")
        print(f"  anchor (urllib, same requests) {anchor:.1f} s; kerncheck record {wall:.1f} s = {wall / anchor:.2f}× "
              f"the anchor; its CPU {cpu:.2f} s ({cpu / wall:.1%}), peak RSS {rss:.0f} MB; decode steps' prompt "
              f"tokens from vLLM's cache: {cached}")
        log, rss, cpu, wall = outs["golden"]
        print(f"  golden from vLLM (record --server --corpus): {wall:.1f} s = {wall / anchor:.2f}× the anchor, "
              f"peak RSS {rss:.0f} MB")


if __name__ == "__main__":
    main()
