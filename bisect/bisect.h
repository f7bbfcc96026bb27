// The accuracy bisector (issue 17, docs/bisect.md): from "the compiled program is wrong" to the first bad
// backend stage, subsystem and application, and the first diverging node, automatically.
//
//   1. Ladder: the subject runs on each backend of eager -> aot_eager -> aot_eager_decomp_partition -> B
//      (those registered), each in a forked child; the first that fails names the stage. The failing rung is
//      run twice: a failure that comes and goes is reported as nondeterministic and not searched.
//   2. Subsystem: every should_run site (core/bisect.h) the failing run asked, latest in the pipeline first,
//      is disabled entirely (KILN_BISECT_DISABLE); the first whose disabling fixes the failure is the culprit,
//      and KILN_BISECT_LIMIT binary-searches its first bad application (1 + ceil(log2 N) runs, plus one to read
//      the site's debug info when the search never ran it). Later subsystems act on what earlier ones made
//      (no lowering, nothing to fuse), so the latest one that fixes the failure is the closest cause. When no
//      site explains it, the configuration flips (flips()) are tried.
//   3. Node (a graph on the inductor): the compiled program runs recording what it materialises (kernel outputs)
//      against every value of the fp64 interpreter, after both are checked deterministic; the first diverging
//      value is then narrowed inside its kernel (values realised: inline and localise off; else the kernel
//      split: fusion off), and the report says which way was used.
//
// Subjects: a graph with inputs (bisect_graph), a user's command (bisect_command: exit 0 good, non-zero bad,
// kiln setting KILN_BISECT_* and KILN_BACKEND in its environment, as `git bisect run`), or a C++ function
// (bisect_function, for captured functions: it runs in a forked child with the settings applied).
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/graph.h"
#include "repro/command.h"
#include "repro/failure.h"

namespace kiln::bisect {

// Which failures count: any, only accuracy failures (--accuracy), or only errors, crashes and hangs (--error).
// A failure of the other kind is never a pass: the tools report it as such (Outcome::OtherFailure, exit 1).
enum class Want : uint8_t { Any, Accuracy, Error };
bool counts_as_failure(Want want, const FailureSignature& f);
// "--accuracy" / "--error" ("" for Any), and what the flag asks about ("an accuracy failure", ...).
std::string_view want_flag(Want want);
std::string_view want_text(Want want);

struct BisectOptions {
  std::string backend = "inductor";  // the top of the ladder ("" with a command: no ladder, the command as is)
  Want want = Want::Any;
  double tolerance = 1e-4;           // the comparator's
  double timeout_s = 60;             // per child run (a compile step is not counted; see repro/isolate.h)
  bool progress = false;             // one line per child run on stderr
};

// One configuration a child runs under.
struct Trial {
  std::string backend;                                        // "" = the subject's default
  std::vector<std::pair<std::string, std::string>> settings;  // KILN_* variable -> value
  std::string watch_site;                                     // "stage:subsystem" whose application...
  int64_t watch_index = -1;                                   // ...#watch_index's debug info to report
};

struct TrialResult {
  FailureSignature failure;
  std::map<std::string, int64_t> counts;  // "stage:subsystem" -> applications asked in this run
  bool counts_known = false;              // false: the child crashed, or a command's log was not seen
  std::string site_info;                  // the watched application's debug info ("" when not asked)
};

// What the search runs in its children.
class Subject {
 public:
  virtual ~Subject() = default;
  virtual TrialResult run(const Trial& t) = 0;
  // A shell command line that runs the trial's configuration by hand.
  virtual std::string command_for(const Trial& t) const = 0;
  // Where the debug info of a site points ("%t5 = relu (line 7:3)"), when the subject knows ("" otherwise).
  virtual std::string locate(const std::string& site_info) const { return ""; }
};

struct LadderRung {
  std::string backend;
  FailureSignature failure;
};

struct Culprit {
  std::string site;             // "stage:subsystem", or the flip's name
  bool is_flip = false;
  int64_t applications = 0;     // asked in the failing run
  int64_t application = -1;     // 0-based index of the first bad one (the `bisect` log's #N)
  std::string site_info;        // the hook's debug info for that application
  std::string location;         // the node it acts on, with its source line
  std::string bad_setting, good_setting;  // NAME=VALUE: fails / passes
  int runs = 0;                 // child runs this site's search took (disable + binary search + watch)
};

struct Divergence {
  std::string value, node, step;  // the value, "%v = op (line L:C)", the kernel that wrote it ("extern")
  std::string narrowed_by;        // how the recording was taken
  std::string verdict;            // the comparator's
  int64_t worst_index = -1;
  std::vector<double> expected, actual;  // up to 8 values from the worst index on (expected: fp64)
};

struct BisectReport {
  // OtherFailure: no rung failed the way --accuracy / --error asks about, but one failed another way (`failure`,
  // `stage`): not searched, and not a pass.
  enum class Outcome : uint8_t { Passes, Nondeterministic, Bisected, Unexplained, OtherFailure } outcome = Outcome::Passes;
  Want want = Want::Any;                // what the search was asked about
  FailureSignature failure;             // the failing rung's
  std::string stage;                    // the first rung that fails
  std::vector<LadderRung> ladder;
  std::vector<std::pair<std::string, bool>> tried;  // site or flip disabled -> whether that fixed the failure
  std::optional<Culprit> culprit;
  std::optional<Divergence> divergence;
  std::string divergence_note;          // why there is no divergence, when there is none
  std::string repro_command;            // the bad configuration, by hand
  std::string good_command;             // the same with the culprit's application left out
  int child_runs = 0;
  double seconds = 0;

  bool failed() const { return outcome != Outcome::Passes; }
  std::string text() const;             // the printed result
  nlohmann::json json() const;
};
std::string_view outcome_name(BisectReport::Outcome o);

// A configuration flip tried when no site explains a failure: kiln's own exp off (KILN_OWN_EXP=0), scalar code
// (KILN_VECTOR_WIDTH=1) and streaming stores off (KILN_STREAM_MIN_BYTES beyond any output).
struct Flip {
  std::string name;
  std::vector<std::pair<std::string, std::string>> settings;
};
const std::vector<Flip>& flips();

// The ladder up to `backend`: eager, aot_eager, aot_eager_decomp_partition (those registered), then it.
std::vector<std::string> ladder_to(const std::string& backend);

// The search over any subject.
BisectReport search(Subject& subject, const BisectOptions& o);

// A graph and its inputs. `rerun` is how a reproduce line names them (repro/command.h: the file, its inputs;
// the backend, tolerance, gradients and settings are filled in per line).
BisectReport bisect_graph(const graph::Graph& g, const std::vector<Tensor>& inputs, const BisectOptions& o,
                          const RunLine& rerun);
// A shell command: exit 0 good, non-zero bad (run by /bin/sh -c, stdout discarded, stderr read for the
// `bisect` log channel, which kiln turns on in KILN_LOGS to count applications).
BisectReport bisect_command(const std::string& command, const BisectOptions& o);
// A function returning true when the result is good, run in forked children with the settings applied
// (a kiln::compile'd function must first compile inside the child: call it only there).
BisectReport bisect_function(const std::function<bool()>& good, const BisectOptions& o);

}  // namespace kiln::bisect
