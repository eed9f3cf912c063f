// Parser of the expectation grammar (plugin/guard/README.md): `key op value` terms separated by
// whitespace, ',' or ';', '#' comments to the end of a line. The guard and sentineld --expect both
// use it, so a node expectation the daemon accepts is one the plugin accepts.
#include "common/expectation.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string>

namespace sentinel::rules {
namespace {

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

bool IsSeparator(char c) { return c == ' ' || c == '\t' || c == '\r' || c == ',' || c == ';'; }

bool IsKeyChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

bool IsPluginNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.' ||
         c == ' ' || c == '+';
}

// Where the parse stopped and why, until ParseExpectation formats it into its Status.
struct ParseError {
  int line = 0;    // 1-based line in the source text
  int column = 0;  // 1-based column of the bad token
  int length = 1;  // caret length
  std::string message;
  std::string source_line;  // the line that holds the error, for the caret display
};

struct Token {
  std::string_view text;
  int column = 0;  // 1-based
};

class Parser {
 public:
  Parser(Expectation* out, ParseError* error) : out_(out), error_(error) {}

  bool ParseLine(std::string_view line, int line_no) {
    line_ = line;
    line_no_ = line_no;
    size_t i = 0;
    while (i < line.size()) {
      char c = line[i];
      if (IsSeparator(c)) {
        ++i;
        continue;
      }
      if (c == '#') break;
      // key
      size_t key_begin = i;
      while (i < line.size() && IsKeyChar(line[i])) ++i;
      if (i == key_begin) {
        return Fail(i, 1,
                    std::string("unexpected character '") + c + "' (expected a key such as net=)");
      }
      Token key{line.substr(key_begin, i - key_begin), static_cast<int>(key_begin) + 1};
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      // operator
      size_t op_begin = i;
      std::string_view op;
      if (line.compare(i, 2, ">=") == 0) {
        op = ">=";
        i += 2;
      } else if (i < line.size() && line[i] == '=') {
        op = "=";
        i += 1;
      } else if (i < line.size() && (line[i] == '<' || line[i] == '>' || line[i] == '!')) {
        size_t len = (i + 1 < line.size() && line[i + 1] == '=') ? 2 : 1;
        return Fail(
            i, len,
            "unsupported operator '" + std::string(line.substr(i, len)) + "' (use '=' or '>=')");
      } else {
        return Fail(key_begin, key.text.size(),
                    "term '" + std::string(key.text) + "' has no value (write " +
                        std::string(key.text) + "=<value>)");
      }
      Token op_token{op, static_cast<int>(op_begin) + 1};
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      // value: a quoted string or a run of non-separator characters
      size_t value_begin = i;
      std::string_view value;
      if (i < line.size() && line[i] == '"') {
        size_t close = line.find('"', i + 1);
        if (close == std::string_view::npos) return Fail(i, line.size() - i, "unterminated quote");
        value = line.substr(i + 1, close - i - 1);
        i = close + 1;
      } else {
        while (i < line.size() && !IsSeparator(line[i]) && line[i] != '#') ++i;
        value = line.substr(value_begin, i - value_begin);
      }
      if (value.empty()) {
        return Fail(op_begin, op.size(), "missing value after '" + std::string(op) + "'");
      }
      Token value_token{value, static_cast<int>(value_begin) + 1};
      if (!ApplyTerm(key, op_token, value_token)) return false;
      if (!out_->text.empty()) out_->text += ' ';
      out_->text += std::string(line.substr(key_begin, i - key_begin));
    }
    return true;
  }

 private:
  bool Fail(size_t pos, size_t len, std::string message) {
    error_->line = line_no_;
    error_->column = static_cast<int>(pos) + 1;
    error_->length = len == 0 ? 1 : static_cast<int>(len);
    error_->message = std::move(message);
    error_->source_line = std::string(line_);
    return false;
  }
  bool Fail(const Token& t, std::string message) {
    return Fail(static_cast<size_t>(t.column - 1), t.text.size(), std::move(message));
  }

  bool Once(const Token& key, unsigned bit) {
    if ((seen_ & bit) != 0) return Fail(key, "'" + std::string(key.text) + "' given twice");
    seen_ |= bit;
    return true;
  }

  bool RequireEq(const Token& key, const Token& op) {
    if (op.text != "=") {
      return Fail(op,
                  "'" + std::string(key.text) + "' takes '=', not '" + std::string(op.text) + "'");
    }
    return true;
  }

  bool ParseCount(const Token& key, const Token& value, int lo, int hi, int* out) {
    std::string s(value.text);
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(s.c_str(), &end, 10);
    if (end == s.c_str() || *end != '\0' || errno != 0 || v < lo || v > hi) {
      return Fail(value, "'" + s + "' is not a valid " + std::string(key.text) +
                             " (a whole number " + std::to_string(lo) + ".." + std::to_string(hi) +
                             ")");
    }
    *out = static_cast<int>(v);
    return true;
  }

