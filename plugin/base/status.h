// The plugin's Status is common/status.h's: one type from common/ up, so a status made in common/
// (a trust check, a parse) reaches a plugin caller unchanged. Plugin code keeps writing
// plugin::Status.
#pragma once

#include "common/status.h"

namespace sentinel::plugin {

using rules::Status;
using rules::StatusCode;
using rules::StatusCodeName;

}  // namespace sentinel::plugin
