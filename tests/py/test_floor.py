"""kerncheck floor (docs/floor.md): a floor plan recorded once, its manifest, and `kerncheck test --floor`.

Servers are tests/py/floor_stub_server.py: it answers like vLLM with responses recorded from a real vLLM CPU
server (tests/data/server), and misbehaves on request (never healthy, exits at start, dies mid-record,
ignores SIGTERM, holds a worker process in its group). The real vLLM goes through the same command in
tests/py/test_vllm_engine.py (label vllm). Checks:
- the lab plan (examples/floor/lab-demo.toml) records the demo's eight floor runs bit for bit (tensors), on a
  tiny model, and its manifest reads as the demo's floor;
- a server plan records each configuration with its own server, one at a time, logs kept, metadata (the
  configuration, the engine's version, the hardware), the manifest's spread against numpy (which runs are
  identical, KL between runs), and `test --floor` judges as `test --noise` with the same runs (CLI and
  kerncheck.test(floor=…));
- a floor whose runs do not differ says so in one sentence in the manifest and in every report (text, JSON,
  JUnit, HTML, Python), and a verdict on the fixed limits never reads as if the floor test had run;
- a rerun keeps finished configurations (no server started) and resumes a recording a dead server cut short;
- a server that never becomes healthy, exits at start, dies mid-record, holds the port, ignores SIGTERM, or a
  kerncheck interrupted (SIGINT, SIGTERM) or killed (SIGKILL): handled, reported, and no process is left;
- malformed plans and manifests, and manifests that do not match the golden, the runs or the candidate, are
  refused with exit 3 naming file, field and what was expected.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file

from engine_replay import ReplayServer, load_exchanges, same_tensors
from kc_env import KC_BIN, has_python_extension, kc, write_tokenizer
from test_corpus_record import CODE, PROSE

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("KC_TEST_DATA", ROOT / "tests" / "data"))
GOLDEN = DATA / "server" / "golden.safetensors"
STUB = Path(__file__).resolve().parent / "floor_stub_server.py"
BUILD = Path(os.environ.get("KC_BUILD_DIR", "build")).resolve()
SMALL = ["--min-split-center", "10", "--min-split-tail", "50"]  # the 96-position fixture golden


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plan_text(configs, port=0, extra_engine="", stub_args=""):
    """A server plan whose command is the stub; configs: [(name, args list, extra TOML lines)]; extra_engine:
    "key = value" lines that replace the engine's defaults below."""
    out = f"""[kerncheck]
format = "floor-plan"
version = 1
[placeholders]
python = "{sys.executable}"
stub = "{STUB}"
[engine]
kind = "server"
api = "vllm"
command = ["{{python}}", "{{stub}}", "--port", "{{port}}", "--pidfile", "{{out_dir}}/{{config}}.pids", "--worker"{stub_args}]
environment = {{ KC_TEST_DATA = "{DATA}" }}
port = {port}
variant = "bf16"
served_model = "smollm2"
startup_timeout = 60
stop_timeout = 5
top_logprobs = 8
concurrency = 1
"""
    for line in filter(None, extra_engine.splitlines()):
        key = line.split("=")[0].strip()
        lines = [x for x in out.splitlines() if not x.startswith(key + " =")]
        out = "\n".join(lines) + "\n" + line + "\n"
    for name, args, more in configs:
        out += f"[[configuration]]\nname = \"{name}\"\n"
        if args:
            out += "args = [" + ", ".join(json.dumps(a) for a in args) + "]\n"
        out += more
    return out


def pids_of(folder):
    return [int(x) for f in Path(folder).glob("*.pids") for x in f.read_text().split()]


