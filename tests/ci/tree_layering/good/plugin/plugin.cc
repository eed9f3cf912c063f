#include "common/rule.h"
#include "plugin/base/status.h"
