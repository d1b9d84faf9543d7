"""The folder layout is the architecture: a layer may include only itself and the layers below it.

    core → numeric → io → {compare, metrics} → ops → model → eval → cli
ops sits above compare/metrics in the build order but must not use them (it sees only core and numeric),
so that engine kernels stay free of file formats and judging.
"""
import pathlib
import re

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"
ALLOWED = {
    "core": {"core"},
    "numeric": {"core", "numeric"},
    "io": {"core", "numeric", "io"},
    "compare": {"core", "numeric", "io", "compare"},
    "metrics": {"core", "numeric", "io", "metrics"},
    "ops": {"core", "numeric", "ops"},
    "model": {"core", "numeric", "io", "ops", "model"},
    "eval": {"core", "numeric", "io", "compare", "metrics", "ops", "model", "eval"},
    "cli": {"core", "numeric", "io", "compare", "metrics", "ops", "model", "eval", "cli"},
    "python": {"core", "numeric", "io", "compare", "metrics", "ops", "model", "eval", "python"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)


def test_every_layer_folder_is_known():
    dirs = {p.name for p in SRC.iterdir() if p.is_dir()}
    assert dirs <= set(ALLOWED), f"unknown layer folders: {dirs - set(ALLOWED)}"


def test_no_layer_includes_a_higher_one():
    bad = []
    for layer, allowed in ALLOWED.items():
        for f in sorted((SRC / layer).glob("*.*")) if (SRC / layer).is_dir() else []:
            for inc in INCLUDE.findall(f.read_text(errors="replace")):
                if inc not in allowed:
                    bad.append(f"{f.relative_to(SRC)} includes {inc}/")
    assert not bad, "layering violations:\n" + "\n".join(bad)
