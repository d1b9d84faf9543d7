// Self-contained HTML report of `kerncheck test --html` (docs/judge.md): SVG plots of the per-position KL CDF by
// domain, KL vs margin with flips marked, flip rate by margin bin against the floor, KL by depth.
// Everything the page shows comes from the JudgeReport (src/judge/judge.h): sample (≤ 20k positions),
// bins (with CIs and the floor), cand.by_depth, cand.by_domain, findings.
#pragma once
#include <string>
#include <vector>

#include "judge/judge.h"

namespace kc {

// A `kerncheck locate --json` report the page links to (`kerncheck test --html F --locate L.json`): each
// phase's first departing site, and a link to the locate page (its "html" key, relative to L.json's
// folder; else to L.json itself) relative to the judge page's folder.
struct LocateLink {
  std::string variant, href;
  std::vector<std::string> phases;  // per phase with positions: "prefill: first site outside the floor: …"
  bool departs = false;             // some phase has a departing site
};
// Throws kc::Error naming `json_path` and the field on a file that is not a locate report.
LocateLink read_locate_link(const std::string& json_path, const std::string& judge_html_path);

std::string render_judge_html(const JudgeReport& report, const LocateLink* locate = nullptr);

}  // namespace kc
