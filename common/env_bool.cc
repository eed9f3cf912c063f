// The shared boolean rule: see env_bool.h.
#include "common/env_bool.h"

#include <strings.h>

#include <cstdlib>
#include <initializer_list>

namespace sentinel::rules {

EnvBool ParseEnvBool(const char* text) {
  if (text == nullptr || *text == '\0') return EnvBool::kUnset;
  for (const char* t : {"1", "true", "yes", "on"}) {
    if (strcasecmp(text, t) == 0) return EnvBool::kTrue;
  }
  for (const char* f : {"0", "false", "no", "off"}) {
    if (strcasecmp(text, f) == 0) return EnvBool::kFalse;
  }
  return EnvBool::kInvalid;
}

bool SentinelDisabled() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read at start-up; nobody sets it concurrently.
  return ParseEnvBool(std::getenv("SENTINEL_DISABLE")) == EnvBool::kTrue;
}

}  // namespace sentinel::rules
