// Kernel name classification (see kernel_class.h).
#include "plugin/cupti/kernel_class.h"

#include <cstring>

namespace sentinel::plugin::cupti {

KernelClassifier::KernelClassifier(const std::string& extra)
    : patterns_{"ncclKernel_", "ncclDevKernel_", "ncclSymDevKernel_", "ncclSymkDevKernel_",
                "oneRankReduce"},
      cache_(kSlots) {
  size_t pos = 0;
  while (pos <= extra.size()) {
    size_t comma = extra.find(',', pos);
    if (comma == std::string::npos) comma = extra.size();
    std::string p = extra.substr(pos, comma - pos);
    if (!p.empty()) patterns_.push_back(p);
    pos = comma + 1;
  }
}

KernelClass KernelClassifier::Classify(const char* name) const {
  if (name == nullptr) return KernelClass::kCompute;
  for (const std::string& p : patterns_) {
    if (strstr(name, p.c_str()) != nullptr) return KernelClass::kNccl;
  }
  return KernelClass::kCompute;
}

KernelClass KernelClassifier::ClassifyCached(const char* name) {
  if (name == nullptr) return KernelClass::kCompute;
  uintptr_t h = reinterpret_cast<uintptr_t>(name);
  h ^= h >> 17;
  h *= 0x9E3779B97F4A7C15ull;
  uint32_t i = static_cast<uint32_t>(h >> 40) & (kSlots - 1);
  for (uint32_t probe = 0; probe < 16; ++probe, i = (i + 1) & (kSlots - 1)) {
    Slot& s = cache_[i];
    if (s.name == name) return s.cls;
    if (s.name == nullptr) {
      ++misses_;
      KernelClass cls = Classify(name);
      if (used_ < kSlots / 2) {
        s.name = name;
        s.cls = cls;
        ++used_;
      }
      return cls;
    }
  }
  ++misses_;
  return Classify(name);
}

}  // namespace sentinel::plugin::cupti
