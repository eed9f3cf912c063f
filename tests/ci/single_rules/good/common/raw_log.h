// The one raw stderr writer may write(2, ...) itself.
#pragma once
#include <unistd.h>

inline void RawWrite(const char* s, unsigned long n) { (void)!write(2, s, n); }
