"""kerncheck.torch.locate (docs/locate.md) on the tiny random HF Llama fixture (3 layers): noise models are
the model with its weights perturbed at 1e-5 relative (two seeds: equally correct implementations that
round differently); the candidate is a third such model whose layer-1 MLP output is rounded to 4 mantissa
bits. locate names layer 1 mlp.out (and nothing upstream); a candidate with only the perturbation names
nothing. The per-site errors are recomputed here with numpy from the modules' outputs."""
import copy
import shutil
import sys
from pathlib import Path
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

BUILD = Path(os.environ.get("KC_BUILD_DIR", "build"))
DATA = Path(os.environ.get("KC_TEST_DATA", Path(__file__).resolve().parents[1] / "data"))
TINY = DATA / "fixtures" / "llama-tiny"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from kc_env import import_kerncheck, kc, write_tokenizer  # noqa: E402
from test_corpus_record import CODE, PROSE  # noqa: E402

kerncheck = import_kerncheck(BUILD)
import kerncheck.torch  # noqa: E402


def perturbed(model, seed, rel=1e-5):
    m = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(1 + rel * torch.randn(p.shape, generator=g))
    return m


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("tlocate")
    model_dir = d / "model"
    shutil.copytree(TINY, model_dir)
    write_tokenizer(model_dir / "tokenizer.json")
    (d / "prose.txt").write_text(PROSE)
    (d / "code.py").write_text(CODE)
    corpus = d / "c.kcc"
    kc("corpus", "build", "--tokenizer", model_dir, "--depths", "48", "--segments-per-depth", "3",
       "--decode-last", "8", "--prose", d / "prose.txt", "--code", d / "code.py", "-o", corpus)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    golden = d / "g.kcg"
    kerncheck.torch.record_golden(model, corpus, golden, k=8, progress=False)
    return model, golden


def test_perturbed_mlp_in_one_layer_is_named(setup):
    model, golden = setup
    noise = [perturbed(model, 1), perturbed(model, 2)]
    cand = perturbed(model, 3)
    h = kerncheck.torch.round_module_output(cand, "model.layers.1.mlp", 4)
    n = kerncheck._core.read_golden(str(golden))["n"]
    rep = kerncheck.torch.locate(model, cand, golden, noise, positions=range(0, n, 3))
    h.remove()
    for phase in ("prefill", "decode"):
        assert rep["first"][phase] is not None and (rep["first"][phase]["layer"], rep["first"][phase]["name"]) == (
            1, "mlp.out"), rep["first"]
    names = [(s["layer"], s["name"]) for s in rep["sites"] if s["phase"] == "prefill"]
    assert names[:3] == [(0, "attn.out"), (0, "mlp.out"), (0, "hidden")]
    first = names.index((1, "mlp.out"))
    assert not any(s["departs"] for s in rep["sites"][:first])
    # The candidate's error at layer 1 mlp.out, recomputed from the module outputs (numpy, f64).
    site = next(s for s in rep["sites"] if s["phase"] == "prefill" and (s["layer"], s["name"]) == (1, "mlp.out"))
    w = kerncheck._core.read_golden(str(golden))["windows"][0]
    ids = torch.as_tensor(np.asarray(w["tokens"][:-1]), dtype=torch.long)[None]
    outs = {}
    for key, m in (("ref", model), ("cand", cand)):
        r = kerncheck.torch.round_module_output(m, "model.layers.1.mlp", 4) if key == "cand" else None
        hk = m.get_submodule("model.layers.1.mlp").register_forward_hook(  # after the rounding: sees its output
            lambda _m, _i, o, key=key: outs.__setitem__(key, o.detach().double().numpy()[0]))
        with torch.no_grad():
            m(input_ids=ids)
        hk.remove()
        if r:
            r.remove()
    e = np.linalg.norm(outs["cand"] - outs["ref"], axis=1) / np.linalg.norm(outs["ref"], axis=1)
    assert 2 ** -9 < float(np.exp(np.log(e).mean())) < 2 ** -3  # 4-bit rounding: ~1e-2 relative
    assert site["cand"] > 30 * site["floor"]


def test_perturbation_alone_names_nothing(setup):
    model, golden = setup
    rep = kerncheck.torch.locate(model, perturbed(model, 3), golden, [perturbed(model, 1), perturbed(model, 2)])
    assert rep["first"] == {"prefill": None, "decode": None}, [s for s in rep["sites"] if s["departs"]]
    with pytest.raises(ValueError, match="noise_models"):
        kerncheck.torch.locate(model, model, golden, [model])
