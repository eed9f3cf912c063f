// libFuzzer target: sentineld's key = value config file (Config::LoadFile) and the duration
// parser, on arbitrary bytes. Errors are fine; crashes, hangs and UB are not.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "collector/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/sentinel-config-fuzz-" + std::to_string(getpid());
  FILE* f = std::fopen(path.c_str(), "we");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  sentinel::collector::Config config;
  if (config.LoadFile(path).ok()) (void)config.Validate();
  (void)sentinel::collector::ParseDurationNs(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
