// Planted: std::chrono clock reads, each outside the plugin's and the collector's clocks.
#include <chrono>

long Ticks() {
  const auto a = std::chrono::steady_clock::now();
  const auto b = std::chrono::system_clock::now();
  const auto c = std::chrono::high_resolution_clock::now();
  return static_cast<long>((a.time_since_epoch() + c.time_since_epoch()).count()) +
         static_cast<long>(b.time_since_epoch().count());
}
