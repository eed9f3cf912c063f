// The event-loop set-up both of sentineld's servers (UNIX ingest, HTTP) share: an epoll set that
// watches the listening socket and an eventfd that Stop() writes to wake the loop.
#pragma once

#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sentinel::collector {

// On success *epoll_fd and *wake_fd are open (close-on-exec; the eventfd non-blocking), and both
// `listen_fd` and the eventfd are registered for EPOLLIN with data.fd set to the fd.
inline absl::Status OpenEpollWithWakeup(int listen_fd, int* epoll_fd, int* wake_fd,
                                        const char* who) {
  *epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  *wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (*epoll_fd < 0 || *wake_fd < 0) {
    return absl::InternalError(absl::StrCat(who, ": epoll/eventfd set-up failed"));
  }
  for (int fd : {listen_fd, *wake_fd}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(*epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
      return absl::InternalError(absl::StrCat(who, ": epoll_ctl failed"));
    }
  }
  return absl::OkStatus();
}

}  // namespace sentinel::collector
