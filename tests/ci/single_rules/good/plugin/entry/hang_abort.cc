// The one documented detached thread (DETACH_OK in check_single_rules.py).
#include <thread>

void Launch(std::thread* t) { t->detach(); }
