"""A small HTTP server on 127.0.0.1 that speaks SGLang's native `POST /generate` protocol, for the
`kerncheck record --server --api sglang` tests (SGLang needs CUDA; this machine has none).

The protocol is SGLang's as its source defines it (python/sglang/srt/managers/io_struct.py GenerateReqInput;
tokenizer_manager.py `_handle_batch_output` / `add_logprob_to_meta_info`; the scheduler's input log-prob
padding): a request {input_ids, sampling_params {max_new_tokens, temperature}, return_logprob,
logprob_start_len, top_logprobs_num, token_ids_logprob, return_text_in_logprobs, return_prompt_token_ids}
gets {"text", "output_ids", "meta_info", "prompt_token_ids"?} with meta_info
  prompt_tokens, completion_tokens, cached_tokens, finish_reason, id, …
  input_token_logprobs      [[None, ids[L], None], [lp, ids[L+1], None], …]   (first entry padded)
  input_top_logprobs        [None, [[lp, id, None] × K'], …]                   (top_logprobs_num > 0)
  input_token_ids_logprobs  [None, [[lp, id, None] per asked id], …]           (token_ids_logprob given)
  output_token_logprobs / output_top_logprobs / output_token_ids_logprobs      (one row per generated token)
with L = logprob_start_len (default −1: len(input_ids) − 1, output log-probs only). Values are f32, as
SGLang's `.tolist()` of its f32 log-softmax gives them.

The numbers are real: the logits come from kerncheck's f32 engine on the real model (tests/kc_llama_logits
on the SmolLM2 GGUF), never invented. A prompt whose first len−1 tokens an earlier request held is computed
as SGLang's radix cache would serve it: the prefix prefilled, the last token a decode step
(`--decode-from len−1`), and cached_tokens reports the prefix length. Every computed row is kept
(`self.rows`) so tests compare against log_softmax of exactly these logits.
"""
import json
import subprocess
import tempfile
import threading
import uuid
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np

from engine_replay import LocalServer, send_json
from kc_env import log_softmax


# GenerateReqInput fields (io_struct.py) and SamplingParams fields (sampling_params.py) this server knows.
# A request with any other key gets HTTP 400 here: SGLang itself would ignore a misspelt field
# ("token_ids_logprobs") silently, so the test server is the stricter of the two.
GENERATE_FIELDS = {"rid", "text", "input_ids", "sampling_params", "return_logprob", "logprob_start_len",
                   "top_logprobs_num", "token_ids_logprob", "return_text_in_logprobs", "stream",
                   "return_prompt_token_ids", "log_metrics"}
SAMPLING_FIELDS = {"max_new_tokens", "temperature", "top_p", "top_k", "min_p", "stop", "stop_token_ids",
                   "ignore_eos", "skip_special_tokens", "n"}

_MEMO = {}
_MEMO_LOCK = threading.Lock()


