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
#include "plugin/base/status.h"
#include "plugin/core/record_sink.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {

// What the drainer needs from the rest of the plugin, injected by whoever wires the plugin
// together (plugin/entry/plugin_wiring.cc, when the .so loads), so that the core depends on no
// sink, transport or vendor tracer. Every member may be null (the core's unit tests): no sinks
// means records are drained and counted as sink drops.
struct DrainerWiring {
  // Builds the sinks, once, at the first drainer start (slow path, under the drainer's lock).
  std::vector<std::unique_ptr<RecordSink>> (*build_sinks)(const EnvConfig& config) = nullptr;
  // At every communicator init, after the drainer started (e.g. the CUPTI tracer's start).
  void (*on_comm_init)() = nullptr;
  // At the finalize of the last communicator, before the final drain.
  void (*on_last_comm_end)() = nullptr;
};
// Replaces the wiring. Takes effect for sinks only before they are built (the first init).
void SetDrainerWiring(const DrainerWiring& wiring) noexcept;

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
