#!/usr/bin/env python3
"""Makes the transformers f32 reference for SmolLM2-135M-Instruct (GGUF) that tests/py/test_llama_reference.py
checks kerncheck's engine against, so that CI needs neither torch nor transformers.

transformers reads the GGUF with the `gguf` package, dequantizes every tensor to f32 and undoes llama.cpp's
Q/K row permutation: an exact f32 reference on the same weights our engine uses. Two segments of real text
(KJV prose from the `bible` program, Python code from the standard library) are tokenized with the GGUF's
tokenizer; the token ids are stored, so the test does not depend on a tokenizer.

Output (safetensors, < 2 MB), per segment S in {prose, code}, T positions:
  S.ids       int32 [T]        token ids
  S.top_ids   int32 [T, K]     the K most likely next tokens, most likely first
  S.top_logp  f32   [T, K]     their log-probabilities (log_softmax of the f32 logits)
  S.lse       f32   [T]        log-sum-exp of the f32 logits
  S.tail      f64   [T]        probability mass outside the top K
  S.rows      int32 [R]        positions whose full logits are kept
  S.logits    f32   [R, V]     full f32 logits at those positions
Metadata: model file name and sha256, transformers / torch versions, text sources.

Usage: make_reference.py --gguf PATH [--out FILE] [--tokens 256] [--k 128] [--ours kc_llama_logits]
With --ours, also runs our engine on the same ids and prints the exact full-vocabulary KL at every position
(the test itself checks the top-K terms plus the tail).
"""
import argparse, glob, hashlib, os, re, subprocess, sys, tempfile

import numpy as np
import torch
import transformers
from safetensors.numpy import save_file


def prose_text():
    out = subprocess.run(["bible", "Genesis 1:1-2:25"], capture_output=True, text=True, check=True).stdout
    # "Gen1:1 In the beginning …" → plain prose, one verse after another
    return " ".join(re.sub(r"^\S+:\d+\s+", "", l).strip() for l in out.splitlines() if l.strip())


def code_text():
    src = open("/usr/lib/python3.11/textwrap.py", encoding="utf-8").read()
    i = src.index("class TextWrapper")
    return src[i:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--out", default="tests/data/fixtures/smollm2_reference.safetensors")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--k", type=int, default=128)
    ap.add_argument("--ours", help="kc_llama_logits binary: also print the exact KL of our logits")
    a = ap.parse_args()
    torch.set_grad_enabled(False)
    d, name = os.path.split(os.path.abspath(a.gguf))
    tok = transformers.AutoTokenizer.from_pretrained(d, gguf_file=name)
    model = transformers.AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32).eval()
    sha = hashlib.sha256(open(a.gguf, "rb").read()).hexdigest()
    tensors = {}
    for seg, text in (("prose", prose_text()), ("code", code_text())):
        ids = tok(text, add_special_tokens=False)["input_ids"][: a.tokens]
        assert len(ids) == a.tokens, (seg, len(ids))
        logits = model(torch.tensor([ids])).logits[0].float()  # [T, V]
        lse = torch.logsumexp(logits.double(), -1)
        logp = logits.double() - lse[:, None]
        top = torch.topk(logp, a.k, dim=-1)
        tail = 1.0 - top.values.exp().sum(-1)
        rows = np.array([0, a.tokens - 1], dtype=np.int32)
        tensors.update({
            f"{seg}.ids": np.array(ids, dtype=np.int32),
            f"{seg}.top_ids": top.indices.numpy().astype(np.int32),
            f"{seg}.top_logp": top.values.float().numpy(),
            f"{seg}.lse": lse.float().numpy(),
            f"{seg}.tail": tail.clamp(min=0).numpy(),
            f"{seg}.rows": rows,
            f"{seg}.logits": logits[torch.from_numpy(rows).long()].numpy().copy(),
        })
        ent = -(logp.exp() * logp).sum(-1)
        print(f"{seg}: {len(ids)} tokens, mean entropy {ent.mean():.3f} nats, max tail {tail.max():.2e}")
        if a.ours:
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "o.npy")
                subprocess.run([a.ours, a.gguf, out] + [str(i) for i in ids], check=True, stdout=subprocess.DEVNULL)
                ours = torch.from_numpy(np.load(out)).double()
            lq = ours - torch.logsumexp(ours, -1, keepdim=True)
            kl = (logp.exp() * (logp - lq)).sum(-1)
            agree = (ours.argmax(-1) == logits.argmax(-1)).float().mean()
            print(f"  ours: max KL {kl.max():.3e}, mean KL {kl.mean():.3e}, top-1 agreement {agree:.4f}, "
                  f"max |dlogit| {(ours - logits.double()).abs().max():.3e}")
    meta = {"model": os.path.basename(a.gguf), "model_sha256": sha, "transformers": transformers.__version__,
            "torch": torch.__version__, "prose": "bible (KJV) Genesis 1:1-2:25",
            "code": "/usr/lib/python3.11/textwrap.py from 'class TextWrapper'", "k": str(a.k)}
    save_file(tensors, a.out, metadata=meta)
    print("wrote", a.out, os.path.getsize(a.out), "bytes")


if __name__ == "__main__":
    main()
