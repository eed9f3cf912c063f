// Parsing the CUPTI tracer's settings (see cupti_config.h).
#include "plugin/cupti/cupti_config.h"

#include <cstdlib>
#include <string>

namespace sentinel::plugin::cupti {

Status ParseCuptiConfig(const rules::SentinelEnv& env, CuptiConfig* out) {
  using rules::Var;
  CuptiConfig& c = *out;
  c = CuptiConfig();
  std::string errors;
  // Values were checked by the registry (a bad one holds the default); pass on its problems with
  // the CUPTI variables.
  for (const Var v :
       {Var::kCupti, Var::kCuptiWindowMs, Var::kCuptiFlushMs, Var::kCuptiStarveMs,
        Var::kCuptiRearmS, Var::kCuptiBufferKib, Var::kCuptiBuffers, Var::kCuptiAttributions}) {
    if (env[v].bad) {
      errors += std::string(rules::Spec(v).name) + "='" + env.Text(v) + "' is invalid; using " +
                rules::Spec(v).default_text + "\n";
    }
  }
  static constexpr rules::ChoiceName<CuptiMode> kModes[] = {
      {"auto", CuptiMode::kAuto}, {"on", CuptiMode::kOn}, {"off", CuptiMode::kOff}};
  c.mode = rules::ChoiceByName(env, Var::kCupti, kModes, CuptiMode::kAuto);  // booleans too
  if (env.Set(Var::kCuptiPath)) c.path = env.Text(Var::kCuptiPath);
  if (env.Set(Var::kCuptiCommKernels)) c.comm_kernels = env.Text(Var::kCuptiCommKernels);
  if (env.Set(Var::kStepNvtx)) c.step_nvtx = env.Text(Var::kStepNvtx);
  // Not ours: NCCL/NVTX's variable, read where we decide, never written.
  if (const char* i = getenv("NVTX_INJECTION64_PATH")) c.nvtx_injection = i;
  c.window_ms = static_cast<uint32_t>(env.Number(Var::kCuptiWindowMs));
  c.flush_ms = static_cast<uint32_t>(env.Number(Var::kCuptiFlushMs));
  c.starve_ms = static_cast<uint32_t>(env.Number(Var::kCuptiStarveMs));
  c.rearm_s = static_cast<uint32_t>(env.Number(Var::kCuptiRearmS));
  c.buffer_kib = static_cast<uint32_t>(env.Number(Var::kCuptiBufferKib));
  c.buffers = static_cast<uint32_t>(env.Number(Var::kCuptiBuffers));
  c.attributions_per_window = static_cast<uint32_t>(env.Number(Var::kCuptiAttributions));
  if (errors.empty()) return Status::Ok();
  return Status::Copy(StatusCode::kInvalidArgument, errors.c_str());
}

Status ParseCuptiConfig(CuptiConfig* out) {
  return ParseCuptiConfig(rules::ProcessSentinelEnv(), out);
}

}  // namespace sentinel::plugin::cupti
