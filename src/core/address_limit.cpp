// Starting under an address-space limit (ulimit -v, RLIMIT_AS). OpenBLAS's constructor, which runs before main,
// maps a buffer of about 129 MiB for every thread it will use (one per core; in its OpenMP build, the build kiln
// links, OMP_NUM_THREADS when set) and retries a failed mapping forever: under a limit below about 600 MB every
// kiln program, `kiln --version` included, spun before main. A function in the program's .preinit_array (run
// once the shared libraries are mapped and before any of their constructors) compares the limit with what is
// mapped and, when the buffers of every thread would not fit, runs the program again (execve of
// /proc/self/exe, same arguments, same pid) with OMP_NUM_THREADS (and OPENBLAS_NUM_THREADS, which a pthread
// build reads) set to the threads that do fit. Setting them in place is not enough: libc's own initialisation,
// which runs after this function, resets the environment to the one the kernel passed. OpenBLAS's OpenMP build
// follows OpenMP's thread count on every call (it maps buffers for more threads when that count grows,
// retrying forever just the same), so the setting holds for the whole process: kiln's own parallel loops use as
// many threads. Where not even one buffer fits, it says so and exits 2 before any library starts. Linked into
// every program that links libkiln (CMakeLists.txt: --undefined=kiln_address_limit_link_anchor); docs/cli.md,
// Memory limits.
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>
#include <fcntl.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {
// Referenced by the link line so that this file's .preinit_array entry is linked into every program.
int kiln_address_limit_link_anchor = 0;
}

namespace {

// What OpenBLAS 0.3 maps per thread on x86-64 at start-up: BUFFER_SIZE (128 MiB) plus its alignment and guard.
constexpr uint64_t kBlasBufferBytes = uint64_t(129) << 20;
// Address space left for the program itself once the buffers are mapped (heap, JIT, thread stacks).
constexpr uint64_t kProgramReserveBytes = uint64_t(64) << 20;

// Bytes mapped by this process now (/proc/self/statm's first field, in pages); 0 if unknown.
uint64_t mapped_bytes() {
  int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  uint64_t pages = 0;
  for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; ++i) pages = pages * 10 + uint64_t(buf[i] - '0');
  return pages * uint64_t(::sysconf(_SC_PAGESIZE));
}

// The leading positive number of the variable `name` in `envp` ("4" and "4,2" are 4); 0 when unset or not one.
// (getenv cannot answer yet: libc sets up its environment after this runs.)
long env_threads(char** envp, const char* name) {
  const size_t len = std::strlen(name);
  for (char** e = envp; e && *e; ++e) {
    if (std::strncmp(*e, name, len) != 0 || (*e)[len] != '=') continue;
    char* end = nullptr;
    long n = std::strtol(*e + len + 1, &end, 10);
    return end != *e + len + 1 && n > 0 ? n : 0;
  }
  return 0;
}

// The threads OpenBLAS's constructor will map buffers for: OMP_NUM_THREADS when set, else the CPUs this
// process may run on.
long blas_threads(char** envp) {
  if (long n = env_threads(envp, "OMP_NUM_THREADS")) return n;
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return ::sysconf(_SC_NPROCESSORS_ONLN);
}

// Replaces the program by itself with OMP_NUM_THREADS and OPENBLAS_NUM_THREADS set to `n` in `envp`; returns
// only when that cannot be done.
void run_again_with_threads(char** argv, char** envp, long n) {
  static char omp[40], blas[40];
  std::snprintf(omp, sizeof omp, "OMP_NUM_THREADS=%ld", n);
  std::snprintf(blas, sizeof blas, "OPENBLAS_NUM_THREADS=%ld", n);
  size_t count = 0;
  while (envp && envp[count]) ++count;
  char** env = static_cast<char**>(std::malloc((count + 3) * sizeof(char*)));
  if (!env) return;
  size_t k = 0;
  const long user_blas = env_threads(envp, "OPENBLAS_NUM_THREADS");
  const bool blas_kept = user_blas > 0 && user_blas <= n;  // a lower setting of the user's stays
  for (size_t i = 0; i < count; ++i) {
    if (std::strncmp(envp[i], "OMP_NUM_THREADS=", 16) == 0) continue;
    if (!blas_kept && std::strncmp(envp[i], "OPENBLAS_NUM_THREADS=", 21) == 0) continue;
    env[k++] = envp[i];
  }
  env[k++] = omp;
  if (!blas_kept) env[k++] = blas;
  env[k] = nullptr;
  ::execve("/proc/self/exe", argv, env);
  std::free(env);
}

void fit_threads_to_address_limit(int, char** argv, char** envp) {
  struct rlimit as {};
  if (::getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY) return;
  const uint64_t limit = as.rlim_cur, mapped = mapped_bytes();
  const long threads = blas_threads(envp);
  const uint64_t needed = mapped + kProgramReserveBytes;
  const long fit = limit > needed ? long((limit - needed) / kBlasBufferBytes) : 0;
  if (fit >= threads) return;
  // The program run again finds OMP_NUM_THREADS=fit and fits (or, mapping less room, fewer threads still: each
  // run sets fewer, so this ends).
  if (fit >= 1) run_again_with_threads(argv, envp, fit);  // returns only when it could not
  const uint64_t minimum = (needed + kBlasBufferBytes + (uint64_t(1) << 20) - 1) >> 20;
  char msg[640];
  int len = fit >= 1
                ? std::snprintf(msg, sizeof msg,
                                "kiln: error: under the address-space limit (ulimit -v) of %llu MiB OpenBLAS can "
                                "run %ld threads, but kiln could not restart itself with OMP_NUM_THREADS=%ld "
                                "(/proc/self/exe); set OMP_NUM_THREADS=%ld or raise the limit (docs/cli.md, "
                                "Memory limits)\n",
                                (unsigned long long)(limit >> 20), fit, fit, fit)
                : std::snprintf(msg, sizeof msg,
                                "kiln: error: the address-space limit (ulimit -v) of %llu MiB is too small to "
                                "start: kiln's libraries map %llu MiB and OpenBLAS needs %llu MiB more for one "
                                "thread, so kiln needs at least %llu MiB (ulimit -v %llu); raise the limit "
                                "(docs/cli.md, Memory limits)\n",
                                (unsigned long long)(limit >> 20), (unsigned long long)(mapped >> 20),
                                (unsigned long long)(kBlasBufferBytes >> 20), (unsigned long long)minimum,
                                (unsigned long long)(minimum << 10));
  if (len > 0) (void)!::write(2, msg, size_t(len < int(sizeof msg) ? len : int(sizeof msg) - 1));
  ::_exit(2);
}

}  // namespace

// Run by the dynamic loader before any shared library's constructor (only a program's own .preinit_array is
// honoured: this file is linked into programs, never into a shared library).
__attribute__((section(".preinit_array"), used)) static void (*const kiln_fit_threads)(int, char**, char**) =
    &fit_threads_to_address_limit;
