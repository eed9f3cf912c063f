// A test fixture over the registry's pure parse (common/sentinel_env.h): each Env() call reads a
// given "NAME=value" list, as the process's one reading would, so settings parsers can be tested
// with any environment.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <vector>

#include "common/sentinel_env.h"

namespace sentinel::plugin {

class RegistryEnvTest : public ::testing::Test {
 protected:
  const rules::SentinelEnv& Env(std::initializer_list<const char*> entries) {
    envp_.assign(entries);
    envp_.push_back(nullptr);
    rules::ParseSentinelEnv(envp_.data(), env_.get());
    return *env_;
  }

 private:
  std::vector<const char*> envp_;
  std::unique_ptr<rules::SentinelEnv> env_ = std::make_unique<rules::SentinelEnv>();
};

}  // namespace sentinel::plugin
