"""What every bench needs before it measures: the kerncheck binaries and the Python packages, with a
one-line message (exit 2) naming the flag or the install command when one is missing, not a traceback."""
import importlib
import os
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CLI = os.environ.get("KC_BIN") or os.path.join(ROOT, "build", "src", "kerncheck")
# SmolLM2 as scripts/fetch_smollm2.sh caches it ($KC_SMOLLM2_GGUF overrides).
DEFAULT_GGUF = os.environ.get("KC_SMOLLM2_GGUF") or os.path.join(
    os.environ.get("KC_CACHE", os.path.expanduser("~/.cache/kerncheck")), "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")


def missing(msg):
    sys.exit(f"{os.path.basename(sys.argv[0])}: {msg}")


def executable(path, flag, what):
    """path if it is an executable file (or a command on PATH), else exit naming the flag."""
    found = path if os.path.isfile(path) and os.access(path, os.X_OK) else shutil.which(path)
    if not found:
        missing(f"{what} not found at {path}: build it (scripts/setup.sh) or pass {flag} PATH")
    return found


def need(*modules):
    """Imports the modules; a missing one exits naming the lock that provides it."""
    out = []
    for m in modules:
        try:
            out.append(importlib.import_module(m))
        except ImportError as e:
            missing(f"Python package {m.split('.')[0]} is missing ({e}); scripts/test.sh installs every bench "
                    f"dependency from requirements.lock into .venv (run the bench with .venv/bin/python)")
    return out[0] if len(out) == 1 else out


def run(*args, env=None):
    """Runs a command; its stdout, or exit naming the command and the tail of its stderr."""
    import subprocess

    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        missing(f"{' '.join(map(str, args[:3]))} …: exit {p.returncode}\n{p.stderr[-2000:]}")
    return p.stdout


def measured(*args):
    """Runs a command; (exit code, stdout and stderr, peak RSS MiB, CPU s, wall s) of that process alone. The
    peak is its VmHWM, read every 20 ms: ru_maxrss would count this Python process, whose memory the child
    shares until it execs."""
    import subprocess
    import threading
    import time

    t = time.perf_counter()
    p = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = [0]

    def watch():
        while p.returncode is None:
            try:
                with open(f"/proc/{p.pid}/status") as f:
                    peak[0] = max([peak[0]] + [int(x.split()[1]) for x in f if x.startswith("VmHWM:")])
            except OSError:
                return
            time.sleep(0.02)

    th = threading.Thread(target=watch, daemon=True)
    th.start()
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    th.join()
    return p.returncode, out, peak[0] / 1024, ru.ru_utime + ru.ru_stime, time.perf_counter() - t


def gguf(path):
    """path if the SmolLM2 GGUF is there, else exit naming how to get it."""
    if not os.path.isfile(path):
        missing(f"the SmolLM2 GGUF is not at {path}: scripts/fetch_smollm2.sh fetches it, or pass --model")
    return path


def one_segment_golden(cli, model, depth, decode_last, k, work):
    """A corpus of one segment of `depth` (its last `decode_last` positions decode steps) and its f32 golden
    from kerncheck's engine, in work/ (reused when there): (corpus, golden)."""
    corpus, golden = os.path.join(work, f"c{depth}.kcorpus"), os.path.join(work, f"g{depth}.kcg")
    if not os.path.exists(golden):
        run(cli, "corpus", "build", "--tokenizer", model, "--depths", depth, "--segments-per-depth", 1,
            "--decode-last", decode_last, "-o", corpus)
        run(cli, "record", "--model", model, "--corpus", corpus, "-k", k, "-o", golden)
    return corpus, golden
