"""A tiny OpenAI-compatible HTTP server for the record --server tests: it replays responses recorded
from a real vLLM server (tests/data/server/*.jsonl), optionally with faults, on 127.0.0.1.

Recording (tests/tools/record_server_fixtures.sh): `python engine_replay.py record UPSTREAM OUT.jsonl PORT`
proxies to a running vLLM and appends each exchange {"key", "status", "response"} to OUT.jsonl.

A request's key: its path, "prefill" (prompt_logprobs) or "decode", and the prompt's token ids.
"""
import json
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The candidate file's tensors (what two recordings must agree on bit for bit).
TENSORS = ("logprobs_at_ref", "other_logprob", "top1_id", "top1_logprob", "token_logprob", "flags", "covered")


def same_tensors(a, b):
    """Two candidate files hold the same TENSORS, bit for bit."""
    from safetensors.numpy import load_file
    import numpy as np

    x, y = load_file(str(a)), load_file(str(b))
    for name in TENSORS:
        assert (name in x) == (name in y), name
        if name in x:
            np.testing.assert_array_equal(x[name], y[name], err_msg=name)


def send_json(handler, code, text):
    """One JSON response from a BaseHTTPRequestHandler; a client that hung up is not an error of the server."""
    data = text.encode()
    try:
        handler.send_response(code)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):
        pass


def request_key(path, body):
    if not body:
        return path
    req = json.loads(body)
    kind = "prefill" if "prompt_logprobs" in req else "decode"
    return f"{path} {kind} {json.dumps(req.get('prompt'))}"


def load_exchanges(path):
    out = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                e = json.loads(line)
                out[e["key"]] = e["response"]
    return out


def port_of(url):
    """The port of http://127.0.0.1:PORT: a resumed recording must reach the server at the same URL (the
    checkpoints are keyed by it)."""
    return int(url.rsplit(":", 1)[1])


class LocalServer:
    """An HTTP server on 127.0.0.1 (port 0: a free port) in a thread, for `with`; subclasses call
    listen(Handler, port)."""

    def listen(self, handler, port=0):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *a):
        self.httpd.shutdown()
        self.httpd.server_close()


class ReplayServer(LocalServer):
    """Serves `exchanges` (key → response text). `fault(key, n)` (n: how many requests so far, 1-based)
    may return None (serve normally), ("status", code), ("body", text) or ("hang", seconds)."""

    def __init__(self, exchanges, fault=None, port=0):
        self.exchanges = exchanges
        self.fault = fault
        self.count = 0
        self.keys = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _serve(self, body):
                key = request_key(self.path, body)
                with server.lock:
                    server.count += 1
                    server.keys.append(key)
                    n = server.count
                f = server.fault(key, n) if server.fault else None
                if f and f[0] == "hang":
                    time.sleep(f[1])
                    return
                if f and f[0] == "status":
                    return self._send(f[1], json.dumps({"error": "injected"}))
                if key not in server.exchanges:
                    return self._send(404, json.dumps({"error": f"no recorded response for {key[:80]}"}))
                text = server.exchanges[key]
                if f and f[0] == "body":
                    text = f[1](text) if callable(f[1]) else f[1]
                self._send(200, text)

            def _send(self, code, text):
                send_json(self, code, text)

            def do_GET(self):
                self._serve(None)

            def do_POST(self):
                self._serve(self.rfile.read(int(self.headers.get("Content-Length", 0))))

        self.listen(Handler, port)


def record(upstream, out_path, port):
    """Proxies 127.0.0.1:port → upstream and appends each exchange to out_path."""
    lock = threading.Lock()

    class Proxy(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _proxy(self, body):
            req = urllib.request.Request(upstream + self.path, data=body,
                                         headers={"Content-Type": "application/json"} if body else {})
            try:
                with urllib.request.urlopen(req, timeout=600) as r:
                    status, text = r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                status, text = e.code, e.read().decode()
            if status == 200:
                with lock, open(out_path, "a") as f:
                    f.write(json.dumps({"key": request_key(self.path, body), "status": status,
                                        "response": text}) + "\n")
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._proxy(None)

        def do_POST(self):
            self._proxy(self.rfile.read(int(self.headers.get("Content-Length", 0))))

    ThreadingHTTPServer(("127.0.0.1", port), Proxy).serve_forever()


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "record":
        record(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
