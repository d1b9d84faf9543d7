"""kerncheck.torch: goldens and candidates from any HF transformers causal LM, and a precision knob.

record_golden(model, corpus, out)     the reference's top-k per position over a kerncheck corpus (.kcc)
record_candidate(model, golden, out)  a candidate scored at the golden's positions
round_module_output(model, name, bits) rounds a module's output to `bits` mantissa bits (forward hook)
locate(model_ref, model_cand, golden, noise_models)  the first decoder-layer site whose error leaves the
                                      noise models' spread (docs/locate.md)

Teacher forcing: each corpus segment's window goes through the model in one forward pass; the logits
never leave the model's device. On the device, per position: log-softmax in float64, top-k, the tail mass
outside the top-k (log-sum-exp over the rest, exact), the corpus token's log-prob and the NaN/inf flags;
only those k + 4 numbers per position reach the host. The C++ core then writes the same golden and
candidate files as `kerncheck record` (docs/golden-format.md), so `kerncheck test` and kerncheck.test judge
them, and `kerncheck record --model --golden` can score the C++ engine against a PyTorch golden.
"""
import json
import os
import re
import sys
import time

import numpy as np
import torch

from . import _core

_FLAG_NAN, _FLAG_POSINF, _FLAG_NOFINITE, _FLAG_NEGINF = 1, 2, 4, 8
_ENGINE = "kerncheck.torch"


def _device_of(model):
    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")


def _model_identity(model, model_id):
    """The golden's model identity: given, else the checkpoint folder's hash as the CLI computes it
    (so goldens from both sides name the same model), else "hf:" + name_or_path."""
    if model_id:
        return model_id
    path = getattr(model, "name_or_path", "") or getattr(getattr(model, "config", None), "_name_or_path", "")
    if path and os.path.isdir(path):
        try:
            return _core.model_identity(path)
        except _core.Error:
            pass
    return f"hf:{path or type(model).__name__}"


def _check_tokenizer(model, corpus, tokenizer):
    """Refuses a corpus tokenized by another tokenizer, when the model's tokenizer.json can be found."""
    path = tokenizer
    if path is None:
        p = getattr(model, "name_or_path", "")
        path = p if p and os.path.isfile(os.path.join(p, "tokenizer.json")) else None
    if path is None:
        return
    tid = _core.tokenizer_identity(os.fspath(path))
    if tid != corpus["tokenizer_id"]:
        raise _core.Error(f"{corpus['path']}: tokenizer: expected the corpus's tokenizer {corpus['tokenizer_id']}, "
                          f"got {tid} from {path}")


