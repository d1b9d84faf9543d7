// Self-contained HTML report of `kerncheck test --html` (SPEC §2): SVG plots of the per-position KL CDF by
// domain, KL vs margin with flips marked, flip rate by margin bin against the floor, KL by depth.
// Everything the page shows comes from the JudgeReport (src/judge/judge.h): sample (≤ 20k positions),
// bins (with CIs and the floor), cand.by_depth, cand.by_domain, findings.
#pragma once
#include <string>

#include "judge/judge.h"

namespace kc {

std::string render_judge_html(const JudgeReport& report);

}  // namespace kc
