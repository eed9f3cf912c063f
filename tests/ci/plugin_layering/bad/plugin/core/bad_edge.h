// Fixture: the core reaching up into the transport is refused.
#pragma once
#include "plugin/transport/collector_sink.h"