class _Progress:
    """Positions done, rate and ETA on stderr (tqdm when installed)."""

    def __init__(self, total, enabled, what):
        self.total, self.enabled, self.done, self.t0 = total, enabled, 0, time.monotonic()
        self.bar = None
        if enabled:
            try:
                from tqdm.auto import tqdm
                self.bar = tqdm(total=total, unit="pos", desc=what)
            except ImportError:
                pass

    def update(self, n):
        self.done += n
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(n)
            return
        el = time.monotonic() - self.t0
        eta = el / self.done * (self.total - self.done) if self.done else 0
        print(f"kerncheck.torch: {self.done}/{self.total} positions, {el:.1f} s, ETA {eta:.0f} s",
              file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _batches(windows, batch_size):
    """Windows (index, tokens) of equal length grouped into batches of at most batch_size: no padding."""
    by_len = {}
    for i, w in enumerate(windows):
        by_len.setdefault(len(w), []).append(i)
    for _, idx in sorted(by_len.items()):
        for b in range(0, len(idx), batch_size):
            yield idx[b:b + batch_size]


def _forward_logits(model, ids):
    out = model(input_ids=ids, use_cache=False)
    return out.logits if hasattr(out, "logits") else out[0]


def _row_stats(x):
    """flags, f64 log-sum-exp, f64 logits of rows x [R, V] (on the device)."""
    nan = torch.isnan(x).any(-1)
    posinf = torch.isposinf(x).any(-1)
    neginf = torch.isneginf(x).any(-1)
    mx = torch.where(torch.isnan(x), torch.full_like(x, -torch.inf), x).amax(-1)
    nofinite = torch.isneginf(mx) & ~posinf
    flags = (nan.to(torch.uint8) * _FLAG_NAN) | (posinf.to(torch.uint8) * _FLAG_POSINF) | \
            (nofinite.to(torch.uint8) * _FLAG_NOFINITE) | (neginf.to(torch.uint8) * _FLAG_NEGINF)
    xd = x.double()
    lse = torch.logsumexp(xd, -1)
    return flags, lse, xd


def _tail_logprob(xd, ids, lse):
    """log of the mass outside `ids` per row, summed directly over the tail (no 1 − Σp cancellation)."""
    return torch.logsumexp(xd.scatter(-1, ids, -torch.inf), -1) - lse


def _chunk_rows(vocab):
    return max(1, (1 << 26) // max(vocab, 1))  # ≈ 512 MiB of f64 per chunk


def _golden_rows(logits, next_tokens, k):
    """Per row of logits [R, V]: top-k ids and log-probs, tail log-prob, token log-prob, flags (host)."""
    out = {n: [] for n in ("ids", "lp", "other", "tok", "flags")}
    step = _chunk_rows(logits.shape[-1])
    for r0 in range(0, logits.shape[0], step):
        x = logits[r0:r0 + step].float()
        nt = next_tokens[r0:r0 + step]
        flags, lse, xd = _row_stats(x)
        _, ids = torch.topk(x, k, dim=-1)
        lp = xd.gather(-1, ids) - lse[:, None]
        other = _tail_logprob(xd, ids, lse)
        tok = xd.gather(-1, nt[:, None])[:, 0] - lse
        out["ids"].append(ids.to(torch.int32).cpu())
        out["lp"].append(lp.float().cpu())
        out["other"].append(other.float().cpu())
        out["tok"].append(tok.float().cpu())
        out["flags"].append(flags.cpu())
    return {n: torch.cat(v).numpy() for n, v in out.items()}


def _candidate_rows(logits, ref_ids, next_tokens):
    """Per row: log-probs at the golden's ids, tail log-prob outside them, own top-1, token log-prob."""
    out = {n: [] for n in ("lp", "other", "top1", "top1_lp", "tok", "flags")}
    step = _chunk_rows(logits.shape[-1])
    for r0 in range(0, logits.shape[0], step):
        x = logits[r0:r0 + step].float()
        ids = ref_ids[r0:r0 + step]
        nt = next_tokens[r0:r0 + step]
        flags, lse, xd = _row_stats(x)
        top1 = torch.argmax(torch.nan_to_num(x, nan=-torch.inf), -1)  # first maximum: the lowest id on ties
        out["lp"].append((xd.gather(-1, ids) - lse[:, None]).float().cpu())
        out["other"].append(_tail_logprob(xd, ids, lse).float().cpu())
        out["top1"].append(top1.to(torch.int32).cpu())
        out["top1_lp"].append((xd.gather(-1, top1[:, None])[:, 0] - lse).float().cpu())
        out["tok"].append((xd.gather(-1, nt[:, None])[:, 0] - lse).float().cpu())
        out["flags"].append(flags.cpu())
    return {n: torch.cat(v).numpy() for n, v in out.items()}


def _run(model, windows, batch_size, progress, what, rows_fn):
    """Runs every window (teacher forcing) and returns rows_fn's host arrays per window, in order."""
    dev = _device_of(model)
    prog = _Progress(sum(len(w) - 1 for w in windows), progress, what)
    results = [None] * len(windows)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for idx in _batches(windows, batch_size):
                ids = torch.as_tensor(np.stack([windows[i] for i in idx]), dtype=torch.long, device=dev)
                logits = _forward_logits(model, ids[:, :-1])  # position p predicts token p + 1
                for b, i in enumerate(idx):
                    results[i] = rows_fn(i, logits[b], ids[b, 1:])
                    prog.update(len(windows[i]) - 1)
                del logits
    finally:
        model.train(was_training)
        prog.close()
    return results


def _cat(results, name):
    return np.ascontiguousarray(np.concatenate([r[name] for r in results]))


def record_golden(model, corpus, out, *, k=20, batch_size=1, progress=True, model_id=None, tokenizer=None,
                  variant="", command_line=None):
    """Records a golden over a kerncheck corpus (`kerncheck corpus build`) from an HF causal LM.

    model: a transformers model (any device; run it in float32 for a ground truth). corpus: .kcc path.
    k: top-k kept per position. batch_size: segments of equal depth per forward pass. model_id: identity
    stored in the golden (default: the checkpoint folder's hash, as the CLI's). tokenizer: a
    tokenizer.json (or folder) checked against the corpus's (default: the model folder's, if any).
    Returns the golden's checksum.
    """
    c = _core.read_corpus(os.fspath(corpus))
    _check_tokenizer(model, c, tokenizer)
    toks = c["tokens"]
    windows = [toks[s["token_begin"]:s["token_begin"] + s["depth"] + 1] for s in c["segments"]]
    vocab = [None]

    def rows(_i, logits, nxt):
        vocab[0] = logits.shape[-1]
        return _golden_rows(logits, nxt, k)

    res = _run(model, windows, batch_size, progress, "golden", rows)
    return _core.write_golden_topk(
        os.fspath(out), os.fspath(corpus), k, int(vocab[0]), _model_identity(model, model_id), _ENGINE, variant,
        command_line if command_line is not None else " ".join(sys.argv), _cat(res, "ids"), _cat(res, "lp"),
        _cat(res, "other"), _cat(res, "tok"), _cat(res, "flags"))


def record_candidate(model, golden, out, *, batch_size=1, progress=True, variant="", command_line=None):
    """Records a candidate for `golden` (made by record_golden or `kerncheck record --model`) from an HF
    causal LM: the same windows under teacher forcing, scored at the golden's top-k ids. Returns the
    candidate's checksum."""
    g = _core.read_golden(os.fspath(golden))
    dev = _device_of(model)
    windows = [w["tokens"] for w in g["windows"]]
    starts = [w["start"] for w in g["windows"]]
    top_ids = torch.as_tensor(g["top_ids"], dtype=torch.long)

    def rows(i, logits, nxt):
        if logits.shape[-1] != g["vocab"]:
            raise _core.Error(f"{golden}: vocab: expected the model's logits to have {g['vocab']} columns, "
                              f"got {logits.shape[-1]}")
        ref = top_ids[starts[i]:starts[i] + len(windows[i]) - 1].to(dev)
        return _candidate_rows(logits, ref, nxt)

    res = _run(model, windows, batch_size, progress, "candidate", rows)
    return _core.write_candidate_topk(
        os.fspath(out), os.fspath(golden), _ENGINE, variant,
        command_line if command_line is not None else " ".join(sys.argv), _cat(res, "lp"), _cat(res, "other"),
        _cat(res, "top1"), _cat(res, "top1_lp"), _cat(res, "tok"), _cat(res, "flags"))


# ---- precision knob ----------------------------------------------------------------------------------

def round_mantissa_torch(x, bits):
    """x rounded to `bits` explicit mantissa bits (RNE, exponent range unchanged, saturating at the
    largest finite value, NaN/inf kept): the bit arithmetic of the core's round_mantissa, in torch ops so
    that it runs on any device. Returns a new float32 tensor."""
    y = x.to(torch.float32).contiguous()
    if bits >= 23:
        return y.clone()
    shift = 23 - bits
    mask = (1 << shift) - 1
    i = y.view(torch.int32)
    a = i & 0x7FFFFFFF
    r = (a + (mask >> 1) + ((a >> shift) & 1)) & ~mask
    r = torch.minimum(r, torch.tensor(0x7F7FFFFF & ~mask, dtype=torch.int32, device=y.device))
    out = torch.where(a >= 0x7F800000, i, (i & ~0x7FFFFFFF) | r)
    return out.view(torch.float32)


def round_tensor(x, bits):
    """x rounded to `bits` mantissa bits, in x's dtype. CPU: the core's round_mantissa (C++, vectorised) on
    a float32 copy; other devices: round_mantissa_torch."""
    if not torch.is_floating_point(x):
        return x
    if x.device.type == "cpu":
        y = x.detach().to(torch.float32).contiguous().clone()
        _core.round_mantissa_(y.numpy(), bits)
    else:
        y = round_mantissa_torch(x.detach(), bits)
    return y.to(x.dtype)


def _round_tree(out, bits):
    if isinstance(out, torch.Tensor):
        return round_tensor(out, bits)
    if isinstance(out, tuple):
        return tuple(_round_tree(o, bits) if i == 0 else o for i, o in enumerate(out))
    return out


def round_module_output(model, name, bits):
    """Rounds the output of module `name` (e.g. "model.layers.3.self_attn") to `bits` mantissa bits on
    every forward. Tuple outputs: the first element (the hidden states). Returns the hook handle: call
    .remove() (or use it as a context manager) to restore the model."""
    if not 0 <= bits <= 23:
        raise ValueError(f"bits: expected 0 … 23, got {bits}")
    try:
        mod = model.get_submodule(name)
    except AttributeError:
        raise ValueError(f"name: expected a submodule of the model (e.g. "
                         f"{next(iter(n for n, _ in model.named_modules() if n), '')!r}), got {name!r}") from None
    return mod.register_forward_hook(lambda _m, _inp, out: _round_tree(out, bits))


# ---- locate ------------------------------------------------------------------------------------------

# Decoder-layer modules of HF causal LMs and the engine's hook names they correspond to (docs/engine.md).
_SITE_PATTERNS = ((re.compile(r"(?:^|\.)layers\.(\d+)\.self_attn$"), "attn.out", 0),
                  (re.compile(r"(?:^|\.)layers\.(\d+)\.mlp$"), "mlp.out", 1),
                  (re.compile(r"(?:^|\.)layers\.(\d+)$"), "hidden", 2))


def _locate_sites(model):
    """[(module name, layer, site name)] in data-flow order: per layer attention, MLP, the layer's output."""
    out = []
    for name, _ in model.named_modules():
        for pat, site, rank in _SITE_PATTERNS:
            m = pat.search(name)
            if m:
                out.append((int(m.group(1)), rank, name, site))
    if not out:
        raise ValueError("model: expected decoder layers named like 'model.layers.N' (with .self_attn and .mlp), "
                         "got none")
    return [(name, layer, site) for layer, _, name, site in sorted(out)]


def _locate_rows(model, sites, windows, chosen):
    """Per (site index, golden position): the float64 output row of that module at that position, from one
    forward pass per window over its tokens up to the last chosen position (teacher forcing)."""
    dev = _device_of(model)
    rows, cur = {}, {}
    mods = {name: model.get_submodule(name) for name, _, _ in sites}

    def hook(i):
        def fn(_m, _inp, out):
            x = out[0] if isinstance(out, tuple) else out
            start, local = cur["start"], cur["local"]
            sel = x[0, local].detach().to(torch.float64).cpu().numpy()
            for j, p in enumerate(local):
                rows[(i, start + int(p))] = sel[j]
        return fn

    handles = [mods[name].register_forward_hook(hook(i)) for i, (name, _, _) in enumerate(sites)]
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for w, local in zip(windows, chosen):
                if not len(local):
                    continue
                cur["start"], cur["local"] = int(w["start"]), torch.as_tensor(local, dtype=torch.long)
                ids = torch.as_tensor(np.asarray(w["tokens"][:int(local[-1]) + 1]), dtype=torch.long, device=dev)
                model(input_ids=ids[None])
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    return rows


def locate(model_ref, model_cand, golden, noise_models, *, positions=None, seed=0, alpha=0.05, min_factor=1.3,
           cluster_positions=4):
    """kerncheck locate for transformers models (docs/locate.md): the first decoder-layer site, in data-flow
    order (per layer: attention output "attn.out", MLP output "mlp.out", the layer's output "hidden"), whose
    error against `model_ref` leaves the spread of the `noise_models` (≥ 2 equally correct implementations).

    Every model runs the golden's windows under teacher forcing (one forward pass per window, up to its last
    chosen position; forward hooks on the named modules). Per site and position the error is the row's
    relative L2 error against the reference's; the site rule is the CLI's (the core's test_sites: one-sided
    t on the mean log error, variance from the noise runs in clusters of cluster_positions positions of a segment, Holm over all sites, ≥ min_factor).
    Phases are the golden's (a prefill/decode label only: torch runs every position in one pass).
    positions: golden indices (default: 64 drawn with `seed`). Returns the report as a dict with the CLI
    JSON's keys (format "kerncheck.locate": first, sites, …)."""
    if len(noise_models) < 2:
        raise ValueError(f"noise_models: expected at least 2 equally correct models, got {len(noise_models)}")
    g = _core.read_golden(os.fspath(golden))
    n = int(g["n"])
    if positions is None:
        positions = np.sort(np.random.default_rng(seed).choice(n, size=min(64, n), replace=False))
    positions = np.unique(np.asarray(positions, dtype=np.int64))
    if positions.size == 0 or positions[0] < 0 or positions[-1] >= n:
        raise ValueError(f"positions: expected golden indices in [0, {n}), got {positions.tolist()[:5]}…")
    windows = g["windows"]
    starts = np.array([int(w["start"]) for w in windows], dtype=np.int64)
    seg_of = np.searchsorted(starts, positions, side="right") - 1
    chosen = [positions[seg_of == s] - starts[s] for s in range(len(windows))]
    phase_of = {}
    for s, w in enumerate(windows):
        for p in chosen[s]:
            phase_of[int(starts[s] + p)] = 0 if p < int(w["n_prefill"]) else 1
    sites = _locate_sites(model_ref)
    ref = _locate_rows(model_ref, sites, windows, chosen)
    runs = [_locate_rows(m, sites, windows, chosen) for m in (*noise_models, model_cand)]
    keys, clusters, samples = [], [], []
    for phase in (0, 1):
        for i, (_, layer, name) in enumerate(sites):
            ps = [int(p) for p in positions if phase_of[int(p)] == phase]
            if not ps:
                continue
            errs = []
            for run in runs:
                e = []
                for p in ps:
                    a, b = run[(i, p)], ref[(i, p)]
                    nb = float(np.sqrt((b * b).sum()))
                    d = float(np.sqrt(((a - b) ** 2).sum()))
                    e.append(d / nb if nb > 0 else (0.0 if d == 0 else float("inf")))
                errs.append(e)
            keys.append((layer, name, phase))
            clusters.append([int(seg_of[np.searchsorted(positions, p)]) * 1_000_000
                             + ((p - int(starts[seg_of[np.searchsorted(positions, p)]])) // cluster_positions
                                if cluster_positions > 0 else 0) for p in ps])
            samples.append(errs)
    tests = json.loads(_core.locate_test_sites(clusters, samples, alpha, min_factor))
    label = ("prefill", "decode")
    report = {"format": "kerncheck.locate", "version": 1, "model": "kerncheck.torch", "golden": os.fspath(golden),
              "variant": "model_cand", "reference": "model_ref",
              "noise": [f"noise_models[{i}]" for i in range(len(noise_models))], "alpha": alpha,
              "min_factor": min_factor,
              "positions": {"prefill": sum(1 for v in phase_of.values() if v == 0),
                            "decode": sum(1 for v in phase_of.values() if v == 1)},
              "segments": int(sum(1 for c in chosen if len(c))), "family": len(tests),
              "first": {"prefill": None, "decode": None}, "sites": []}
    for (layer, name, phase), t in zip(keys, tests):
        report["sites"].append({"layer": layer, "name": name, "phase": label[phase], **t})
        if t["departs"] and report["first"][label[phase]] is None:
            report["first"][label[phase]] = {"layer": layer, "name": name, "ratio": t["ratio"]}
    return report
