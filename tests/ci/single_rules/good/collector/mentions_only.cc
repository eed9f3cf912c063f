// Mentions only: std::chrono::steady_clock::now(), std::time(nullptr), write(2, ...),
// `using Clock = std::chrono::steady_clock;`, std::thread(...) and .detach() in a comment.
const char* kWhy = "no steady_clock::now(), std::time(nullptr) or write(STDERR_FILENO, here";
long Uptime(long time_s) { return time_s; }  // a variable named time is not a clock read
