// Kernel classification: NCCL communication or compute, by the kernel's (mangled) name.
// NCCL names across 2.18-2.30 (docs/cupti-verbs-facts.md "1.8 Recognising NCCL kernels by name"):
// ncclKernel_* (<= 2.18), ncclDevKernel_* (>= 2.19, incl. _Generic and _SendRecv),
// ncclSymDevKernel_* (2.27 symmetric memory), ncclSymkDevKernel_* (>= 2.28), and oneRankReduce
// (nranks == 1 reductions). Mangled names embed these tokens verbatim after the length prefix, so a
// substring test works on both forms.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sentinel::plugin::cupti {

enum class KernelClass : uint8_t { kCompute = 0, kNccl = 1 };

class KernelClassifier {
 public:
  // `extra` adds comma-separated substrings that also mean "communication" (SENTINEL_CUPTI_COMM_
  // KERNELS, e.g. NVSHMEM or a custom all-reduce). Empty entries are ignored.
  explicit KernelClassifier(const std::string& extra = "");

  // By name (a substring scan; slow path).
  KernelClass Classify(const char* name) const;

  // Hot path of record parsing: CUPTI hands the same name pointer to every record of one
  // kernel, so the answer is cached by pointer in a fixed open-addressing table (no allocation
  // after construction; a full table falls back to Classify).
  KernelClass ClassifyCached(const char* name);

  uint64_t cache_misses() const { return misses_; }

 private:
  static constexpr uint32_t kSlots = 4096;  // power of two
  std::vector<std::string> patterns_;
  struct Slot {
    const char* name = nullptr;
    KernelClass cls = KernelClass::kCompute;
  };
  std::vector<Slot> cache_;
  uint32_t used_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace sentinel::plugin::cupti
