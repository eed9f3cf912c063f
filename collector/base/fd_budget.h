// How sentineld shares its open files: the HTTP server's connections, the plugin connections and
// its own files. One formula, read by both servers, so that each counts the other's share the
// same way.
#pragma once

#include <sys/resource.h>

namespace sentinel::collector {

// The open-file limit after raising the soft value to the hard one (sentineld's own process:
// thousands of sockets are its job). RLIM_INFINITY when unlimited, 0 when it cannot be read.
rlim_t RaisedFileLimit();

// The HTTP server's connection limit for `nofile` open files: what is left after 512 files for
// everything else (half of them under 1,024), between 64 and 4096.
rlim_t HttpConnectionsForFds(rlim_t nofile);

}  // namespace sentinel::collector
