// The seam between the plugin core and whatever carries its output (a JSONL dump file today,
// the sentineld socket client of plugin/transport). Sinks run only on the plugin's drainer
// thread, never on an NCCL callback thread, so they may block briefly, allocate and make syscalls;
// they MUST NOT throw and MUST NOT call back into the core.
#pragma once

#include <cstddef>
#include <cstdint>

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {

class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // A communicator was initialised (called once per profiler init, in drain order).
  virtual void OnCommInit(const SentinelWireCommInit& comm) = 0;
  // A communicator was finalized.
  virtual void OnCommEnd(uint64_t comm_hash, int rank) = 0;
  // A batch of completed records. Returns how many it accepted; the rest are counted as dropped.
  virtual size_t OnRecords(const SentinelWireCollRecord* records, size_t n) = 0;
  // Periodic (about once a second) and at flush: cumulative health counters.
  virtual void OnHeartbeat(const SentinelWireHeartbeat& hb) = 0;
  // A slow-path record (a transport verdict, a GPU activity window) queued through
  // EnqueueControlRecord(); `payload` is the record body without the frame header.
  virtual void OnControlRecord(uint16_t type, const void* payload, size_t size) {
    (void)type;
    (void)payload;
    (void)size;
  }
  // The in-flight state of one live communicator (about once a second, and at once when its
  // oldest collective is stuck). State, not an event: a later one supersedes an earlier one.
  virtual void OnInFlight(const SentinelWireInFlight& state) { (void)state; }
  // The end of one drain (records and control records handed over): a sink that batches writes
  // may write once here rather than several times as the records come, without waiting (unlike
  // Flush).
  virtual void OnDrainEnd() {}
  // Finalize of the last communicator, or process exit: push out anything buffered.
  virtual void Flush() = 0;
};

}  // namespace sentinel::plugin
