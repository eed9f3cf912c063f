// The collector reaches common/ and the contracts; a mention of "tools/x.h" in a comment is no
// edge.
#include "collector/ctl.h"

#include "common/rule.h"
#include "schemas/wire/sentinel_wire.h"
