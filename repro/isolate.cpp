// fork + pipe + poll: each child's result travels as "<kind>\n<payload>" through its pipe, after one
// kRunStarts byte when the body has a setup step; the parent polls all running children, restarts a child's
// clock at that byte, kills those past their time limit and starts the next body while fewer than `jobs` run.
#include "repro/isolate.h"

#include <cblas.h>
#include <omp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/bisect.h"
#include "core/error.h"

namespace kiln {

namespace {

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return;
    off += size_t(n);
  }
}

using Clock = std::chrono::steady_clock;

// Sent by isolated_run_starts() before the result: the setup step is over; 8 bytes follow, the
// Clock::rep of when (steady_clock is CLOCK_MONOTONIC, one clock for every process of the machine).
constexpr char kRunStarts = '\x02';
constexpr size_t kRunStartsSize = 1 + sizeof(Clock::rep);
// In a forked child with a setup step: the write end of its result pipe (isolated_run_starts writes there);
// -1 elsewhere.
int g_result_fd = -1;

Clock::time_point after(Clock::time_point t, double seconds) {
  return t + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

struct Child {
  size_t index;
  pid_t pid;
  int fd;
  std::string out;
  bool eof = false, hung = false;
  bool in_setup = false;  // the body has a setup step and has not said it is over
  Clock::time_point started, run_started, deadline;
};

void check_limits(double timeout_s, double setup_s) {
  KILN_CHECK(std::isfinite(timeout_s) && timeout_s > 0, "run_isolated: the time limit must be a positive number of "
             "seconds, not {}", timeout_s);
  KILN_CHECK(std::isfinite(setup_s) && setup_s >= 0, "run_isolated: the setup time limit must be a number of seconds "
             ">= 0, not {}", setup_s);
}

}  // namespace

// Exported by OpenBLAS's threaded builds (their fork handler): stops the thread pool. Not in cblas.h, so
// declared weak: null where the BLAS has no such pool.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

namespace {

// Forks a child that runs `body` and writes "ok\n<result>" or "error\n<message>" to a pipe. `others`: pipes of
// running siblings, closed in the child.
Child spawn(size_t index, const std::function<std::string()>& body, double timeout_s, double setup_s,
            const std::vector<Child>& others) {
  int fds[2];
  KILN_CHECK(::pipe(fds) == 0, "run_isolated: pipe failed: {}", strerror(errno));
  std::fflush(nullptr);
  const auto started = Clock::now();
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  KILN_CHECK(pid >= 0, "run_isolated: fork failed: {}", strerror(errno));
  if (pid == 0) {
    // Die with the parent (however it ends: SIGKILL, SIGINT, SIGTERM, a crash), and if it already ended
    // between fork() and prctl(), now. Lead a process group, so a hung child is killed with what it started.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    ::setpgid(0, 0);
    ::close(fds[0]);
    g_result_fd = setup_s > 0 ? fds[1] : -1;  // isolated_run_starts() speaks only where the parent listens
    for (const Child& c : others) ::close(c.fd);
    // GNU OpenMP's thread pool does not survive fork(): each child computes on one thread (and parallel
    // children share the machine's cores). kiln's OpenBLAS (the OpenMP build, ops/blas.h) follows OpenMP; a
    // pthread build linked instead re-creates its own pool when told its thread count after a fork, and those
    // threads spin (sched_yield) for a while, taking a core from the body and its siblings: shut that pool down
    // again (with one thread, OpenBLAS runs on the calling thread).
    omp_set_num_threads(1);
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_) blas_thread_shutdown_();
    // A crash of the body is the result: die by the signal even where a sanitizer installed its own handlers.
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
    // ... and no more: a crashing child writes no core file. Under `ulimit -c unlimited` (systemd services, many
    // CI runners) each crashing candidate dumped tens of MB into the user's directory (`core`, a file kiln was
    // never asked to write) before its pipe closed, and under load the dump outlasted the time limit, turning
    // a crash verdict into a hang.
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    // The child judges its graph as a fresh `kiln run` would: KILN_BISECT_LIMIT counts applications from zero,
    // not on from whatever the parent compiled before forking (a test binary that compiled every op's probe
    // graph before its first test; a user's program under KILN_REPRO_AFTER).
    reset_bisect_counts();
    std::string msg;
    try {
      msg = "ok\n" + body();
    } catch (const std::exception& e) {
      msg = std::string("error\n") + e.what();
    }
    write_all(fds[1], msg);
    ::close(fds[1]);
    std::fflush(nullptr);
    ::_exit(0);
  }
  ::setpgid(pid, pid);  // also here, so that the group exists before the parent may kill it
  ::close(fds[1]);
  Child c{index, pid, fds[0]};
  c.in_setup = setup_s > 0;
  c.started = c.run_started = started;
  c.deadline = after(started, c.in_setup ? setup_s : timeout_s);
  return c;
}

