#!/usr/bin/env python3
"""Trains tests/data/models/hybrid-mem: a tiny Qwen3.5-architecture hybrid (Gated DeltaNet x3 + gated
attention, twice; hidden 192) like hybrid-tiny, with hybrid-tiny's tokenizer.json, but built so that its
recurrent state remembers:

- decay initialised for slow decay (Mamba / FLA style): softplus(dt_bias) log-uniform in [1e-3, 1e-1],
  A_log = log(U(1, 16)); transformers' GatedDeltaNet decay is alpha = exp(-exp(A_log) * softplus(a + dt_bias)),
  so at init the per-token alpha lies in [exp(-1.6), exp(-1e-3)] (half-lives 0.4 to 700 tokens);
  A_log and dt_bias get no weight decay (as in Mamba);
- data that rewards memory mixed into real text: in a fraction of the training sequences a passage of
  32-256 tokens is repeated after a gap of 64-1024 tokens (the copy overwrites the text there), so
  predicting the copy needs what was seen up to ~1.3k tokens before.

Text (what this Debian machine has; the recipe of ../shared/tools/make_corpus.py, read in sorted order):
  train prose: the King James Bible (`bible gen1:1-rev22:21`, package bible-kjv) and README files under
               /usr/share/doc (2k-200k characters);
  train code:  the Python 3 standard library (/usr/lib/python3.X, no tests) and ~6 MB of C headers
               (/usr/include, a seeded sample);
  held out:    prose = The Devil's Dictionary (/usr/share/dictd/devil.dict.dz, package dict-devil);
               code  = .py files of /usr/lib/python3/dist-packages (a seeded sample; neither this model nor
               hybrid-tiny, whose corpus skipped *-packages, trained on them).

  train_hybrid.py --out DIR [--seconds 2700] [--threads 2] [--seed 0] [--dry-run]
  train_hybrid.py --eval MODEL_DIR        held-out loss of an existing model (prose, code, copies)

Writes DIR/{config.json, model.safetensors (bf16), tokenizer.json, tokenizer_config.json,
reference.safetensors, train_log.json}; reference.safetensors holds f32 transformers logits of the
bf16-weight model on a held-out prose and code segment (prefill and cached decode), the layout of
make_models.py's reference_logits(). Needs torch, transformers, tokenizers, safetensors (.venv).
"""
import argparse, gzip, json, math, os, random, re, resource, shutil, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENIZER_DIR = os.path.join(ROOT, "tests", "data", "models", "hybrid-tiny")
T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


def fail(msg):
    print(f"train_hybrid.py: {msg}", file=sys.stderr)
    sys.exit(3)


# ------------------------------------------------------------------------------------------- text
def read_text(p):
    data = gzip.open(p).read() if p.endswith((".gz", ".dz")) else open(p, "rb").read()
    return data.decode("utf-8")


def train_docs(seed):
    docs = []
    try:
        kjv = subprocess.run(["bible", "gen1:1-rev22:21"], check=True, capture_output=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError) as e:
        fail(f"`bible gen1:1-rev22:21` (package bible-kjv): {e}; expected the King James Bible text")
    docs += [("prose", b) for b in re.split(r"\n(?=[A-Z0-9][A-Za-z0-9 ]+ 1\n)", kjv) if b.strip()]
    for root, dirs, files in sorted(os.walk("/usr/share/doc")):
        dirs.sort()
        for f in sorted(files):
            if f.startswith("README"):
                try:
                    t = read_text(os.path.join(root, f))
                except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
                    continue
                if 2000 < len(t) < 200000:
                    docs.append(("prose", t))
    pyroot = next(p for p in sorted(os.listdir("/usr/lib"), reverse=True) if re.fullmatch(r"python3\.\d+", p))
    for root, dirs, files in os.walk(os.path.join("/usr/lib", pyroot)):
        dirs.sort()
        if "/test" in root or "__pycache__" in root or "-packages" in root:
            continue
        for f in sorted(files):
            if f.endswith(".py"):
                t = open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
                if len(t) > 500:
                    docs.append(("code", t))
    hdrs = sorted(os.path.join(r, f) for r, _, fs in os.walk("/usr/include") for f in fs if f.endswith(".h"))
    random.Random(seed).shuffle(hdrs)
    total = 0
    for p in hdrs:
        try:
            t = open(p, encoding="utf-8").read()
        except (OSError, UnicodeDecodeError):
            continue
        if len(t) >= 1000:
            docs.append(("code", t))
            total += len(t)
            if total > 6_000_000:
                break
    random.Random(seed + 1).shuffle(docs)
    return docs


