// What the ingest server feeds besides the frame stream: connection bookkeeping, the periodic
// tick, and the frames queued for plugins. The aggregator implements it, so ingest depends on this
// interface and never on the aggregator (collector/ layering: ingest sits below aggregate).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "collector/base/clock.h"
#include "collector/ingest/session.h"

namespace sentinel::collector {

// Called on the ingest thread only.
class IngestConsumer : public IngestSink {
 public:
  // The clock the server times handshakes and ticks with.
  virtual Clock* clock() const = 0;
  virtual void NoteAccepted(int client, uint32_t pid, uint32_t uid) = 0;
  virtual void NoteRefused(const char* reason) = 0;
  virtual void NoteClosed(int client, CloseReason reason, uint64_t frames,
                          uint64_t unknown_skipped) = 0;
  // Periodic work; the server calls it every Config::tick_ns.
  virtual void Tick() = 0;
  // Frames for plugin connections (client id, whole frame bytes), sent after Tick().
  virtual std::vector<std::pair<int, std::string>> TakeOutbound() = 0;
};

}  // namespace sentinel::collector