def running(pid):
    """True while pid is a live process (a zombie waiting for its parent is not running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def assert_gone(pids, wait=10):
    """Every process of the servers kerncheck started has ended (they may take a moment after a kill)."""
    assert pids, "the stub wrote no pid file"
    t0 = time.time()
    while time.time() - t0 < wait and any(running(p) for p in pids):
        time.sleep(0.1)
    assert not [p for p in pids if running(p)], "server processes left behind"


def judge_json(tmp, *args):
    """`kerncheck test ARGS --json F`: the report (any verdict)."""
    f = Path(tmp) / "judge.json"
    r = kc("test", *args, "--json", f, check=False)
    assert r.returncode in (0, 1, 2), r.stderr
    return json.loads(f.read_text())


def floor(plan, out, *extra, check=False):
    return kc("floor", plan, "--golden", GOLDEN, "-o", out, *SMALL, *extra, check=check)


def record_stub(tmp, out, *stub_args, variant="bf16"):
    """A candidate recorded from a stub the test starts itself (not through a plan)."""
    port = free_port()
    p = subprocess.Popen([sys.executable, STUB, "--port", str(port), *stub_args],
                         env={**os.environ, "KC_TEST_DATA": str(DATA)}, stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        kc("record", "--server", f"http://127.0.0.1:{port}", "--golden", GOLDEN, "--top-logprobs", "8",
           "--concurrency", "1", "--variant", variant, "-o", out)
    finally:
        p.terminate()
        p.wait()


@pytest.fixture(scope="module")
def spread_floor(tmp_path_factory):
    """Three configurations whose bits differ (the stub's --perturb), recorded once."""
    d = tmp_path_factory.mktemp("floor")
    plan = d / "plan.toml"
    plan.write_text(plan_text([("base", [], ""), ("p1", ["--perturb", "1"], ""),
                               ("p2", ["--perturb", "2"], "concurrency = 2\n")]))
    r = floor(plan, d / "f", check=True)
    cand = d / "cand.kcc"
    record_stub(d, cand, "--perturb", "7")
    return d, plan, d / "f", r, cand


def kl_pair(a, b, k_cov=None):
    """KL(a ‖ b) per position over the golden's top-k ids both reported, plus one bucket for the rest (numpy)."""
    lp, lq = a["logprobs_at_ref"].astype(np.float64), b["logprobs_at_ref"].astype(np.float64)
    cov = np.ones(lp.shape, bool)
    for x in (a, b):
        if "covered" in x:
            cov &= x["covered"].astype(bool)
    p, q = np.where(cov, np.exp(lp), 0), np.where(cov, np.exp(lq), 0)
    po = np.maximum(1 - p.sum(1), lp.shape[1] * 2.0**-24)
    qo = np.maximum(1 - q.sum(1), lp.shape[1] * 2.0**-24)
    po, qo = np.log(po.astype(np.float32)).astype(np.float64), np.log(qo.astype(np.float32)).astype(np.float64)
    terms = np.where(cov & (p > 0), p * (lp - lq), 0).sum(1)
    return terms + np.exp(po) * (po - qo)


# ---- the lab plan: the demo's floor, bit for bit ---------------------------------------------------------------

def test_lab_plan_reproduces_the_demo_floor(tmp_path):
    model = tmp_path / "model"
    import shutil
    shutil.copytree(DATA / "fixtures" / "llama-tiny", model)
    write_tokenizer(model / "tokenizer.json")
    (tmp_path / "prose.txt").write_text(PROSE)
    (tmp_path / "code.py").write_text(CODE)
    demo = tmp_path / "demo"
    r = kc("demo", "--preset", "tiny", "--model", model, "--out-dir", demo, "--prose", tmp_path / "prose.txt",
           "--code", tmp_path / "code.py", check=False)
    assert r.returncode in (0, 1), r.stderr
    summary = json.loads((demo / "summary.json").read_text())
    noise = [x["name"] for x in summary["runs"] if x.get("role", "noise") == "noise"][:8]
    out = tmp_path / "floor"
    r = kc("floor", ROOT / "examples" / "floor" / "lab-demo.toml", "--golden", demo / "golden.kcg", "-o", out,
           "--set", f"model={model}")
    m = json.loads((out / "floor.json").read_text())
    names = [x["name"] for x in m["runs"]]
    assert names == ["bf16", "bf16-flash"] + [f"order-{i}" for i in range(1, 7)]
    assert names == noise, "the plan lists the demo's floor runs, in its order"
    for n in names:
        same_tensors(out / f"{n}.kcc", demo / "runs" / f"{n}.kcc")  # the same bits as the demo's run
    assert m["engine"].startswith("kerncheck") and m["golden"]["checksum"].startswith("xxh3:")
    # The demo's floor through the manifest: the same judgement as the demo's run files given as --noise,
    # each distinct implementation once (on the tiny model some runs repeat another's bits).
    distinct = [x["name"] for x in m["runs"] if x["same_bits_as"] is None]
    assert len(distinct) == m["spread"]["distinct"] >= 2
    cand = demo / "runs" / "p-fp8.kcc"
    a = judge_json(tmp_path, demo / "golden.kcg", cand, "--floor", out / "floor.json")
    b = judge_json(tmp_path, demo / "golden.kcg", cand,
                   *[x for n in distinct for x in ("--noise", demo / "runs" / f"{n}.kcc")])
    assert a["verdict"] == b["verdict"] and a["stats"] == b["stats"] and a["headline"] == b["headline"]
    assert a["floor_test"] == b["floor_test"]
    # A rerun keeps every run.
    assert kc("floor", ROOT / "examples" / "floor" / "lab-demo.toml", "--golden", demo / "golden.kcg", "-o", out,
              "--set", f"model={model}").stdout.count("kept") == 8


# ---- a server plan ---------------------------------------------------------------------------------------------

def test_server_floor_records_each_configuration(spread_floor):
    d, plan, out, r, _ = spread_floor
    m = json.loads((out / "floor.json").read_text())
    assert [x["name"] for x in m["runs"]] == ["base", "p1", "p2"]
    assert m["engine"] == "vllm" and m["variant"] == "bf16" and m["served_model"] == "smollm2"
    g = load_file(str(GOLDEN))
    with safe_open(str(GOLDEN), "np") as f:
        assert m["golden"]["checksum"] == f.metadata()["checksum"]
    runs = {x["name"]: load_file(str(out / x["file"])) for x in m["runs"]}
    for x in m["runs"]:
        with safe_open(str(out / x["file"]), "np") as f:
            md = f.metadata()
        assert md["floor_configuration"] == x["name"] and md["engine_version"] == "stub-0.1" == x["engine_version"]
        assert md["checksum"] == x["checksum"] and x["hardware"] and md["variant"] == "bf16"
        assert (out / "logs" / f"{x['name']}.log").read_text().count("stub: listening") == 1
    assert m["runs"][1]["configuration"]["args"] == ["--perturb", "1"]
    assert m["runs"][2]["configuration"]["concurrency"] == 2
    # One server at a time: each log's server had stopped before the next one started (its pids are gone).
    assert_gone(pids_of(out))
    # The spread, against numpy: every run differs; KL between each pair.
    s = m["spread"]
    assert s["distinct"] == 3 and not s["degenerate"] and s["identical_groups"] == [["base"], ["p1"], ["p2"]]
    for p in s["pairwise_kl_mean"]["pairs"]:
        want = kl_pair(runs[p["a"]], runs[p["b"]]).mean()
        assert p["kl_mean"] == pytest.approx(want, rel=1e-3, abs=1e-12), p
    assert "3 floor runs, 3 with distinct bits" in s["sentence"]
    assert s["floor_test"]["splits"] and all(x["spread"] and x["mde_ratio"] > 1 for x in s["floor_test"]["splits"])
    assert "wrote" in r.stdout and "floor.json" in r.stdout
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "python" / "kerncheck" / "schemas" / "floor.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(m)


def test_test_with_floor_is_test_with_its_runs(spread_floor):
    d, plan, out, _, cand = spread_floor
    m = json.loads((out / "floor.json").read_text())
    a = d / "a.json"
    b = d / "b.json"
    ra = kc("test", GOLDEN, cand, "--floor", out / "floor.json", *SMALL, "--min-positions", "50", "--json", a,
            check=False)
    noise = [x for r in m["runs"] for x in ("--noise", out / r["file"])]
    rb = kc("test", GOLDEN, cand, *noise, *SMALL, "--min-positions", "50", "--json", b, check=False)
    assert ra.returncode == rb.returncode and ra.returncode in (0, 1, 2), ra.stderr
    ja, jb = json.loads(a.read_text()), json.loads(b.read_text())
    assert ja["floor_manifest"] == str(out / "floor.json") and jb["floor_manifest"] is None
    for key in ("verdict", "headline", "stats", "floor_stats", "findings", "floor_test", "notes"):
        assert ja[key] == jb[key], key
    assert f"floor     {out / 'floor.json'} (3 runs)" in ra.stdout
    if not has_python_extension(BUILD):
        return
    sys.path.insert(0, str(BUILD / "python"))
    import kerncheck

    rep = kerncheck.test(GOLDEN, cand, floor=out / "floor.json", min_split_center=10, min_split_tail=50,
                         min_positions=50)
    assert rep.verdict == ja["verdict"] and rep.json["stats"] == ja["stats"] and rep.notes == ja["notes"]
    with pytest.raises(kerncheck.Error, match="--floor: expected the manifest alone"):
        kerncheck.test(GOLDEN, cand, noise=[out / "base.kcc"], floor=out / "floor.json")


def test_rerun_keeps_finished_configurations(spread_floor):
    d, plan, out, _, _ = spread_floor
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("*.pids")}
    r = floor(plan, out, check=True)
    assert r.stdout.count("kept") == 3 and "starting the server" not in r.stdout
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.pids")} == before  # no server started


