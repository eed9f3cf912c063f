// Parsing of SENTINEL_EVENTS.
#include "plugin/base/event_mask.h"

#include <strings.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace sentinel::plugin {
namespace {

struct Named {
  const char* name;
  uint32_t bits;
};

constexpr Named kPresets[] = {
    {"default", kMaskDefault}, {"proxy", kMaskProxy}, {"minimal", kMaskMinimal},
    {"all", kMaskAll},         {"none", 0},
};
constexpr Named kEvents[] = {
    {"Group", 1u << 0},    {"Coll", 1u << 1},      {"P2p", 1u << 2},
    {"ProxyOp", 1u << 3},  {"ProxyStep", 1u << 4}, {"ProxyCtrl", 1u << 5},
    {"KernelCh", 1u << 6}, {"NetPlugin", 1u << 7}, {"GroupApi", 1u << 8},
    {"CollApi", 1u << 9},  {"P2pApi", 1u << 10},   {"KernelLaunch", 1u << 11},
    {"CeColl", 1u << 12},  {"CeSync", 1u << 13},   {"CeBatch", 1u << 14},
};

bool LookupName(const char* begin, size_t len, const Named* table, size_t n, uint32_t* bits) {
  for (size_t i = 0; i < n; ++i) {
    if (strlen(table[i].name) == len && strncasecmp(table[i].name, begin, len) == 0) {
      *bits = table[i].bits;
      return true;
    }
  }
  return false;
}

// The whole grammar: true and *mask set when `spec` is valid.
bool ParseBits(const char* spec, uint32_t* mask) noexcept {
  if (spec == nullptr) return false;
  while (*spec == ' ') ++spec;
  if (*spec == '\0') return false;
  uint32_t bits = 0;
  if (LookupName(spec, strlen(spec), kPresets, sizeof(kPresets) / sizeof(kPresets[0]), &bits)) {
    *mask = bits;
    return true;
  }
  if (spec[0] >= '0' && spec[0] <= '9') {
    char* end = nullptr;
    errno = 0;
    unsigned long long v = strtoull(spec, &end, 0);  // decimal or 0x...
    if (errno != 0 || *end != '\0' || v > 0x7FFF) return false;
    *mask = static_cast<uint32_t>(v);
    return true;
  }
  uint32_t total = 0;
  const char* p = spec;
  while (*p != '\0') {
    const char* comma = strchr(p, ',');
    size_t len = comma == nullptr ? strlen(p) : static_cast<size_t>(comma - p);
    while (len > 0 && *p == ' ') {
      ++p;
      --len;
    }
    while (len > 0 && p[len - 1] == ' ') --len;
    if (len > 11 && strncasecmp(p, "ncclProfile", 11) == 0) {
      p += 11;
      len -= 11;
    }
    uint32_t one = 0;
    if (!LookupName(p, len, kEvents, sizeof(kEvents) / sizeof(kEvents[0]), &one) &&
        !LookupName(p, len, kPresets, sizeof(kPresets) / sizeof(kPresets[0]), &one)) {
      return false;
    }
    total |= one;
    if (comma == nullptr) break;
    p = comma + 1;
  }
  *mask = total;
  return true;
}

// Why `spec` (not null, not valid) is not valid. A spec that starts with a digit was meant as a
// number; otherwise the first comma-separated item that is not valid on its own is named.
Status Explain(const char* spec) noexcept {
  if (spec[0] >= '0' && spec[0] <= '9') {
    errno = 0;
    char* end = nullptr;
    const unsigned long long n = strtoull(spec, &end, 0);
    if (errno == 0 && end != nullptr && *end == '\0' && n > 0x7FFF) {
      return Status(StatusCode::kInvalidArgument,
                    "sets bits above 0x7fff (the 15 event types of the profiler ABI)");
    }
    return Status(StatusCode::kInvalidArgument, "is not a decimal or 0x number");
  }
  const char* p = spec;
  for (;;) {
    const char* comma = strchr(p, ',');
    size_t len = comma == nullptr ? strlen(p) : static_cast<size_t>(comma - p);
    const char* item = p;
    while (len > 0 && *item == ' ') {
      ++item;
      --len;
    }
    while (len > 0 && item[len - 1] == ' ') --len;
    // An item longer than any name or sensible number is shown cut; it is not valid either way.
    char one_item[256];
    const size_t kept = len < sizeof(one_item) ? len : sizeof(one_item) - 1;
    memcpy(one_item, item, kept);
    one_item[kept] = '\0';
    uint32_t unused = 0;
    if (kept < len || !ParseBits(one_item, &unused)) {
      return Status::Format(StatusCode::kInvalidArgument,
                            "has unknown event '%s' (presets: default, proxy, minimal, all, none)",
                            one_item);
    }
    if (comma == nullptr) break;
    p = comma + 1;
  }
  return Status(StatusCode::kInvalidArgument, "is not a preset, an event list or a number");
}

}  // namespace

Status ParseEventMask(const char* spec, uint32_t* mask) noexcept {
  if (spec == nullptr) return Status(StatusCode::kInvalidArgument, "is not set");
  if (ParseBits(spec, mask)) return Status::Ok();
  return Explain(spec);
}

}  // namespace sentinel::plugin
