// `kiln import` (docs/import.md): every committed .pt2 fixture (tests/fixtures/pt2, written by
// tools/export_pt2.py with PyTorch 2.11) imports, and its graph run on eager and on the inductor gives PyTorch's
// outputs; malformed, hostile and unsupported archives are refused with exit 2 and a message naming the
// problem, writing nothing; `kiln ops --coverage` lists the Core ATen ops the importer cannot map.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <zip.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "eager/npy.h"
#include "import/aten_ops.h"
#include "import/zip_reader.h"

namespace fs = std::filesystem;
using kiln::cli_test::CliResult;
using kiln::cli_test::kiln_cli;
using json = nlohmann::json;

namespace {

fs::path fixtures() { return kiln::cli_test::source_path("tests/fixtures/pt2"); }

// Writes a stored (uncompressed) zip of `entries`, in order.
void write_zip(const fs::path& path, const std::vector<std::pair<std::string, std::string>>& entries) {
  zipFile z = zipOpen64(path.c_str(), 0);
  ASSERT_TRUE(z) << path;
  for (const auto& [name, data] : entries) {
    zip_fileinfo info{};
    ASSERT_EQ(zipOpenNewFileInZip64(z, name.c_str(), &info, nullptr, 0, nullptr, 0, nullptr, 0, 0, 1), ZIP_OK);
    ASSERT_EQ(zipWriteInFileInZip(z, data.data(), unsigned(data.size())), ZIP_OK);
    ASSERT_EQ(zipCloseFileInZip(z), ZIP_OK);
  }
  ASSERT_EQ(zipClose(z, nullptr), ZIP_OK);
}

// The entries of a fixture, by name, in a stable order, for building altered copies of it.
std::vector<std::pair<std::string, std::string>> fixture_entries(const std::string& stem) {
  kiln::importer::ZipReader zip((fixtures() / (stem + ".pt2")).string());
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, size] : zip.entries()) out.emplace_back(name, zip.read(name, int64_t(1) << 30));
  return out;
}

std::string& entry(std::vector<std::pair<std::string, std::string>>& entries, const std::string& name) {
  for (auto& [n, data] : entries)
    if (n == name) return data;
  ADD_FAILURE() << "no entry " << name;
  static std::string none;
  return none;
}

// Whether the dumped output equals PyTorch's within float32 rounding of a different summation order.
::testing::AssertionResult close_to(const fs::path& actual_file, const fs::path& expected_file) {
  kiln::Tensor a = kiln::read_npy(actual_file.string()), e = kiln::read_npy(expected_file.string());
  if (a.sizes() != e.sizes() || a.dtype() != e.dtype())
    return ::testing::AssertionFailure() << actual_file << " has another shape or dtype than " << expected_file;
  if (a.dtype() == kiln::DType::I64) {  // indices (topk's): exactly PyTorch's
    for (int64_t i = 0; i < a.numel(); ++i)
      if (a.data<int64_t>()[i] != e.data<int64_t>()[i])
        return ::testing::AssertionFailure() << "element " << i << ": kiln " << a.data<int64_t>()[i] << ", PyTorch "
                                             << e.data<int64_t>()[i];
    return ::testing::AssertionSuccess();
  }
  const float* x = a.data<float>();
  const float* y = e.data<float>();
  for (int64_t i = 0; i < a.numel(); ++i)
    if (!(std::fabs(x[i] - y[i]) <= 1e-4f + 1e-4f * std::fabs(y[i])))
      return ::testing::AssertionFailure() << "element " << i << ": kiln " << x[i] << ", PyTorch " << y[i];
  return ::testing::AssertionSuccess();
}