def test_a_floor_without_spread_says_so_everywhere(tmp_path):
    """Two configurations with the same bits (a deterministic engine): one sentence with what to do, in the
    manifest and in every report; the PASS is on the fixed limits and says so (it once read 'every check
    within its limit', as if the floor test had run)."""
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_text([("c1", [], ""), ("c4", [], "concurrency = 4\n")]))
    out = tmp_path / "f"
    r = floor(plan, out, check=True)
    m = json.loads((out / "floor.json").read_text())
    s = m["spread"]
    assert s["degenerate"] and s["distinct"] == 1 and s["identical_groups"] == [["c1", "c4"]]
    assert all(p["kl_mean"] == 0 for p in s["pairwise_kl_mean"]["pairs"])
    sentence = s["sentence"]
    assert sentence.startswith("the 2 floor runs do not differ") and "another attention backend" in sentence
    assert "accept the fixed limits" in sentence and "2 × the floor's" in sentence
    assert sentence in r.stdout and m["runs"][1]["same_bits_as"] == "c1"
    cand = tmp_path / "cand.kcc"
    record_stub(tmp_path, cand)  # the same bits again: PASS on the fixed limits
    js, ju, html = tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "r.html"
    t = kc("test", GOLDEN, cand, "--floor", out / "floor.json", *SMALL, "--min-positions", "50", "--json", js,
           "--junit", ju, "--html", html, check=False)
    j = json.loads(js.read_text())
    assert t.returncode == 0 and j["verdict"] == "PASS", t.stdout
    assert j["headline"].startswith("within the fixed limits only; no floor test ran (the 2 floor runs do not differ)")
    assert j["floor_test"]["tests"] == [] and j["floor_test"]["not_run"] == "the 2 floor runs do not differ"
    assert sentence in j["notes"]
    assert j["headline"] in t.stdout and f"note: {sentence}" in t.stdout
    assert sentence in ET.parse(ju).getroot().find("testsuite").find("system-out").text
    assert "fixed limits only" in html.read_text() and "do not differ" in html.read_text()


