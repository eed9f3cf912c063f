// The drainer: one background thread ("sentinel-drain", all signals blocked) that moves completed
// records from the per-thread rings to the sinks, forwards communicator and control records, and
// sends a heartbeat about once a second. It starts at the first communicator init, stops (after a
// last drain and Flush) at the finalize of the last one, and restarts at the next init. At process
// exit an atexit handler drains and flushes once, with a bounded wait.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "plugin/base/env_config.h"
#include "plugin/core/record_sink.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {

// Sinks: the one place that decides where records go (built once, on the first drainer start).
std::vector<std::unique_ptr<RecordSink>> BuildSinks(const EnvConfig& config);

// Slow path, from any thread: queues a control record for RecordSink::OnControlRecord. Returns
// false when the plugin is off, the payload is too large, or the bounded queue is full.
bool EnqueueControlRecord(uint16_t type, const void* payload, size_t size);

// Called by the core from init / finalize (slow paths).
void DrainerOnCommInit(const SentinelWireCommInit& comm, const EnvConfig& config) noexcept;
void DrainerOnCommEnd(uint64_t comm_hash, int rank) noexcept;
// Drains and flushes now, synchronously (tests, and the exit path).
void DrainerFlushNow() noexcept;
// Registered with atexit at the first init.
void DrainerAtExit() noexcept;
// For tests: is the thread running?
bool DrainerRunning() noexcept;

}  // namespace sentinel::plugin
