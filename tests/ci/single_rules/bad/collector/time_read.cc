// Planted: a wall-clock read through std::time instead of the collector's Clock.
#include <ctime>

long Age(long at) { return std::time(nullptr) - at; }
