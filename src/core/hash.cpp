#include "core/hash.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/error.h"

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
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), bytes.data(), bytes.size());
}
std::uint64_t Xxh64::digest() const { return XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_)); }
std::string Xxh64::hex() const { return fmt::format("{:016x}", digest()); }

std::uint64_t xxh64(std::span<const std::uint8_t> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

}  // namespace kc
