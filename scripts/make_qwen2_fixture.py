#!/usr/bin/env python3
"""Makes tests/data/fixtures/qwen2-tiny (a random-init Qwen2 checkpoint with transformers' f32 reference
logits) and tests/data/fixtures/greedy_reference.json (transformers' greedy continuations of the tiny
fixtures), so that CI needs neither torch nor transformers.

qwen2-tiny is modelled on /work/shared/tools/make_models.py's fixture(): random init (seed 0), every
matrix widened ×2.5 so distributions are not nearly uniform, 48 random token ids (seed 1), f32 logits of a
full prefill and of prefill [0, P) + cached decode of the last 8 positions (reference.safetensors:
input_ids, logits, decode_logits, decode_start). Unlike make_models.py it also gives the q/k/v biases
(Qwen2's difference from Llama, zero after HF's init) random values, and unties the embeddings, so the
fixture covers both.

greedy_reference.json: for llama-tiny, qwen3-tiny and qwen2-tiny, a fixed prompt of random ids (seed 7) and
`model.generate(do_sample=False, max_new_tokens=N)` with EOS disabled; per step also the top-1 − top-2
logit margin of transformers' f32 logits, so a test can tell a real disagreement from a near-tie.

Usage: .venv/bin/python scripts/make_qwen2_fixture.py [--fixtures tests/data/fixtures] [--steps 24]
"""
import argparse
import json
import os

import torch
import transformers
from safetensors.torch import save_file


def reference_logits(model, ids, n_decode):
    """As make_models.py: f32 logits [T, V] of a full prefill, and the last n_decode via cached decode."""
    res = {"input_ids": ids.clone().contiguous()}
    with torch.no_grad():
        res["logits"] = model(ids).logits[0].float().contiguous()
        P = ids.shape[1] - n_decode
        out = model(ids[:, :P], use_cache=True)
        pkv = out.past_key_values
        steps = [out.logits[0, -1].float()]
        for t in range(P, ids.shape[1] - 1):
            out = model(ids[:, t:t + 1], past_key_values=pkv, use_cache=True)
            pkv = out.past_key_values
            steps.append(out.logits[0, -1].float())
        # decode_logits[j] predicts token P+j, i.e. equals logits[P-1+j] in exact arithmetic
        res["decode_logits"] = torch.stack(steps).contiguous()
        res["decode_start"] = torch.tensor([P - 1], dtype=torch.int64)
    return res


def make_qwen2(out_dir, V=512, T=48, n_decode=8, seed=0):
    torch.manual_seed(seed)
    cfg = transformers.Qwen2Config(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                                   num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False,
                                   max_position_embeddings=4096, rope_parameters={"rope_type": "default",
                                                                                  "rope_theta": 1e6},
                                   bos_token_id=1, eos_token_id=2)
    model = transformers.Qwen2ForCausalLM(cfg).float().eval()
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.dim() >= 2:
                p.mul_(2.5)
            elif n.endswith("proj.bias"):  # q/k/v biases: zero after init, so give them values
                p.copy_(torch.randn(p.shape) * 0.5)
    model.save_pretrained(out_dir)
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, V, (1, T), generator=g)
    res = reference_logits(model, ids, n_decode)
    d = (res["decode_logits"] - res["logits"][T - n_decode - 1:-1]).abs().max().item()
    save_file(res, os.path.join(out_dir, "reference.safetensors"))
    lp = torch.log_softmax(res["logits"], -1)
    ent = -(lp.exp() * lp).sum(-1).mean().item()
    print(f"qwen2-tiny: {sum(p.numel() for p in model.parameters())} params, mean entropy {ent:.3f}, "
          f"cached decode vs prefill max|diff| {d:.2e}, files {sorted(os.listdir(out_dir))}")


def greedy(model, prompt, steps):
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=steps, min_new_tokens=steps,
                             eos_token_id=None, pad_token_id=0, output_logits=True, return_dict_in_generate=True)
    ids = out.sequences[0, len(prompt):].tolist()
    margins = []
    for lg in out.logits:  # one [1, V] per step, the raw f32 logits
        top = torch.topk(lg[0].float(), 2).values
        margins.append(float(top[0] - top[1]))
    return ids, margins


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", default="tests/data/fixtures")
    ap.add_argument("--steps", type=int, default=24)
    a = ap.parse_args()
    torch.set_num_threads(1)
    make_qwen2(os.path.join(a.fixtures, "qwen2-tiny"))
    g = torch.Generator().manual_seed(7)
    prompt = torch.randint(0, 512, (12,), generator=g).tolist()
    ref = {"transformers": transformers.__version__, "torch": torch.__version__, "prompt": prompt,
           "steps": a.steps, "models": {}}
    for name in ("llama-tiny", "qwen3-tiny", "qwen2-tiny"):
        model = transformers.AutoModelForCausalLM.from_pretrained(os.path.join(a.fixtures, name),
                                                                  dtype=torch.float32).eval()
        ids, margins = greedy(model, prompt, a.steps)
        ref["models"][name] = {"ids": ids, "margins": margins}
        print(f"{name}: greedy {ids}; smallest top-1 − top-2 margin {min(margins):.4f}")
    with open(os.path.join(a.fixtures, "greedy_reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
