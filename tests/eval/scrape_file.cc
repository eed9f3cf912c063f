#include "tests/eval/scrape_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace sentinel::collector::eval {
namespace {

constexpr char kMagic[8] = {'s', 'n', 't', 's', 'c', 'r', 'p', '1'};
// A node's text is a few hundred KiB; anything far larger is a damaged file, not a text.
constexpr uint64_t kMaxText = uint64_t{1} << 30;

void PutU64(std::ofstream& out, uint64_t v) { out.write(reinterpret_cast<const char*>(&v), 8); }
void PutString(std::ofstream& out, const std::string& s) {
  PutU64(out, s.size());
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
}
bool GetU64(std::ifstream& in, uint64_t* v) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(v), 8));
}
bool GetString(std::ifstream& in, std::string* s) {
  uint64_t n = 0;
  if (!GetU64(in, &n) || n > kMaxText) return false;
  s->resize(n);
  return static_cast<bool>(in.read(s->data(), static_cast<std::streamsize>(n)));
}

}  // namespace

bool SaveScrapes(const std::string& path, const ClusterDumpSpec& spec, const ClusterDump& dump) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(kMagic, sizeof(kMagic));
    PutU64(out, static_cast<uint64_t>(spec.nodes));
    PutU64(out, static_cast<uint64_t>(spec.run_ns));
    PutU64(out, static_cast<uint64_t>(spec.keep_scrapes_from_ns));
    PutU64(out, static_cast<uint64_t>(dump.start_ns));
    PutU64(out, dump.instances.size());
    for (const std::string& i : dump.instances) PutString(out, i);
    PutU64(out, dump.scrapes.size());
    for (const ClusterDump::Scrape& s : dump.scrapes) {
      PutU64(out, static_cast<uint64_t>(s.node));
      PutU64(out, static_cast<uint64_t>(s.t_ns));
      PutString(out, s.text);
    }
    if (!out.flush()) {
      std::fprintf(stderr, "prom_scale: cannot write %s\n", tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::fprintf(stderr, "prom_scale: cannot rename %s: %s\n", tmp.c_str(), std::strerror(errno));
    return false;
  }
  return true;
}

bool LoadScrapes(const std::string& path, ClusterDumpSpec* spec, ClusterDump* dump) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  char magic[sizeof(kMagic)] = {};
  uint64_t nodes = 0;
  uint64_t run_ns = 0;
  uint64_t keep_from = 0;
  uint64_t start = 0;
  uint64_t n = 0;
  const auto damaged = [&path] {
    std::fprintf(stderr, "prom_scale: %s is not a scrape file of this version\n", path.c_str());
    return false;
  };
  if (!in.read(magic, sizeof(magic)) || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0 ||
      !GetU64(in, &nodes) || !GetU64(in, &run_ns) || !GetU64(in, &keep_from) ||
      !GetU64(in, &start) || !GetU64(in, &n)) {
    return damaged();
  }
  if (nodes != static_cast<uint64_t>(spec->nodes) ||
      run_ns != static_cast<uint64_t>(spec->run_ns)) {
    std::fprintf(stderr, "prom_scale: %s holds %llu nodes over %.0f s, not %d over %.0f s\n",
                 path.c_str(), static_cast<unsigned long long>(nodes),
                 static_cast<double>(run_ns) / 1e9, spec->nodes,
                 static_cast<double>(spec->run_ns) / 1e9);
    return false;
  }
  if (n != nodes) return damaged();
  ClusterDump d;
  d.instances.resize(n);
  for (std::string& i : d.instances) {
    if (!GetString(in, &i)) return damaged();
  }
  if (!GetU64(in, &n)) return damaged();
  d.scrapes.reserve(n);
  for (uint64_t k = 0; k < n; ++k) {
    ClusterDump::Scrape s;
    uint64_t node = 0;
    uint64_t t = 0;
    if (!GetU64(in, &node) || node >= nodes || !GetU64(in, &t) || !GetString(in, &s.text)) {
      return damaged();
    }
    s.node = static_cast<int>(node);
    s.t_ns = static_cast<int64_t>(t);
    d.scrapes.push_back(std::move(s));
  }
  d.start_ns = static_cast<int64_t>(start);
  spec->keep_scrapes_from_ns = static_cast<int64_t>(keep_from);
  *dump = std::move(d);
  return true;
}

}  // namespace sentinel::collector::eval
