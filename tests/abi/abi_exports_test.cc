// The built .so exports exactly the symbols listed in plugin/exports.map, and NEEDs nothing but
// the C/C++ runtime (no abseil, spdlog or fmt).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace {

std::string RunCommand(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

// Symbols between "global:" and "local:", one per line, comments skipped.
std::set<std::string> AllowedFromMap() {
  std::ifstream in(SENTINEL_EXPORTS_MAP);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  std::string clean;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 2, "/*") == 0) {
      size_t end = text.find("*/", i + 2);
      if (end == std::string::npos) break;
      i = end + 1;
      continue;
    }
    clean += text[i];
  }
  std::set<std::string> names;
  size_t g = clean.find("global:");
  size_t l = clean.find("local:");
  if (g == std::string::npos || l == std::string::npos) return names;
  std::stringstream body(clean.substr(g + 7, l - g - 7));
  std::string tok;
  while (std::getline(body, tok, ';')) {
    size_t b = tok.find_first_not_of(" \t\r\n");
    size_t e = tok.find_last_not_of(" \t\r\n");
    if (b != std::string::npos) names.insert(tok.substr(b, e - b + 1));
  }
  return names;
}

TEST(AbiExports, ExactlyTheVersionScriptList) {
  std::set<std::string> allowed = AllowedFromMap();
  ASSERT_TRUE(allowed.count("ncclProfiler_v4"));
  ASSERT_TRUE(allowed.count("ncclProfiler_v5"));
  ASSERT_TRUE(allowed.count("ncclProfiler_v6"));
  std::string nm = RunCommand(std::string("nm -D --defined-only ") + SENTINEL_PLUGIN_SO);
  ASSERT_FALSE(nm.empty());
  std::set<std::string> exported;
  std::stringstream lines(nm);
  std::string line;
  while (std::getline(lines, line)) {
    std::stringstream f(line);
    std::string addr, type, name;
    f >> addr >> type >> name;
    if (name.empty()) continue;
    size_t at = name.find('@');
    if (at != std::string::npos) name = name.substr(0, at);
    exported.insert(name);
  }
  EXPECT_EQ(exported, allowed);
}

TEST(AbiExports, NeededIsOnlyTheRuntime) {
  std::string d = RunCommand(std::string("readelf -d ") + SENTINEL_PLUGIN_SO);
  ASSERT_FALSE(d.empty());
  const std::set<std::string> ok = {"libc.so.6",           "libm.so.6",       "libstdc++.so.6",
                                    "libgcc_s.so.1",       "libpthread.so.0", "libdl.so.2",
                                    "ld-linux-x86-64.so.2"};
  std::stringstream lines(d);
  std::string line;
  int needed = 0;
  while (std::getline(lines, line)) {
    if (line.find("(NEEDED)") == std::string::npos) continue;
    size_t b = line.find('[');
    size_t e = line.find(']');
    ASSERT_NE(b, std::string::npos);
    std::string lib = line.substr(b + 1, e - b - 1);
    ++needed;
#ifdef SENTINEL_SANITIZED
    if (lib.find("asan") != std::string::npos || lib.find("ubsan") != std::string::npos ||
        lib.find("tsan") != std::string::npos) {
      continue;  // a sanitized test build (never shipped)
    }
#endif
    EXPECT_TRUE(ok.count(lib)) << "unexpected NEEDED " << lib;
    for (const char* bad : {"absl", "spdlog", "fmt"}) {
      EXPECT_EQ(lib.find(bad), std::string::npos) << lib;
    }
  }
  EXPECT_GT(needed, 0);
}

}  // namespace
