// The flight record's JSON text and its defensive parse: see flight_record.h.
#include "collector/log/flight_record.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "common/errno_text.h"
#include "common/wire_names.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {
namespace {

using nlohmann::json;

constexpr size_t kMaxName = 256;  // node names, alert ids, the RFC 3339 time
// The format's deepest nesting is 8 (root, communicators, a communicator, ranks, a rank, ops, an
// op, its flags): anything deeper is not a flight record, and is refused before a DOM is built.
constexpr int kMaxDepth = 8;

struct StateName {
  FlightState state;
  const char* name;
};
constexpr StateName kStates[] = {{FlightState::kCompleted, "completed"},
                                 {FlightState::kKernelStarted, "kernel_started"},
                                 {FlightState::kEnqueued, "enqueued"},
                                 {FlightState::kInFlight, "in_flight"}};

struct FlagName {
  uint8_t bit;
  const char* name;
};
constexpr FlagName kFlags[] = {{FlightOp::kP2p, "p2p"},
                               {FlightOp::kSampled, "sampled"},
                               {FlightOp::kTruncated, "truncated"},
                               {FlightOp::kStuck, "stuck"}};

// A JSON string (quotes included); bytes that are not UTF-8 become U+FFFD instead of an error.
std::string Quoted(std::string_view s) {
  return json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
}

void AppendTime(std::string* out, const char* key, int64_t ns) {
  if (ns < 0) {
    absl::StrAppend(out, ",\"", key, "\":null");
  } else {
    absl::StrAppend(out, ",\"", key, "\":", ns);
  }
}

void AppendRankOrNull(std::string* out, const char* key, int32_t v) {
  if (v < 0) {
    absl::StrAppend(out, ",\"", key, "\":null");
  } else {
    absl::StrAppend(out, ",\"", key, "\":", v);
  }
}

void AppendOp(std::string* out, const FlightOp& op) {
  absl::StrAppend(out, "{\"pos\":");
  if (op.position == 0) {
    absl::StrAppend(out, "null");
  } else {
    absl::StrAppend(out, op.position);
  }
  absl::StrAppend(out, ",\"seq\":", op.seq, ",\"func\":");
  // A value outside NCCL's numbering (a newer plugin's, or garbage) is unknown: null.
  const char* func = rules::FuncName(op.func);
  if (std::string_view(func) == "Unknown") {
    absl::StrAppend(out, "null");
  } else {
    absl::StrAppend(out, "\"", func, "\"");
  }
  absl::StrAppend(out, ",\"bytes\":");
  if (op.bytes_known()) {
    absl::StrAppend(out, op.bytes);
  } else {
    absl::StrAppend(out, "null");
  }
  absl::StrAppend(out, ",\"dtype\":");
  const char* dtype = rules::DatatypeName(op.datatype);
  if (std::string_view(dtype) == "Unknown") {
    absl::StrAppend(out, "null");
  } else {
    absl::StrAppend(out, "\"", dtype, "\"");
  }
  AppendRankOrNull(out, "root", op.root);
  AppendRankOrNull(out, "peer", op.peer);
  absl::StrAppend(out, ",\"state\":\"", FlightStateName(op.state), "\"");
  AppendTime(out, "api_ns", op.api_ns);
  AppendTime(out, "enqueue_ns", op.enqueue_ns);
  AppendTime(out, "gpu_start_ns", op.gpu_start_ns);
  AppendTime(out, "gpu_end_ns", op.gpu_end_ns);
  absl::StrAppend(out, ",\"flags\":[");
  bool first = true;
  for (const FlagName& f : kFlags) {
    if ((op.flags & f.bit) == 0) continue;
    absl::StrAppend(out, first ? "" : ",", "\"", f.name, "\"");
    first = false;
  }
  absl::StrAppend(out, "]}");
}

// The text with at most `keep` operations per rank (its newest).
std::string Encode(const FlightRecord& r, size_t keep) {
  std::string out;
  absl::StrAppend(&out, "{\"format\":\"", kFlightRecordFormat, "\",\"version\":", r.version,
                  ",\n\"node\":", Quoted(r.node), ",\n\"clock\":{\"mono_ns\":", r.mono_ns,
                  ",\"real_ns\":", r.real_ns, ",\"real_time\":", Quoted(r.real_time), "}");
  absl::StrAppend(&out, ",\n\"reason\":{\"kind\":", Quoted(r.reason),
                  ",\"alert_id\":", r.alert_id.empty() ? std::string("null") : Quoted(r.alert_id),
                  ",\"verdict\":", Quoted(r.verdict), "}");
  absl::StrAppend(&out, ",\n\"ops_per_rank\":", r.ops_per_rank, ",\n\"communicators\":[");
  for (size_t c = 0; c < r.comms.size(); ++c) {
    const FlightComm& comm = r.comms[c];
    absl::StrAppend(&out, c == 0 ? "\n" : ",\n",
                    absl::StrFormat("{\"comm\":\"0x%016x\"", comm.hash),
                    ",\"nranks\":", comm.nranks, ",\"local_ranks\":[");
    for (size_t i = 0; i < comm.ranks.size(); ++i) {
      absl::StrAppend(&out, i == 0 ? "" : ",", comm.ranks[i].rank);
    }
    absl::StrAppend(&out, "],\"ranks\":[");
    for (size_t i = 0; i < comm.ranks.size(); ++i) {
      const FlightRank& rank = comm.ranks[i];
      const size_t n = rank.ops.size();
      const size_t cut = n > keep ? n - keep : 0;
      absl::StrAppend(&out, i == 0 ? "\n" : ",\n", "{\"rank\":", rank.rank, ",\"pid\":", rank.pid,
                      ",\"ops_seen\":", rank.ops_seen, ",\"ops_omitted\":", rank.ops_omitted + cut,
                      ",\"progress\":");
      const FlightProgress& p = rank.progress;
      if (!p.known) {
        absl::StrAppend(&out, "null");
      } else {
        absl::StrAppend(&out, "{\"completed\":", p.completed, ",\"kernel_started\":",
                        p.kernel_traced ? absl::StrCat(p.kernel_started) : std::string("null"),
                        ",\"enqueued\":", p.enqueued);
        AppendTime(&out, "as_of_ns", p.as_of_ns);
        absl::StrAppend(&out, "}");
      }
      absl::StrAppend(&out, ",\"ops\":[");
      for (size_t k = cut; k < n; ++k) {
        absl::StrAppend(&out, k == cut ? "\n" : ",\n");
        AppendOp(&out, rank.ops[k]);
      }
      absl::StrAppend(&out, "]}");
    }
    absl::StrAppend(&out, "]}");
  }
  absl::StrAppend(&out, "]}\n");
  return out;
}

// Checks a text's syntax before a DOM is built from it: the byte where it breaks, and a nesting
// bound (a hostile file of nested brackets costs nothing).
class Syntax : public nlohmann::json_sax<json> {
 public:
  bool null() override { return true; }
  bool boolean(bool /*val*/) override { return true; }
  bool number_integer(number_integer_t /*val*/) override { return true; }
  bool number_unsigned(number_unsigned_t /*val*/) override { return true; }
  bool number_float(number_float_t /*val*/, const string_t& /*s*/) override { return true; }
  bool string(string_t& /*val*/) override { return true; }
  bool binary(binary_t& /*val*/) override { return true; }
  bool start_object(std::size_t /*elements*/) override { return Enter(); }
  bool key(string_t& /*val*/) override { return true; }
  bool end_object() override { return Leave(); }
  bool start_array(std::size_t /*elements*/) override { return Enter(); }
  bool end_array() override { return Leave(); }
  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& /*ex*/) override {
    error = absl::StrFormat("not JSON (truncated or corrupt) at byte %u", position);
    return false;
  }
  std::string error;

