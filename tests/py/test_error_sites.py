"""Every refusal says what was expected: a static check over every input-error site in src/.

The one shape of a refusal is "FILE[:LINE:COL]: FIELD: expected …, got …" (src/core/error.h).
`throw_input_error(file, field, expected, got)` has it by construction (this test checks that `expected` is
never an empty literal); every free-form site — `fail(…)`, `throw Error(…)`, `throw nb::…_error(…)`,
`throw std::…(…)` — must carry "FIELD: expected" (or "; expected", "(expected") in its format string. The few sites that cannot (they wrap a
message made elsewhere) are listed in ALLOWED with the reason; an entry that no longer matches a site fails
too, so the list cannot rot. Internal invariants use KC_ASSERT (an abort, never exit 3) and are not scanned.
The walk through the real CLI is tests/py/test_hostile_inputs.py
(`test_every_reader_refusal_names_file_field_and_expected`).
"""
import pathlib
import re

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"

# A call that raises an input error. `(?<![\w.:])` keeps out assert_fail, x.fail and the like.
_SITE = re.compile(r"(?<![\w.])(?:kc::)?fail\s*\(|\bthrow\s+(?:kc::)?Error\s*\(|\bthrow\s+nb::\w+_error\s*\("
                   r"|\bthrow\s+std::\w+\s*\(")
_TIE = re.compile(r"(?<![\w.])(?:kc::)?throw_input_error\s*\(")
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
# "FIELD: expected", "…; expected" (the variant grammar) or "(expected" — not a bare leading "expected …".
_EXPECTED = re.compile(r"(?:: |; |\()expected ")

# (file, a piece of the call, callee included; "" = no arguments): why the site may not say "expected" itself.
ALLOWED = {
    ("core/error.h", "fmt::format(f, std::forward<Args>(args)...)"): "the definition of fail()",
    ("core/error.cpp", "msg"): "throw_input_error's own throw",
    ("golden/golden.cpp", "f.second"): "rethrows check_rows' message; its callers format 'FILE: FIELD: expected …'",
    ("golden/golden.cpp", ""): "std::bad_alloc from a failed mmap: main reports 'out of memory'",
    ("opmode/cases.cpp", "file, ln, c, msg"): "the CSV parser's err(); every caller passes 'expected …, got …'",
    ("opmode/cases.cpp", 'where_col("shapes"), e.what()'): "prefixes the op's own 'FIELD: expected …' with FILE:LINE:COL",
    ("opmode/cases.cpp", "c.where(), e.what()"): "prefixes a kc::Error (already shaped) with FILE:LINE:COL",
    ("lab/generate.cpp", "o.prompts_path, p.line, e.what()"): "prefixes the prompt's kc::Error with FILE: line N",
    ("lab/generate.cpp", "expected at least 2 tokens"): "caught below, becomes 'FILE: line N: prompt: expected …'",
    ("lab/record_model.cpp", "KC_RECORD_STOP_AFTER"): "a deliberate stop for the resume tests, not a refusal",
    ("cli/cmd_corpus.cpp", "std::invalid_argument(t"): "caught two lines below, rethrown as '--depths: expected …'",
    ("lab/record_server.cpp", "stopped (another request failed)"): "cancels a worker after another request "
    "failed; only the first failure (shaped where it is thrown) is reported",
    ("lab/record_server.cpp", "first_error + fmt::format("): "rethrows the first failed request's shaped message "
    "with the resume hint",
}