class Import : public kiln::cli_test::CliTest {
 protected:
  // `kiln import` of `archive` into a fresh -o directory; the result and the directory.
  CliResult import(const fs::path& archive, const std::string& extra = "") {
    return kiln_cli("import '" + archive.string() + "' -o '" + path("out") + "' " + extra);
  }
  fs::path write(const std::string& name, const std::vector<std::pair<std::string, std::string>>& entries) {
    write_zip(dir_ / name, entries);
    return dir_ / name;
  }
  // An import that must fail: exit 2, the message contains `expected`, and no output directory appeared.
  void expect_refused(const fs::path& archive, const std::string& expected, const std::string& extra = "") {
    CliResult r = import(archive, extra);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("kiln: error: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << "expected '" << expected << "' in:\n" << r.output;
    EXPECT_FALSE(fs::exists(dir_ / "out")) << "a refused import wrote its output directory";
  }
};

// ---------------------------------------------------------------- the fixtures run and match PyTorch

TEST_F(Import, EveryFixtureImportsAndMatchesPyTorchOnEagerAndInductor) {
  int archives = 0;
  for (const auto& file : fs::directory_iterator(fixtures())) {
    if (file.path().extension() != ".pt2") continue;
    ++archives;
    const std::string stem = file.path().stem().string();
    SCOPED_TRACE(stem);
    fs::remove_all(dir_ / "out");
    CliResult r = import(file.path());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const fs::path kir = dir_ / "out" / (stem + ".kir");
    EXPECT_NE(r.output.find("-> " + kir.string()), std::string::npos) << r.output;
    EXPECT_EQ(kiln_cli("verify '" + kir.string() + "'").exit_code, 0);
    for (const auto& input : fs::directory_iterator(fixtures() / (stem + ".inputs")))
      fs::copy_file(input.path(), dir_ / "out" / input.path().filename());
    for (const std::string backend : {"eager", "inductor"}) {
      const fs::path dump = dir_ / ("dump_" + backend);
      fs::remove_all(dump);
      CliResult run = kiln_cli("run '" + kir.string() + "' --inputs '" + path("out") + "' --backend " + backend +
                               " --dump '" + dump.string() + "'");
      ASSERT_EQ(run.exit_code, 0) << backend << ":\n" << run.output;
      int outputs = 0;
      for (const auto& expected : fs::directory_iterator(fixtures() / (stem + ".expected"))) {
        ++outputs;
        EXPECT_TRUE(close_to(dump / expected.path().filename(), expected.path())) << backend;
      }
      EXPECT_GE(outputs, 1);
    }
  }
  EXPECT_GE(archives, 7);
}

TEST_F(Import, WritesTheGraphAndOneNpyPerWeightAndNothingElse) {
  CliResult r = import(fixtures() / "mlp.pt2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::set<std::string> files;
  for (const auto& f : fs::directory_iterator(dir_ / "out")) files.insert(f.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"mlp.kir", "p_fc1_weight.npy", "p_fc1_bias.npy", "p_fc2_weight.npy",
                                          "p_fc2_bias.npy"}));
  kiln::Tensor w = kiln::read_npy((dir_ / "out" / "p_fc1_weight.npy").string());
  EXPECT_EQ(w.sizes(), (kiln::Shape{32, 16}));
  EXPECT_NE(r.output.find("put x.npy in"), std::string::npos) << r.output;
  std::set<std::string> top;
  for (const auto& f : fs::directory_iterator(dir_)) top.insert(f.path().filename().string());
  EXPECT_EQ(top, std::set<std::string>{"out"});
}

