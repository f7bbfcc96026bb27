// The ATen table of `kiln import` (src/import/aten_ops.cpp): every overload that a row of ops.def lists in
// its `aten` column maps one-to-one onto that kiln op (every argument under its own name), and the rows
// written by hand because they differ (another ATen name, renamed or dropped arguments, code) are still there
// and still say what they do.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "import/aten_ops.h"
#include "ops/op_info.h"

namespace {

using kiln::importer::AtenRow;
using kiln::importer::aten_rows;

struct OpRow {
  std::string_view op, overloads;
};
constexpr OpRow kOpRows[] = {
#define KILN_OP(id, family, kind, flags, schema, aten, ...) {#id, aten},
#include "ops/ops.def"
#undef KILN_OP
};

std::vector<std::string> split_words(std::string_view s) {
  std::vector<std::string> out;
  std::string word;
  for (char c : std::string(s) + " ") {
    if (c != ' ') word += c;
    else if (!word.empty()) out.push_back(std::exchange(word, ""));
  }
  return out;
}

TEST(ImportTable, EveryOneToOneOverloadOfOpsDefForwardsToItsOp) {
  std::string report;
  int rows = 0;
  for (const OpRow& row : kOpRows) {
    for (const std::string& overload : split_words(row.overloads)) {
      const std::string key = fmt::format("{}.{}", row.op, overload);
      auto it = aten_rows().find(key);
      ++rows;
      if (it == aten_rows().end()) {
        report += fmt::format("  aten.{}: no row\n", key);
        continue;
      }
      const AtenRow& r = it->second;
      if (r.forwards_to != row.op || !r.renames.empty() || !r.ignored.empty() || r.decomposes)
        report += fmt::format("  aten.{}: forwards to '{}' with {} renamed and {} dropped arguments\n", key,
                              r.forwards_to, r.renames.size(), r.ignored.size());
    }
  }
  EXPECT_EQ(report, "") << "ops.def's aten column names overloads the table does not map one-to-one:\n" << report;
  EXPECT_GE(rows, 140);  // 141 when the column was introduced
}

// A hand row: the kiln op it forwards to ("" for a row written as code), its renames and dropped arguments.
struct HandRow {
  std::string forwards_to;
  std::map<std::string, std::string> renames;
  std::vector<std::string> ignored;
};

TEST(ImportTable, TheRowsThatDifferFromOpsDefAreStillWrittenByHand) {
  const std::vector<std::string> placement = {"layout", "device", "pin_memory", "memory_format", "non_blocking"};
  std::vector<std::string> random = placement;
  random.push_back("generator");
  const std::map<std::string, HandRow> expected = {
      // Forwarding rows that rename or drop arguments, or map another ATen name.
      {"_unsafe_view.default", {"view", {}, {}}},
      {"clone.default", {"clone", {}, {"memory_format"}}},
      {"contiguous.default", {"contiguous", {}, {"memory_format"}}},
      {"to.dtype", {"to", {}, {"non_blocking", "copy", "memory_format"}}},
      {"gather.default", {"gather", {}, {"sparse_grad"}}},
      {"layer_norm.default", {"layer_norm", {}, {"cudnn_enable"}}},
      {"batch_norm.default", {"batch_norm", {}, {"cudnn_enabled"}}},
      {"full.default", {"full", {}, placement}},
      {"zeros.default", {"zeros", {}, placement}},
      {"ones.default", {"ones", {}, placement}},
      {"full_like.default", {"full_like", {}, placement}},
      {"zeros_like.default", {"zeros_like", {}, placement}},
      {"ones_like.default", {"ones_like", {}, placement}},
      {"arange.start_step", {"arange", {}, placement}},
      {"arange.start", {"arange", {}, placement}},
      {"rand.default", {"rand", {}, random}},
      {"randn.default", {"randn", {}, random}},
      {"empty.memory_format", {"zeros", {}, placement}},
      {"empty_strided.default", {"zeros", {}, {"stride", "layout", "device", "pin_memory"}}},
      {"fill.Scalar", {"full_like", {{"value", "fill_value"}}, {}}},
      // Rows written as code (checked arguments, several kiln ops, or outputs kiln does not compute).
      {"any.dim", {}}, {"all.dim", {}}, {"squeeze.dim", {}}, {"t.default", {}}, {"expand.default", {}},
      {"detach.default", {}}, {"alias.default", {}}, {"_to_copy.default", {}}, {"constant_pad_nd.default", {}},
      {"embedding.default", {}}, {"arange.default", {}}, {"_softmax.default", {}}, {"_log_softmax.default", {}},
      {"max_pool2d_with_indices.default", {}}, {"native_layer_norm.default", {}},
  };
  std::string report;
  for (const auto& [key, want] : expected) {
    auto it = aten_rows().find(key);
    if (it == aten_rows().end()) {
      report += fmt::format("  aten.{}: no row\n", key);
      continue;
    }
    const AtenRow& r = it->second;
    if (r.forwards_to != want.forwards_to || r.renames != want.renames || r.ignored != want.ignored)
      report += fmt::format("  aten.{}: forwards to '{}' ({} renamed, {} dropped), expected '{}' ({}, {})\n", key,
                            r.forwards_to, r.renames.size(), r.ignored.size(), want.forwards_to,
                            want.renames.size(), want.ignored.size());
  }
  EXPECT_EQ(report, "") << report;
}

}  // namespace
