// LD_PRELOAD: SIGUSR2 makes the receiving thread print its backtrace (addresses) to stderr.
#include <cstdio>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
static void on_usr2(int) {
  void* b[48];
  int n = backtrace(b, 48);
  char msg[64];
  int l = snprintf(msg, sizeof msg, "--- tid %ld\n", (long)syscall(SYS_gettid));
  write(2, msg, l);
  backtrace_symbols_fd(b, n, 2);
}
__attribute__((constructor)) static void install() {
  struct sigaction sa {};
  sa.sa_handler = on_usr2;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR2, &sa, nullptr);
}
