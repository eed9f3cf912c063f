// libFuzzer target: sentineld's HTTP request head and query-string parsing
// (collector/export/http_request.h), fed in two pieces as a socket would deliver them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "collector/export/http_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using sentinel::collector::HeadStatus;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  for (std::string_view part : {all.substr(0, cut), all}) {
    sentinel::collector::HttpRequest req;
    size_t head = 0;
    if (sentinel::collector::ParseRequestHead(part, &req, &head) == HeadStatus::kComplete) {
      if (head > part.size() || req.path.empty() || req.path[0] != '/') __builtin_trap();
      (void)req.get_param_value("window");
    }
  }
  std::vector<std::pair<std::string, std::string>> params;
  (void)sentinel::collector::ParseQuery(all, &params);
  return 0;
}
