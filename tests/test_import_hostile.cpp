// `kiln import` of hostile archives: payload layouts whose extent wraps 64-bit arithmetic (a storage offset
// or stride near 2^62..2^63 once read heap bytes from before the payload into the written .npy), JSON that is
// not an object, nested beyond reason or missing fields, and sizes that are not integers. Each is refused as
// bad input (exit 2, a message naming the archive and what is wrong) and nothing is written; a RapidCheck
// property checks that tensor_from_storage either refuses a layout or reads only inside the payload.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <zip.h>

#include <cstring>
#include <functional>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "core/error.h"
#include "import/pt2.h"
#include "import/zip_reader.h"

namespace fs = std::filesystem;
using kiln::cli_test::CliResult;
using kiln::cli_test::kiln_cli;
using json = nlohmann::json;

namespace {

using Entries = std::vector<std::pair<std::string, std::string>>;

fs::path fixture(const std::string& stem) { return kiln::cli_test::source_path("tests/fixtures/pt2/" + stem + ".pt2"); }

Entries fixture_entries(const std::string& stem) {
  kiln::importer::ZipReader zip(fixture(stem).string());
  Entries out;
  for (const auto& [name, size] : zip.entries()) out.emplace_back(name, zip.read(name, int64_t(1) << 30));
  return out;
}

std::string& entry(Entries& entries, const std::string& name) {
  for (auto& [n, data] : entries)
    if (n == name) return data;
  ADD_FAILURE() << "no entry " << name;
  static std::string none;
  return none;
}

class ImportHostile : public kiln::cli_test::CliTest {
 protected:
  fs::path write(const std::string& name, const Entries& entries) {
    const fs::path path = dir_ / name;
    fs::remove(path);
    zipFile z = zipOpen64(path.c_str(), 0);
    EXPECT_TRUE(z) << path;
    for (const auto& [n, data] : entries) {
      zip_fileinfo info{};
      EXPECT_EQ(zipOpenNewFileInZip64(z, n.c_str(), &info, nullptr, 0, nullptr, 0, nullptr, 0, 0, 1), ZIP_OK);
      EXPECT_EQ(zipWriteInFileInZip(z, data.data(), unsigned(data.size())), ZIP_OK);
      EXPECT_EQ(zipCloseFileInZip(z), ZIP_OK);
    }
    EXPECT_EQ(zipClose(z, nullptr), ZIP_OK);
    return path;
  }
  // The import must be refused as bad input: exit 2, `expected` in the message, no output directory.
  void expect_refused(const fs::path& archive, const std::string& expected) {
    fs::remove_all(dir_ / "out");
    CliResult r = kiln_cli("import '" + archive.string() + "' -o '" + (dir_ / "out").string() + "'");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("kiln: error: "), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << "expected '" << expected << "' in:\n" << r.output;
    EXPECT_FALSE(fs::exists(dir_ / "out")) << "a refused import wrote its output directory";
  }
  // mlp.pt2 with its weights config edited by `edit`.
  fs::path mlp_with_config(const std::string& name, const std::function<void(json&)>& edit) {
    Entries entries = fixture_entries("mlp");
    std::string& text = entry(entries, "mlp/data/weights/model_weights_config.json");
    json config = json::parse(text);
    edit(config["config"]["fc1.weight"]["tensor_meta"]);
    text = config.dump();
    return write(name, entries);
  }
  // mlp.pt2 with models/model.json replaced by `model`, or edited by `edit`.
  fs::path mlp_with_model(const std::string& name, const std::string& model) {
    Entries entries = fixture_entries("mlp");
    entry(entries, "mlp/models/model.json") = model;
    return write(name, entries);
  }
  fs::path mlp_with_model(const std::string& name, const std::function<void(json&)>& edit) {
    Entries entries = fixture_entries("mlp");
    json model = json::parse(entry(entries, "mlp/models/model.json"));
    edit(model);
    return mlp_with_model(name, model.dump());
  }
};

// ---------------------------------------------------------------- payload layouts

TEST_F(ImportHostile, StorageOffsetsAndStridesWhoseExtentWrapsAreRefusedNotReadFromTheHeap) {
  // The offsets of the probe: 2^62 - 512 (its end in bytes wraps to 2 KB before the payload: a leak) and
  // 2^62 - 2^24 (a read far before it: a crash).
  for (int64_t offset : {int64_t(4611686018427387392), int64_t(4611686018410610688)}) {
    SCOPED_TRACE(offset);
    expect_refused(mlp_with_config("offset.pt2", [&](json& tm) { tm["storage_offset"] = {{"as_int", offset}}; }),
                   "payload 'fc1.weight'");
  }
  for (int64_t stride : {INT64_MAX / 31 + 1, int64_t(1) << 62, INT64_MAX}) {
    SCOPED_TRACE(stride);
    expect_refused(mlp_with_config("stride.pt2", [&](json& tm) { tm["strides"][0] = {{"as_int", stride}}; }),
                   "payload 'fc1.weight'");
  }
  expect_refused(mlp_with_config("negative.pt2", [](json& tm) { tm["storage_offset"] = {{"as_int", -1}}; }),
                 "negative storage offset -1");
}

// Whether every element a layout addresses lies inside `storage_bytes`, computed in 128 bits (no wrap).
bool inside(const kiln::Shape& sizes, const kiln::Shape& strides, int64_t offset, int64_t elem, size_t storage_bytes) {
  __int128 last = offset;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return true;
    last += __int128(sizes[d] - 1) * strides[d];
  }
  return offset >= 0 && (last + 1) * elem <= __int128(storage_bytes);
}