def strip_comments(text: str) -> str:
    """The text with // and /* */ comments blanked (string and char literals kept, raw strings too)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith('R"(', i):
            j = text.index(')"', i) + 2
        elif text[i] in "\"'":
            j = i + 1
            while j < n and text[j] != text[i]:
                j += 2 if text[j] == "\\" else 1
            j += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        elif text.startswith("/*", i):
            j = text.index("*/", i) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        else:
            j = i + 1
        out.append(text[i:j])
        i = j
    return "".join(out)


def call_args(text: str, at: int) -> str:
    """The argument text of the call whose '(' ends just before `at`."""
    depth, j = 1, at
    while depth:
        c = text[j]
        if c in "\"'":
            q, j = c, j + 1
            while text[j] != q:
                j += 2 if text[j] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        j += 1
    return text[at:j - 1]


def top_level_args(args: str) -> list[str]:
    parts, depth, cur, i = [], 0, "", 0
    while i < len(args):
        c = args[i]
        if c in "\"'":
            j = i + 1
            while args[j] != c:
                j += 2 if args[j] == "\\" else 1
            cur += args[i:j + 1]
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    parts.append(cur.strip())
    return parts


def scan(src: pathlib.Path) -> tuple[list[tuple[str, int, str]], set[tuple[str, str]]]:
    """(free-form sites without "expected", allowlist entries used)."""
    bad, used = [], set()
    for f in sorted(p for p in src.rglob("*") if p.suffix in (".cpp", ".h")):
        rel = f.relative_to(src).as_posix()
        text = strip_comments(f.read_text())
        for m in _SITE.finditer(text):
            if text[max(0, m.start() - 5):m.start()].endswith("void "):
                continue  # a declaration or definition
            args = call_args(text, m.end())
            if _EXPECTED.search("".join(_LITERAL.findall(args))):
                continue
            call = m.group(0) + args
            key = next((k for k in ALLOWED if k[0] == rel and (k[1] in call if k[1] else not args.strip())), None)
            if key:
                used.add(key)
                continue
            bad.append((rel, text.count("\n", 0, m.start()) + 1, " ".join(args.split())[:120]))
        for m in _TIE.finditer(text):
            if text[max(0, m.start() - 5):m.start()].endswith("void "):
                continue
            a = top_level_args(call_args(text, m.end()))
            if len(a) != 4 or a[2] in ('""', "{}", "std::string()"):
                bad.append((rel, text.count("\n", 0, m.start()) + 1, "throw_input_error without an expected value"))
    return bad, used


def test_every_input_error_site_says_what_was_expected():
    bad, used = scan(SRC)
    assert not bad, "refusals without 'expected' (reword to throw_input_error(file, field, expected, got)):\n" + \
        "\n".join(f"src/{f}:{line}: {args}" for f, line, args in bad)
    stale = set(ALLOWED) - used
    assert not stale, f"allowlist entries that match no site any more (remove them): {sorted(stale)}"


def test_the_scan_catches_planted_sites(tmp_path):
    """Sites the scan must flag, and look-alikes it must not: the check can fail."""
    src = tmp_path / "src" / "core"
    src.mkdir(parents=True)
    (src / "planted.cpp").write_text(r'''
void f() {
  fail("{}: cannot open", path);                       // flagged: no expected
  kc::fail("{}: key \"{}\" appears twice", file, k);    // flagged (escaped quotes)
  fail("{}: split "
       "over lines", x);                                // flagged
  throw Error(fmt::format("{}: bad", p));               // flagged
  throw nb::value_error("op: unknown");                 // flagged
  throw std::runtime_error("oops");                     // flagged
  fail("{}: x", a);  /* expected in a comment only */   // flagged
  throw_input_error(path, "field", "", "got");          // flagged: empty expected
  fail("expected a source, got none");                 // flagged: names no file or flag
  fail("{}: field: expected 3, got {}", p, n);          // fine
  fail("{}: a (b): "
       "expected c", p);                                // fine: concatenated literal
  throw_input_error(path, "field", fmt::format("{} bytes", n), "x");  // fine
  KC_ASSERT(ok, "broken");                              // fine: an invariant
  assert_fail("x", __FILE__, __LINE__, "y");            // fine: not a refusal
}
''')
    bad, _ = scan(tmp_path / "src")
    assert sorted(line for _, line, _ in bad) == [3, 4, 5, 7, 8, 9, 10, 11, 12], bad