def heldout_docs(seed):
    devil = "/usr/share/dictd/devil.dict.dz"
    try:
        prose = [read_text(devil)]
    except OSError as e:
        fail(f"{devil} (package dict-devil): {e}; expected The Devil's Dictionary")
    files = sorted(os.path.join(r, f) for r, _, fs in os.walk("/usr/lib/python3/dist-packages")
                   for f in fs if f.endswith(".py") and "__pycache__" not in r)
    random.Random(seed).shuffle(files)
    code = []
    for p in files:
        t = open(p, encoding="utf-8", errors="replace").read()
        if len(t) > 2000:
            code.append(t)
        if sum(map(len, code)) > 400_000:
            break
    return {"prose": prose, "code": code}


def pack(tok, texts, eos):
    import torch
    ids = []
    for e in tok.encode_batch(texts):
        ids.extend(e.ids)
        ids.append(eos)
    return torch.tensor(ids, dtype=torch.int64)


def add_copies(x, gen, n_copies):
    """In place: n_copies times, a passage of 32-256 tokens of row x is repeated after a gap of 64-1024."""
    import torch
    L = x.numel()
    spans = []
    for _ in range(n_copies):
        P = int(torch.randint(32, 257, (1,), generator=gen))
        G = int(torch.randint(64, min(1024, L - 2 * P - 1) + 1, (1,), generator=gen))
        i = int(torch.randint(0, L - 2 * P - G + 1, (1,), generator=gen))
        x[i + P + G:i + 2 * P + G] = x[i:i + P].clone()
        spans.append((i + P + G, P))
    return spans


# ------------------------------------------------------------------------------------------- model
def make_config(vocab, eos):
    from transformers import Qwen3_5TextConfig
    # hybrid-tiny's configuration (make_models.py SIZE=tiny)
    D, H = 192, 3
    return Qwen3_5TextConfig(
        vocab_size=vocab, hidden_size=D, intermediate_size=D * 8 // 3, num_hidden_layers=8,
        layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 2,
        num_attention_heads=H, num_key_value_heads=1, head_dim=64, linear_num_key_heads=1,
        linear_num_value_heads=H, linear_key_head_dim=64, linear_value_head_dim=64, linear_conv_kernel_dim=4,
        rms_norm_eps=1e-6, tie_word_embeddings=True, max_position_embeddings=8192, eos_token_id=eos)


def slow_decay_init(model, gen):
    """Mamba/FLA decay init for every GatedDeltaNet layer (names as in transformers' Qwen3_5GatedDeltaNet)."""
    import torch
    n = 0
    with torch.no_grad():
        for name, mod in model.named_modules():
            if hasattr(mod, "A_log") and hasattr(mod, "dt_bias"):
                h = mod.dt_bias.numel()
                dt = torch.exp(torch.rand(h, generator=gen) * (math.log(1e-1) - math.log(1e-3)) + math.log(1e-3))
                mod.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
                mod.A_log.copy_(torch.log(torch.empty(h).uniform_(1, 16, generator=gen)))
                n += 1
    if n == 0:
        fail("no GatedDeltaNet layer with A_log and dt_bias found: transformers' parameter names changed")
    return n


