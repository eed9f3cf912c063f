// Fixture for check_env_reads.py: a SENTINEL_* variable read with getenv must be found.
#include <cstdlib>

const char* SocketFromEnv() { return std::getenv("SENTINEL_SOCKET"); }
