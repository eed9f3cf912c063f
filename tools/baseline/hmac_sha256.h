// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), written here for the rendezvous's proof that
// both ends hold the job's token (launch.h): a few hundred bytes per rank, so plain and small
// beats a crypto library dependency. Checked against the FIPS and RFC 4231 vectors
// (tests/unit/baseline). Not for anything secret at rest, not constant-time beyond the compare.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sentinel::baseline {

inline constexpr size_t kSha256Bytes = 32;

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t n);
  void Final(uint8_t out[kSha256Bytes]);

 private:
  void Block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t total_ = 0;
};

// HMAC-SHA256 of `message` under `key`.
void HmacSha256(std::string_view key, std::string_view message, uint8_t out[kSha256Bytes]);

// Equal contents, in time that does not depend on where they differ.
bool SameBytes(const uint8_t* a, const uint8_t* b, size_t n);

// Lowercase hex, for tests and messages.
std::string Hex(const uint8_t* p, size_t n);

}  // namespace sentinel::baseline