def heldout_loss(model, held, tok, eos, gen_seed=5):
    """Mean next-token loss on the first 8x1024 held-out tokens of each domain (windows of 1024, f32), and on
    the copied tokens of the same windows with one 32-256-token passage repeated per window."""
    import torch
    res = {}
    model.eval()
    with torch.no_grad():
        for dom in ("prose", "code"):
            ids = pack(tok, held[dom], eos)[:8 * 1024]
            x = ids.view(-1, 1024)
            logits = model(x, use_cache=False).logits.float()
            lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, x[:, 1:, None])[..., 0]
            res[dom] = -lp.mean().item()
            xc = x.clone()
            gen = torch.Generator().manual_seed(gen_seed)
            spans = [add_copies(xc[r], gen, 1) for r in range(xc.shape[0])]
            logits = model(xc, use_cache=False).logits.float()
            lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, xc[:, 1:, None])[..., 0]
            # tokens 1.. of each copy (the first copied token cannot be known from the passage)
            vals = [lp[r, s:s + P - 1] for r, sp in enumerate(spans) for s, P in sp]
            res[dom + "_copy"] = -torch.cat(vals).mean().item()
    res["uniform"] = math.log(tok.get_vocab_size())
    return res


def reference_logits(model, ids, n_decode):
    """The fixtures' one definition (scripts/make_qwen2_fixture.py, as make_models.py): f32 prefill logits and
    cached-decode logits of the last n_decode steps."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from make_qwen2_fixture import reference_logits as ref
    return ref(model, ids, n_decode)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="output model directory")
    ap.add_argument("--eval", metavar="MODEL_DIR", help="only report the held-out losses of MODEL_DIR")
    ap.add_argument("--seconds", type=float, default=2700, help="training wall-time budget (default 2700)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=2048, help="training sequence length (>= 1600 for the copies)")
    ap.add_argument("--copy-frac", type=float, default=0.5, help="fraction of sequences with copies")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--init-from", metavar="MODEL_DIR",
                    help="start from MODEL_DIR's weights (same architecture, e.g. hybrid-tiny) instead of a random "
                         "init; the decay parameters are re-initialised for slow decay all the same")
    ap.add_argument("--warmup", type=int, default=20, help="linear warm-up steps (default 20)")
    ap.add_argument("--dry-run", action="store_true", help="3 steps, short eval, no reference")
    a = ap.parse_args()
    if not a.out and not a.eval:
        ap.error("--out or --eval is required")
    if a.seq < 1600:
        fail(f"--seq {a.seq}: expected >= 1600 (a 256-token passage, a 1024-token gap and its copy fit)")

    import torch
    from tokenizers import Tokenizer
    from transformers import Qwen3_5ForCausalLM
    from safetensors.torch import save_file
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    tok = Tokenizer.from_file(os.path.join(TOKENIZER_DIR, "tokenizer.json"))
    eos = tok.token_to_id("<|endoftext|>")
    held = heldout_docs(a.seed + 7)

    if a.eval:
        model = Qwen3_5ForCausalLM.from_pretrained(a.eval).float()
        print(json.dumps({"model": a.eval, **heldout_loss(model, held, tok, eos)}))
        return

    docs = train_docs(a.seed)
    data = pack(tok, [t for _, t in docs], eos)
    chars = {d: sum(len(t) for dd, t in docs if dd == d) for d in ("prose", "code")}
    log("train documents", len(docs), "characters", chars, "tokens", data.numel())

    cfg = make_config(tok.get_vocab_size(), eos)
    if a.init_from:
        model = Qwen3_5ForCausalLM.from_pretrained(a.init_from).float()
        if model.config.to_dict()["layer_types"] != cfg.layer_types or model.config.hidden_size != cfg.hidden_size:
            fail(f"{a.init_from}/config.json: layer_types/hidden_size: expected hybrid-tiny's architecture")
    else:
        model = Qwen3_5ForCausalLM(cfg)
    gen = torch.Generator().manual_seed(a.seed)
    log("GDN layers initialised for slow decay:", slow_decay_init(model, gen),
        "params", sum(p.numel() for p in model.parameters()))
    no_wd = [p for n, p in model.named_parameters() if p.dim() < 2 or n.endswith(("A_log", "dt_bias"))]
    wd = [p for n, p in model.named_parameters() if not (p.dim() < 2 or n.endswith(("A_log", "dt_bias")))]
    opt = torch.optim.AdamW([{"params": wd, "weight_decay": 0.1}, {"params": no_wd, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95))
    budget = a.seconds
    warm = a.warmup
    B, L = a.batch, a.seq
    step, t_start, c_start = 0, time.time(), time.process_time()
    losses = []
    model.train()
    while True:
        el = time.time() - t_start
        if (a.dry_run and step >= 3) or (not a.dry_run and el > budget):
            break
        lr = a.lr * min(1.0, (step + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, el / budget))))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.randint(0, data.numel() - L - 1, (B,), generator=gen)
        x = torch.stack([data[s:s + L] for s in starts])
        for r in range(B):
            if torch.rand(1, generator=gen).item() < a.copy_frac:
                add_copies(x[r], gen, int(torch.randint(1, 4, (1,), generator=gen)))
        # f32: on this CPU (no AVX512-BF16) bf16 autocast took 2-3x the CPU time of f32
        loss = model(x, labels=x, use_cache=False).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % 10 == 0 or a.dry_run:
            log(f"step {step} loss {loss.item():.4f} lr {lr:.2e} "
                f"tok/s {(step + 1) * B * L / max(1e-9, time.time() - t_start):.0f}")
        step += 1
    wall, cpu = time.time() - t_start, time.process_time() - c_start
    log("trained steps", step, "tokens", step * B * L, f"wall {wall:.0f}s cpu {cpu:.0f}s")

    tmp = tempfile.mkdtemp(prefix="hybrid-mem.", dir=os.path.dirname(os.path.abspath(a.out)))
    model = model.to(torch.bfloat16)  # bf16 weights, as checkpoints ship (and as hybrid-tiny)
    model.save_pretrained(tmp, save_original_format=False)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOKENIZER_DIR, f), os.path.join(tmp, f))
    m32 = Qwen3_5ForCausalLM.from_pretrained(tmp).float().eval()
    ev = heldout_loss(m32, {k: v[:1] if a.dry_run else v for k, v in held.items()}, tok, eos)
    log("held-out loss (bf16 weights, f32 compute)", ev)
    if not a.dry_run:
        refs = {}
        for dom in ("prose", "code"):
            ids = pack(tok, held[dom], eos)[1000:1000 + 128].view(1, -1)
            for k, v in reference_logits(m32, ids, 16).items():
                refs[f"{dom}.{k}"] = v
        save_file(refs, os.path.join(tmp, "reference.safetensors"))
    with open(os.path.join(tmp, "train_log.json"), "w") as fh:
        json.dump({"command": " ".join(sys.argv), "init_from": a.init_from, "seed": a.seed, "threads": a.threads, "steps": step,
                   "batch": B, "seq": L, "tokens": step * B * L, "copy_frac": a.copy_frac,
                   "train_tokens_available": data.numel(), "train_characters": chars,
                   "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                   "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                   "heldout": ev, "loss_every_10_steps": losses[::10], "last_loss": losses[-1]}, fh, indent=1)
    os.chmod(tmp, 0o755)  # mkdtemp and the safetensors writer make owner-only files; these go into git
    for f in os.listdir(tmp):
        os.chmod(os.path.join(tmp, f), 0o644)
    if os.path.exists(a.out):
        shutil.rmtree(a.out)
    os.rename(tmp, a.out)
    log("saved", a.out, sorted(os.listdir(a.out)))


if __name__ == "__main__":
    main()
