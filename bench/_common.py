"""What every bench needs before it measures: the kerncheck binaries and the Python packages, with a
one-line message (exit 2) naming the flag or the install command when one is missing, not a traceback."""
import importlib
import os
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CLI = os.environ.get("KC_BIN") or os.path.join(ROOT, "build", "src", "kerncheck")


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
