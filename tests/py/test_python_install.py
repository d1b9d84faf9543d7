"""`pip install .` builds the package on this machine (scikit-build-core + nanobind compile the C++ core and
the extension) and the installed package works: imported from the install target (not the build tree),
it compares tensors, lists the ops and runs the judge's module, and the install's own `kerncheck` command
(the CLI binary, in the target's bin/) runs, and so does the pytest example through the plugin's entry
point.

Installs with --no-build-isolation into a temporary --target (the venv stays untouched), so the venv
needs scikit-build-core and nanobind (requirements.txt). The build reuses the test build's objects: it is
configured like it (the same build type) in a folder beside it (`build-pip` next to `build`), and compiles
through ccache with paths hashed relative to the checkout, so every object of the core is a cache hit of
the test build's and only the extension is compiled (a full compile of the core inside pip, as this test
once did, took longer than its timeout on a loaded 2-core machine). The folder persists, so reruns
recompile only what changed.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("KC_BUILD_DIR", ROOT / "build")).resolve()


def pip_build_settings():
    """pip's build folder and its -C settings: beside the test build (the same depth under the checkout, so
    ccache's relative paths match), with its generator, compilers and build type, so that each object's
    compile command is the test build's (a test build elsewhere gets a folder inside it: no shared objects)."""
    cache = BUILD / "CMakeCache.txt"
    entries = {}
    for line in (cache.read_text(errors="replace") if cache.is_file() else "").splitlines():
        if ":" in line and "=" in line and not line.startswith(("//", "#")):
            key, value = line.split("=", 1)
            entries[key.split(":", 1)[0]] = value
    folder = BUILD.parent / f"{BUILD.name}-pip" if BUILD.parent == ROOT else BUILD / "py-install"
    settings = ["-C", f"build-dir={folder}", "-C", f"cmake.build-type={entries.get('CMAKE_BUILD_TYPE') or 'Release'}"]
    for key in ("CMAKE_C_COMPILER", "CMAKE_CXX_COMPILER"):
        if entries.get(key):
            settings += ["-C", f"cmake.define.{key}={entries[key]}"]
    return settings, entries.get("CMAKE_GENERATOR")


def test_pip_install_works(tmp_path):
    cache = BUILD / "CMakeCache.txt"
    if cache.is_file() and "KC_PYTHON_BUILT:INTERNAL=OFF" in cache.read_text(errors="replace"):
        pytest.skip("this build has no Python extension (KC_BUILD_PYTHON=OFF)")
    target = tmp_path / "site"
    settings, generator = pip_build_settings()
    env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 2), CCACHE_BASEDIR=str(ROOT),
               CCACHE_NOHASHDIR="1")
    if generator:
        env["CMAKE_GENERATOR"] = generator
    env.pop("PYTHONPATH", None)
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "-q",
                        "--target", str(target), *settings, str(ROOT)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    g = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    a = g + np.float32(0.01) * np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "g.npy", g)
    script = (
        "import numpy as np, kerncheck, kerncheck.testing, kerncheck._core as c\n"
        "a = np.load('a.npy'); g = np.load('g.npy')\n"
        "r = kerncheck.compare(a, g, method='cosine')\n"
        "print(kerncheck.__file__)\n"
        "print(r.verdict, repr(r.figure('one_minus_cosine').value))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                         env=dict(env, PYTHONPATH=str(target)))
    assert out.returncode == 0, out.stderr
    where, line = out.stdout.splitlines()[:2]
    assert Path(where).resolve().is_relative_to(target.resolve()), where
    verdict, value = line.split()
    a64, g64 = a.astype(np.float64), g.astype(np.float64)
    one_minus_cos = 1 - a64 @ g64 / np.linalg.norm(a64) / np.linalg.norm(g64)
    assert verdict == "PASS" and abs(float(value) - one_minus_cos) <= 1e-9
    ops = subprocess.run([sys.executable, "-m", "kerncheck", "ops"], capture_output=True, text=True, cwd=tmp_path,
                         env=dict(env, PYTHONPATH=str(target)))
    assert ops.returncode == 0 and "matmul" in ops.stdout, ops.stderr
    # The wheel installs the CLI: the same commands as build/src/kerncheck (a venv puts it on PATH).
    exe = target / "bin" / "kerncheck"
    assert exe.is_file() and os.access(exe, os.X_OK), sorted(p.name for p in target.iterdir())
    h = subprocess.run([str(exe), "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert h.returncode == 0 and "test" in h.stdout and "record" in h.stdout, h.stdout + h.stderr
    t = subprocess.run([str(exe), "compare", tmp_path / "a.npy", tmp_path / "g.npy", "--compare", "cosine"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert t.returncode == 0 and "PASS" in t.stdout, t.stdout + t.stderr
    # The pytest plugin registers through its entry point (no -p): the example runs from the install.
    ex = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                         str(ROOT / "examples" / "test_pytest_example.py")], capture_output=True, text=True,
                        cwd=tmp_path, env=dict(env, PYTHONPATH=str(target)))
    assert ex.returncode == 0 and "3 passed, 1 skipped" in ex.stdout, ex.stdout + ex.stderr