RC_GTEST_PROP(ImportPayloadLayout, EveryLayoutIsRefusedOrReadInsideThePayload, ()) {
  const size_t rank = *rc::gen::inRange<size_t>(0, 4);
  kiln::Shape sizes, strides;
  // Small values, and values whose products and sums wrap int64 (the probe's 2^62 - 512, 2^63 - 1, ...).
  const auto big = rc::gen::element<int64_t>(int64_t(1) << 62, (int64_t(1) << 62) - 512, INT64_MAX, INT64_MAX / 2 + 1,
                                             INT64_MAX / 3, int64_t(1) << 61);
  const auto number = rc::gen::weightedOneOf<int64_t>({{6, rc::gen::inRange<int64_t>(0, 9)}, {2, big},
                                                       {1, rc::gen::inRange<int64_t>(-3, 0)}});
  for (size_t d = 0; d < rank; ++d) {
    sizes.push_back(*rc::gen::inRange<int64_t>(0, 5));
    strides.push_back(*number);
  }
  const int64_t offset = *number;
  const kiln::DType dtype = *rc::gen::element(kiln::DType::U8, kiln::DType::F32, kiln::DType::F64);
  const int64_t elem = kiln::dtype_size(dtype);
  const std::string storage = *rc::gen::container<std::string>(*rc::gen::inRange<size_t>(0, 200), rc::gen::arbitrary<char>());
  bool valid = offset >= 0;
  for (size_t d = 0; d < rank; ++d) valid = valid && strides[d] >= 0;
  valid = valid && inside(sizes, strides, offset, elem, storage.size());
  try {
    kiln::Tensor t = kiln::importer::tensor_from_storage(storage, sizes, dtype, strides, offset, "payload 'p'");
    RC_ASSERT(valid);  // read only when the whole layout lies inside the storage
    RC_ASSERT(t.sizes() == sizes);
    // Each element is the storage's bytes at its offset.
    std::vector<int64_t> index(rank, 0);
    const char* got = static_cast<const char*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel(); ++i) {
      int64_t at = offset;
      for (size_t d = 0; d < rank; ++d) at += index[d] * strides[d];
      RC_ASSERT(std::memcmp(got + i * elem, storage.data() + at * elem, size_t(elem)) == 0);
      for (size_t d = rank; d-- > 0;) {
        if (++index[d] < sizes[d]) break;
        index[d] = 0;
      }
    }
  } catch (const kiln::Error& e) {
    RC_ASSERT(!e.internal());
    RC_ASSERT(!valid);
    RC_ASSERT(std::string(e.what()).find("payload 'p'") != std::string::npos);
  }
}

// ---------------------------------------------------------------- hostile JSON

TEST_F(ImportHostile, ModelJsonThatIsNotAnObjectIsBadInput) {
  expect_refused(mlp_with_model("null.pt2", std::string("null")), "entry 'mlp/models/model.json' is null, not a JSON object");
  expect_refused(mlp_with_model("array.pt2", std::string("[1, 2]")), "entry 'mlp/models/model.json' is an array");
  expect_refused(mlp_with_model("number.pt2", std::string("8")), "entry 'mlp/models/model.json' is a number");
}