def test_runs_that_repeat_bits_are_read_once(tmp_path):
    """A configuration that gives another's bits is the same implementation: the manifest says which, and
    `test --floor` reads it once (counted twice, the floor's spread would shrink and the test would alarm)."""
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_text([("base", [], ""), ("again", [], "concurrency = 3\n"), ("p1", ["--perturb", "1"], ""),
                               ("p2", ["--perturb", "2"], "")]))
    out = tmp_path / "f"
    floor(plan, out, check=True)
    m = json.loads((out / "floor.json").read_text())
    assert m["spread"]["identical_groups"] == [["base", "again"], ["p1"], ["p2"]]
    assert [x["same_bits_as"] for x in m["runs"]] == [None, "base", None, None]
    assert "4 floor runs, 3 with distinct bits" in m["spread"]["sentence"]
    cand = tmp_path / "cand.kcc"
    record_stub(tmp_path, cand, "--perturb", "9")
    j = judge_json(tmp_path, GOLDEN, cand, "--floor", out / "floor.json", *SMALL)
    assert j["noise"] == [str(out / "base.kcc"), str(out / "p1.kcc"), str(out / "p2.kcc")]
    assert any(n.startswith("the floor's 4 runs hold 3 distinct implementations: again repeats an earlier run's bits")
               for n in j["notes"]), j["notes"]
    assert all(len(t["floor_runs"]) == 3 for t in j["floor_test"]["tests"])


def test_identical_noise_runs_never_read_as_a_floor_test(tmp_path):
    """The same through --noise (no manifest): identical runs and one run both give headlines on the fixed
    limits and the note; a floor that differs gives the ordinary headline."""
    cand = tmp_path / "c.kcc"
    n1, n2 = tmp_path / "n1.kcc", tmp_path / "n2.kcc"
    with ReplayServer(load_exchanges(DATA / "server" / "vllm_f32.jsonl")) as srv:
        for f in (cand, n1, n2):
            kc("record", "--server", srv.url, "--golden", GOLDEN, "--top-logprobs", "8", "--concurrency", "1",
               "--variant", "bf16", "-o", f)
    for noise, why in (([n1, n2], "the 2 floor runs do not differ"), ([n1], "one noise run")):
        args = [x for n in noise for x in ("--noise", n)]
        j = judge_json(tmp_path, GOLDEN, cand, *args, *SMALL, "--min-positions", "50")
        assert j["verdict"] == "PASS" and j["headline"].startswith(f"within the fixed limits only; no floor test ran ({why})")
        assert j["floor_test"]["not_run"] == why


