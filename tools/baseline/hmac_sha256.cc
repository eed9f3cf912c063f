// HMAC-SHA256 through OpenSSL: see hmac_sha256.h.
#include "tools/baseline/hmac_sha256.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>

namespace sentinel::baseline {

void HmacSha256(std::string_view key, std::string_view message, uint8_t out[kSha256Bytes]) {
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), out,
           &len) == nullptr ||
      len != kSha256Bytes) {
    std::memset(out, 0, kSha256Bytes);  // never matches a peer's proof (a nonce is mixed in)
  }
}

bool SameBytes(const uint8_t* a, const uint8_t* b, size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }

std::string Hex(const uint8_t* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    s.push_back(kDigits[p[i] >> 4]);
    s.push_back(kDigits[p[i] & 0xf]);
  }
  return s;
}

}  // namespace sentinel::baseline
