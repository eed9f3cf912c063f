// Planted: common/ reaches into the plugin.
#pragma once
#include "plugin/base/status.h"
