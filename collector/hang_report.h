// `sentinelctl hang-report FILE...`: merges the flight records (collector/log/flight_record.h) of
// one hang from several nodes and says why it hangs, from what the records show and only that:
//   1. the first position of a communicator where the ranks issued different operations, both
//      sides quoted ("rank 3 issued AllGather 4 MiB bf16 as collective #1041 of comm 0x...; the
//      other 7 ranks issued AllReduce 16 MiB bf16"), and the stuck position when it is later;
//   2. else a wait cycle across communicators ("rank 0 (a pid 1) waits in comm A #40 for rank 1
//      (b pid 2); rank 0 (b pid 2) waits in comm B #12 for rank 1 (a pid 1)");
//   3. else the ranks that never reached the stuck position, with their last operation and state;
//   4. else "all ranks reached #N: waiting on something outside the record".
// Operations are matched by (communicator, position), never by time, and each node's clock is
// kept apart: a duration is only ever the difference of two readings of one rank's clock. Files
// that share no communicator are separate jobs, reported as such.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "collector/log/flight_record.h"

namespace sentinel::collector {

// A parsed file and the name it is shown by (its path).
struct FlightFile {
  std::string name;
  FlightRecord record;
};

// The NOLINT: its implicit noexcept move and destructor reach nlohmann::json's, which
// clang-tidy follows into their allocating helpers.
struct HangReportResult {  // NOLINT(bugprone-exception-escape)
  bool ok = true;          // false: some input was refused (listed in the text's and JSON's errors)
  std::string text;        // for a person; every string from the files escaped
  nlohmann::json json;
};

// Pure. A file that contradicts an earlier one (a rank of a communicator in both, or another size
// for the same communicator) is left out whole and named in the errors.
HangReportResult MergeFlightRecords(const std::vector<FlightFile>& files);

// Reads each path (ReadFlightRecordFile) and merges those that parse; the others are errors.
HangReportResult HangReportFromPaths(const std::vector<std::string>& paths);

// "AllGather 4 MiB bf16", "Broadcast 1 KiB fp32 root 3", "Send 2 MiB bf16 peer 5": what the
// report quotes of an operation (the fields the record knows).
std::string FlightOpText(const FlightOp& op);

}  // namespace sentinel::collector
