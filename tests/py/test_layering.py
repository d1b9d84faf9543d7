"""The folder layout is the architecture: a layer may include only itself and the layers below it.

The dependency table is read from the CMake targets (src/CMakeLists.txt: `kc_layer(NAME DEPS kc_…)`, the
`kerncheck` executable = cli/, the `_core` extension = python/), closed transitively, so the table the
build links with and the table this test enforces cannot drift apart. Linking alone does not catch an
upward include (a header-only use links fine), hence this test. Every include form counts:
`"layer/x.h"`, `<layer/x.h>`, relative `"../layer/x.h"` and same-folder `"x.h"`, in every file below a
layer folder (sub-folders included).
"""
import pathlib
import re

import pytest

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"
_LAYER = re.compile(r"kc_layer\(\s*(\w+)([^)]*)\)")
_LINK = re.compile(r"target_link_libraries\(\s*(\w+)\s+(?:PUBLIC|PRIVATE|INTERFACE)?([^)]*)\)")
_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
# Targets that are not kc_layer libraries, and the folder that holds their sources.
_TOP_TARGETS = {"kerncheck": "cli", "_core": "python"}


def dependency_table(src: pathlib.Path) -> dict[str, set[str]]:
    """Folder → folders it may include (itself and everything it links, transitively)."""
    direct: dict[str, set[str]] = {}
    for cm in [src / "CMakeLists.txt", *sorted(src.glob("*/CMakeLists.txt"))]:
        text = re.sub(r"#.*", "", cm.read_text())
        for name, args in _LAYER.findall(text):
            deps = args.split("DEPS", 1)[1].split() if "DEPS" in args else []
            direct[name] = {d[3:] for d in deps if d.startswith("kc_")}
        for target, args in _LINK.findall(text):
            folder = _TOP_TARGETS.get(target)
            if folder:
                direct.setdefault(folder, set()).update(d[3:] for d in args.split() if d.startswith("kc_"))
    closed: dict[str, set[str]] = {}

    def close(layer: str, seen: tuple[str, ...] = ()) -> set[str]:
        if layer in seen:
            raise AssertionError(f"dependency cycle in the CMake targets: {' → '.join(seen + (layer,))}")
        if layer not in closed:
            out = {layer}
            for d in direct.get(layer, ()):
                out |= close(d, seen + (layer,))
            closed[layer] = out
        return closed[layer]

    for layer in direct:
        close(layer)
    return closed


def included_layer(src: pathlib.Path, f: pathlib.Path, bracket: str, path: str, layers: set[str]) -> str | None:
    """The layer folder an include names, or None for a system/library header."""
    if bracket == '"':
        resolved = (f.parent / path).resolve()
        if resolved.is_file() and src.resolve() in resolved.parents:
            return resolved.relative_to(src.resolve()).parts[0]
    first = path.split("/", 1)[0]
    return first if "/" in path and first in layers else None


def violations(src: pathlib.Path) -> list[str]:
    table = dependency_table(src)
    layers = set(table)
    bad = []
    for d in sorted(p for p in src.iterdir() if p.is_dir()):
        if d.name not in table:
            bad.append(f"{d.name}/ is a folder without a CMake layer target")
            continue
        for f in sorted(p for p in d.rglob("*") if p.suffix in {".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh"}):
            for bracket, path in _INCLUDE.findall(f.read_text(errors="replace")):
                layer = included_layer(src, f, bracket, path, layers)
                if layer is not None and layer not in table[d.name]:
                    bad.append(f"{f.relative_to(src)} includes {path} (layer {layer}/, "
                               f"allowed: {', '.join(sorted(table[d.name]))})")
    return bad


def test_the_table_comes_from_cmake():
    table = dependency_table(SRC)
    assert {"core", "numeric", "cli", "python"} <= set(table)
    assert table["core"] == {"core"}
    assert "core" in table["cli"] and "cli" not in table["core"]


def test_no_layer_includes_a_higher_one():
    bad = violations(SRC)
    assert not bad, "layering violations:\n" + "\n".join(bad)


def _plant(tmp_path: pathlib.Path, include_line: str, where: str = "low/sub/x.cpp") -> pathlib.Path:
    src = tmp_path / "src"
    (src / "low" / "sub").mkdir(parents=True)
    (src / "high").mkdir()
    (src / "CMakeLists.txt").write_text(
        "# kc_layer(fake DEPS kc_high) in a comment is not a target\n"
        "kc_layer(low DEPS Threads::Threads)\nkc_layer(high DEPS kc_low fmt::fmt)\n")
    (src / "high" / "h.h").write_text("#pragma once\n")
    (src / "low" / "l.h").write_text('#pragma once\n#include "low/l.h"\n#include <vector>\n')
    (src / where).write_text(include_line + "\n")
    return src


@pytest.mark.parametrize("line, where", [
    ('#include "high/h.h"', "low/sub/x.cpp"),          # quoted, from a sub-folder
    ("#include <high/h.h>", "low/x.h"),                 # angle brackets
    ('#include "../../high/h.h"', "low/sub/x.cpp"),     # relative path
    ('#  include  "../high/h.h"', "low/x.cpp"),         # spacing
])
def test_a_planted_violation_is_found(tmp_path, line, where):
    src = _plant(tmp_path, line, where)
    bad = violations(src)
    assert len(bad) == 1 and "layer high/" in bad[0], bad


def test_allowed_includes_pass(tmp_path):
    src = _plant(tmp_path, '#include "../l.h"\n#include <low/l.h>\n#include <fmt/format.h>')
    assert violations(src) == []
    (src / "high" / "y.cpp").write_text('#include "h.h"\n#include "low/l.h"\n')
    assert violations(src) == []


def test_an_unknown_folder_is_reported(tmp_path):
    src = _plant(tmp_path, "")
    (src / "stray").mkdir()
    assert violations(src) == ["stray/ is a folder without a CMake layer target"]
