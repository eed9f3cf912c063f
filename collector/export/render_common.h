// What the API JSON renderings share: the version (version.h), time formatting (real_time.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collector/base/real_time.h"
#include "collector/export/version.h"
