// ErrnoText (see errno_text.h).
#include "common/errno_text.h"

#include <cstring>

namespace sentinel::rules {

const char* ErrnoText(int err) noexcept {
  // glibc's static description: no shared buffer to race on, unlike strerror's.
  const char* text = strerrordesc_np(err);
  return text != nullptr ? text : "unknown error";
}

}  // namespace sentinel::rules