class SglangServer(LocalServer):
    """`fault(kind, n)` (kind: "prefill" when logprob_start_len is ≥ 0, else "decode"; n: requests so far,
    1-based) may return None, ("status", code) or ("body", fn(text) -> text)."""

    def __init__(self, tool, model, fault=None, model_path="SmolLM2-135M-Instruct", port=0):
        self.tool, self.model, self.fault, self.model_path = str(tool), str(model), fault, model_path
        self.rows = {}        # (tuple(input_ids), prompt log-probs asked) -> f32 logits [len, V] it computed
        self.held = set()     # the radix cache: token sequences whose KV an earlier request left
        self.requests = []    # (kind, input_ids, request body, response text)
        self.count = 0
        self.lock = threading.Lock()
        self.tmp = tempfile.TemporaryDirectory()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, text):
                send_json(self, code, text)

            def do_GET(self):
                if self.path == "/v1/models":  # SGLang's OpenAI-compatible model list
                    return self._send(200, json.dumps({"object": "list", "data": [
                        {"id": server.model_path, "object": "model", "owned_by": "sglang", "root": server.model_path}]}))
                if self.path == "/get_model_info":
                    return self._send(200, json.dumps({"model_path": server.model_path, "is_generation": True}))
                self._send(404, json.dumps({"detail": "Not Found"}))

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path != "/generate":
                    return self._send(404, json.dumps({"detail": "Not Found"}))
                req = json.loads(body)
                # Prompt log-probs asked for (logprob_start_len ≥ 0): a prefill request, one window of it.
                kind = "prefill" if req.get("logprob_start_len", -1) not in (-1, None) else "decode"
                with server.lock:
                    server.count += 1
                    n = server.count
                f = server.fault(kind, n) if server.fault else None
                if f and f[0] == "status":
                    return self._send(f[1], json.dumps({"error": {"message": "injected"}}))
                try:
                    text = server.generate(req)
                except ValueError as e:  # SGLang answers a bad request with 400
                    return self._send(400, json.dumps({"error": {"message": str(e)}}))
                with server.lock:
                    server.requests.append((kind, list(req["input_ids"]), req, text))
                if f and f[0] == "body":
                    text = f[1](text)
                self._send(200, text)

        self.listen(Handler, port)

    def __exit__(self, *a):
        super().__exit__(*a)
        self.tmp.cleanup()

    # ---- the model ----------------------------------------------------------------------------------
    def _cached_prefix(self, ids):
        """The radix cache: the longest prefix of ids held by an earlier request (prompt + output)."""
        best = 0
        for held in self.held:
            n = 0
            while n < min(len(held), len(ids)) and held[n] == ids[n]:
                n += 1
            best = max(best, n)
        return best

    def _logits(self, ids, cached):
        """f32 logits [len(ids), V] from kerncheck's engine: rows [0, cached) prefill, the rest decode steps.
        The engine is bitwise deterministic for the same tokens and split (test_llama_reference.py), so one
        test process computes each (tokens, split) once (_MEMO) and every server reuses it."""
        key = (self.tool, self.model, tuple(ids), cached)
        with _MEMO_LOCK:
            if key in _MEMO:
                return _MEMO[key]
        out = Path(self.tmp.name) / f"{uuid.uuid4().hex}.npy"
        flags = ["--decode-from", str(cached)] if 0 < cached < len(ids) else []
        p = subprocess.run([self.tool, self.model, str(out), *flags, *map(str, ids)], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(p.stderr)
        x = np.load(out)
        out.unlink()
        with _MEMO_LOCK:
            _MEMO[key] = x
        return x

    def generate(self, req):
        unknown = sorted(set(req) - GENERATE_FIELDS) + sorted(set(req.get("sampling_params") or {}) - SAMPLING_FIELDS)
        if unknown:
            raise ValueError(f"fields this test server does not know (not GenerateReqInput/SamplingParams): {unknown}")
        ids = req.get("input_ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, int) for i in ids):
            raise ValueError("input_ids: a non-empty list of token ids (single request) is expected here")
        sp = req.get("sampling_params") or {}
        max_new = sp.get("max_new_tokens", 128)
        if max_new != 1 or sp.get("temperature", 1.0) != 0:
            raise ValueError("this test server generates exactly one greedy token (max_new_tokens 1, temperature 0)")
        m = len(ids)
        start = req.get("logprob_start_len")
        if start is None or start == -1:  # SGLang: output log-probs only
            start = m - 1
        if not 0 <= start < m:
            raise ValueError(f"logprob_start_len ({start}) must be in [0, {m})")
        k_top = int(req.get("top_logprobs_num") or 0)
        named = req.get("token_ids_logprob")
        with self.lock:
            # The radix cache never serves positions whose log-probs are asked for, nor the last token.
            cached = min(self._cached_prefix(ids), m - 1, start)
        x = self._logits(ids, cached)
        lp = log_softmax(x).astype(np.float32)  # [m, V]: row j predicts token j + 1
        gen = int(np.argmax(lp[m - 1]))
        with self.lock:
            self.rows[(tuple(ids), req.get("logprob_start_len", -1) not in (-1, None))] = x
            self.held.add(tuple(ids + [gen]))  # prompt and generated token stay in the cache

        def triple(row, t):
            return [float(row[t]), int(t), None]

        def top(row):
            order = np.argsort(-row, kind="stable")[:k_top]
            return [triple(row, t) for t in order]

        meta = {"id": uuid.uuid4().hex, "finish_reason": {"type": "length", "length": 1}, "prompt_tokens": m,
                "weight_version": "default", "num_retractions": 0}
        if req.get("return_logprob"):
            rows = [lp[j - 1] for j in range(start + 1, m)]  # predicting ids[start+1 … m−1]
            meta["input_token_logprobs"] = [[None, int(ids[start]), None]] + [
                triple(r, ids[j]) for r, j in zip(rows, range(start + 1, m))]
            meta["output_token_logprobs"] = [triple(lp[m - 1], gen)]
            meta["output_token_logprobs_length"] = 1
            if k_top > 0:
                meta["input_top_logprobs"] = [None] + [top(r) for r in rows]
                meta["output_top_logprobs"] = [top(lp[m - 1])]
            if named is not None:
                meta["input_token_ids_logprobs"] = [None] + [[triple(r, t) for t in named] for r in rows]
                meta["output_token_ids_logprobs"] = [[triple(lp[m - 1], t) for t in named]]
        meta.update({"reasoning_tokens": 0, "completion_tokens": 1, "cached_tokens": cached, "e2e_latency": 0.01})
        out = {"text": "", "output_ids": [gen], "meta_info": meta}
        if req.get("return_prompt_token_ids"):
            out["prompt_token_ids"] = list(ids)
        return json.dumps(out)
