// fork + pipe + poll: each child's result travels as "<kind>\n<payload>" through its pipe; the parent polls all
// running children, kills those past their time limit and starts the next body while fewer than `jobs` run.
#include "repro/isolate.h"

#include <cblas.h>
#include <omp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

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

struct Child {
  size_t index;
  pid_t pid;
  int fd;
  std::string out;
  bool eof = false, hung = false;
  std::chrono::steady_clock::time_point started, deadline;
};

}  // namespace

// Exported by OpenBLAS's threaded builds (their fork handler): stops the thread pool. Not in cblas.h, so
// declared weak: null where the BLAS has no such pool.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

namespace {

// Forks a child that runs `body` and writes "ok\n<result>" or "error\n<message>" to a pipe. `others`: pipes of
// running siblings, closed in the child.
Child spawn(size_t index, const std::function<std::string()>& body, double timeout_s, const std::vector<Child>& others) {
  int fds[2];
  KILN_CHECK(::pipe(fds) == 0, "run_isolated: pipe failed: {}", strerror(errno));
  std::fflush(nullptr);
  const auto started = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  KILN_CHECK(pid >= 0, "run_isolated: fork failed: {}", strerror(errno));
  if (pid == 0) {
    ::close(fds[0]);
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
  ::close(fds[1]);
  return {index, pid, fds[0], {}, false, false, started,
          started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s))};
}

// Reaps a child whose pipe reached its end (or that is past its time limit: killed first) into its result.
IsolatedResult finish(Child& c, double timeout_s) {
  ::close(c.fd);
  if (c.hung) ::kill(c.pid, SIGKILL);
  int status = 0;
  while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {}
  IsolatedResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - c.started).count();
  if (c.hung) {
    r.kind = IsolatedResult::Kind::Hang;
    r.payload = fmt::format("no result after {} s", timeout_s);
  } else if (WIFSIGNALED(status)) {
    r.kind = IsolatedResult::Kind::Crash;
    r.signal = WTERMSIG(status);
    r.payload = strsignal(r.signal);
  } else if (c.out.rfind("ok\n", 0) == 0) {
    r.payload = c.out.substr(3);
  } else if (c.out.rfind("error\n", 0) == 0) {
    r.kind = IsolatedResult::Kind::Error;
    r.payload = c.out.substr(6);
  } else {
    r.kind = IsolatedResult::Kind::Crash;
    r.payload = fmt::format("the child exited with status {} without a result", WEXITSTATUS(status));
  }
  return r;
}

// Waits (up to 1 s) for output from the running children, reads it, and marks those at their pipe's end or
// past their deadline. A child with output waiting is read, not killed, even past its deadline: its result
// may have come in time while nobody was reading (run_isolated_beside).
void poll_children(std::vector<Child>& running) {
  std::vector<pollfd> fds;
  for (const Child& c : running) fds.push_back({c.fd, POLLIN, 0});
  auto now = std::chrono::steady_clock::now();
  long long wait_ms = 1000;
  for (const Child& c : running)
    wait_ms = std::min<long long>(wait_ms, std::max<long long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - now).count() + 1));
  int r = ::poll(fds.data(), fds.size(), int(wait_ms));
  if (r < 0 && errno != EINTR) fail("run_isolated: poll failed: {}", strerror(errno));
  char buf[4096];
  now = std::chrono::steady_clock::now();
  for (size_t k = 0; k < running.size(); ++k) {
    Child& c = running[k];
    if (r > 0 && (fds[k].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t n = ::read(c.fd, buf, sizeof buf);
      if (n <= 0) c.eof = true;
      else c.out.append(buf, size_t(n));
    } else if (now >= c.deadline) {
      c.hung = true;
    }
  }
}

}  // namespace

std::vector<IsolatedResult> run_isolated_many(const std::vector<std::function<std::string()>>& bodies, int jobs,
                                              double timeout_s) {
  std::vector<IsolatedResult> results(bodies.size());
  std::vector<Child> running;
  size_t next = 0;
  jobs = std::max(1, jobs);
  while (next < bodies.size() || !running.empty()) {
    while (next < bodies.size() && int(running.size()) < jobs) {
      running.push_back(spawn(next, bodies[next], timeout_s, running));
      ++next;
    }
    poll_children(running);
    for (size_t k = running.size(); k-- > 0;) {
      if (running[k].eof || running[k].hung) {
        results[running[k].index] = finish(running[k], timeout_s);
        running.erase(running.begin() + long(k));
      }
    }
  }
  return results;
}

IsolatedResult run_isolated_beside(const std::function<std::string()>& body, double timeout_s,
                                   const std::function<void()>& beside) {
  std::vector<Child> running{spawn(0, body, timeout_s, {})};
  try {
    beside();
  } catch (...) {
    running[0].hung = true;  // killed: its result no longer matters
    finish(running[0], timeout_s);
    throw;
  }
  while (!running[0].eof && !running[0].hung) poll_children(running);
  return finish(running[0], timeout_s);
}

IsolatedResult run_isolated(const std::function<std::string()>& body, double timeout_s) {
  return run_isolated_many({body}, 1, timeout_s)[0];
}

}  // namespace kiln