  bool ApplyTerm(const Token& key, const Token& op, const Token& value) {
    std::string_view k = key.text;
    std::string_view v = value.text;
    if (IEquals(k, "net")) {
      if (!Once(key, 1u << 0) || !RequireEq(key, op)) return false;
      if (IEquals(v, "ib")) {
        out_->net = NetKind::kIb;
      } else if (IEquals(v, "roce")) {
        out_->net = NetKind::kRoce;
      } else if (IEquals(v, "socket")) {
        out_->net = NetKind::kSocket;
      } else {
        for (char c : v) {
          if (!IsPluginNameChar(c)) {
            return Fail(value, "unknown value '" + std::string(v) +
                                   "' for net (expected ib, roce, socket or an external net "
                                   "plugin's name as NCCL prints it)");
          }
        }
        out_->net = NetKind::kPlugin;
        out_->net_plugin = std::string(v);
      }
      return true;
    }
    if (IEquals(k, "gdr")) {
      if (!Once(key, 1u << 1) || !RequireEq(key, op)) return false;
      if (IEquals(v, "on") || IEquals(v, "yes") || IEquals(v, "1")) {
        out_->gdr = Toggle::kOn;
      } else if (IEquals(v, "off") || IEquals(v, "no") || IEquals(v, "0")) {
        out_->gdr = Toggle::kOff;
      } else {
        return Fail(value, "unknown value '" + std::string(v) + "' for gdr (expected on or off)");
      }
      return true;
    }
    if (IEquals(k, "intra")) {
      if (!Once(key, 1u << 2) || !RequireEq(key, op)) return false;
      if (IEquals(v, "p2p")) {
        out_->intra = IntraPath::kP2p;
      } else if (IEquals(v, "nvls")) {
        out_->intra = IntraPath::kNvls;
      } else if (IEquals(v, "shm")) {
        out_->intra = IntraPath::kShm;
      } else {
        return Fail(value,
                    "unknown value '" + std::string(v) + "' for intra (expected p2p, nvls or shm)");
      }
      return true;
    }
    if (IEquals(k, "ranks_per_node")) {
      if (!Once(key, 1u << 3)) return false;
      out_->ranks_per_node_cmp = op.text == ">=" ? Compare::kAtLeast : Compare::kExactly;
      return ParseCount(key, value, 1, 1 << 20, &out_->ranks_per_node);
    }
    if (IEquals(k, "nics")) {
      if (!Once(key, 1u << 4)) return false;
      out_->nics_cmp = op.text == ">=" ? Compare::kAtLeast : Compare::kExactly;
      return ParseCount(key, value, 1, 4096, &out_->nics);
    }
    if (IEquals(k, "link_gbps")) {
      if (!Once(key, 1u << 5)) return false;
      if (op.text != ">=") {
        return Fail(op,
                    "link_gbps takes '>=' (a minimum rate), not '" + std::string(op.text) + "'");
      }
      std::string s(v);
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (end == s.c_str() || *end != '\0' || !(d > 0) || d > 1e6) {
        return Fail(value, "'" + s + "' is not a valid link_gbps (a positive number of Gb/s)");
      }
      out_->link_gbps = d;
      return true;
    }
    if (IEquals(k, "ports")) {
      if (!Once(key, 1u << 6) || !RequireEq(key, op)) return false;
      if (!IEquals(v, "active")) {
        return Fail(value, "unknown value '" + std::string(v) + "' for ports (expected active)");
      }
      out_->ports_active = true;
      return true;
    }
    if (IEquals(k, "affinity")) {
      if (!Once(key, 1u << 7) || !RequireEq(key, op)) return false;
      if (IEquals(v, "pcie")) {
        out_->affinity = Affinity::kPcie;
      } else if (IEquals(v, "numa")) {
        out_->affinity = Affinity::kNuma;
      } else {
        return Fail(value,
                    "unknown value '" + std::string(v) + "' for affinity (expected pcie or numa)");
      }
      return true;
    }
    return Fail(key, "unknown key '" + std::string(k) +
                         "' (expected net, gdr, intra, ranks_per_node, link_gbps, nics, ports or "
                         "affinity)");
  }

  Expectation* out_;
  ParseError* error_;
  std::string_view line_;
  int line_no_ = 0;
  unsigned seen_ = 0;
};

// "<line>:<column>: <message>", the source line and the caret line under the bad token.
std::string Describe(const ParseError& error) {
  std::string msg = std::to_string(error.line) + ':' + std::to_string(error.column) + ": " +
                    error.message + "\n  ";
  std::string shown = error.source_line;
  for (char& c : shown) {
    if (c == '\t') c = ' ';  // keep the caret aligned
  }
  msg += shown + "\n  ";
  msg.append(static_cast<size_t>(error.column > 0 ? error.column - 1 : 0), ' ');
  msg.append(static_cast<size_t>(error.length > 0 ? error.length : 1), '^');
  return msg;
}

}  // namespace

Status ParseExpectation(std::string_view text, Expectation* out) {
  *out = Expectation();
  ParseError error;
  Parser parser(out, &error);
  int line_no = 1;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t nl = text.find('\n', begin);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    if (!parser.ParseLine(text.substr(begin, end - begin), line_no)) {
      return Status::Copy(StatusCode::kInvalidArgument, Describe(error).c_str());
    }
    if (nl == std::string_view::npos) break;
    begin = nl + 1;
    ++line_no;
  }
  return Status::Ok();
}

std::string FormatParseError(std::string_view source_name, const Status& error) {
  std::string msg(source_name);
  msg += ':';
  msg += error.message();
  return msg;
}

const char* NetKindName(NetKind kind) {
  switch (kind) {
    case NetKind::kIb:
      return "ib";
    case NetKind::kRoce:
      return "roce";
    case NetKind::kSocket:
      return "socket";
    case NetKind::kPlugin:
      return "plugin";
    case NetKind::kAny:
      break;
  }
  return "any";
}

const char* IntraPathName(IntraPath path) {
  switch (path) {
    case IntraPath::kP2p:
      return "p2p";
    case IntraPath::kNvls:
      return "nvls";
    case IntraPath::kShm:
      return "shm";
    case IntraPath::kAny:
      break;
  }
  return "any";
}

const char* AffinityName(Affinity affinity) {
  switch (affinity) {
    case Affinity::kPcie:
      return "pcie";
    case Affinity::kNuma:
      return "numa";
    case Affinity::kAny:
      break;
  }
  return "any";
}

}  // namespace sentinel::rules
