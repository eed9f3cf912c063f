// HMAC-SHA256 for the rendezvous's proof that both ends hold the job's token (launch.h), from
// OpenSSL's libcrypto (already a dependency: cpp-httplib's Debian package brings libssl-dev).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sentinel::baseline {

inline constexpr size_t kSha256Bytes = 32;

// HMAC-SHA256 of `message` under `key`.
void HmacSha256(std::string_view key, std::string_view message, uint8_t out[kSha256Bytes]);

// Equal contents, in time that does not depend on where they differ.
bool SameBytes(const uint8_t* a, const uint8_t* b, size_t n);

// Lowercase hex, for tests and messages.
std::string Hex(const uint8_t* p, size_t n);

}  // namespace sentinel::baseline
