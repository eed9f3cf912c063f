// NCCL's communicator hash (docs/nccl-facts.md "10.4 The communicator hash"): a 128-bit-state hash
// of byte strings. The unique id is eaten as one 128-byte string; split communicators hash (parent
// hash, splitCount, color) as three separate strings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sentinel::testing {

class CommHasher {
 public:
  void Eat(const void* data, size_t size) {
    const unsigned char* bytes = static_cast<const unsigned char*>(data);
    acc0_ ^= size;
    for (size_t off = 0; off < size; off += 8) {
      uint64_t chunk = 0;
      for (size_t i = 0; i < 8 && off + i < size; ++i) {
        chunk |= static_cast<uint64_t>(bytes[off + i]) << (8 * i);  // little-endian, zero-padded
      }
      acc0_ += acc1_;
      acc1_ ^= acc0_;
      acc0_ ^= acc0_ >> 31;
      acc0_ *= 0x9de62bbc8cef3ce3ULL;
      acc1_ ^= acc1_ >> 32;
      acc1_ *= 0x485cd6311b599e79ULL;
      acc0_ += chunk;
    }
  }
  uint64_t Digest() const {
    uint64_t h = acc0_;
    h ^= h >> 31;
    h *= 0xbac3bd562846de6bULL;
    h += acc1_;
    h ^= h >> 32;
    h *= 0x995a187a14e7b445ULL;
    return h;
  }

 private:
  uint64_t acc0_ = 1;
  uint64_t acc1_ = 1;
};

inline uint64_t HashUniqueId(const void* id128) {
  CommHasher h;
  h.Eat(id128, 128);
  return h.Digest();
}

inline uint64_t HashSplit(uint64_t parent_hash, int split_count, int color) {
  CommHasher h;
  h.Eat(&parent_hash, sizeof(parent_hash));
  h.Eat(&split_count, sizeof(split_count));
  h.Eat(&color, sizeof(color));
  return h.Digest();
}

}  // namespace sentinel::testing
