// The fixture of the repro hook's end-to-end tests (test_repro_hook.cpp, test_aot_repro.cpp): the hook
// installed, a fresh debug directory per test (dir_), and the files written there by name pattern.
#pragma once
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "minifier/hook.h"

namespace kiln {

class ReproHookFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    install_repro_hook();
    dir_ = std::filesystem::temp_directory_path() / ("kiln_repro_hook_test_" + std::to_string(::getpid())) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Files in the debug directory whose names match `pattern`.
  std::vector<std::filesystem::path> files(const std::string& pattern) const {
    std::vector<std::filesystem::path> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_))
      if (std::regex_match(e.path().filename().string(), std::regex(pattern))) out.push_back(e.path());
    return out;
  }

  std::filesystem::path dir_;
};

}  // namespace kiln