# ---- servers that misbehave ----------------------------------------------------------------------------------

def test_server_that_never_becomes_healthy(tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_text([("a", [], ""), ("b", [], "")], extra_engine="startup_timeout = 3",
                              stub_args=', "--never-healthy"'))
    r = floor(plan, tmp_path / "f")
    assert r.returncode == 3
    assert "configuration a: server: expected http://127.0.0.1:" in r.stderr and "within 3 s" in r.stderr
    assert "no healthy answer; the server was stopped" in r.stderr and "stub: listening" in r.stderr  # log tail
    assert_gone(pids_of(tmp_path / "f"))
    assert not (tmp_path / "f" / "floor.json").exists() and (tmp_path / "f" / "logs" / "a.log").exists()


def test_server_that_exits_at_start(tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_text([("a", ["--exit-at-start", "7"], ""), ("b", [], "")]))
    r = floor(plan, tmp_path / "f")
    assert r.returncode == 3 and "ended during start-up (exit code 7)" in r.stderr, r.stderr
    assert "stub: exiting at start with code 7" in r.stderr
    assert_gone(pids_of(tmp_path / "f"))


def test_server_that_dies_mid_record_then_a_rerun_resumes(tmp_path):
    port = free_port()
    flag, count = tmp_path / "died", tmp_path / "count"
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_text([("a", ["--die-after", "7", "--die-once", str(flag), "--count", str(count)], ""),
                               ("b", [], "")], port=port))
    out = tmp_path / "f"
    r = floor(plan, out)
    assert r.returncode == 3, r.stdout
    assert "a server that ended during the recording (exit code 3)" in r.stderr
    assert "stub: dying at request 8" in r.stderr and f"{out / 'a.kcc'}.partial/" in r.stderr
    assert_gone(pids_of(out))  # the worker the dead server left behind too
    first = len(count.read_text().splitlines())
    r = floor(plan, out, check=True)
    total = len(count.read_text().splitlines()) - first
    # 4 segments of 1 prefill + 4 decode requests each: the segment(s) finished before the death are not asked again.
    assert 0 < total < 20 and json.loads((out / "floor.json").read_text())["spread"]["runs"] == 2
    with ReplayServer(load_exchanges(DATA / "server" / "vllm_f32.jsonl")) as srv:
        kc("record", "--server", srv.url, "--golden", GOLDEN, "--top-logprobs", "8", "--concurrency", "1",
           "--variant", "bf16", "-o", tmp_path / "ref.kcc")
    same_tensors(out / "a.kcc", tmp_path / "ref.kcc")  # the resumed file is the one an uninterrupted run writes
    assert_gone(pids_of(out))


