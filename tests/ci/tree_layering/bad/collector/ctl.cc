// Planted: the collector includes a tool's header; its own and common's are fine.
#include "collector/ctl.h"

#include "common/rule.h"
#include "tools/baseline/report.h"
