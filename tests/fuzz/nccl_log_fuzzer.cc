// libFuzzer target: NCCL's log lines (plugin/guard/nccl_log_parser.h), one line and a whole log.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "plugin/guard/nccl_log_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  sentinel::guard::LogEvidence line_ev;
  sentinel::guard::ParseNcclLogLine(text, &line_ev);
  sentinel::guard::LogEvidence ev;
  sentinel::guard::ParseNcclLog(text, &ev);
  return 0;
}
