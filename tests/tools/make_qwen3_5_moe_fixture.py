#!/usr/bin/env python3
"""Makes tests/data/fixtures/qwen3_5_moe-tiny: a tiny random-init Qwen3.5-MoE (transformers'
Qwen3_5MoeForCausalLM, fused expert tensors `mlp.experts.gate_up_proj` [E, 2·Im, D] / `down_proj` [E, D, Im])
with its f32 reference logits, in the format of ../shared/tools/make_models.py (fixture() and
reference_logits(), mirrored here: `input_ids` [1, 48], `logits` [48, V] of a one-piece prefill,
`decode_logits` [8, V] of cached decode steps after a prefill of decode_start+1 tokens, `decode_start` [1]).

Usage (deterministic: seed 0, CPU, f32; about 10 s):
    /work/main/.venv/bin/python tests/tools/make_qwen3_5_moe_fixture.py [OUT_DIR]
OUT_DIR defaults to tests/data/fixtures/qwen3_5_moe-tiny next to this script's repository.

Config: vocab 512, D 64, 4 layers [GDN, GDN, attention, GDN] (every FFN is MoE in Qwen3.5-MoE), 4 experts,
top-2, expert width 24 and shared-expert width 40 (no dimension equals another, so a
transposed tensor fails the shape check). Weights are widened ×2.5 as make_models.py does, and the router
×4 more so that no token's 2nd and 3rd expert probabilities nearly tie (a tie would make the routing, and
so the logits, depend on f32 rounding); the smallest such gap is printed.
"""
import os
import sys

import torch
import transformers
from safetensors.torch import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "data", "fixtures", "qwen3_5_moe-tiny")
V, T, N_DECODE, SEED = 512, 48, 8, 0

torch.backends.cuda.matmul.allow_tf32 = False


# The fixtures' one definition of the reference logits (scripts/make_qwen2_fixture.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from make_qwen2_fixture import reference_logits  # noqa: E402


def min_routing_gap(model, ids, k):
    """Smallest p_(k) − p_(k+1) over tokens and layers (router softmax), from forward hooks."""
    gaps = []

    def hook(mod, inp, out):
        p = torch.softmax(out[0].float(), -1).sort(-1, descending=True).values
        gaps.append((p[:, k - 1] - p[:, k]).min().item())

    hs = [m.register_forward_hook(hook) for m in model.modules() if type(m).__name__ == "Qwen3_5MoeTopKRouter"]
    with torch.no_grad():
        model(ids)
    for h in hs:
        h.remove()
    return min(gaps)


def main():
    torch.manual_seed(SEED)
    cfg = transformers.Qwen3_5MoeTextConfig(
        vocab_size=V, hidden_size=64, num_hidden_layers=4,
        layer_types=["linear_attention", "linear_attention", "full_attention", "linear_attention"],
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
        linear_conv_kernel_dim=4, rms_norm_eps=1e-6, tie_word_embeddings=False, max_position_embeddings=4096,
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24, shared_expert_intermediate_size=40,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25})
    model = transformers.Qwen3_5MoeForCausalLM(cfg).float().eval()
    model.set_experts_implementation("eager")  # grouped_mm has no CPU kernel on older torch
    with torch.no_grad():  # widen the random init so distributions are not nearly uniform
        for n, p in model.named_parameters():
            if p.dim() >= 2:
                p.mul_(2.5)
            if n.endswith("mlp.gate.weight"):
                p.mul_(4.0)
    os.makedirs(OUT, exist_ok=True)
    model.save_pretrained(OUT, save_original_format=False)
    ids = torch.randint(0, V, (1, T), generator=torch.Generator().manual_seed(SEED + 1))
    res = reference_logits(model.float().eval(), ids, N_DECODE)
    save_file(res, os.path.join(OUT, "reference.safetensors"))
    lp = torch.log_softmax(res["logits"], -1)
    ent = -(lp.exp() * lp).sum(-1).mean().item()
    print(f"{OUT}: params={sum(p.numel() for p in model.parameters())} mean entropy={ent:.3f} "
          f"min top-2/3 router gap={min_routing_gap(model, ids, 2):.3g} files={sorted(os.listdir(OUT))}")


if __name__ == "__main__":
    main()
