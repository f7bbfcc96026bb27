// The PyTorch runner of `kiln minify --oracle torch`: persistent Python workers fed candidate directories over
// pipes (torch_oracle.h, minifier/torch_worker.py).
#include "minifier/torch_oracle.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/escape.h"
#include "core/files.h"
#include "minifier/emit.h"
#include "torch_worker_source.h"

namespace kiln::minify {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Importing torch from a cold disk takes seconds; a worker that has not said it is ready by then never will.
constexpr double kStartLimitS = 180;
constexpr size_t kLogTail = 4096;

std::string signal_text(int s) {
  const char* abbrev = sigabbrev_np(s);
  return abbrev ? fmt::format("{} (SIG{})", s, abbrev) : std::to_string(s);
}

std::string file_tail(const fs::path& p, size_t n = kLogTail) {
  std::ifstream in(p, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (s.size() > n) s.erase(0, s.size() - n);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

struct Worker {
  pid_t pid = -1;
  int to = -1;          // its stdin: candidate directories, one JSON string a line
  int from = -1;        // its fd 3: answers, one JSON object a line
  std::string pending;  // read from `from`, not yet a whole line
  fs::path log;         // its stdout and stderr
  bool ready = false;   // it has said "ready" (torch imported)
};

// Moves `fd` to a descriptor at or above 10 (so placing the child's 0, 1, 2 and 3 cannot overwrite another).
int lift(int fd) { return fcntl(fd, F_DUPFD, 10); }

class TorchRunner : public CandidateRunner {
 public:
  TorchRunner(MinifyOptions::Torch torch, double timeout_s, int jobs, std::string work_dir)
      : torch_(std::move(torch)), timeout_s_(timeout_s), workers_(std::max(1, jobs)), work_dir_(std::move(work_dir)) {
    // A worker that dies while kiln writes to it must not end kiln with SIGPIPE: the write fails instead.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, &saved_sigpipe_);
  }
  ~TorchRunner() override {
    for (Worker& w : workers_) stop(w);
    sigaction(SIGPIPE, &saved_sigpipe_, nullptr);
  }

  void write(const graph::Graph& g, const std::vector<Tensor>& inputs, const std::string& dir) override {
    write_candidate_directory(g, inputs, dir);
    ReproFile r = make_repro(g, "torch");
    r.input_dir = ".";
    write_file_atomic((fs::path(dir) / "candidate.py").string(),
                      emit_torch(r, (fs::path(dir) / "candidate.kir").string()));
  }

  std::string reproduce_line(const std::string& dir) const override {
    const std::string abs = fs::absolute(dir).lexically_normal().string();
    return fmt::format("cd {} && {} candidate.py {}", shell_quote(abs), shell_quote(torch_.python),
                       shell_quote(torch_.backend));
  }

  std::string judge_name() const override { return fmt::format("PyTorch (backend {})", torch_.backend); }

  std::vector<CommandRun> run(const std::vector<std::string>& dirs) override {
    std::vector<CommandRun> out(dirs.size());
    struct Busy {
      size_t index;
      Clock::time_point deadline;
    };
    std::vector<std::optional<Busy>> busy(workers_.size());
    // Every slot this batch will use starts at once and imports torch beside the others (a start is seconds:
    // one after another they would lie end to end on the critical path).
    const size_t used = std::min(workers_.size(), dirs.size());
    for (size_t w = 0; w < used; ++w) launch_if_needed(w);
    for (size_t w = 0; w < used; ++w) await_ready(w);
    size_t next = 0;
    for (;;) {
      for (size_t w = 0; w < workers_.size() && next < dirs.size(); ++w) {
        if (busy[w]) continue;
        start_if_needed(w);
        const std::string line = nlohmann::json(fs::absolute(dirs[next]).string()).dump() + "\n";
        if (!write_all(workers_[w].to, line)) {  // it died between candidates: the candidate goes to a new one
          reap(workers_[w]);
          start_if_needed(w);
          KILN_CHECK(write_all(workers_[w].to, line), "--oracle torch: could not send a candidate to a freshly "
                     "started PyTorch worker; its output ends:\n{}", file_tail(workers_[w].log));
        }
        busy[w] = Busy{next++, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(timeout_s_))};
      }
      std::vector<pollfd> fds;
      std::vector<size_t> slot;
      Clock::time_point soonest = Clock::time_point::max();
      for (size_t w = 0; w < workers_.size(); ++w)
        if (busy[w]) {
          fds.push_back({workers_[w].from, POLLIN, 0});
          slot.push_back(w);
          soonest = std::min(soonest, busy[w]->deadline);
        }
      if (fds.empty()) break;
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(soonest - Clock::now()).count();
      const int rc = ::poll(fds.data(), fds.size(), int(std::clamp<int64_t>(wait, 0, 1000)));
      KILN_CHECK(rc >= 0 || errno == EINTR, "--oracle torch: poll failed: {}", strerror(errno));
      for (size_t i = 0; i < fds.size(); ++i) {
        const size_t w = slot[i];
        Worker& worker = workers_[w];
        const size_t index = busy[w]->index;
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
          std::optional<std::string> line = read_line(worker);
          if (!line && worker.from >= 0) continue;  // part of a line: wait for the rest
          out[index] = line ? answer(*line, worker) : died(worker);
          busy[w].reset();
        } else if (Clock::now() >= busy[w]->deadline) {
          stop(worker);
          out[index].outcome = {FailureKind::Hang,
                                fmt::format("PyTorch ran past the time limit of {} s", timeout_s_)};
          busy[w].reset();
        }
      }
    }
    return out;
  }

  int starts() const { return starts_; }

 private:
  static bool write_all(int fd, const std::string& s) {
    size_t done = 0;
    while (done < s.size()) {
      const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += size_t(n);
    }
    return true;
  }

  // A whole line when one has arrived (reading at most once: call it when poll says `from` is readable);
  // nullopt with `from` still open while only part of one has, or with `from` closed (-1) at the end of the stream.
  static std::optional<std::string> read_line(Worker& w) {
    auto take = [&]() -> std::optional<std::string> {
      const size_t eol = w.pending.find('\n');
      if (eol == std::string::npos) return std::nullopt;
      std::string line = w.pending.substr(0, eol);
      w.pending.erase(0, eol + 1);
      return line;
    };
    if (auto line = take()) return line;
    char buf[65536];
    ssize_t n;
    do n = ::read(w.from, buf, sizeof buf);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
      ::close(w.from);
      w.from = -1;
      return std::nullopt;
    }
    w.pending.append(buf, size_t(n));
    return take();
  }