 private:
  bool Enter() {
    if (++depth_ <= kMaxDepth) return true;
    error = absl::StrFormat("nested deeper than a flight record (%d levels)", kMaxDepth);
    return false;
  }
  bool Leave() {
    --depth_;
    return true;
  }
  int depth_ = 0;
};

// Readers of one field: each checks the type and the range, and on failure sets the error that
// names the field's place. No json accessor that may throw is reached without its type checked.
class Reader {
 public:
  absl::Status error() const { return absl::InvalidArgumentError(error_); }
  bool failed() const { return !error_.empty(); }

  bool Fail(const std::string& where, const std::string& what) {
    if (error_.empty()) error_ = absl::StrCat(where, ": ", what);
    return false;
  }
  const json* Field(const json& obj, const std::string& where, const char* key) {
    const auto it = obj.find(key);
    if (it == obj.end()) {
      Fail(Path(where, key), "missing");
      return nullptr;
    }
    return &*it;
  }
  bool Object(const json& v, const std::string& where) {
    return v.is_object() || Fail(where, "expected an object");
  }
  bool Array(const json& v, const std::string& where, size_t max) {
    if (!v.is_array()) return Fail(where, "expected an array");
    if (v.size() > max)
      return Fail(where, absl::StrFormat("%u entries, more than %u", v.size(), max));
    return true;
  }
  bool U64(const json& obj, const std::string& where, const char* key, uint64_t* out) {
    const json* v = Field(obj, where, key);
    if (v == nullptr) return false;
    if (!v->is_number_unsigned()) return Fail(Path(where, key), "expected an unsigned integer");
    *out = v->get<uint64_t>();
    return true;
  }
  bool NullableU64(const json& obj, const std::string& where, const char* key, uint64_t* out,
                   bool* present) {
    const json* v = Field(obj, where, key);
    if (v == nullptr) return false;
    *present = !v->is_null();
    if (v->is_null()) return true;
    return U64(obj, where, key, out);
  }
  bool I64(const json& obj, const std::string& where, const char* key, int64_t* out) {
    uint64_t u = 0;
    if (!U64(obj, where, key, &u)) return false;
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Fail(Path(where, key), "out of range");
    }
    *out = static_cast<int64_t>(u);
    return true;
  }
  // A time (>= 0) or null (kFlightNoTime).
  bool Time(const json& obj, const std::string& where, const char* key, int64_t* out) {
    const json* v = Field(obj, where, key);
    if (v == nullptr) return false;
    if (v->is_null()) {
      *out = kFlightNoTime;
      return true;
    }
    return I64(obj, where, key, out);
  }
  // A rank index in [0, limit) or null (kFlightNoRank).
  bool Rank(const json& obj, const std::string& where, const char* key, int64_t limit,
            int32_t* out) {
    const json* v = Field(obj, where, key);
    if (v == nullptr) return false;
    if (v->is_null()) {
      *out = kFlightNoRank;
      return true;
    }
    uint64_t u = 0;
    if (!U64(obj, where, key, &u)) return false;
    if (u >= static_cast<uint64_t>(limit)) {
      return Fail(Path(where, key), absl::StrFormat("%u is not below %d", u, limit));
    }
    *out = static_cast<int32_t>(u);
    return true;
  }
  bool String(const json& obj, const std::string& where, const char* key, size_t max,
              std::string* out, bool nullable = false) {
    const json* v = Field(obj, where, key);
    if (v == nullptr) return false;
    if (nullable && v->is_null()) {
      out->clear();
      return true;
    }
    if (!v->is_string()) return Fail(Path(where, key), "expected a string");
    const std::string& s = v->get_ref<const std::string&>();
    if (s.size() > max) {
      return Fail(Path(where, key), absl::StrFormat("%u bytes, more than %u", s.size(), max));
    }
    *out = s;
    return true;
  }
  static std::string Path(const std::string& where, const char* key) {
    return where.empty() ? std::string(key) : absl::StrCat(where, ".", key);
  }

 private:
  std::string error_;
};

