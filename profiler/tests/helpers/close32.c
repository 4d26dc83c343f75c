/* A 32-bit (ia32) process with no libc: CLOSES close(-1) calls and one socketcall(SYS_ACCEPT)
 * on fd -1, made with int $0x80, then exit. Built by profiler/tests/hosts.rs with
 * `cc -m32 -nostdlib -static`, which needs no 32-bit libraries. */
#ifndef CLOSES
#define CLOSES 1000
#endif

static int sys3(int nr, int a, int b, int c) {
    int r;
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
    return r;
}

void _start(void) {
    for (int i = 0; i < CLOSES; i++)
        sys3(6 /* close */, -1, 0, 0);
    int args[3] = {-1, 0, 0};
    sys3(102 /* socketcall */, 5 /* SYS_ACCEPT */, (int)(long)args, 0);
    sys3(1 /* exit */, 0, 0, 0);
    for (;;) {
    }
}
