"""python -m kerncheck compare -i CASES.csv --plugin assets.py [--compare M] [--spec F.toml] [--json F]
[--junit F] [--save DIR]; python -m kerncheck ops [--plugin assets.py].

The CLI's `kerncheck compare -i` with Python plugins: TestSpec classes route and tune the methods (as
--spec does), @kerncheck.candidate functions are candidates of the built-in ops. Exit codes as the CLI:
0 every case passes, 1 any fails, 3 bad input or usage.
"""
import argparse
import json
import sys

from . import _core
from ._compare import DEFAULT_METHOD, METHODS
from .plugin import list_ops, load_plugin

EXIT_PASS, EXIT_FAIL, EXIT_INPUT = 0, 1, 3


def _compare(args):
    tomls, labels = [], []
    for p in args.plugin:
        plug = load_plugin(p)
        if plug.toml:
            tomls.append(plug.toml)
            labels.append(plug.path)
    if args.spec:
        with open(args.spec, encoding="utf-8") as f:
            tomls.append(f.read())
        labels.append(args.spec)
    toml = "\n".join(tomls) if tomls else None

    def on_case(text, _json):
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    js, junit, passed, failed = _core.run_cases(args.input, args.compare, toml, " + ".join(labels),
                                                args.save or "", on_case)
    print(f"{passed} passed, {failed} failed")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(js)
    if args.junit:
        with open(args.junit, "w", encoding="utf-8") as f:
            f.write(junit)
    return EXIT_FAIL if failed else EXIT_PASS


def _ops(args):
    for p in args.plugin:
        load_plugin(p)
    for d in list_ops():
        print(f"{d['name']}: {d['summary']}\n  inputs: {'; '.join(d['inputs'])}")
        if d["params"]:
            print(f"  params: {', '.join(d['params'])}")
        print(f"  candidates: {', '.join(d['candidates'])} (default {d['default_candidate']})")
    return EXIT_PASS


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m kerncheck", description=__doc__.split("\n\n")[1])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare", help="run a CSV case file with Python plugins (TestSpec, candidates)")
    c.add_argument("-i", "--input", required=True, help="CSV case file (the CLI's format, docs/cli-compare.md)")
    c.add_argument("--plugin", action="append", default=[],
                   help="Python file with TestSpec classes and/or @kerncheck.candidate functions (repeatable)")
    c.add_argument("--compare", default=None,
                   help=f"method for every case: {', '.join(METHODS)} (default: routed by the plugin's "
                        f"TestSpec, then by dtype, then {DEFAULT_METHOD})")
    c.add_argument("--spec", default=None, help="TOML spec too (as kerncheck compare --spec)")
    c.add_argument("--json", default=None, help="write the results as JSON to FILE")
    c.add_argument("--junit", default=None, help="write the results as JUnit XML to FILE")
    c.add_argument("--save", default=None, help="op cases: write inputs, golden and actual as .npy under DIR/NAME/")
    o = sub.add_parser("ops", help="list the built-in ops and their candidates (plugins' too)")
    o.add_argument("--plugin", action="append", default=[], help="Python plugin file (repeatable)")
    args = ap.parse_args(argv)
    try:
        return _compare(args) if args.cmd == "compare" else _ops(args)
    except (_core.Error, ValueError, TypeError, OSError) as e:
        sys.stdout.flush()
        print(f"python -m kerncheck {args.cmd}: error: {e}", file=sys.stderr)
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
