// Fixture for check_env_reads.py: not hits. A comment may say getenv("SENTINEL_SOCKET") was used;
// other variables may be read with getenv.
#include <cstdlib>

const char* RuntimeDir() { return std::getenv("XDG_RUNTIME_DIR"); }