// Reaps a child whose pipe reached its end (or that is past its time limit: killed first) into its result.
IsolatedResult finish(Child& c, double timeout_s, double setup_s) {
  ::close(c.fd);
  if (c.hung) {
    ::kill(-c.pid, SIGKILL);  // its process group: the child and anything it started
    ::kill(c.pid, SIGKILL);
  }
  int status = 0;
  while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {}
  IsolatedResult r;
  const auto now = Clock::now();
  r.seconds = std::chrono::duration<double>(now - c.started).count();
  r.run_seconds = c.in_setup ? 0 : std::chrono::duration<double>(now - c.run_started).count();
  if (c.hung) {
    r.kind = FailureKind::Hang;
    r.payload = c.in_setup ? fmt::format("no result after {} s: still in its setup step (compiling)", setup_s)
                           : fmt::format("no result after {} s", timeout_s);
  } else if (WIFSIGNALED(status)) {
    r.kind = FailureKind::Crash;
    r.signal = WTERMSIG(status);
    r.payload = strsignal(r.signal);
  } else if (c.out.rfind("ok\n", 0) == 0) {
    r.payload = c.out.substr(3);
  } else if (c.out.rfind("error\n", 0) == 0) {
    r.kind = FailureKind::RuntimeError;
    r.payload = c.out.substr(6);
  } else {
    r.kind = FailureKind::Crash;
    r.payload = fmt::format("the child exited with status {} without a result", WEXITSTATUS(status));
  }
  return r;
}

// Waits (up to 1 s) for output from the running children, reads it, and marks those at their pipe's end or
// past their deadline. A child with output waiting is read, not killed, even past its deadline: its result
// may have come in time while nobody was reading (run_isolated_beside).
void poll_children(std::vector<Child>& running, double timeout_s) {
  std::vector<pollfd> fds;
  for (const Child& c : running) fds.push_back({c.fd, POLLIN, 0});
  auto now = Clock::now();
  long long wait_ms = 1000;
  for (const Child& c : running)
    wait_ms = std::min<long long>(wait_ms, std::max<long long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - now).count() + 1));
  int r = ::poll(fds.data(), fds.size(), int(wait_ms));
  if (r < 0 && errno != EINTR) fail("run_isolated: poll failed: {}", strerror(errno));
  char buf[4096];
  now = Clock::now();
  for (size_t k = 0; k < running.size(); ++k) {
    Child& c = running[k];
    if (r > 0 && (fds[k].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t n = ::read(c.fd, buf, sizeof buf);
      if (n <= 0) c.eof = true;
      else c.out.append(buf, size_t(n));
      if (c.in_setup && c.out.size() >= kRunStartsSize && c.out[0] == kRunStarts) {  // the timed run started
        Clock::rep when;
        std::memcpy(&when, c.out.data() + 1, sizeof when);
        c.out.erase(0, kRunStartsSize);
        c.in_setup = false;
        c.run_started = Clock::time_point(Clock::duration(when));
        c.deadline = after(c.run_started, timeout_s);
      }
    } else if (now >= c.deadline) {
      c.hung = true;
    }
  }
}

}  // namespace

double setup_limit_for(double timeout_s) { return std::max(120.0, 10 * timeout_s); }

void isolated_run_starts() {
  if (g_result_fd < 0) return;
  const Clock::rep now = Clock::now().time_since_epoch().count();
  std::string marker(1, kRunStarts);
  marker.append(reinterpret_cast<const char*>(&now), sizeof now);
  write_all(g_result_fd, marker);
  g_result_fd = -1;  // once
}

std::vector<IsolatedResult> run_isolated_many(const std::vector<std::function<std::string()>>& bodies, int jobs,
                                              double timeout_s, double setup_s,
                                              const std::function<void(size_t, const IsolatedResult&)>& on_result) {
  check_limits(timeout_s, setup_s);
  std::vector<IsolatedResult> results(bodies.size());
  std::vector<Child> running;
  size_t next = 0;
  jobs = std::max(1, jobs);
  while (next < bodies.size() || !running.empty()) {
    while (next < bodies.size() && int(running.size()) < jobs) {
      running.push_back(spawn(next, bodies[next], timeout_s, setup_s, running));
      ++next;
    }
    poll_children(running, timeout_s);
    for (size_t k = running.size(); k-- > 0;) {
      if (running[k].eof || running[k].hung) {
        const size_t index = running[k].index;
        results[index] = finish(running[k], timeout_s, setup_s);
        running.erase(running.begin() + long(k));
        if (on_result) on_result(index, results[index]);
      }
    }
  }
  return results;
}

IsolatedResult run_isolated_beside(const std::function<std::string()>& body, double timeout_s,
                                   const std::function<void()>& beside, double setup_s) {
  check_limits(timeout_s, setup_s);
  std::vector<Child> running{spawn(0, body, timeout_s, setup_s, {})};
  try {
    beside();
  } catch (...) {
    running[0].hung = true;  // killed: its result no longer matters
    finish(running[0], timeout_s, setup_s);
    throw;
  }
  while (!running[0].eof && !running[0].hung) poll_children(running, timeout_s);
  return finish(running[0], timeout_s, setup_s);
}

IsolatedResult run_isolated(const std::function<std::string()>& body, double timeout_s, double setup_s) {
  return run_isolated_many({body}, 1, timeout_s, setup_s)[0];
}

}  // namespace kiln
