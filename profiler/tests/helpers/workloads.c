/* The differential suite's workloads (tests/differential.rs): each makes a known number of
 * close() and read() calls in a shape that has broken counting before (threads, a fork storm,
 * signal-interrupted calls, an exec chain). Built by the test with cc.
 *
 *   workloads MODE            run MODE: none | threads | forks | signals | exec-threads |
 *                             exec PROGRAM
 *   workloads gate FILE MODE  wait until FILE exists (for attach --pid), then run MODE
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void closes(int n) {
    for (int i = 0; i < n; i++) close(-1);
}

static void *thread_body(void *arg) {
    (void)arg;
    closes(250);
    return NULL;
}

static void threads(void) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, thread_body, NULL);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
}

static void forks(void) {
    for (int i = 0; i < 20; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            closes(50);
            _exit(0);
        }
    }
    while (wait(NULL) > 0) {
    }
}

static void on_signal(int sig) { (void)sig; }

/* A child blocked in read() on an empty pipe, interrupted 10 times (no SA_RESTART): 10 read
 * calls, each failing with EINTR; and the parent's one read of the child's "ready". */
static void signals(void) {
    int fds[2], ready[2];
    if (pipe(fds) != 0 || pipe(ready) != 0) exit(2);
    pid_t pid = fork();
    if (pid == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigaction(SIGUSR1, &sa, NULL);
        char c = 1;
        /* The handler is in place: the parent may signal (one write, not traced). */
        if (write(ready[1], &c, 1) != 1) _exit(2);
        int interrupted = 0;
        while (interrupted < 10) {
            if (read(fds[0], &c, 1) < 0 && errno == EINTR) interrupted++;
        }
        _exit(0);
    }
    /* One read here: 11 in all. */
    char c;
    if (read(ready[0], &c, 1) != 1) exit(2);
    struct timespec gap = {0, 20 * 1000 * 1000};
    int status;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        nanosleep(&gap, NULL);
        kill(pid, SIGUSR1);
    }
}

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "gate") == 0) {
        struct timespec gap = {0, 5 * 1000 * 1000};
        while (access(argv[2], F_OK) != 0) nanosleep(&gap, NULL);
        argv += 2;
        argc -= 2;
    }
    if (argc < 2) return 2;
    const char *mode = argv[1];
    if (strcmp(mode, "none") == 0) {
        /* Only the program's start: what a trace that begins after it does not see. */
    } else if (strcmp(mode, "threads") == 0) {
        threads();
    } else if (strcmp(mode, "forks") == 0) {
        forks();
    } else if (strcmp(mode, "signals") == 0) {
        signals();
    } else if (strcmp(mode, "exec-threads") == 0) {
        /* An exec chain: 100 closes here, then this program again, threaded. */
        closes(100);
        execl("/proc/self/exe", argv[0], "threads", (char *)NULL);
        return 3;
    } else if (strcmp(mode, "exec") == 0 && argc >= 3) {
        /* 64-bit, then the program named (the 32-bit helper: 64 -> 32). */
        closes(100);
        execl(argv[2], argv[2], (char *)NULL);
        return 3;
    } else {
        return 2;
    }
    return 0;
}
