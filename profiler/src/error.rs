//! Errors a caller may want to tell apart. Each message is one line: what was wrong and what to do.
//! A cause is written into the message or returned as the source, never both, so `{e:#}` (what
//! `main` prints) says it once.

use thiserror::Error;

/// Why the kernel programs could not be set up.
#[derive(Debug, Error)]
pub enum SetupError {
    /// Neither root nor CAP_BPF + CAP_PERFMON; the missing ones named.
    #[error(
        "loading eBPF programs needs root or CAP_BPF and CAP_PERFMON, and this process lacks {0}: run it with sudo, or `setcap cap_bpf,cap_perfmon,cap_dac_read_search+ep` on the binary"
    )]
    NotPrivileged(String),
    /// tracefs is not mounted (and the profiler could not mount it in its own namespace).
    #[error(
        "tracefs is not mounted at /sys/kernel/tracing and the profiler could not mount it privately (that needs CAP_SYS_ADMIN): mount it (`mount -t tracefs tracefs /sys/kernel/tracing`) or run the profiler as root"
    )]
    TracefsNotMounted,
    /// perf_event_open of a tracepoint refused to a non-root process that has CAP_PERFMON:
    /// Debian's kernels treat `kernel.perf_event_paranoid` 3 (their default) as "CAP_SYS_ADMIN
    /// only".
    #[error(
        "the kernel refused this user a tracepoint perf event (kernel.perf_event_paranoid is {}; Debian's kernels at 3 allow it to CAP_SYS_ADMIN only): add cap_sys_admin to the profiler's capabilities, or set `sysctl kernel.perf_event_paranoid=2`",
        paranoid.map_or_else(|| "unreadable".to_owned(), |p| p.to_string())
    )]
    PerfEventRefused {
        /// `kernel.perf_event_paranoid`.
        paranoid: Option<i32>,
    },
    /// The kernel is locked down for confidentiality and refused what the profiler needs.
    #[error(
        "the kernel is locked down for confidentiality (/sys/kernel/security/lockdown), which refuses tracefs and BPF reads of kernel memory that the profiler needs ({0}); boot without lockdown=confidentiality (integrity mode works)"
    )]
    LockedDown(String),
    /// tracefs is mounted but this (non-root) process may not read it.
    #[error(
        "tracefs at /sys/kernel/tracing is not readable by this user (it is mode 0700): besides CAP_BPF and CAP_PERFMON the profiler needs CAP_DAC_READ_SEARCH (`setcap cap_bpf,cap_perfmon,cap_dac_read_search+ep profiler`)"
    )]
    TracefsUnreadable,
    /// The kernel was built without syscall tracepoints.
    #[error(
        "this kernel has no syscalls: tracepoints (/sys/kernel/tracing/events/syscalls is missing): it needs CONFIG_FTRACE_SYSCALLS"
    )]
    NoSyscallTracepoints,
    /// A tracepoint record (or kernel struct) without a field where the programs can read it.
    #[error(
        "{tracepoint}: {problem}; this kernel's layout is not supported: please report it with `uname -r`"
    )]
    RecordLayout {
        /// `category:name`, or `BTF`.
        tracepoint: String,
        /// What is wrong with it.
        problem: String,
    },
    /// No usable kernel BTF where it is needed.
    #[error(
        "this kernel has no usable BTF at /sys/kernel/btf/vmlinux ({0}), which kernels before 6.16 need to see processes exit: use a kernel built with CONFIG_DEBUG_INFO_BTF=y"
    )]
    NoBtf(String),
    /// The bpf() system call does not exist.
    #[error(
        "this kernel has no BPF (the bpf() system call is missing): it needs CONFIG_BPF_SYSCALL=y"
    )]
    NoBpf,
    /// A syscall name that has no tracepoint on this kernel.
    #[error(
        "unknown syscall '{name}': valid names are the sys_enter_* tracepoints of this kernel, e.g. {examples} (see `ls /sys/kernel/tracing/events/syscalls`)"
    )]
    UnknownSyscall {
        /// What the user typed.
        name: String,
        /// A few valid names, closest first.
        examples: String,
    },
    /// A syscall that never returns, so it has no duration.
    #[error(
        "{0} never returns to its caller, so there is no time to measure: leave it out of --syscalls"
    )]
    NeverReturns(String),
    /// More syscalls than the kernel maps have slots for.
    #[error("{0} syscalls requested but at most {max} can be timed at once: pass a shorter --syscalls list", max = profiler_common::MAX_SYSCALL_SLOTS)]
    TooManySyscalls(usize),
    /// A `--syscalls` list that names nothing.
    #[error("--syscalls names no syscall: give a comma-separated list such as close,read")]
    NoSyscalls,
    /// A pid that does not name a running process.
    /// `--attach FRONT` where the kernel cannot give it (why).
    #[error(
        "--attach {front}: {why}; use --attach tracepoint (or auto, which falls back by itself)"
    )]
    FrontUnavailable { front: &'static str, why: String },

    /// `PROFILER_ATTACH` names no front end.
    #[error("{0}")]
    BadAttachChoice(String),

    #[error("no process with pid {0}: check the pid with `ps -p {0}`")]
    NoSuchProcess(u32),
    /// A pid that names the profiler itself.
    #[error("pid {0} is this profiler itself: give the pid of the process to trace")]
    SelfTarget(u32),
    /// Pids asked for where this process's pid namespace is not the host's.
    #[error(
        "the profiler runs in a pid namespace of its own (a container without the host's pids, or `unshare --pid`): the kernel programs see host pids, which pids and commands here cannot be matched with; run it in the host's pid namespace (e.g. `docker run --pid=host`), or trace by --cgroup or --all"
    )]
    ChildPidNamespace,
    /// A pid that names a kernel thread.
    #[error(
        "pid {pid} is the kernel thread '{comm}', which makes no system calls: give the pid of a user process"
    )]
    KernelThread {
        /// The pid given.
        pid: u32,
        /// Its name.
        comm: String,
    },
    /// A `--cgroup` that is not a cgroup v2 directory.
    #[error(
        "--cgroup {path}: {problem}; give a cgroup v2 directory, as a path relative to the cgroup2 mount (system.slice/nginx.service) or absolute below it"
    )]
    NoCgroup {
        /// The path as given.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// More cgroup ids (named cgroups and those below them) than the kernel map holds.
    #[error(
        "the named cgroups hold {0} cgroups with those below them, more than the {max} the programs can trace: name fewer or deeper ones",
        max = profiler_common::MAX_CGROUP_IDS
    )]
    TooManyCgroups(usize),
    /// More cgroups named than user space may hand dense indexes to.
    #[error("{0} cgroups named but at most {max} can be traced at once: name a common parent instead (the cgroups below a named one are traced with it)", max = profiler_common::FIRST_FORKED_PROCESS - 1)]
    TooManyNamedCgroups(usize),
    /// More pids than user space may hand dense indexes to.
    #[error("{0} pids given but at most {max} can be named at once: trace their parent instead (children are followed) or use --all", max = profiler_common::FIRST_FORKED_PROCESS)]
    TooManyPids(usize),
    /// The verifier refused a program.
    #[error(
        "the kernel's verifier rejected program '{program}': {cause}; verifier log tail:\n{log_tail}"
    )]
    VerifierRejected {
        /// Program name.
        program: String,
        /// The load error.
        cause: String,
        /// The last lines of the verifier log.
        log_tail: String,
    },
    /// Any other failure of the BPF machinery.
    #[error("{context}: {error:#}")]
    Bpf {
        /// What we were doing.
        context: String,
        /// The underlying error (in the message, so not a source: not named `source`).
        error: anyhow::Error,
    },
}

impl SetupError {
    /// Wraps a lower-level error with what we were doing.
    pub fn bpf(context: impl Into<String>, source: impl Into<anyhow::Error>) -> Self {
        Self::Bpf {
            context: context.into(),
            error: source.into(),
        }
    }
}
