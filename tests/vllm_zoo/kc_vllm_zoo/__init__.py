"""Regressions injected into vLLM itself, for kerncheck's real-engine zoo (bench/vllm_zoo.py, docs/engines.md).

vLLM loads this as a general plugin in every one of its processes (the API server, the engine core, the
workers) when this folder is on PYTHONPATH: the dist-info beside this package names `register` under the
entry-point group `vllm.general_plugins`. Nothing changes unless an environment variable asks for it:

KC_VLLM_ZOO="NAME=VALUE[;NAME=VALUE]"  (a test's own environment, never a user's)
  attn_scale=EPS       every attention layer's softmax scale × (1 + EPS)
  decode_scale=EPS     the same, only for the decode steps: sequences with cached context whose query is at
                       most one KV block (a recomputed tail and the generated token's position)
  round_layer=L:BITS   decoder layer L's output (before the residual add) rounded to BITS mantissa bits
  v_fp8=LAYERS         V rows of LAYERS (L, A-B or a comma list) written to the KV cache through
                       float8_e4m3fn without a scale
  kv_fp8=LAYERS        the same for K and V
  norm_eps=F           every RMSNorm's epsilon × F
KC_VLLM_DUMP=DIR       while the file DIR/on exists, each compute_logits result (the full-vocabulary logits of
                       the rows vLLM samples from or scores as prompt log-probs) is saved as DIR/NNNNNNNN.npy
                       (float32): the true KL of bench/vllm_zoo.py, independent of the top-K' API.
"""
import itertools
import os

_counter = itertools.count()


def _parse(spec):
    out = {}
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        name, _, value = part.partition("=")
        out[name.strip()] = value.strip()
    known = {"attn_scale", "decode_scale", "round_layer", "v_fp8", "kv_fp8", "norm_eps"}
    unknown = set(out) - known
    if unknown:
        raise ValueError(f"KC_VLLM_ZOO: expected names among {sorted(known)}, got {sorted(unknown)}")
    return out


def _layer_index(name):
    """'model.layers.7.self_attn.attn' → 7 (None when the name holds no layer number)."""
    parts = str(name).split(".")
    for a, b in zip(parts, parts[1:]):
        if a == "layers" and b.isdigit():
            return int(b)
    return None


def _layers(spec):
    """'3' → {3}; '0-3' → {0, 1, 2, 3}; '1,5' → {1, 5}."""
    out = set()
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def _round_mantissa(x, bits):
    """x rounded to nearest even at `bits` mantissa bits (through f32's bits; exact for bf16 inputs)."""
    import torch

    f = x.float().contiguous()
    i = f.view(torch.int32)
    shift = 23 - bits
    lsb = (i >> shift) & 1
    i = (i + ((1 << (shift - 1)) - 1) + lsb) & ~((1 << shift) - 1)
    return i.view(torch.float32).to(x.dtype)


def _fp8(x):
    import torch

    return x.to(torch.float8_e4m3fn).to(x.dtype)


def _patch_attention(z):
    from vllm.v1.attention.backends import cpu_attn

    impl = cpu_attn.CPUAttentionBackendImpl
    if "attn_scale" in z:
        eps = float(z["attn_scale"])
        init = impl.__init__

        def __init__(self, *a, **kw):
            init(self, *a, **kw)
            self.scale *= 1 + eps

        impl.__init__ = __init__
    if "decode_scale" in z:
        eps = float(z["decode_scale"])
        forward = impl.forward

        def forward_decode(self, layer, query, key, value, kv_cache, attn_metadata, output, *a, **kw):
            out = forward(self, layer, query, key, value, kv_cache, attn_metadata, output, *a, **kw)
            if attn_metadata is None:
                return out
            block = kv_cache.shape[2]
            qsl = attn_metadata.query_start_loc.tolist()
            seq = attn_metadata.seq_lens.tolist()
            rows = [(qsl[i], qsl[i + 1]) for i in range(len(seq))
                    if 0 < qsl[i + 1] - qsl[i] <= block and seq[i] > qsl[i + 1] - qsl[i]]
            if not rows:
                return out
            scale = self.scale
            alt = out.clone()
            self.scale = scale * (1 + eps)
            try:
                forward(self, layer, query, key, value, kv_cache, attn_metadata, alt, *a, **kw)
            finally:
                self.scale = scale
            for b, e in rows:
                out[b:e] = alt[b:e]
            return out

        impl.forward = forward_decode
    for key, both in (("v_fp8", False), ("kv_fp8", True)):
        if key not in z:
            continue
        target = _layers(z[key])
        update = impl.do_kv_cache_update

        def do_kv_cache_update(self, layer, k, v, kv_cache, slot_mapping, *a, _u=update, _t=target, _both=both, **kw):
            if _layer_index(getattr(layer, "layer_name", "")) in _t:
                v = _fp8(v)
                if _both:
                    k = _fp8(k)
            return _u(self, layer, k, v, kv_cache, slot_mapping, *a, **kw)

        impl.do_kv_cache_update = do_kv_cache_update


def _patch_model(z):
    from vllm.model_executor.models import llama

    if "round_layer" in z:
        layer, bits = (int(v) for v in z["round_layer"].split(":"))
        cls = llama.LlamaDecoderLayer
        init, forward = cls.__init__, cls.forward

        def __init__(self, *a, **kw):
            init(self, *a, **kw)
            self._kc_layer = _layer_index(kw.get("prefix", ""))

        def layer_forward(self, positions, hidden_states, residual):
            h, r = forward(self, positions, hidden_states, residual)
            if self._kc_layer == layer:
                h = _round_mantissa(h, bits)
            return h, r

        cls.__init__, cls.forward = __init__, layer_forward
    if "norm_eps" in z:
        from vllm.model_executor.layers import layernorm

        factor = float(z["norm_eps"])
        init = layernorm.RMSNorm.__init__

        def norm_init(self, *a, **kw):
            init(self, *a, **kw)
            self.variance_epsilon *= factor

        layernorm.RMSNorm.__init__ = norm_init


def _patch_dump(folder):
    import numpy as np
    from vllm.model_executor.models import llama

    cls = llama.LlamaForCausalLM
    compute = cls.compute_logits
    flag = os.path.join(folder, "on")

    def compute_logits(self, hidden_states, *a, **kw):
        logits = compute(self, hidden_states, *a, **kw)
        if logits is not None and os.path.exists(flag):
            path = os.path.join(folder, f"{next(_counter):08d}.npy")
            np.save(path + ".tmp.npy", logits.float().cpu().numpy())
            os.replace(path + ".tmp.npy", path)
        return logits

    cls.compute_logits = compute_logits


def register():
    spec = os.environ.get("KC_VLLM_ZOO", "")
    z = _parse(spec)
    if z:
        _patch_attention(z)
        _patch_model(z)
    if os.environ.get("KC_VLLM_DUMP"):
        _patch_dump(os.environ["KC_VLLM_DUMP"])
    if z or os.environ.get("KC_VLLM_DUMP"):
        print(f"kc_vllm_zoo: pid {os.getpid()}: {spec or '-'} (dump: {os.environ.get('KC_VLLM_DUMP', '-')})",
              flush=True)