  void start_if_needed(size_t slot) {
    launch_if_needed(slot);
    await_ready(slot);
  }

  // Starts slot's worker if it has none; await_ready waits for its first line ("ready": torch imported).
  void launch_if_needed(size_t slot) {
    Worker& w = workers_[slot];
    if (w.pid > 0) return;
    w.ready = false;
    w.log = fs::path(work_dir_) / fmt::format("torch-worker-{}.log", slot);
    int to[2], from[2];
    KILN_CHECK(::pipe2(to, O_CLOEXEC) == 0 && ::pipe2(from, O_CLOEXEC) == 0, "--oracle torch: pipe failed: {}",
               strerror(errno));
    const int log = ::open(w.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    KILN_CHECK(log >= 0, "--oracle torch: could not create {}: {}", w.log.string(), strerror(errno));
    const std::string source(kTorchWorkerSource);
    std::vector<char*> argv = {const_cast<char*>(torch_.python.c_str()), const_cast<char*>("-c"),
                               const_cast<char*>(source.c_str()), const_cast<char*>(torch_.backend.c_str()), nullptr};
    const pid_t pid = ::fork();
    KILN_CHECK(pid >= 0, "--oracle torch: fork failed: {}", strerror(errno));
    if (pid == 0) {
      ::setpgid(0, 0);  // its own group: a hang is killed with every process it started
      const int in = lift(to[0]), answers = lift(from[1]), logs = lift(log);
      if (in < 0 || answers < 0 || logs < 0 || ::dup2(in, 0) < 0 || ::dup2(logs, 1) < 0 || ::dup2(logs, 2) < 0 ||
          ::dup2(answers, 3) < 0)
        ::_exit(126);
      ::execvp(argv[0], argv.data());
      const char msg[] = "kiln: could not run the Python named by --torch-python\n";
      [[maybe_unused]] ssize_t n = ::write(2, msg, sizeof msg - 1);
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // also here: kiln may kill the group before the child has made it
    ::close(to[0]);
    ::close(from[1]);
    ::close(log);
    w.pid = pid;
    w.to = to[1];
    w.from = from[0];
    w.pending.clear();
    ++starts_;
  }

  void await_ready(size_t slot) {
    Worker& w = workers_[slot];
    if (w.ready) return;
    const Clock::time_point limit = Clock::now() + std::chrono::seconds(int(kStartLimitS));
    std::optional<std::string> line;
    while (!line && w.from >= 0 && Clock::now() < limit) {
      pollfd p{w.from, POLLIN, 0};
      if (::poll(&p, 1, 1000) > 0) line = read_line(w);
    }
    nlohmann::json ready;
    if (line) ready = nlohmann::json::parse(*line, nullptr, false);
    if (!line || !ready.is_object() || !ready.contains("ready")) {
      const std::string why = !line && w.from >= 0 ? fmt::format("it did not start within {} s", kStartLimitS)
                                                   : "it ended before it was ready";
      stop(w);
      fail("--oracle torch: {} could not start the PyTorch worker ({}); its output ends:\n{}\nInstall PyTorch and "
           "NumPy for that Python (Debian: python3-torch) or name one that has them with --torch-python",
           torch_.python, why, terminal_safe_lines(file_tail(w.log)));
    }
    w.ready = true;
  }

  CommandRun answer(const std::string& line, Worker& w) {
    const nlohmann::json a = nlohmann::json::parse(line, nullptr, false);
    KILN_CHECK(a.is_object(), "--oracle torch: the PyTorch worker answered with something that is not JSON: {}",
               terminal_safe(line.substr(0, 200)));
    if (a.contains("error")) {
      const std::string why = a["error"].is_string() ? a["error"].get<std::string>() : a["error"].dump();
      stop(w);
      fail("--torch-backend {}: {}", torch_.backend, why);
    }
    auto text = [&](const char* key) {
      return a.contains(key) && a[key].is_string() ? a[key].get<std::string>() : std::string();
    };
    const std::string kind = text("kind");
    CommandRun r;
    r.output = text("message") + "\n" + text("detail");
    if (kind == "compile_error") r.outcome = {FailureKind::CompileError, text("message")};
    else if (kind == "runtime_error") r.outcome = {FailureKind::RuntimeError, text("message")};
    else if (kind == "accuracy") r.outcome = {FailureKind::Accuracy, text("message")};
    else if (kind == "eager_error") r.output = "eager fails (not the compiler's failure): " + r.output;
    else KILN_CHECK(kind == "none", "--oracle torch: the PyTorch worker answered an unknown kind \"{}\"",
                    terminal_safe(kind));
    return r;
  }

  CommandRun died(Worker& w) {
    const int status = reap(w);
    CommandRun r;
    r.outcome.kind = FailureKind::Crash;
    r.outcome.message = WIFSIGNALED(status)
        ? "the PyTorch worker was killed by signal " + signal_text(WTERMSIG(status))
        : fmt::format("the PyTorch worker exited with status {}", WEXITSTATUS(status));
    r.output = file_tail(w.log);
    return r;
  }

  // Waits for a worker that has ended (its answers' pipe closed); its wait status.
  static int reap(Worker& w) {
    int status = 0;
    if (w.pid > 0) {
      ::kill(-w.pid, SIGKILL);  // what it started, if anything outlives it
      while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    close_pipes(w);
    w.pid = -1;
    w.ready = false;
    return status;
  }

  static void stop(Worker& w) {
    if (w.pid > 0) ::kill(-w.pid, SIGKILL);
    reap(w);
  }

  static void close_pipes(Worker& w) {
    if (w.to >= 0) ::close(w.to);
    if (w.from >= 0) ::close(w.from);
    w.to = w.from = -1;
  }

  MinifyOptions::Torch torch_;
  double timeout_s_;
  std::vector<Worker> workers_;
  std::string work_dir_;
  int starts_ = 0;
  struct sigaction saved_sigpipe_ {};
};

}  // namespace

std::shared_ptr<CandidateRunner> make_torch_runner(const MinifyOptions::Torch& torch, double timeout_s, int jobs,
                                                   const std::string& work_dir) {
  return std::make_shared<TorchRunner>(torch, timeout_s, jobs, work_dir);
}

int torch_worker_starts(const CandidateRunner& runner) {
  const auto* t = dynamic_cast<const TorchRunner*>(&runner);
  return t ? t->starts() : 0;
}

}  // namespace kiln::minify
