// libFuzzer target: a flight record file (collector/log/flight_record.h) on arbitrary bytes, and
// `sentinelctl hang-report`'s merge (collector/hang_report.h) of what parses, with a copy of
// itself (the conflicting-file path). Nothing may crash, hang or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "collector/hang_report.h"
#include "collector/log/flight_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  sentinel::collector::FlightFile file;
  file.name = "fuzz.json";
  const absl::Status parsed = sentinel::collector::ParseFlightRecord(text, &file.record);
  if (!parsed.ok()) {
    if (parsed.message().empty()) __builtin_trap();  // a refusal always says why
    return 0;
  }
  // What parses writes back as text that parses again.
  sentinel::collector::FlightRecord again;
  if (!sentinel::collector::ParseFlightRecord(sentinel::collector::FlightRecordJson(file.record),
                                              &again)
           .ok()) {
    __builtin_trap();
  }
  const sentinel::collector::HangReportResult report =
      sentinel::collector::MergeFlightRecords({file, file});
  if (report.text.empty()) __builtin_trap();
  return 0;
}
