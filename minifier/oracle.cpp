// ForkOracle: candidate inputs from recorded values, a pool of forked children, and the same-failure rules.
// A child reports "<kind>\n<message>" through a pipe; kinds: compile_error, runtime_error, accuracy, none,
// invalid (the candidate's own reference run failed).
#include "minifier/oracle.h"

#include <cblas.h>
#include <omp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "graph/compare.h"
#include "graph/interpreter.h"
#include "ops/api.h"
#include "repro/reproduce.h"

namespace kiln::minify {

bool matches_target(const Target& t, const FailureSignature& o) {
  const FailureSignature& f = t.failure;
  if (o.kind != f.kind) return false;
  if (f.kind == "compile_error" || f.kind == "runtime_error") {
    if (!t.check_str.empty()) return o.message.find(t.check_str) != std::string::npos;
    return normalize_failure_message(f.message) == normalize_failure_message(o.message);
  }
  if (f.kind == "crash") return f.message == o.message;  // the signal
  return true;  // hang, accuracy
}

graph::ValueId InputSource::origin(const graph::Graph& g, graph::ValueId id) const {
  return original_.find_value(g.value(id).name).value_or(graph::kNoValue);
}

Tensor InputSource::value_of(const graph::Graph& g, graph::ValueId input) const {
  graph::ValueId o = origin(g, input);
  KILN_CHECK(o != graph::kNoValue, "minifier: input %{} names no value of the original graph", g.value(input).name);
  const auto& oin = original_.inputs();
  auto it = std::find(oin.begin(), oin.end(), o);
  NoGradGuard no_grad;
  Tensor t = it != oin.end() ? inputs_[size_t(it - oin.begin())] : values_.get(o);
  Tensor r = to(t, g.value(input).meta.dtype);
  if (r.impl() == t.impl()) r = clone(t);
  return contiguous(r).detach();
}

std::vector<Tensor> InputSource::inputs_of(const graph::Graph& g) const {
  std::vector<Tensor> out;
  for (graph::ValueId id : g.inputs()) out.push_back(value_of(g, id));
  return out;
}

Tensor InputSource::reference_of(const graph::Graph& g, graph::ValueId id) const {
  graph::ValueId o = origin(g, id);
  KILN_CHECK(o != graph::kNoValue, "minifier: %{} names no value of the original graph", g.value(id).name);
  if (g.value(id).producer < 0) {  // an input of the candidate: its reference is the value it carries
    Tensor v = value_of(g, id);
    return is_floating(v.dtype()) ? to(v, DType::F64) : v;
  }
  return values_.get(o);
}

ForkOracle::ForkOracle(const InputSource& src, ForkOracleOptions opts) : src_(src), opts_(std::move(opts)) {
  for (const graph::Node& n : src_.original().nodes())
    if (n.kind == graph::NodeKind::Op && graph::is_random_node(n)) random_graph_ = true;
  if (random_graph_) opts_.reuse_reference = false;
}

namespace {
// The backend is looked up once per child: classify_run's registry, reached through a one-node run.
std::vector<Tensor> run_backend(const std::string& name, const graph::Graph& g, const std::vector<Tensor>& in);
}  // namespace

std::string ForkOracle::child_body(const graph::Graph& g, bool exact) const {
  const bool accuracy = opts_.target.failure.kind == "accuracy";
  std::vector<Tensor> inputs = src_.inputs_of(g);
  std::vector<Tensor> reference;
  if (exact) {  // the candidate's own reference must run (and is the accuracy reference)
    graph::InterpretOptions o;
    o.fp64 = true;
    std::vector<Tensor> copies;
    for (const Tensor& t : inputs) copies.push_back(clone(t).detach());
    default_generator() = opts_.seed_state;
    try {
      reference = graph::run_graph(g, copies, o);
    } catch (const std::exception& e) {
      return std::string("invalid\n") + e.what();
    }
  }
  default_generator() = opts_.seed_state;
  std::vector<Tensor> outs;
  try {
    outs = run_backend(opts_.backend, g, inputs);
  } catch (const CompileError& e) {
    return std::string("compile_error\n") + e.what();
  } catch (const std::exception& e) {
    return std::string("runtime_error\n") + e.what();
  }
  if (!accuracy) return "none\n";
  if (!exact) {
    for (graph::ValueId id : g.outputs()) reference.push_back(src_.reference_of(g, id));
  }
  if (outs.size() != reference.size()) return fmt::format("accuracy\nthe backend returned {} outputs, the graph has {}", outs.size(), reference.size());
  std::vector<Tensor> expected;
  for (size_t i = 0; i < outs.size(); ++i) expected.push_back(to(reference[i], outs[i].dtype()));
  CompareOptions co;
  co.tol = opts_.tolerance;
  co.ignore_non_float = !opts_.target.strict_accuracy;
  CompareVerdict v = compare_outputs(expected, outs, reference, co);
  return v.ok ? std::string("none\n") : "accuracy\n" + v.str();
}

Verdict ForkOracle::judge(const ChildResult& r) const {
  Verdict v;
  switch (r.kind) {
    case ChildResult::Kind::Crash: v.observed = {"crash", r.payload}; break;
    case ChildResult::Kind::Hang: v.observed = {"hang", r.payload}; break;
    case ChildResult::Kind::Error: v.observed = {"invalid", r.payload}; break;
    case ChildResult::Kind::Ok: {
      size_t nl = r.payload.find('\n');
      v.observed = {r.payload.substr(0, nl), nl == std::string::npos ? "" : r.payload.substr(nl + 1)};
    }
  }
  v.fails = matches_target(opts_.target, v.observed);
  return v;
}

Verdict ForkOracle::test(const Candidate& c) {
  bool exact = !opts_.reuse_reference;
  return judge(run_children({[&] { return child_body(c.graph, exact); }}, 1, opts_.timeout_s)[0]);
}

std::vector<std::optional<Verdict>> ForkOracle::test_batch(const std::vector<const Candidate*>& batch) {
  bool exact = !opts_.reuse_reference;
  std::vector<std::function<std::string()>> bodies;
  for (const Candidate* c : batch) bodies.push_back([this, c, exact] { return child_body(c->graph, exact); });
  std::vector<ChildResult> rs = run_children(bodies, opts_.jobs, opts_.timeout_s);
  std::vector<std::optional<Verdict>> out;
  for (const ChildResult& r : rs) out.push_back(judge(r));
  return out;
}

Verdict ForkOracle::confirm(const Candidate& c) {
  return judge(run_children({[&] { return child_body(c.graph, true); }}, 1, opts_.timeout_s)[0]);
}

FailureSignature ForkOracle::classify(const graph::Graph& g) { return confirm(Candidate{g, "original"}).observed; }

namespace {

std::vector<Tensor> run_backend(const std::string& name, const graph::Graph& g, const std::vector<Tensor>& in) {
  return find_backend(name)(g, in);
}

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return;
    off += size_t(n);
  }
}

