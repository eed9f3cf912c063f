// nccl-tests' bus-bandwidth factor of a collective over `nranks` ranks (busbw = algbw * factor),
// for the joined collectives' busbw on /v1/telemetry.
#pragma once

#include <cstdint>

namespace sentinel::collector {

double BusBwFactor(uint8_t func, int32_t nranks);

}  // namespace sentinel::collector
