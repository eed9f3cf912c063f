// The shared boolean rule: see env_bool.h.
#include "common/env_bool.h"

#include <strings.h>

#include <initializer_list>

#include "common/sentinel_env.h"

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

bool SentinelDisabled() { return ProcessSentinelEnv().Flag(Var::kDisable); }

}  // namespace sentinel::rules
