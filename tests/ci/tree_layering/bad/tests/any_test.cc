// Tests may include any tree.
#include "collector/ctl.h"
#include "plugin/base/status.h"
#include "tools/baseline/report.h"
