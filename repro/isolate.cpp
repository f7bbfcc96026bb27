// fork + pipe + poll: the child's result travels as "<kind>\n<payload>" through the pipe.
#include "repro/isolate.h"

#include <cblas.h>
#include <omp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
}  // namespace

IsolatedResult run_isolated(const std::function<std::string()>& body, double timeout_s) {
  int fds[2];
  KILN_CHECK(::pipe(fds) == 0, "run_isolated: pipe failed: {}", strerror(errno));
  std::fflush(nullptr);
  pid_t pid = ::fork();
  KILN_CHECK(pid >= 0, "run_isolated: fork failed: {}", strerror(errno));
  if (pid == 0) {
    ::close(fds[0]);
    // GNU OpenMP's and OpenBLAS's thread pools do not survive fork(): the child computes on one thread.
    omp_set_num_threads(1);
    openblas_set_num_threads(1);
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
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool hung = false;
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) { hung = true; break; }
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, int(std::min<long long>(left, 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r > 0) {
      ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n <= 0) break;  // EOF: the child closed the pipe (finished or died)
      out.append(buf, size_t(n));
    }
  }
  ::close(fds[0]);
  if (hung) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  IsolatedResult res;
  if (hung) {
    res.kind = IsolatedResult::Kind::Hang;
    res.payload = fmt::format("no result after {} s", timeout_s);
  } else if (WIFSIGNALED(status)) {
    res.kind = IsolatedResult::Kind::Crash;
    res.signal = WTERMSIG(status);
    res.payload = strsignal(res.signal);
  } else if (out.rfind("ok\n", 0) == 0) {
    res.payload = out.substr(3);
  } else if (out.rfind("error\n", 0) == 0) {
    res.kind = IsolatedResult::Kind::Error;
    res.payload = out.substr(6);
  } else {
    res.kind = IsolatedResult::Kind::Crash;
    res.payload = fmt::format("the child exited with status {} without a result", WEXITSTATUS(status));
  }
  return res;
}

}  // namespace kiln
