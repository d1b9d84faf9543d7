#!/usr/bin/env python3
"""What a deep SGLang prefill costs the client, one request per segment against one per window, in one run.

SGLang returns every id of a request's `token_ids_logprob` list at every scored position, so a prefill of a
whole segment of depth D, asked for the golden's top-k ids there, lists up to (k+1)·D ids at each of D
positions. `record --server --api sglang --prefill-window W` asks W depths at a time. For each depth this
bench builds a one-segment corpus and its f32 golden with kerncheck's engine, then records the segment's
prefill through tests/py/sglang_server.py (SGLang's /generate protocol with the real model's numbers; no
SGLang runs on a CPU-only machine) with W = 0 (the whole segment: the anchor) and each --windows W, and
prints per run: requests, the ids asked per request, the largest response, all responses, kerncheck's peak
RSS (its VmHWM) and CPU time (os.wait4) and the anchor ÷ ours ratios.

A whole-segment request whose ids × positions pass --max-entries is not sent (the stand-in would need
gigabytes to write it): its line gives the entries it would list, computed from the golden, marked "not sent".

Usage: bench/sglang_windows.py [--kerncheck build/src/kerncheck] [--logits-tool build/tests/kc_llama_logits]
                               [--model GGUF] [--depths 512,2048] [--windows 64] [--work DIR]
"""
import argparse
import os
import sys
import tempfile

from _common import DEFAULT_CLI, DEFAULT_GGUF, ROOT, executable, gguf, measured, missing, need, one_segment_golden

sys.path.insert(0, os.path.join(ROOT, "tests", "py"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kerncheck", default=DEFAULT_CLI)
    ap.add_argument("--logits-tool", default=os.path.join(ROOT, "build", "tests", "kc_llama_logits"))
    ap.add_argument("--model", default=DEFAULT_GGUF)
    ap.add_argument("--depths", default="512,2048")
    ap.add_argument("--windows", default="64", help="the --prefill-window values measured against W = 0")
    ap.add_argument("-k", type=int, default=20, help="the golden's top-k (and K' asked of the server)")
    ap.add_argument("--max-entries", type=float, default=3e6, help="largest whole-segment response sent")
    ap.add_argument("--work", help="folder for the files (default: a temporary one)")
    a = ap.parse_args()
    cli = executable(a.kerncheck, "--kerncheck", "the kerncheck CLI")
    tool = executable(a.logits_tool, "--logits-tool", "kc_llama_logits (a KC_BUILD_TESTS=ON build)")
    gguf(a.model)
    np, st = need("numpy", "safetensors.numpy")
    from sglang_server import SglangServer

    work = a.work or tempfile.mkdtemp(prefix="kc-sglang-windows-")
    os.makedirs(work, exist_ok=True)
    windows = [int(w) for w in a.windows.split(",")]
    print(f"SGLang prefill through the stand-in server, k = K' = {a.k}, one segment per depth, --phase prefill")
    print(f"{'depth':>6} {'W':>5} {'requests':>8} {'ids/request':>11} {'largest response':>17} "
          f"{'all responses':>14} {'client RSS':>10} {'client CPU':>10} {'wall':>7}")
    for depth in [int(d) for d in a.depths.split(",")]:
        _, golden = one_segment_golden(cli, a.model, depth, 0, a.k, work)
        g = st.load_file(golden)
        ids = len(set(g["top_ids"].ravel().tolist()) | set(g["token"].tolist()))
        rows = {}
        for w in [0] + windows:
            if w == 0 and ids * depth > a.max_entries:
                print(f"{depth:>6} {'all':>5} {1:>8} {ids:>11} {ids * depth / 1e6:>10.1f} M entries (not sent)")
                continue
            out = os.path.join(work, f"c{depth}-w{w}.kcc")
            if os.path.exists(out):
                os.remove(out)
            with SglangServer(tool, a.model) as srv:
                rc, log, rss, cpu, wall = measured(
                    cli, "record", "--server", srv.url, "--api", "sglang", "--golden", golden, "--phase", "prefill",
                    "--top-logprobs", a.k, "--prefill-window", w, "--concurrency", 1, "--max-response-mb", 4096,
                    "-o", out)
                sizes = [len(t) for *_, t in srv.requests]
                asked = max(len(r.get("token_ids_logprob", [])) for _, _, r, _ in srv.requests)
            if rc != 0:
                missing(f"record --prefill-window {w} at depth {depth}: exit {rc}\n{log[-2000:]}")
            rows[w] = (max(sizes), sum(sizes), rss, cpu)
            print(f"{depth:>6} {w if w else 'all':>5} {len(sizes):>8} {asked:>11} {max(sizes) / 1e6:>14.2f} MB "
                  f"{sum(sizes) / 1e6:>11.2f} MB {rss:>7.0f} MB {cpu:>8.2f} s {wall:>5.0f} s")
        if 0 in rows:
            for w in windows:
                r0, r = rows[0], rows[w]
                print(f"{'':>6} ratio all ÷ W = {w}: largest response {r0[0] / r[0]:.1f}×, all responses "
                      f"{r0[1] / r[1]:.1f}×, client RSS {r0[2] / r[2]:.1f}×, client CPU {r0[3] / r[3]:.1f}×")


if __name__ == "__main__":
    main()