struct Child {
  size_t index;
  pid_t pid;
  int fd;
  std::string out;
  bool eof = false, hung = false;
  std::chrono::steady_clock::time_point deadline;
};

}  // namespace

std::vector<ChildResult> run_children(const std::vector<std::function<std::string()>>& bodies, int jobs,
                                      double timeout_s) {
  std::vector<ChildResult> results(bodies.size());
  std::vector<Child> running;
  size_t next = 0;
  jobs = std::max(1, jobs);
  auto start = [&](size_t i) {
    int fds[2];
    KILN_CHECK(::pipe(fds) == 0, "minifier: pipe failed: {}", strerror(errno));
    std::fflush(nullptr);
    pid_t pid = ::fork();
    KILN_CHECK(pid >= 0, "minifier: fork failed: {}", strerror(errno));
    if (pid == 0) {
      ::close(fds[0]);
      for (const Child& c : running) ::close(c.fd);
      // OpenMP's and OpenBLAS's pools do not survive fork(); -j children also share the machine's cores.
      omp_set_num_threads(1);
      openblas_set_num_threads(1);
      for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
      std::string msg;
      try {
        msg = "ok\n" + bodies[i]();
      } catch (const std::exception& e) {
        msg = std::string("error\n") + e.what();
      }
      write_all(fds[1], msg);
      ::close(fds[1]);
      ::_exit(0);
    }
    ::close(fds[1]);
    running.push_back({i, pid, fds[0], {}, false, false,
                       std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                              std::chrono::duration<double>(timeout_s))});
  };
  auto finish = [&](Child& c) {
    ::close(c.fd);
    if (c.hung) ::kill(c.pid, SIGKILL);
    int status = 0;
    while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {}
    ChildResult& r = results[c.index];
    if (c.hung) {
      r.kind = ChildResult::Kind::Hang;
      r.payload = fmt::format("no result after {} s", timeout_s);
    } else if (WIFSIGNALED(status)) {
      r.kind = ChildResult::Kind::Crash;
      r.payload = strsignal(WTERMSIG(status));
    } else if (c.out.rfind("ok\n", 0) == 0) {
      r.payload = c.out.substr(3);
    } else if (c.out.rfind("error\n", 0) == 0) {
      r.kind = ChildResult::Kind::Error;
      r.payload = c.out.substr(6);
    } else {
      r.kind = ChildResult::Kind::Crash;
      r.payload = fmt::format("the child exited with status {} without a result", WEXITSTATUS(status));
    }
  };
  while (next < bodies.size() || !running.empty()) {
    while (next < bodies.size() && int(running.size()) < jobs) start(next++);
    std::vector<pollfd> fds;
    for (const Child& c : running) fds.push_back({c.fd, POLLIN, 0});
    auto now = std::chrono::steady_clock::now();
    long long wait_ms = 1000;
    for (const Child& c : running)
      wait_ms = std::min<long long>(wait_ms, std::max<long long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - now).count() + 1));
    int r = ::poll(fds.data(), fds.size(), int(wait_ms));
    if (r < 0 && errno != EINTR) fail("minifier: poll failed: {}", strerror(errno));
    char buf[4096];
    now = std::chrono::steady_clock::now();
    for (size_t k = 0; k < running.size(); ++k) {
      Child& c = running[k];
      if (r > 0 && (fds[k].revents & (POLLIN | POLLHUP | POLLERR))) {
        ssize_t n = ::read(c.fd, buf, sizeof buf);
        if (n <= 0) c.eof = true;
        else c.out.append(buf, size_t(n));
      }
      if (!c.eof && now >= c.deadline) c.hung = true;
    }
    for (size_t k = running.size(); k-- > 0;) {
      if (running[k].eof || running[k].hung) {
        finish(running[k]);
        running.erase(running.begin() + long(k));
      }
    }
  }
  return results;
}

}  // namespace kiln::minify