TEST_F(ImportHostile, DeeplyNestedJsonIsRefusedWhileParsing) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  expect_refused(mlp_with_model("deep.pt2", deep), "nests JSON deeper than 256 levels");
  const std::string deep_field = "{\"schema_version\": " + deep + "}";
  expect_refused(mlp_with_model("deep_field.pt2", deep_field), "nests JSON deeper than 256 levels");
}

TEST_F(ImportHostile, MissingOrMistypedFieldsNameTheFileAndTheField) {
  expect_refused(mlp_with_model("no_gm.pt2", [](json& m) { m.erase("graph_module"); }),
                 "no_gm.pt2: models/model.json has no field 'graph_module'");
  expect_refused(mlp_with_model("gm_null.pt2", [](json& m) { m["graph_module"] = nullptr; }),
                 "models/model.json: graph_module is null, not an object with field 'graph'");
  expect_refused(mlp_with_model("nodes.pt2", [](json& m) { m["graph_module"]["graph"]["nodes"] = 7; }),
                 "graph_module.graph.nodes is number, not a list");
  expect_refused(mlp_with_model("version.pt2", [](json& m) { m["schema_version"] = "8"; }),
                 "models/model.json: schema_version is string, not an object with field 'major'");
  expect_refused(mlp_with_model("node_null.pt2", [](json& m) { m["graph_module"]["graph"]["nodes"][2] = nullptr; }),
                 "graph_module.graph.nodes[2] is null, not an object with field 'target'");
  expect_refused(mlp_with_model("specs.pt2", [](json& m) { m["graph_module"]["signature"]["input_specs"] = json::object(); }),
                 "graph_module.signature.input_specs is object, not a list");
}

TEST_F(ImportHostile, ANodeWithoutItsOutputsIsBadInput) {
  expect_refused(mlp_with_model("no_outputs.pt2", [](json& m) {
                   m["graph_module"]["graph"]["nodes"][0]["outputs"] = json::array();
                 }),
                 "the archive lists 0 outputs where aten.permute.default has 1");
}

// ---------------------------------------------------------------- sizes that are not integers

TEST_F(ImportHostile, SizesThatAreNotIntegersAreSaidToBeSoAndNeverTruncated) {
  auto size = [&](const std::string& name, const json& dim) {
    return mlp_with_model(name, [&](json& m) { m["graph_module"]["graph"]["tensor_values"]["relu"]["sizes"][1] = dim; });
  };
  expect_refused(size("abc.pt2", "abc"), "value %relu's size is \"abc\", not a size (expected {\"as_int\": N})");
  // 1e23 (printed as the double it parses to) is neither a size nor an integer.
  expect_refused(size("big.pt2", 1e23), "value %relu's size is 9.999999999999999e+22, not a size");
  expect_refused(size("half.pt2", {{"as_int", 32.5}}), "value %relu's size is 32.5, not an integer that fits in 64 bits");
  expect_refused(size("huge.pt2", {{"as_int", 1e23}}), "value %relu's size is 9.999999999999999e+22, not an integer");
  expect_refused(size("unsigned.pt2", {{"as_int", uint64_t(1) << 63}}),
                 "value %relu's size is 9223372036854775808, not an integer that fits in 64 bits");
  // A real symbolic size is still called one.
  expect_refused(size("sym.pt2", {{"as_expr", {{"expr_str", "s0"}}}}), "value %relu's size is a symbolic size");
  // An op argument: permute's dims.
  expect_refused(mlp_with_model("arg.pt2", [](json& m) {
                   m["graph_module"]["graph"]["nodes"][0]["inputs"][1]["arg"] = {{"as_ints", {1.5, 0}}};
                 }),
                 "node %permute (aten.permute.default): argument 'dims' is 1.5, not a size");
  expect_refused(mlp_with_model("dtype.pt2", [](json& m) {
                   m["graph_module"]["graph"]["tensor_values"]["relu"]["dtype"] = 7.5;
                 }),
                 "value %relu's dtype is 7.5, not an integer");
}

}  // namespace
