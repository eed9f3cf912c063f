#include "common/choice_words.h"

#include <cstring>

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::rules {
namespace {

constexpr ChoiceName<OnMismatch> kModes[] = {
    {"fail", OnMismatch::kFail}, {"warn", OnMismatch::kWarn}, {"abort", OnMismatch::kAbort}};

constexpr ChoiceName<LogLevelWord> kLevels[] = {
    {"trace", LogLevelWord::kTrace},       {"debug", LogLevelWord::kDebug},
    {"info", LogLevelWord::kInfo},         {"warn", LogLevelWord::kWarn},
    {"warning", LogLevelWord::kWarn},      {"error", LogLevelWord::kError},
    {"critical", LogLevelWord::kCritical}, {"off", LogLevelWord::kOff}};

template <typename E, size_t N>
bool Parse(const ChoiceName<E> (&table)[N], const char* text, E* out) noexcept {
  if (text == nullptr) return false;
  for (const ChoiceName<E>& row : table) {
    if (std::strcmp(row.word, text) == 0) {
      *out = row.value;
      return true;
    }
  }
  return false;
}

}  // namespace

const char* OnMismatchWord(OnMismatch mode) noexcept {
  for (const ChoiceName<OnMismatch>& row : kModes) {
    if (row.value == mode) return row.word;
  }
  return kModes[0].word;
}

bool ParseOnMismatch(const char* text, OnMismatch* out) noexcept {
  return Parse(kModes, text, out);
}

OnMismatch OnMismatchFromEnv(const SentinelEnv& env, OnMismatch fallback) noexcept {
  return ChoiceByName(env, Var::kOnMismatch, kModes, fallback);
}

uint16_t OutcomeOf(OnMismatch mode) noexcept {
  switch (mode) {
    case OnMismatch::kWarn:
      return kSentinelOutcomeWarn;
    case OnMismatch::kAbort:
      return kSentinelOutcomeAbort;
    case OnMismatch::kFail:
      break;
  }
  return kSentinelOutcomeFail;
}

const char* OutcomeWord(uint16_t outcome) noexcept {
  switch (outcome) {
    case kSentinelOutcomePass:
      return "pass";
    case kSentinelOutcomeWarn:
      return OnMismatchWord(OnMismatch::kWarn);
    case kSentinelOutcomeFail:
      return OnMismatchWord(OnMismatch::kFail);
    case kSentinelOutcomeAbort:
      return OnMismatchWord(OnMismatch::kAbort);
    default:
      return "unknown";
  }
}

bool ParseLogLevel(const char* text, LogLevelWord* out) noexcept {
  return Parse(kLevels, text, out);
}

LogLevelWord LogLevelFromEnv(const SentinelEnv& env, LogLevelWord fallback) noexcept {
  return ChoiceByName(env, Var::kLogLevel, kLevels, fallback);
}

}  // namespace sentinel::rules
