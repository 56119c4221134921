// LD_PRELOAD: on SIGSEGV/SIGBUS/SIGABRT/SIGFPE/SIGILL print the faulting thread's backtrace, ask
// every other thread for its own (SIGUSR2), then die by the same signal. A SIGUSR2 sent to the
// process (timeout -s USR2: a hang) prints every thread's backtrace the same way.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <execinfo.h>
#include <initializer_list>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static std::atomic<int> forwarded{0};
static void say(const char* s, int n) { ssize_t r = write(2, s, n); (void)r; }
static void dump(const char* what, int sig, void* addr) {
  void* b[64];
  int n = backtrace(b, 64);
  char msg[160];
  int l = snprintf(msg, sizeof msg, "--- %s %d addr %p tid %ld pid %d\n", what, sig, addr,
                   (long)syscall(SYS_gettid), (int)getpid());
  say(msg, l);
  backtrace_symbols_fd(b, n, 2);
  say("--- END\n", 8);
}
static void others() {
  if (forwarded.exchange(1)) return;
  long self = syscall(SYS_gettid);
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      long tid = atol(e->d_name);
      if (tid > 0 && tid != self) syscall(SYS_tgkill, getpid(), tid, SIGUSR2);
    }
    closedir(d);
  }
  timespec ts{0, 300000000};
  nanosleep(&ts, nullptr);
}
static void on_fault(int sig, siginfo_t* si, void*) {
  dump("SIGNAL", sig, si->si_addr);
  others();
  signal(sig, SIG_DFL);
  raise(sig);
}
static void on_usr2(int sig, siginfo_t* si, void*) {
  const bool from_outside = si->si_code <= 0 && si->si_pid != getpid();
  dump(from_outside ? "HANG" : "THREAD", sig, nullptr);
  if (from_outside) others();
}
__attribute__((constructor)) static void install() {
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO;
  for (int s : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) sigaction(s, &sa, nullptr);
  struct sigaction su {};
  su.sa_sigaction = on_usr2;
  su.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGUSR2, &su, nullptr);
}
