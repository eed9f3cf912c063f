// The one stderr writer: every line it writes starts "[sentinel <pid>] ", a text of any length
// arrives whole and in order, and errno is what it was. fd 2 is captured through a pipe.
#include "common/raw_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <thread>

namespace sentinel::rules {
namespace {

// Runs `write` with fd 2 pointing into a pipe and returns what reached it (read on another
// thread, so a text longer than the pipe holds does not block the writer).
template <typename Fn>
std::string CaptureFd2(Fn write) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  std::string out;
  std::thread reader([&out, fd = fds[0]] {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  });
  const int saved = dup(2);
  dup2(fds[1], 2);
  close(fds[1]);
  write();
  dup2(saved, 2);  // the pipe's last writer is gone: the reader sees its end
  close(saved);
  reader.join();
  close(fds[0]);
  return out;
}

std::string Prefix() { return "[sentinel " + std::to_string(getpid()) + "] "; }

TEST(RawLog, OneLineWithThePidPrefix) {
  const std::string out = CaptureFd2([] { RawLog("cannot map the pools (%s)", "no memory"); });
  EXPECT_EQ(out, Prefix() + "cannot map the pools (no memory)\n");
}

TEST(RawLog, ATextGetsThePrefixOnceAndOneNewline) {
  const std::string text = "invalid expectation: X:1:2: bad\n  net=x\n      ^";
  std::string out = CaptureFd2([&] { RawLogText(text.data(), text.size()); });
  EXPECT_EQ(out, Prefix() + text + "\n");
  const std::string ended = "already ends in a newline\n";
  out = CaptureFd2([&] { RawLogText(ended.data(), ended.size()); });
  EXPECT_EQ(out, Prefix() + ended) << "no second newline";
}

TEST(RawLog, ALongTextArrivesWholeAndKeepsErrno) {
  std::string text;
  for (int i = 0; text.size() < 200000; ++i) text += "line " + std::to_string(i) + "\n";
  errno = EACCES;
  const std::string out = CaptureFd2([&] { RawLogText(text.data(), text.size()); });
  EXPECT_EQ(errno, EACCES);
  EXPECT_EQ(out, Prefix() + text);
}

TEST(RawLog, AFormattedLineIsCutNotOverrun) {
  const std::string longer(2000, 'z');
  const std::string out = CaptureFd2([&] { RawLog("%s", longer.c_str()); });
  EXPECT_EQ(out, Prefix() + longer.substr(0, 511) + "\n");
}

TEST(RawLog, PrefixedTextIsWrittenAsGiven) {
  const std::string line = "[sentinel 1 0] from the logger, prefixed there\n";
  const std::string out = CaptureFd2([&] { RawWriteStderr(line.data(), line.size()); });
  EXPECT_EQ(out, line);
}

}  // namespace
}  // namespace sentinel::rules
