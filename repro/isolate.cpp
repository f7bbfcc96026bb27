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
  std::chrono::steady_clock::time_point deadline;
};

}  // namespace

std::vector<IsolatedResult> run_isolated_many(const std::vector<std::function<std::string()>>& bodies, int jobs,
                                              double timeout_s) {
  std::vector<IsolatedResult> results(bodies.size());
  std::vector<Child> running;
  size_t next = 0;
  jobs = std::max(1, jobs);
  auto start = [&](size_t i) {
    int fds[2];
    KILN_CHECK(::pipe(fds) == 0, "run_isolated: pipe failed: {}", strerror(errno));
    std::fflush(nullptr);
    pid_t pid = ::fork();
    KILN_CHECK(pid >= 0, "run_isolated: fork failed: {}", strerror(errno));
    if (pid == 0) {
      ::close(fds[0]);
      for (const Child& c : running) ::close(c.fd);
      // GNU OpenMP's and OpenBLAS's thread pools do not survive fork(): each child computes on one thread
      // (and parallel children share the machine's cores).
      omp_set_num_threads(1);
      openblas_set_num_threads(1);
      // A crash of the body is the result: die by the signal even where a sanitizer installed its own handlers.
      for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
      std::string msg;
      try {
        msg = "ok\n" + bodies[i]();
      } catch (const std::exception& e) {
        msg = std::string("error\n") + e.what();
      }
      write_all(fds[1], msg);
      ::close(fds[1]);
      std::fflush(nullptr);
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
    IsolatedResult& r = results[c.index];
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
    if (r < 0 && errno != EINTR) fail("run_isolated: poll failed: {}", strerror(errno));
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

IsolatedResult run_isolated(const std::function<std::string()>& body, double timeout_s) {
  return run_isolated_many({body}, 1, timeout_s)[0];
}

}  // namespace kiln
