// Fixture of plugin_layering_catches_test: the core reaching up into the transport is refused.
#pragma once
#include "plugin/transport/collector_sink.h"
