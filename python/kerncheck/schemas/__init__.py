"""JSON schemas (draft 2020-12) of kerncheck's JSON reports (docs/schemas.md): kerncheck.schemas.load(name)
with name one of NAMES. Each report names its layout: "format" and "version" keys (the judge's report:
"kerncheck_report"); a version changes only when a key changes meaning or goes away."""
import json
from pathlib import Path

NAMES = ("compare", "test", "sweep", "demo-summary", "pytest", "locate", "floor")


def load(name):
    """The schema of report `name` (compare, test, sweep, demo-summary, pytest, locate, floor) as a dict."""
    if name not in NAMES:
        raise ValueError(f"schema: expected one of {', '.join(NAMES)}, got {name!r}")
    return json.loads((Path(__file__).parent / f"{name}.json").read_text(encoding="utf-8"))
