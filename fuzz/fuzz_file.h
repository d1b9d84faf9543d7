// For fuzz targets whose reader takes a path: the input bytes written to one file per process (a fixed name,
// rewritten for every input). Returns the path, or "" when the file cannot be written (the input is skipped).
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

inline std::string fuzz_input_file(const char* stem, const char* ext, const std::uint8_t* data, std::size_t size) {
  static const std::string pid = std::to_string(::getpid());
  const std::string path = "/tmp/kc-fuzz-" + std::string(stem) + "-" + pid + ext;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return "";
  const bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok ? path : "";
}
