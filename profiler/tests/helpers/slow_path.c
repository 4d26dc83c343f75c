/* The workload of the --slow tests: slow_path() waits about 20 ms for a byte on a pipe (a child
 * writes it after a sleep), fast_path() reads a byte that is already there. Built with frame
 * pointers (-fno-omit-frame-pointer), so the kernel can walk the user stack from the read.
 *
 * read_one() sits between each path and libc's read(): Debian's libc is built without frame
 * pointers, so the frame-pointer walk skips the function that called read() directly (its
 * return address is on the stack, not in a frame) and starts with that function's caller.
 *
 * Usage: slow_path [SLOW_CALLS [FAST_CALLS_AFTER_EACH]] (default 3 and 20). */
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int fds[2];

__attribute__((noinline)) static void read_one(void) {
    char c;
    if (read(fds[0], &c, 1) != 1)
        _exit(2);
}

__attribute__((noinline)) void slow_path(void) {
    pid_t pid = fork();
    if (pid < 0)
        _exit(3);
    if (pid == 0) {
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
        if (write(fds[1], "s", 1) != 1)
            _exit(2);
        _exit(0);
    }
    read_one();
    waitpid(pid, NULL, 0);
}

__attribute__((noinline)) void fast_path(void) {
    if (write(fds[1], "f", 1) != 1)
        _exit(2);
    read_one();
}

int main(int argc, char **argv) {
    int slow = argc > 1 ? atoi(argv[1]) : 3;
    int fast = argc > 2 ? atoi(argv[2]) : 20;
    if (pipe(fds) != 0)
        return 1;
    for (int i = 0; i < slow; i++) {
        slow_path();
        for (int j = 0; j < fast; j++)
            fast_path();
    }
    return 0;
}
