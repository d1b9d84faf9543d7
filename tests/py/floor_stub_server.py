"""A stand-in inference server that `kerncheck floor` starts from a floor plan's command (tests/py/test_floor.py).

It answers like vLLM with responses recorded from a real vLLM CPU server (tests/data/server/vllm_f32.jsonl, the
replay of engine_replay.py), and can misbehave the ways a real engine does:

  python floor_stub_server.py --port P [--pidfile F] [--worker] [--perturb SEED] [--delay S]
      [--never-healthy] [--exit-at-start CODE] [--die-after N --die-once FLAG] [--ignore-term] [--count FILE]

--worker        start a child process in the server's process group (an engine's worker), recorded in --pidfile
--perturb SEED  lower every log-prob by a deterministic |N(0, 1)| · 1e-3 (another configuration whose bits differ;
                still a distribution: log-probs ≤ 0, mass ≤ 1)
--delay S       wait S seconds before each completion
--never-healthy /health answers 503 forever
--exit-at-start end with exit code CODE before listening
--die-after N   end abruptly (exit 3, the worker left running) at the (N+1)-th completion request; with
                --die-once FLAG only when FLAG does not exist yet (it is created), so a rerun survives
--ignore-term   ignore SIGTERM (kerncheck must fall back to SIGKILL)
--count FILE    append one line per completion request (how many a resumed recording asked again)
"""
import argparse
import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_replay import load_exchanges, request_key, send_json  # noqa: E402

DATA = Path(os.environ.get("KC_TEST_DATA", Path(__file__).resolve().parents[1] / "data")) / "server"


def perturbed(text, seed, key):
    """The response with every log-prob lowered by a deterministic amount (seed, request, id)."""
    def lower(v, what):
        h = hashlib.sha256(f"{seed} {key} {what}".encode()).digest()
        u1, u2 = (int.from_bytes(h[:8], "little") + 1) / 2**64, int.from_bytes(h[8:16], "little") / 2**64
        return v - abs(math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)) * 1e-3

    r = json.loads(text)
    for c in r.get("choices", []):
        for d, row in enumerate(c.get("prompt_logprobs") or []):
            for i, e in (row or {}).items():
                e["logprob"] = lower(e["logprob"], f"p{d}:{i}")
        lp = c.get("logprobs")
        if lp:
            for t, row in enumerate(lp["top_logprobs"]):
                for i in row:
                    row[i] = lower(row[i], f"d{t}:{i}")
            lp["token_logprobs"] = [lp["top_logprobs"][t].get(tok, v)
                                    for t, (tok, v) in enumerate(zip(lp["tokens"], lp["token_logprobs"]))]
    return json.dumps(r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pidfile")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--perturb", type=int)
    ap.add_argument("--delay", type=float, default=0)
    ap.add_argument("--never-healthy", action="store_true")
    ap.add_argument("--exit-at-start", type=int)
    ap.add_argument("--die-after", type=int)
    ap.add_argument("--die-once")
    ap.add_argument("--ignore-term", action="store_true")
    ap.add_argument("--count")
    a = ap.parse_args()
    pids = [os.getpid()]
    worker = None
    if a.worker:
        worker = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(1)"])
        pids.append(worker.pid)
    if a.pidfile:
        Path(a.pidfile).write_text("".join(f"{p}\n" for p in pids))
    if a.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        def on_term(*_):  # an engine's shutdown: its workers first
            if worker:
                worker.terminate()
            os._exit(0)
        signal.signal(signal.SIGTERM, on_term)
    if a.exit_at_start is not None:
        print(f"stub: exiting at start with code {a.exit_at_start}", flush=True)
        sys.exit(a.exit_at_start)
    exchanges = load_exchanges(DATA / "vllm_f32.jsonl")
    served = [0]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path == "/health":
                return send_json(self, 503 if a.never_healthy else 200, "{}")
            if self.path == "/version":
                return send_json(self, 200, json.dumps({"version": "stub-0.1"}))
            send_json(self, 200 if self.path in exchanges else 404, exchanges.get(self.path, "{}"))

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            key = request_key(self.path, body)
            served[0] += 1
            if a.count:
                with open(a.count, "a") as f:
                    f.write(key[:40] + "\n")
            if a.die_after is not None and served[0] > a.die_after and not (a.die_once and os.path.exists(a.die_once)):
                if a.die_once:
                    Path(a.die_once).write_text("died\n")
                print(f"stub: dying at request {served[0]}", flush=True)
                os._exit(3)  # abruptly: the worker is left behind, as a crashed engine leaves its workers
            time.sleep(a.delay)
            if key not in exchanges:
                return send_json(self, 404, json.dumps({"error": f"no recorded response for {key[:60]}"}))
            text = exchanges[key]
            send_json(self, 200, perturbed(text, a.perturb, key) if a.perturb is not None else text)

    httpd = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    httpd.daemon_threads = True
    print(f"stub: listening on 127.0.0.1:{a.port}", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
