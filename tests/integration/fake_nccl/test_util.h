// Helpers for the fake-NCCL integration tests: run a program with a clean NCCL environment plus
// overrides, read files, and parse the recording plugin's and the sentinel plugin's output.
#pragma once

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace sentinel::testing {

inline std::string MakeTempDir() {
  char tmpl[] = "/tmp/fakenccl_test_XXXXXX";
  const char* dir = mkdtemp(tmpl);
  return dir != nullptr ? dir : "/tmp";
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) out.push_back(line);
  return out;
}

// Polls `pred` every 50 ms until it holds or `timeout_ms` passes; then one last look.
template <typename Pred>
bool Eventually(Pred pred, int timeout_ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

// A program started in the background (StartProgram); WaitProgram collects it.
struct Started {
  pid_t pid = -1;
  std::string out_path;  // its stdout + stderr
};

// Starts argv (under `timeout timeout_s`) with every NCCL_/FAKE_NCCL_/SENTINEL_/RECORDING_
// variable removed, then `env` set.
inline Started StartProgram(const std::vector<std::string>& argv,
                            const std::vector<std::pair<std::string, std::string>>& env,
                            int timeout_s = 60) {
  static int counter = 0;
  Started st;
  st.out_path = "/tmp/fakenccl_run_" + std::to_string(getpid()) + "_" + std::to_string(++counter);
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<std::string> drop;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv(*e);
      std::string key = kv.substr(0, kv.find('='));
      for (const char* prefix : {"NCCL_", "FAKE_NCCL_", "SENTINEL_", "RECORDING_", "DRIVER_"}) {
        if (key.rfind(prefix, 0) == 0) drop.push_back(key);
      }
    }
    for (const std::string& k : drop) unsetenv(k.c_str());
    for (const auto& kv : env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
    FILE* f = freopen(st.out_path.c_str(), "w", stdout);
    if (f == nullptr) _exit(126);
    dup2(fileno(stdout), 2);
    std::vector<std::string> full = {"/usr/bin/timeout", std::to_string(timeout_s)};
    full.insert(full.end(), argv.begin(), argv.end());
    std::vector<char*> args;
    for (std::string& a : full) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  st.pid = pid;
  return st;
}

inline RunResult WaitProgram(const Started& st) {
  RunResult r;
  int status = 0;
  waitpid(st.pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.output = ReadFile(st.out_path);
  unlink(st.out_path.c_str());
  return r;
}

// Runs argv to the end (see StartProgram).
inline RunResult RunProgram(const std::vector<std::string>& argv,
                            const std::vector<std::pair<std::string, std::string>>& env,
                            int timeout_s = 60) {
  return WaitProgram(StartProgram(argv, env, timeout_s));
}

// One line of the recording plugin's log.
struct RecLine {
  long tid = 0;
  std::string thread;
  int ctx = 0;
  std::string verb;  // init, start, stop, state, finalize
  std::map<std::string, std::string> kv;
  std::string Get(const std::string& k) const {
    auto it = kv.find(k);
    return it != kv.end() ? it->second : "";
  }
  long long Num(const std::string& k) const { return atoll(Get(k).c_str()); }
};

inline std::vector<RecLine> ParseRecording(const std::string& text) {
  std::vector<RecLine> out;
  for (const std::string& line : Lines(text)) {
    RecLine r;
    std::stringstream ss(line);
    std::string tok;
    ss >> tok;  // sequence number
    bool verb_seen = false;
    while (ss >> tok) {
      size_t eq = tok.find('=');
      if (eq == std::string::npos) {
        r.verb = tok;
        verb_seen = true;
        continue;
      }
      std::string k = tok.substr(0, eq);
      std::string v = tok.substr(eq + 1);
      if (!verb_seen && k == "tid")
        r.tid = atol(v.c_str());
      else if (!verb_seen && k == "thread")
        r.thread = v;
      else if (!verb_seen && k == "ctx")
        r.ctx = atoi(v.c_str());
      else
        r.kv[k] = v;
    }
    // Thread names may contain a space ("NCCL Progress 0"): keep the first word only.
    out.push_back(r);
  }
  return out;
}

// "key":value from one JSON object line (numbers and strings; enough for the dump format).
inline std::string JsonField(const std::string& line, const std::string& key) {
  std::string pat = "\"" + key + "\":";
  size_t p = line.find(pat);
  if (p == std::string::npos) return "";
  p += pat.size();
  if (line[p] == '"') {
    size_t e = line.find('"', p + 1);
    return line.substr(p + 1, e - p - 1);
  }
  size_t e = line.find_first_of(",}", p);
  return line.substr(p, e - p);
}

inline long long JsonNum(const std::string& line, const std::string& key) {
  return atoll(JsonField(line, key).c_str());
}

}  // namespace sentinel::testing
