// Must NOT compile (ctest rules_dcheck_release_typechecks): a release build compiles the condition
// of SENTINEL_DCHECK without evaluating it, so a condition naming something that does not exist is
// still an error there, and a DCHECK cannot rot unnoticed in release-only builds.
#undef SENTINEL_DCHECK_FATAL
#define SENTINEL_DCHECK_FATAL 0

#include "common/dcheck.h"

int main() {
  SENTINEL_DCHECK(no_such_variable_in_release > 0);
  return 0;
}