TEST_F(Import, WithoutDashOTheOutputIsTheArchivesStemInTheCurrentDirectory) {
  fs::copy_file(fixtures() / "cnn.pt2", dir_ / "small-cnn.pt2");
  CliResult r = kiln::cli_test::shell("cd '" + dir_.string() + "' && '" KILN_CLI "' import small-cnn.pt2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string kir = kiln::cli_test::read_text(dir_ / "small-cnn" / "small-cnn.kir");
  EXPECT_EQ(kir.rfind("graph small_cnn(", 0), 0u) << kir.substr(0, 80);  // the graph is named after the stem
}

TEST_F(Import, DecomposeNoneRefusesOpsThatNeedSeveralKilnOpsAndNamesThemAll) {
  // The Core ATen transformer has native_layer_norm (3 outputs) and split_with_sizes: several kiln ops each.
  expect_refused(fixtures() / "transformer.pt2", "2 ops kiln cannot import", "--decompose none");
  CliResult r = import(fixtures() / "transformer.pt2", "--decompose none");
  EXPECT_NE(r.output.find("aten.native_layer_norm.default (needs --decompose core) (2 nodes: %native_layer_norm, %native_layer_norm_1)"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("aten.split_with_sizes.default (needs --decompose core)"), std::string::npos) << r.output;
  // The export IR of the same model maps one to one.
  EXPECT_EQ(import(fixtures() / "transformer_ir.pt2", "--decompose none").exit_code, 0);
  EXPECT_EQ(import(fixtures() / "mlp.pt2", "--decompose bogus").exit_code, 2);
}

// ---------------------------------------------------------------- bad archives

TEST_F(Import, TruncatedArchiveIsRefused) {
  std::string bytes = kiln::cli_test::read_text(fixtures() / "mlp.pt2");
  kiln::cli_test::write_file(dir_ / "half.pt2", bytes.substr(0, bytes.size() / 2));
  expect_refused(dir_ / "half.pt2", "not a zip archive, or a truncated one");
  kiln::cli_test::write_file(dir_ / "empty.pt2", "");
  expect_refused(dir_ / "empty.pt2", "not a zip archive, or a truncated one");
  expect_refused(dir_ / "missing.pt2", "missing.pt2");
  expect_refused(dir_, "archive");  // a directory
}

TEST_F(Import, CorruptEntryFailsItsCrc) {
  std::string bytes = kiln::cli_test::read_text(fixtures() / "mlp.pt2");
  size_t at = bytes.find("\"graph_module\"");  // stored uncompressed: the JSON's bytes are in the file as they are
  ASSERT_NE(at, std::string::npos);
  bytes[at + 1] = 'G';
  kiln::cli_test::write_file(dir_ / "corrupt.pt2", bytes);
  expect_refused(dir_ / "corrupt.pt2", "entry 'mlp/models/model.json' fails its CRC check");
}

TEST_F(Import, InvalidJsonAndWrongSchemaAreRefused) {
  expect_refused(write("bad.pt2", {{"m/models/model.json", "{\"graph_module\": [1, 2"}}),
                 "entry 'm/models/model.json' is not valid JSON");
  expect_refused(write("shape.pt2", {{"m/models/model.json", "{\"schema_version\": {\"major\": 8, \"minor\": 1}}"}}),
                 "shape.pt2: models/model.json has no field 'graph_module'");
  expect_refused(write("v9.pt2", {{"m/models/model.json", "{\"schema_version\": {\"major\": 9, \"minor\": 0}}"}}),
                 "ExportedProgram schema 9.0; kiln reads schema 8.x");
  expect_refused(write("none.pt2", {{"m/readme.txt", "hello"}}), "not a torch.export archive: it has no models/model.json");
  expect_refused(write("old.pt2", {{"m/serialized_exported_program.json", "{}"}}), "PyTorch < 2.6");
}

TEST_F(Import, EntryNamesThatEscapeTheArchiveAreRefusedAndNothingIsWritten) {
  auto entries = fixture_entries("mlp");
  for (const std::string evil : {"../evil.txt", "mlp/../../evil.txt", "/tmp/evil.txt", "mlp\\..\\evil.txt"}) {
    SCOPED_TRACE(evil);
    auto with = entries;
    with.emplace_back(evil, "pwned");
    fs::remove(dir_ / "evil.pt2");
    expect_refused(write("evil.pt2", with), "zip entry '" + evil + "' is refused");
  }
  EXPECT_FALSE(fs::exists(dir_.parent_path() / "evil.txt"));
  EXPECT_FALSE(fs::exists("/tmp/evil.txt"));
  // A payload config that names a file outside data/weights.
  auto config = entries;
  std::string& text = entry(config, "mlp/data/weights/model_weights_config.json");
  text = std::regex_replace(text, std::regex("\"weight_0\""), "\"../models/model.json\"");
  expect_refused(write("payload.pt2", config), "names payload '../models/model.json', which is not a plain file name");
}

TEST_F(Import, UnknownOpsAreAllListedByName) {
  auto entries = fixture_entries("mlp");
  std::string& model = entry(entries, "mlp/models/model.json");
  model = std::regex_replace(model, std::regex("torch\\.ops\\.aten\\.relu\\.default"), "torch.ops.aten.frobnicate.default");
  model = std::regex_replace(model, std::regex("torch\\.ops\\.aten\\._softmax\\.default"), "torch.ops.mylib.custom.default");
  expect_refused(write("unknown.pt2", entries), "2 ops kiln cannot import:\n  aten.frobnicate.default (1 node: %relu)\n"
                                                "  torch.ops.mylib.custom.default (1 node: %_softmax)");
}

TEST_F(Import, AssertTensorMetadataIsCheckedAtImport) {
  auto entries = fixture_entries("mlp");
  std::string& model = entry(entries, "mlp/models/model.json");
  json j = json::parse(model);
  json assert_node = {{"target", "torch.ops.aten._assert_tensor_metadata.default"},
                      {"inputs", {{{"name", "a"}, {"arg", {{"as_tensor", {{"name", "x"}}}}}, {"kind", 1}},
                                  {{"name", "dtype"}, {"arg", {{"as_scalar_type", 7}}}, {"kind", 2}}}},
                      {"outputs", json::array()}, {"metadata", json::object()}, {"name", "_assert_x"}};
  auto& nodes = j["graph_module"]["graph"]["nodes"];
  nodes.insert(nodes.begin(), assert_node);
  model = j.dump();
  CliResult r = import(write("assert.pt2", entries));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(": 6 op nodes"), std::string::npos) << r.output;  // the assertion adds no node
  fs::remove_all(dir_ / "out");
  nodes[0]["inputs"][1]["arg"]["as_scalar_type"] = 5;  // i64: not what %x is
  model = j.dump();
  fs::remove(dir_ / "assert.pt2");
  expect_refused(write("assert.pt2", entries), "node %_assert_x (aten._assert_tensor_metadata.default): the value is f32 "
                                               "where the graph asserts i64");
}

TEST_F(Import, MetadataThatDisagreesWithKilnsShapeInferenceNamesTheNode) {
  auto entries = fixture_entries("mlp");
  std::string& model = entry(entries, "mlp/models/model.json");
  json j = json::parse(model);
  j["graph_module"]["graph"]["tensor_values"]["relu"]["sizes"][1]["as_int"] = 33;
  model = j.dump();
  expect_refused(write("meta.pt2", entries), "node %relu (aten.relu.default): kiln infers f32[4, 32] for output %relu "
                                             "where the archive records f32[4, 33]");
}

TEST_F(Import, TruncatedPayloadAndBadArgumentsNameWhatIsWrong) {
  auto entries = fixture_entries("mlp");
  entry(entries, "mlp/data/weights/weight_0").resize(100);
  expect_refused(write("short.pt2", entries), "payload 'fc1.weight': 100 bytes of storage where sizes [32, 16]");
  entry(entries, "mlp/data/weights/weight_0").assign((4 << 20) + 1, '\0');  // 4x 2048 bytes + 1 MiB is the limit
  expect_refused(write("long.pt2", entries), "entry 'mlp/data/weights/weight_0' is 4194305 bytes, more than the limit 1056768");
  auto args = fixture_entries("mlp");
  std::string& model = entry(args, "mlp/models/model.json");
  json j = json::parse(model);
  j["graph_module"]["graph"]["nodes"][0]["inputs"][1]["arg"] = {{"as_ints", {{{"as_name", "s0"}}}}};
  model = j.dump();
  expect_refused(write("args.pt2", args), "node %permute (aten.permute.default)");
}

TEST_F(Import, OutputPathThatIsAFileIsRefused) {
  kiln::cli_test::write_file(dir_ / "out", "a file");
  CliResult r = import(fixtures() / "mlp.pt2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("not a directory"), std::string::npos) << r.output;
}

RC_GTEST_PROP(ImportEntryNames, ComponentsWithoutDotDotAreSafeAndAnyDotDotIsNot, ()) {
  const auto part = rc::gen::nonEmpty(rc::gen::container<std::string>(rc::gen::elementOf(std::string("abz09_-"))));
  const auto parts = *rc::gen::nonEmpty(rc::gen::container<std::vector<std::string>>(part));
  std::string name;
  for (const std::string& p : parts) name += (name.empty() ? "" : "/") + p;
  RC_ASSERT(kiln::importer::unsafe_entry_name_reason(name).empty());
  const size_t at = *rc::gen::inRange<size_t>(0, parts.size() + 1);
  std::vector<std::string> evil = parts;
  evil.insert(evil.begin() + long(at), "..");
  std::string bad;
  for (const std::string& p : evil) bad += (bad.empty() ? "" : "/") + p;
  RC_ASSERT(!kiln::importer::unsafe_entry_name_reason(bad).empty());
  RC_ASSERT(!kiln::importer::unsafe_entry_name_reason("/" + name).empty());
}

// ---------------------------------------------------------------- kiln ops --coverage

TEST(ImportCoverage, ListsExactlyTheCoreAtenOpsWithoutARow) {
  CliResult r = kiln_cli("ops --coverage");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(Core ATen ops \(PyTorch 2\.11[^)]*\) kiln import cannot map: (\d+) of (\d+))")))
      << r.output;
  const std::string list = kiln::cli_test::read_text(kiln::cli_test::source_path("src/import/core_aten_ops.txt"));
  int core = 0, missing = 0;
  std::istringstream lines(list);
  for (std::string op; std::getline(lines, op);) {
    if (op.empty() || op[0] == '#') continue;
    ++core;
    bool listed = r.output.find("  aten." + op + "\n") != std::string::npos;
    EXPECT_EQ(listed, !kiln::importer::aten_rows().count(op)) << op;
    missing += listed;
  }
  EXPECT_EQ(std::stoi(m[1]), missing);
  EXPECT_EQ(std::stoi(m[2]), core);
  EXPECT_GT(core, 150);
  EXPECT_NE(r.output.find("  aten.nonzero.default\n"), std::string::npos);     // a data-dependent shape
  EXPECT_EQ(r.output.find("aten.avg_pool3d.default"), std::string::npos);       // written with kiln ops
  EXPECT_EQ(r.output.find("aten.addmm.default"), std::string::npos);            // imported
  EXPECT_EQ(r.output.find("aten.cumsum.default"), std::string::npos);           // imported since issue 21's rows
  EXPECT_EQ(kiln_cli("ops --coverage --missing").exit_code, 2);
}

}  // namespace
