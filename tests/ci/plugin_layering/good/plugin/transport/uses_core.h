// Fixture: the transport may include the core below it.
#pragma once
#include "plugin/core/record_sink.h"
