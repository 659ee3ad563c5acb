/* The pod sandbox ("pause") process: holds a pod's namespaces open and does nothing else.
 * It waits in pause() until SIGTERM or SIGINT and exits 0; as PID 1 of the pod it also reaps
 * orphaned children (SIGCHLD), as upstream's pause does. Built with `gcc -static` by
 * tools/build-pause.sh into a FROM scratch image. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction term = {.sa_handler = stop};
  struct sigaction child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGTERM, &term, NULL) < 0 || sigaction(SIGINT, &term, NULL) < 0 ||
      sigaction(SIGCHLD, &child, NULL) < 0) {
    return 1;
  }
  for (;;) {
    pause();
  }
}
