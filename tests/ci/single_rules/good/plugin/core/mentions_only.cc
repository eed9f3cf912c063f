// Mentions only: __rdtsc(), rdtsc, clock_gettime(CLOCK_MONOTONIC) and std::thread( in a comment.
const char* kWhy = "reads __rdtsc() and clock_gettime( through the one rule";
