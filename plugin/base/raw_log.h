// RawLog(): the plugin's name for common/raw_log.h, the one stderr writer ("[sentinel <pid>] "),
// usable before (or without) the logger and in any state of the process.
#pragma once

#include "common/raw_log.h"

namespace sentinel::plugin {

using rules::RawLog;
using rules::RawLogText;
using rules::RawWriteStderr;

}  // namespace sentinel::plugin
