// kc_golden_rewrite IN OUT: reads a golden or candidate without checking its checksum (and without the
// candidate/golden cross-checks) and writes it again with a fresh checksum. Lets the Python tests craft
// files (a candidate with unknown tail mass, coverage flags, edited identities) that the stock safetensors
// writer cannot checksum. Exit 3 with the reader's message when the file is malformed.
#include <cstdio>

#include "core/error.h"
#include "core/mapped_file.h"
#include "golden/golden.h"
#include "io/safetensors.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: kc_golden_rewrite IN OUT\n");
    return 3;
  }
  try {
    auto file = kc::MappedFile::open(argv[1]);
    auto st = kc::SafetensorsFile::parse(file->bytes(), argv[1], file);
    auto it = st.metadata().find("kerncheck.format");
    std::string fmt = it == st.metadata().end() ? "" : it->second;
    if (fmt == "golden") {
      kc::Golden g = kc::parse_golden(file->bytes(), argv[1], false);
      kc::write_golden(argv[2], g.meta, g.a);
    } else {
      kc::Candidate c = kc::parse_candidate(file->bytes(), argv[1], false);
      kc::write_candidate(argv[2], c.meta, c.a);
    }
  } catch (const kc::Error& e) {
    std::fprintf(stderr, "kc_golden_rewrite: %s\n", e.what());
    return 3;
  }
  return 0;
}
