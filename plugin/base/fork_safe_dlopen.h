// dlopen() for the plugin's own background threads, made atomic with respect to fork().
//
// glibc holds its loader lock for the whole of a dlopen (constructors included) and does not reset
// it in a forked child. If the host forks while one of OUR threads is inside dlopen (the CUPTI
// thread loads libcupti lazily), the child inherits the lock held by a thread that no longer
// exists, and its exit() (whose _dl_fini takes that lock) or any dlopen hangs forever. A
// pthread_atfork prepare handler therefore waits for an in-progress load to finish before the
// fork proceeds: at most one load's duration, bounded by kForkWaitMs, once per process at most.
#pragma once

namespace sentinel::plugin {

// How long a fork() waits for one of our loads in progress before it goes ahead anyway.
inline constexpr int kForkWaitMs = 2000;

// dlopen(path, flags), never concurrent with a fork() of this process (see above). dlerror()
// afterwards reports this call, as it is thread-local.
void* DlopenBesideFork(const char* path, int flags) noexcept;

}  // namespace sentinel::plugin
