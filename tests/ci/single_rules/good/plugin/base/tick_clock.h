// The one file allowed to read the TSC.
#include <x86intrin.h>

inline unsigned long long Stamp() { return __rdtsc(); }
