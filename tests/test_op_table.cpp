// Completeness of the op table: every op can run eagerly, be differentiated, be shape-inferred, and has a
// sample generator for the property tests; and `kiln ops` / `kiln ops --missing` report the table truthfully.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <set>
#include <sstream>
#include <sys/wait.h>

#include "op_samples.h"
#include "ops/op_info.h"

using namespace kiln;

namespace {

// What an op lacks, by the rules the CLI's `kiln ops --missing` also applies (empty when complete).
std::vector<std::string> missing_functions(const OpInfo& op) {
  std::vector<std::string> lacks;
  if (!op.kernel && !op.decomp) lacks.push_back("no eager kernel and no decomposition");
  if (op.differentiable && !op.vjp && !op.decomp) lacks.push_back("differentiable, but no VJP and no decomposition");
  if (op.kind == OpKind::Composite && !op.decomp) lacks.push_back("kind Composite, but no decomposition");
  if (!op.infer && !op.decomp) lacks.push_back("no shape inference (no infer function and no decomposition)");
  return lacks;
}

struct CommandResult {
  int exit_code = -1;
  std::string out;
};

CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Op names listed by `kiln ops`: the first word of each table line, between the header and the blank line
// before the summary.
std::vector<std::string> listed_ops(const std::string& out) {
  std::vector<std::string> names;
  std::istringstream lines(out);
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line) && !line.empty()) names.push_back(line.substr(0, line.find(' ')));
  return names;
}

TEST(OpTable, EveryOpIsComplete) {
  std::string report;
  for (const OpInfo& op : all_ops())
    for (const std::string& lack : missing_functions(op)) report += fmt::format("  {}: {}\n", op.name, lack);
  EXPECT_TRUE(report.empty()) << "incomplete ops:\n" << report;
}

TEST(OpTable, EveryOpHasASampleGenerator) {
  auto diff = differentiable_op_samples(), non_diff = non_differentiable_op_samples();
  std::string report;
  for (const OpInfo& op : all_ops()) {
    const auto& table = op.differentiable ? diff : non_diff;
    if (!table.count(std::string(op.name)))
      report += fmt::format("  {}: no sample generator in tests/op_samples.cpp ({} table)\n", op.name,
                            op.differentiable ? "differentiable_op_samples" : "non_differentiable_op_samples");
  }
  // and every generator belongs to an op of the right kind (catches typos and rows that changed flags)
  for (const auto* table : {&diff, &non_diff})
    for (const auto& [name, gen] : *table) {
      const OpInfo* op = find_op(name);
      if (!op) report += fmt::format("  {}: a sample generator for an op that is not in ops.def\n", name);
      else if (op->differentiable != (table == &diff))
        report += fmt::format("  {}: sample generator is in the wrong table\n", name);
    }
  EXPECT_TRUE(report.empty()) << report;
}

TEST(OpTable, CliListsEveryOp) {
  CommandResult r = run_command(std::string(KILN_CLI) + " ops");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::vector<std::string> listed = listed_ops(r.out);
  std::vector<std::string> expected;
  for (const OpInfo& op : all_ops()) expected.emplace_back(op.name);
  EXPECT_EQ(listed, expected) << r.out;
  EXPECT_NE(r.out.find(fmt::format("{} ops:", all_ops().size())), std::string::npos) << r.out;
}

TEST(OpTable, CliMissingListsExactlyTheIncompleteOps) {
  CommandResult r = run_command(std::string(KILN_CLI) + " ops --missing");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::vector<std::string> listed = listed_ops(r.out);
  std::vector<std::string> expected;
  for (const OpInfo& op : all_ops())
    if (!missing_functions(op).empty()) expected.emplace_back(op.name);
  EXPECT_EQ(listed, expected) << r.out;
}

}  // namespace