def test_port_in_use_is_refused(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        plan = tmp_path / "plan.toml"
        plan.write_text(plan_text([("a", [], ""), ("b", [], "")], port=port))
        r = floor(plan, tmp_path / "f")
    assert r.returncode == 3
    assert f"port: expected 127.0.0.1:{port} to be free before the server starts, got a port in use" in r.stderr
    assert not list((tmp_path / "f").glob("*.pids"))  # no server was started


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("stubborn", [False, True])
def test_interrupted_floor_stops_its_server(tmp_path, sig, stubborn):
    """Ctrl-C or a kill of kerncheck during a recording: the server's group is stopped (SIGTERM, then
    SIGKILL for a server that ignores it) before kerncheck ends by the signal."""
    plan = tmp_path / "plan.toml"
    args = ["--delay", "0.2"] + (["--ignore-term"] if stubborn else [])
    plan.write_text(plan_text([("a", args, ""), ("b", [], "")], extra_engine="stop_timeout = 2"))
    out = tmp_path / "f"
    p = subprocess.Popen([KC_BIN, "floor", plan, "--golden", GOLDEN, "-o", out, *SMALL], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    while not (out / "a.kcc.partial").exists() and time.time() - t0 < 30:
        time.sleep(0.05)
    time.sleep(0.3)
    pids = pids_of(out)
    assert pids and all(running(x) for x in pids)
    p.send_signal(sig)
    p.communicate(timeout=30)
    assert p.returncode == -sig
    assert_gone(pids, wait=3)


def test_killed_floor_leaves_no_server(tmp_path):
    """kerncheck killed outright (SIGKILL: no handler runs): the kernel tells the server to stop
    (PR_SET_PDEATHSIG), and an engine that stops its workers on SIGTERM leaves nothing behind."""
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_text([("a", ["--delay", "0.2"], ""), ("b", [], "")]))
    out = tmp_path / "f"
    p = subprocess.Popen([KC_BIN, "floor", plan, "--golden", GOLDEN, "-o", out, *SMALL], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    t0 = time.time()
    while not (out / "a.kcc.partial").exists() and time.time() - t0 < 30:
        time.sleep(0.05)
    pids = pids_of(out)
    p.kill()
    p.wait()
    assert_gone(pids)


def test_placeholders_are_expanded_per_start(tmp_path):
    """{port} and {config} per start, {plan_dir}, {out_dir}, {env:…} and [placeholders] (with --set) when the
    plan is read; {{ and }} are literal braces."""
    plan = tmp_path / "plan.toml"
    text = plan_text([("a", [], ""), ("b", [], "")])
    text = text.replace('environment = {', 'environment = { KC_BRACES = "{{port}}:{port}:{config}:{plan_dir}:{who}:{env:KC_FLOOR_T}",')
    text = text.replace("[placeholders]\n", '[placeholders]\nwho = "nobody"\n')
    plan.write_text(text)
    out = tmp_path / "f"
    r = kc("floor", plan, "--golden", GOLDEN, "-o", out, *SMALL, "--set", "who=me", env={"KC_FLOOR_T": "t1"})
    assert r.returncode == 0, r.stderr
    for name in ("a", "b"):
        log = (out / "logs" / f"{name}.log").read_text()
        port = log.split(", port ", 1)[1].split("\n", 1)[0]
        assert f"== KC_BRACES={{port}}:{port}:{name}:{tmp_path}:me:t1\n" in log, log[:400]
        assert f"--pidfile {out}/{name}.pids" in log


# ---- refusals ----------------------------------------------------------------------------------------------

GOOD = plan_text([("a", [], ""), ("b", [], "")])

PLAN_CASES = [
    ("not toml", "[kerncheck\n", "syntax: expected valid TOML (a floor plan)"),
    ("no head", GOOD.replace('[kerncheck]\nformat = "floor-plan"\nversion = 1\n', ""),
     "[kerncheck]: expected a table with format"),
    ("format", GOOD.replace('"floor-plan"', '"thresholds"'), 'kerncheck.format: expected "floor-plan", got "thresholds"'),
    ("version", GOOD.replace("version = 1", "version = 2"), "kerncheck.version: expected 1, got 2"),
    ("top key", GOOD + "[extra]\n", 'extra: expected one of the keys kerncheck, placeholders, engine, configuration'),
    ("kind", GOOD.replace('kind = "server"', 'kind = "docker"'), 'engine.kind: expected server (an inference server'),
    ("typo", GOOD.replace("startup_timeout", "startup_timout"),
     'engine.startup_timout: expected one of the keys', 'did you mean "startup_timeout"'),
    ("api", GOOD.replace('api = "vllm"', 'api = "llamacpp"'), 'engine.api: expected vllm or sglang, got "llamacpp"'),
    ("no command", GOOD.replace("command = [", "commands = ["), "engine.commands: expected one of the keys"),
    ("empty command", GOOD.replace('command = ["{python}"', 'command = []\nx = ["{python}"'), "engine.x: expected one of"),
    ("port", GOOD.replace("port = 0", "port = 70000"), "engine.port: expected a whole number in [0, 65535], got 70000"),
    ("window for vllm", GOOD.replace("port = 0", "port = 0\nprefill_window = 8"),
     'engine.prefill_window: expected only with api = "sglang", got a window for "vllm"'),
    ("window range", GOOD.replace('api = "vllm"', 'api = "sglang"\nprefill_window = -1'),
     "engine.prefill_window: expected a whole number in [0, 1048576], got -1"),
    ("timeout type", GOOD.replace("startup_timeout = 60", 'startup_timeout = "60"'),
     "engine.startup_timeout: expected a number in [1, 86400], got a string"),
    ("placeholder", GOOD.replace('"{port}"', '"{prot}"'), 'engine.command[3]: expected a known placeholder',
     'got {prot} (did you mean "port"?)'),
    ("env unset", GOOD.replace('"{python}"', '"{env:KC_SURELY_UNSET_VAR}"'),
     "engine.command[0]: expected environment variable KC_SURELY_UNSET_VAR to be set"),
    ("brace", GOOD.replace('"--worker"', '"--wor{ker"'), 'engine.command[6]: expected balanced braces'),
    ("one config", GOOD.split("[[configuration]]")[0] + '[[configuration]]\nname = "a"\n',
     "[[configuration]]: expected at least 2 configurations (a floor is the spread between runs), got 1"),
    ("no name", GOOD.replace('name = "b"', 'args = []'), "configuration[1].name: expected a string, got nothing"),
    ("same name", GOOD.replace('name = "b"', 'name = "a"'), 'configuration[1].name: expected a name no other configuration has, got "a" again'),
    ("bad name", GOOD.replace('name = "b"', 'name = "../b"'), "configuration[1].name: expected 1 to 64 characters"),
    ("args type", GOOD.replace('name = "b"', 'name = "b"\nargs = "--x"'), "configuration[1].args: expected an array of strings, got a string"),
    ("arg type", GOOD.replace('name = "b"', 'name = "b"\nargs = [1]'), "configuration[1].args[0]: expected a string, got an integer"),
    ("env value", GOOD.replace('name = "b"', 'name = "b"\nenvironment = { X = 1 }'), "configuration[1].environment.X: expected a string, got an integer"),
    ("concurrency", GOOD.replace('name = "b"', 'name = "b"\nconcurrency = 0'), "configuration[1].concurrency: expected a whole number in [1, 1024], got 0"),
    ("variant on server", GOOD.replace('name = "b"', 'name = "b"\nvariant = "bf16"'), "configuration[1].variant: expected one of the keys name, args, environment, concurrency"),
    ("lab variant", '[kerncheck]\nformat = "floor-plan"\nversion = 1\n[engine]\nkind = "kerncheck"\nmodel = "m"\n'
     '[[configuration]]\nname = "a"\nvariant = "bf16"\n[[configuration]]\nname = "b"\nvariant = "bf16+ordr=1"\n',
     "configuration[1].variant"),
    ("lab args", '[kerncheck]\nformat = "floor-plan"\nversion = 1\n[engine]\nkind = "kerncheck"\nmodel = "m"\n'
     '[[configuration]]\nname = "a"\nvariant = "bf16"\n[[configuration]]\nname = "b"\nargs = []\nvariant = "bf16"\n',
     "configuration[1].args: expected one of the keys name, variant"),
]


@pytest.mark.parametrize("case", PLAN_CASES, ids=[c[0] for c in PLAN_CASES])
def test_malformed_plans_are_refused(tmp_path, case):
    plan = tmp_path / "plan.toml"
    plan.write_text(case[1])
    r = floor(plan, tmp_path / "f")
    assert r.returncode == 3, r.stdout
    assert f"{plan}" in r.stderr.split(": error: ", 1)[1].split(":")[0] + ":" or str(plan) in r.stderr
    for want in case[2:]:
        assert want in r.stderr, r.stderr
    assert not list((tmp_path / "f").glob("*.pids"))


def test_unknown_set_is_refused(tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text(GOOD)
    r = floor(plan, tmp_path / "f", "--set", "pythn=x")
    assert r.returncode == 3 and '--set pythn: expected a placeholder of the plan' in r.stderr
    assert 'did you mean "python"' in r.stderr


def mutate(manifest, fn, to):
    m = json.loads(Path(manifest).read_text())
    fn(m)
    Path(to).write_text(json.dumps(m))
    return to


MANIFEST_CASES = [
    ("format", lambda m: m.update(format="kerncheck.other"), 'format: expected "kerncheck.floor", got "kerncheck.other"'),
    ("version", lambda m: m.update(version=2), "version: expected 1, got 2"),
    ("no runs", lambda m: m.update(runs=[]), "runs: expected a non-empty array of runs, got []"),
    ("no golden", lambda m: m.pop("golden"), "golden: expected a JSON object, got nothing"),
    ("golden checksum", lambda m: m["golden"].update(checksum="abc"), 'golden.checksum: expected "xxh3:" and 16 hex digits, got "abc"'),
    ("run checksum", lambda m: m["runs"][1].pop("checksum"), "runs[1].checksum: expected a string, got nothing"),
    ("run name", lambda m: m["runs"][1].update(name="base"), 'runs[1].name: expected a name no other run has, got "base" again'),
    ("run engine", lambda m: m["runs"][2].update(engine="sglang"), 'runs[2].engine: expected the manifest\'s engine "vllm", got "sglang"'),
    ("run file", lambda m: m["runs"][0].update(file=3), "runs[0].file: expected a non-empty string, got 3"),
]


@pytest.mark.parametrize("case", MANIFEST_CASES, ids=[c[0] for c in MANIFEST_CASES])
def test_malformed_manifests_are_refused(spread_floor, case, tmp_path):
    d, plan, out, _, cand = spread_floor
    bad = mutate(out / "floor.json", case[1], out / f"bad-{case[0].replace(' ', '-')}.json")
    r = kc("test", GOLDEN, cand, "--floor", bad, *SMALL, check=False)
    assert r.returncode == 3 and f"{bad}: {case[2]}" in r.stderr, r.stderr


def test_manifest_not_json(spread_floor, tmp_path):
    d, plan, out, _, cand = spread_floor
    (tmp_path / "m.json").write_text("{not json")
    r = kc("test", GOLDEN, cand, "--floor", tmp_path / "m.json", check=False)
    assert r.returncode == 3 and f"{tmp_path / 'm.json'}: syntax: expected valid JSON" in r.stderr
    # A number beyond a double is a syntax error too (the parser raises another kind of error for it).
    (tmp_path / "m.json").write_text('{"format": 1e999}')
    r = kc("test", GOLDEN, cand, "--floor", tmp_path / "m.json", check=False)
    assert r.returncode == 3 and f"{tmp_path / 'm.json'}: syntax: expected valid JSON" in r.stderr, r.stderr


def test_manifest_that_does_not_match_is_refused(spread_floor, tmp_path):
    d, plan, out, _, cand = spread_floor
    m = out / "floor.json"
    # Another golden (the manifest's runs belong to the fixture golden).
    other = tmp_path / "g2.safetensors"
    with ReplayServer(load_exchanges(DATA / "server" / "vllm_f32.jsonl")) as srv:
        kc("record", "--server", srv.url, "--corpus", DATA / "server" / "corpus.kcc", "--top-logprobs", "8",
           "-k", "8", "-o", other)
    r = kc("test", other, cand, "--floor", m, check=False)
    assert r.returncode == 3, r.stdout
    # A run replaced by another file (a run of the same golden, another configuration's bits).
    swapped = tmp_path / "swap"
    import shutil
    shutil.copytree(out, swapped, ignore=shutil.ignore_patterns("*.partial"))
    shutil.copy(swapped / "p1.kcc", swapped / "p2.kcc")
    r = kc("test", GOLDEN, cand, "--floor", swapped / "floor.json", *SMALL, check=False)
    assert r.returncode == 3 and "floor.json: runs[2].checksum: expected the checksum of" in r.stderr, r.stderr
    # A byte of a run changed: its own checksum fails (the manifest's stored checksum still matches its header).
    shutil.copy(out / "p2.kcc", swapped / "p2.kcc")
    b = bytearray((swapped / "p2.kcc").read_bytes())
    b[-5] ^= 1
    (swapped / "p2.kcc").write_bytes(bytes(b))
    r = kc("test", GOLDEN, cand, "--floor", swapped / "floor.json", *SMALL, check=False)
    assert r.returncode == 3 and "p2.kcc" in r.stderr and "checksum" in r.stderr, r.stderr
    # A candidate from another served model than the floor's.
    bad = mutate(m, lambda j: j.update(served_model="llama-70b"), out / "bad-served.json")
    r = kc("test", GOLDEN, cand, "--floor", bad, *SMALL, check=False)
    assert r.returncode == 3 and 'server_record.model: expected the floor\'s served model "llama-70b"' in r.stderr
    # A candidate of another precision than the floor's runs (f32 against bf16): the floor check of --noise.
    f32 = tmp_path / "f32.kcc"
    record_stub(tmp_path, f32, variant="f32")
    r = kc("test", GOLDEN, f32, "--floor", m, *SMALL, check=False)
    assert r.returncode == 3 and "variant: expected a noise run of the candidate's engine and precision" in r.stderr
    # --floor with --noise.
    r = kc("test", GOLDEN, cand, "--floor", m, "--noise", out / "base.kcc", check=False)
    assert r.returncode == 3 and "--floor: expected the manifest alone" in r.stderr
    # The manifest as an output: refused before any work (it is an input).
    r = kc("test", GOLDEN, cand, "--floor", m, "--json", out / "p1.kcc", check=False)
    assert r.returncode == 3 and "p1.kcc" in r.stderr