bool ParseHash(std::string_view s, uint64_t* out) {
  if (s.size() < 3 || s.size() > 18 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
  uint64_t v = 0;
  for (size_t i = 2; i < s.size(); ++i) {
    const char c = s[i];
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    if (d < 0) return false;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

bool ParseOp(Reader* rd, const json& j, const std::string& where, int32_t nranks, FlightOp* op) {
  if (!rd->Object(j, where)) return false;
  bool has_pos = false;
  bool has_bytes = false;
  std::string func;
  std::string dtype;
  std::string state;
  if (!rd->NullableU64(j, where, "pos", &op->position, &has_pos) ||
      !rd->U64(j, where, "seq", &op->seq) ||
      !rd->String(j, where, "func", kMaxName, &func, /*nullable=*/true) ||
      !rd->NullableU64(j, where, "bytes", &op->bytes, &has_bytes) ||
      !rd->String(j, where, "dtype", kMaxName, &dtype, /*nullable=*/true) ||
      !rd->Rank(j, where, "root", nranks, &op->root) ||
      !rd->Rank(j, where, "peer", nranks, &op->peer) ||
      !rd->String(j, where, "state", kMaxName, &state) ||
      !rd->Time(j, where, "api_ns", &op->api_ns) ||
      !rd->Time(j, where, "enqueue_ns", &op->enqueue_ns) ||
      !rd->Time(j, where, "gpu_start_ns", &op->gpu_start_ns) ||
      !rd->Time(j, where, "gpu_end_ns", &op->gpu_end_ns)) {
    return false;
  }
  if (has_pos && op->position == 0) return rd->Fail(Reader::Path(where, "pos"), "0 (null is none)");
  if (!has_pos) op->position = 0;
  if (has_bytes) op->flags |= FlightOp::kBytesKnown;
  op->func = kSentinelFuncUnknown;
  if (!func.empty()) {
    op->func = rules::FuncFromName(func.c_str());
    if (op->func == kSentinelFuncUnknown) {
      return rd->Fail(Reader::Path(where, "func"), "not an NCCL function name");
    }
  }
  op->datatype = kSentinelDatatypeUnknown;
  if (!dtype.empty()) {
    op->datatype = rules::DatatypeFromName(dtype.c_str());
    if (op->datatype == kSentinelDatatypeUnknown) {
      return rd->Fail(Reader::Path(where, "dtype"), "not an NCCL data type name");
    }
  }
  if (!FlightStateFromName(state, &op->state)) {
    return rd->Fail(Reader::Path(where, "state"), "not an operation state");
  }
  const json* flags = rd->Field(j, where, "flags");
  const std::string fwhere = Reader::Path(where, "flags");
  if (flags == nullptr || !rd->Array(*flags, fwhere, 8)) return false;
  for (const json& f : *flags) {
    if (!f.is_string()) return rd->Fail(fwhere, "expected strings");
    const std::string& name = f.get_ref<const std::string&>();
    bool known = false;
    for (const FlagName& k : kFlags) {
      if (name == k.name) {
        op->flags |= k.bit;
        known = true;
      }
    }
    if (!known) return rd->Fail(fwhere, "not an operation flag");
  }
  return true;
}

bool ParseRank(Reader* rd, const json& j, const std::string& where, int32_t nranks,
               FlightRank* rank) {
  if (!rd->Object(j, where)) return false;
  uint64_t pid = 0;
  if (!rd->Rank(j, where, "rank", nranks, &rank->rank) || !rd->U64(j, where, "pid", &pid) ||
      !rd->U64(j, where, "ops_seen", &rank->ops_seen) ||
      !rd->U64(j, where, "ops_omitted", &rank->ops_omitted)) {
    return false;
  }
  if (rank->rank < 0) return rd->Fail(Reader::Path(where, "rank"), "null");
  if (pid > std::numeric_limits<uint32_t>::max()) {
    return rd->Fail(Reader::Path(where, "pid"), "out of range");
  }
  rank->pid = static_cast<uint32_t>(pid);
  const json* progress = rd->Field(j, where, "progress");
  if (progress == nullptr) return false;
  const std::string pwhere = Reader::Path(where, "progress");
  FlightProgress& p = rank->progress;
  if (!progress->is_null()) {
    if (!rd->Object(*progress, pwhere) || !rd->U64(*progress, pwhere, "completed", &p.completed) ||
        !rd->NullableU64(*progress, pwhere, "kernel_started", &p.kernel_started,
                         &p.kernel_traced) ||
        !rd->U64(*progress, pwhere, "enqueued", &p.enqueued) ||
        !rd->Time(*progress, pwhere, "as_of_ns", &p.as_of_ns)) {
      return false;
    }
    if (p.completed > p.enqueued) {
      return rd->Fail(pwhere,
                      "completed is past enqueued (a collective completes after it is "
                      "enqueued)");
    }
    p.known = true;
  }
  const json* ops = rd->Field(j, where, "ops");
  const std::string owhere = Reader::Path(where, "ops");
  if (ops == nullptr || !rd->Array(*ops, owhere, kFlightMaxOpsPerRank)) return false;
  rank->ops.resize(ops->size());
  for (size_t k = 0; k < ops->size(); ++k) {
    if (!ParseOp(rd, (*ops)[k], absl::StrCat(owhere, "[", k, "]"), nranks, &rank->ops[k])) {
      return false;
    }
  }
  return true;
}

bool ParseComm(Reader* rd, const json& j, const std::string& where, FlightComm* comm) {
  if (!rd->Object(j, where)) return false;
  std::string hash;
  uint64_t nranks = 0;
  if (!rd->String(j, where, "comm", kMaxName, &hash) || !rd->U64(j, where, "nranks", &nranks)) {
    return false;
  }
  if (!ParseHash(hash, &comm->hash)) {
    return rd->Fail(Reader::Path(where, "comm"), "expected 0x and 1 to 16 hex digits");
  }
  if (nranks == 0 || nranks > static_cast<uint64_t>(kFlightMaxNranks)) {
    return rd->Fail(Reader::Path(where, "nranks"),
                    absl::StrFormat("%u is not in 1..%d", nranks, kFlightMaxNranks));
  }
  comm->nranks = static_cast<int32_t>(nranks);
  const json* local = rd->Field(j, where, "local_ranks");
  const std::string lwhere = Reader::Path(where, "local_ranks");
  const json* ranks = rd->Field(j, where, "ranks");
  const std::string rwhere = Reader::Path(where, "ranks");
  const size_t max_ranks = std::min(kFlightMaxRanksPerComm, static_cast<size_t>(nranks));
  if (local == nullptr || ranks == nullptr || !rd->Array(*local, lwhere, max_ranks) ||
      !rd->Array(*ranks, rwhere, max_ranks)) {
    return false;
  }
  std::set<int32_t> seen;
  comm->ranks.resize(ranks->size());
  for (size_t i = 0; i < ranks->size(); ++i) {
    const std::string here = absl::StrCat(rwhere, "[", i, "]");
    if (!ParseRank(rd, (*ranks)[i], here, comm->nranks, &comm->ranks[i])) return false;
    if (!seen.insert(comm->ranks[i].rank).second) {
      return rd->Fail(here, absl::StrFormat("rank %d listed twice", comm->ranks[i].rank));
    }
  }
  std::set<int32_t> listed;
  for (const json& r : *local) {
    if (!r.is_number_unsigned() || r.get<uint64_t>() >= nranks) {
      return rd->Fail(lwhere, "expected rank indices below nranks");
    }
    listed.insert(static_cast<int32_t>(r.get<uint64_t>()));
  }
  if (listed != seen || listed.size() != local->size()) {
    return rd->Fail(lwhere, "does not list exactly the ranks given");
  }
  return true;
}

}  // namespace

const char* FlightStateName(FlightState state) {
  for (const StateName& s : kStates) {
    if (s.state == state) return s.name;
  }
  return "unknown";
}

bool FlightStateFromName(std::string_view name, FlightState* out) {
  for (const StateName& s : kStates) {
    if (name == s.name) {
      *out = s.state;
      return true;
    }
  }
  return false;
}

std::string FlightRecordJson(const FlightRecord& record, size_t max_bytes) {
  size_t keep = 0;
  for (const FlightComm& c : record.comms) {
    for (const FlightRank& r : c.ranks) keep = std::max(keep, r.ops.size());
  }
  std::string text = Encode(record, keep);
  // Over the bound: fewer operations per rank, the newest kept (a hang is at the end), until the
  // text fits or only the header and the ranks' progress are left.
  while (text.size() > max_bytes && keep > 0) {
    const size_t scaled =
        static_cast<size_t>(static_cast<double>(keep) * static_cast<double>(max_bytes) /
                            static_cast<double>(text.size()) * 0.95);
    keep = std::min(keep - 1, scaled);
    text = Encode(record, keep);
  }
  return text;
}

absl::Status ParseFlightRecord(std::string_view text, FlightRecord* out) {
  *out = FlightRecord{};
  if (text.size() > kFlightRecordMaxBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%u bytes, larger than a flight record may be (%u)", text.size(), kFlightRecordMaxBytes));
  }
  Syntax syntax;
  if (!json::sax_parse(text, &syntax)) {
    return absl::InvalidArgumentError(syntax.error.empty() ? "not JSON" : syntax.error);
  }
  const json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return absl::InvalidArgumentError("not JSON");
  Reader rd;
  if (!rd.Object(root, "the file")) return rd.error();
  std::string format;
  uint64_t version = 0;
  if (!rd.String(root, "", "format", kMaxName, &format)) return rd.error();
  if (format != kFlightRecordFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a flight record (format \"", format.substr(0, 64), "\")"));
  }
  if (!rd.U64(root, "", "version", &version)) return rd.error();
  if (version != static_cast<uint64_t>(kFlightRecordVersion)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "flight record version %u; this reader knows version %d", version, kFlightRecordVersion));
  }
  const json* clock = rd.Field(root, "", "clock");
  const json* reason = rd.Field(root, "", "reason");
  const json* comms = rd.Field(root, "", "communicators");
  if (clock == nullptr || reason == nullptr || comms == nullptr) return rd.error();
  if (!rd.String(root, "", "node", kMaxName, &out->node) || !rd.Object(*clock, "clock") ||
      !rd.I64(*clock, "clock", "mono_ns", &out->mono_ns) ||
      !rd.I64(*clock, "clock", "real_ns", &out->real_ns) ||
      !rd.String(*clock, "clock", "real_time", kMaxName, &out->real_time) ||
      !rd.Object(*reason, "reason") ||
      !rd.String(*reason, "reason", "kind", kMaxName, &out->reason) ||
      !rd.String(*reason, "reason", "alert_id", kMaxName, &out->alert_id, /*nullable=*/true) ||
      !rd.String(*reason, "reason", "verdict", kFlightMaxText, &out->verdict) ||
      !rd.U64(root, "", "ops_per_rank", &out->ops_per_rank) ||
      !rd.Array(*comms, "communicators", kFlightMaxComms)) {
    return rd.error();
  }
  if (out->reason != "hang" && out->reason != "on_demand") {
    return absl::InvalidArgumentError("reason.kind: expected \"hang\" or \"on_demand\"");
  }
  std::set<uint64_t> hashes;
  out->comms.resize(comms->size());
  for (size_t c = 0; c < comms->size(); ++c) {
    const std::string where = absl::StrCat("communicators[", c, "]");
    if (!ParseComm(&rd, (*comms)[c], where, &out->comms[c])) return rd.error();
    if (!hashes.insert(out->comms[c].hash).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": communicator listed twice"));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadFlightRecordFile(const std::string& path, FlightRecord* out) {
  // O_NONBLOCK: a FIFO given by mistake (or malice) is refused below instead of waited on.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat(path, ": ", rules::ErrnoText(errno)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", rules::ErrnoText(err)));
    }
    if (n == 0) break;
    // Read one byte past the bound at most: a larger file is refused, never held whole.
    if (text.size() + static_cast<size_t>(n) > kFlightRecordMaxBytes) {
      close(fd);
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: larger than a flight record may be (%u bytes)", path, kFlightRecordMaxBytes));
    }
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const absl::Status parsed = ParseFlightRecord(text, out);
  if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", parsed.message()));
  return absl::OkStatus();
}

}  // namespace sentinel::collector
