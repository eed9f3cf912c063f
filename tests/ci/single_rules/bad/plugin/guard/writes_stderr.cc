// Planted: two direct stderr writes outside common/raw_log.h.
#include <unistd.h>

void Say(const char* s, unsigned long n) {
  (void)!write(2, s, n);
  (void)!write(STDERR_FILENO, s, n);
}
