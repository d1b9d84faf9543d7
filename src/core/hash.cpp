#include "core/hash.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/error.h"

// libxxhash built with its x86 dispatcher (Debian's) exports *_dispatch entry points that pick the AVX2 /
// AVX-512 kernels at run time; the plain XXH3_64bits_update is its SSE2 build (~2.8x slower here: 14.7
// vs 40.6 GB/s in cache). Weak, so a libxxhash without the dispatcher still links (then the plain one).
extern "C" XXH_errorcode XXH3_64bits_update_dispatch(XXH3_state_t*, const void*, size_t) __attribute__((weak));

namespace kc {

std::string sha256_hex(std::span<const std::uint8_t> bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  KC_ASSERT(EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr) == 1, "EVP_Digest");
  std::string out;
  for (unsigned i = 0; i < len; ++i) out += fmt::format("{:02x}", md[i]);
  return out;
}

Xxh64::Xxh64() : state_(XXH3_createState()) { XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_)); }
Xxh64::~Xxh64() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }
void Xxh64::update(std::span<const std::uint8_t> bytes) {
  auto* st = static_cast<XXH3_state_t*>(state_);
  if (XXH3_64bits_update_dispatch)
    XXH3_64bits_update_dispatch(st, bytes.data(), bytes.size());
  else
    XXH3_64bits_update(st, bytes.data(), bytes.size());
}
std::uint64_t Xxh64::digest() const { return XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_)); }
std::string Xxh64::hex() const { return fmt::format("{:016x}", digest()); }

std::uint64_t xxh64(std::span<const std::uint8_t> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

}  // namespace kc
