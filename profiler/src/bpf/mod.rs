//! Loading, configuring and attaching the kernel programs, and reading what they counted.
//!
//! A [`Session`] is one load of `profiler-ebpf`: the syscall set and the target processes are data
//! written into its maps. Which programs time the syscalls, and where they attach, is the front
//! end's ([`front::FrontEnd`]: on the tracepoints every traced syscall shares the same two
//! programs, on fentry each slot has its own pair per table); the session attaches what it
//! lists, with the 32-bit and every-call programs beside it where it needs them.

pub mod attach;
pub mod environment;
pub mod front;
pub mod layout;
mod syscall_entries;
pub mod syscall_names;

use std::{
    collections::BTreeMap,
    path::Path,
    time::{Duration, Instant},
};

use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, HashMap as AyaHashMap, MapData, PerCpuArray},
};
use profiler_common::{
    DERIVED_PROCESS, DROP_REASONS, EVERY_KEYS, FIRST_FORKED_PROCESS, LatencyBuckets, MAX_PROCESSES,
    MAX_SYSCALL_NR, MAX_SYSCALL_SLOTS, OVERFLOW_PROCESS, OtherCalls, RECORD_HEADER, RecordLayout,
    RowStats, SLOW_RING_BYTES, SLOW_STACK_ENTRIES, SyscallSlot, encode_slot_entry,
    forked_process_indexes,
    names::{map, program},
};

use self::attach::{AttachTo, Link};
pub use self::{
    front::{AttachPoint, SyscallAttach, SyscallFront},
    layout::{GroupExit, SchedAttach, SchedFront},
    syscall_names::{DEFAULT_SYSCALLS, Syscall},
};
use crate::{
    error::SetupError,
    stats::{
        DropCounts, EveryCall, LatencyHistogram, OffCpuSplit, RowSummary, RowSyscall, Snapshot,
        SyscallSummary,
    },
};

/// The compiled kernel programs, built by `build.rs`.
static EBPF_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/profiler-ebpf.o"));
/// The context probe, alone (see [`probe_sys_exit_context`]).
static PROBE_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/profiler-ebpf-probe.o"));
/// The profiler's programs plus the limits `profiler bench overhead` measures them against.
static BENCH_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/profiler-ebpf-bench.o"));

/// Which processes to time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// These processes (tgids) and every process they fork from now on. May start empty and be
    /// filled with [`Session::track`].
    Processes(Vec<u32>),
    /// Every process on the machine.
    All,
    /// The processes in these cgroups (and the cgroups below them), counted per cgroup.
    Cgroups(Vec<crate::cgroup::Cgroup>),
}

/// `--by-cgroup`'s rows at most (`--cgroup-top`): each cgroup row is a series per syscall in
/// Prometheus and OTLP, and a machine can have thousands of cgroups.
pub const DEFAULT_CGROUP_TOP: usize = 100;

/// `--by-cgroup`'s names of the cgroups that made calls, by id: path and container.
#[derive(Default)]
struct CgroupNames {
    by_id: std::collections::HashMap<u64, Option<(String, Option<crate::container::Container>)>>,
    looked: Option<Instant>,
}

/// What to load: which syscalls, which processes.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// Syscalls to time (at most `MAX_SYSCALL_SLOTS`).
    pub syscalls: Vec<Syscall>,
    /// Processes to time.
    pub target: Target,
    /// The profiler's programs, or one of the limits `profiler bench overhead` measures it against.
    pub programs: Programs,
    /// How the end of a process is detected ([`GroupExit::Auto`] but in tests of the other path).
    pub group_exit: GroupExit,
    /// Whether the processes that tracked ones fork are tracked too (`attach --no-children`
    /// turns it off).
    pub follow_forks: bool,
    /// Split each call's time into on-CPU, blocked and runnable (`--off-cpu`): attaches
    /// `sched_switch` and `sched_wakeup` and keeps one more entry per thread id.
    pub off_cpu: bool,
    /// Which scheduler tracepoints the split uses ([`SchedAttach::Auto`]: raw where the kernel
    /// allows).
    pub sched_attach: SchedAttach,
    /// `--all --by-cgroup`: also count every call under its cgroup, a row per cgroup.
    pub by_cgroup: bool,
    /// `--cgroup-top`: at most this many cgroup rows ([`DEFAULT_CGROUP_TOP`]); the others are
    /// summed in one.
    pub cgroup_top: usize,
    /// `--slow`: send every call at least this long, with its stacks, to user space
    /// ([`Session::start_slow_collector`]); turns the split on, which the records carry.
    pub slow: Option<Duration>,
    /// Also time 32-bit (ia32) processes' calls, which the syscall tracepoints skip: two raw
    /// `sys_enter`/`sys_exit` programs that every syscall of the machine runs (a map lookup
    /// for all but the traced numbers; the raw tracepoints' own cost is ~150 ns a syscall on
    /// this project's VMs). On by default; off only where the caller knows every traced
    /// process runs a 64-bit program.
    pub compat: bool,
    /// Whether every call of the traced processes is counted too, per syscall (for the share
    /// of their syscall time the table leaves out, and `--syscalls all`).
    pub count_every: CountEvery,
    /// Never count this process's own calls (attach and serve: their polling, /proc reads and
    /// writes under `--all`, or when a named process is their parent).
    pub exclude_self: bool,
    /// How per-thread state is kept (arrays indexed by id, or hash maps keyed by it).
    pub per_thread: PerThread,
    /// How the syscalls are timed; `None`: the default ([`SyscallAttach::default_choice`]:
    /// `--attach`, else `PROFILER_ATTACH`, else auto).
    pub syscall_attach: Option<SyscallAttach>,
}

impl SessionConfig {
    /// The profiler's programs timing `syscalls` of `target`, children followed, 32-bit
    /// processes included, nothing else: set the other fields with `..SessionConfig::new(..)`.
    #[must_use]
    pub fn new(syscalls: Vec<Syscall>, target: Target) -> Self {
        Self {
            syscalls,
            target,
            programs: Programs::Profiler,
            group_exit: GroupExit::Auto,
            follow_forks: true,
            off_cpu: false,
            sched_attach: SchedAttach::Auto,
            by_cgroup: false,
            cgroup_top: DEFAULT_CGROUP_TOP,
            slow: None,
            compat: true,
            count_every: CountEvery::Auto,
            per_thread: PerThread::default_choice(),
            exclude_self: false,
            syscall_attach: None,
        }
    }
}

/// When every call of the traced processes is counted ([`SessionConfig::count_every`]): by
/// two programs on the raw `sys_enter`/`sys_exit` tracepoints, which every syscall of the
/// machine runs (a map lookup and out for the untraced).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CountEvery {
    /// Where the session's raw 32-bit programs already put every syscall of the machine
    /// through the raw tracepoints (the tracepoint front end with `compat`); not with fentry,
    /// which spares every syscall that path, nor in `run` with a 64-bit server (the report
    /// then says that the share left out was not measured).
    #[default]
    Auto,
    /// On any front end (`--syscalls all`).
    Always,
    /// Never (the benchmark's floors).
    Never,
}

/// Where the kernel programs keep per-thread (and per-process) state: the call in flight, its
/// off-CPU parts, which processes are tracked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PerThread {
    /// Arrays while `kernel.pid_max` is at most [`PER_THREAD_ARRAY_MAX`], hash maps above.
    #[default]
    Auto,
    /// Arrays indexed by id, sized by `kernel.pid_max` at load: one load instruction per
    /// lookup, but 32 bytes per possible id for the calls in flight alone (134 MB at systemd's
    /// pid_max of 4194304), and ids above a pid_max raised while tracing are not seen.
    Array,
    /// Hash maps keyed by id, an entry per thread that made a traced call (deleted when it
    /// exits), bounded by `kernel.threads-max` (at most [`PER_THREAD_HASH_MAX`]): any id fits.
    Hash,
}

/// The largest `kernel.pid_max` [`PerThread::Auto`] keeps arrays for (2 MB of calls in flight).
pub const PER_THREAD_ARRAY_MAX: u32 = 65_536;

/// The per-thread hash maps' entries at most (threads traced at once).
pub const PER_THREAD_HASH_MAX: u32 = 1 << 18;

impl PerThread {
    /// `PROFILER_PER_THREAD` (array, hash) where set, as the tests choose a mode; else auto.
    #[must_use]
    pub fn default_choice() -> Self {
        match std::env::var("PROFILER_PER_THREAD").as_deref() {
            Ok("array") => Self::Array,
            Ok("hash") => Self::Hash,
            _ => Self::Auto,
        }
    }

    /// Whether a session with `kernel.pid_max` at `pid_max` uses the hash maps.
    #[must_use]
    pub fn hash(self, pid_max: u32) -> bool {
        match self {
            Self::Auto => pid_max > PER_THREAD_ARRAY_MAX,
            Self::Array => false,
            Self::Hash => true,
        }
    }
}

/// Which programs a [`Session`] attaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Programs {
    /// The profiler's own, on the chosen syscalls' tracepoints.
    Profiler,
    /// Do-nothing programs: the attach point's own cost (`profiler bench overhead`).
    Empty(AttachPoint),
    /// The least any syscall timer must do: a clock read at entry stored per thread, a clock
    /// read at exit, the difference added to one per-CPU counter (`profiler bench overhead`).
    MinimalTimer(AttachPoint),
    /// A do-nothing program on the raw `sched_switch` and `sched_wakeup` tracepoints and
    /// nothing else: the floor of `--off-cpu`'s cost per context switch.
    EmptySched,
}

/// One load of the kernel programs, attached and counting until dropped.
pub struct Session {
    ebpf: Ebpf,
    syscalls: Vec<Syscall>,
    /// Dense index → pid for the processes user space named (index `i + first_named`).
    named: Vec<u32>,
    /// 0, or 1 under `--all`, where the derived index 0 is left unused (its counters could not
    /// be derived from totals that include every process).
    first_named: u32,
    /// Processes whose counting [`Session::pause`] set aside: pid → their tracking entry.
    paused: std::collections::HashMap<u32, u32>,
    logger: Option<aya_log::EbpfLogger<&'static dyn log::Log>>,
    /// Every attachment, by program name: dropping them detaches.
    links: Vec<(String, Link)>,
    /// When the last program was attached (or the counters were last reset): the start of the
    /// interval the counters cover.
    armed_at: Instant,
    /// Whether calls are split into on-CPU, blocked and runnable time (`--off-cpu`).
    off_cpu: bool,
    /// The `--off-cpu` front end, when the split is on.
    sched_front: Option<SchedFront>,
    /// `--slow`: the threshold past which calls are sent to user space.
    slow: Option<Duration>,
    /// Whether every call is counted under its cgroup too (`--all --by-cgroup`).
    by_cgroup: bool,
    /// `--cgroup`: the traced cgroups' labels; cgroup i counts under process index i + 1.
    cgroups: Vec<String>,
    /// Names the containers of cgroup rows (`--cgroup`, `--by-cgroup`).
    containers: std::sync::Mutex<crate::container::Resolver>,
    /// `--by-cgroup`: the cgroups given rows of their own, at most `cgroup_top`: chosen by
    /// syscall time when first seen and kept from then on, so that every row's counters (and
    /// the "other" row's) only grow, as Prometheus counters must.
    shown_cgroups: std::sync::Mutex<std::collections::HashSet<u64>>,
    cgroup_top: usize,
    /// `--by-cgroup`: the cgroups' names, looked up while they exist
    /// ([`Session::remember_cgroup_names`]); `None` for an id no longer in the tree then.
    cgroup_names: std::sync::Mutex<CgroupNames>,
    /// Whether 32-bit processes' calls are timed (the compat programs are attached).
    compat: bool,
    /// What the session was asked about counting every call, whether the compat programs count
    /// them (frozen at load), and whether every call is counted.
    count_every: CountEvery,
    count_in_compat: bool,
    every: bool,
    /// The front end timing the syscalls (the benchmark's floors: the one they are on).
    syscall_front: SyscallFront,
    /// `kernel.pid_max` when the per-thread maps were sized.
    pid_max: u32,
    /// Whether per-thread state is in the hash maps ([`PerThread`]).
    per_thread_hash: bool,
}

impl Drop for Session {
    fn drop(&mut self) {
        attach::detach_all(self.links.drain(..).map(|(_, link)| link).collect());
    }
}

/// One try of [`Session::start`]'s: the session, or the front end refused at attach and why.
enum Attempt {
    Loaded(Box<Session>),
    Refused(AttachPoint, String),
}

impl Session {
    /// Checks the machine, loads the programs, writes the configuration and attaches them.
    pub fn start(config: &SessionConfig) -> Result<Self, SetupError> {
        // A front end planned under auto and refused at attach (fentry on a lockdown the
        // pre-check could not read: securityfs unmounted) is passed by, and the programs are
        // loaded again for the next: what is frozen at load (every call counted inside the
        // compat pair) must be what that one needs.
        let mut passed_by = Vec::new();
        loop {
            match Self::load(config, passed_by.clone()) {
                Ok(Attempt::Refused(point, why)) => passed_by.push((point, why)),
                Ok(Attempt::Loaded(session)) => return Ok(*session),
                Err(e) => return Err(environment::explain_lockdown(e)),
            }
        }
    }

    /// [`Session::start`]'s one try, `passed_by` the front ends refused at attach so far.
    fn load(
        config: &SessionConfig,
        passed_by: Vec<(AttachPoint, String)>,
    ) -> Result<Attempt, SetupError> {
        environment::prepare()?;
        environment::check_bpf()?;
        environment::raise_memlock_limit();
        if config.syscalls.len() > MAX_SYSCALL_SLOTS {
            return Err(SetupError::TooManySyscalls(config.syscalls.len()));
        }
        let (initial, cgroups) = match &config.target {
            Target::Processes(pids) => (pids.clone(), Vec::new()),
            Target::All => (Vec::new(), Vec::new()),
            Target::Cgroups(c) => (Vec::new(), c.clone()),
        };
        // Cgroup i counts under index i + 1, below the first forked process's.
        if cgroups.len() >= FIRST_FORKED_PROCESS as usize {
            return Err(SetupError::TooManyNamedCgroups(cgroups.len()));
        }
        let cgroup_ids: usize = cgroups.iter().map(|c| c.ids.len()).sum();
        if cgroup_ids > profiler_common::MAX_CGROUP_IDS as usize {
            return Err(SetupError::TooManyCgroups(cgroup_ids));
        }
        if initial.len() > FIRST_FORKED_PROCESS as usize {
            return Err(SetupError::TooManyPids(initial.len()));
        }
        for &pid in &initial {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                return Err(SetupError::NoSuchProcess(pid));
            }
        }

        let slow_ns = match config.slow {
            Some(d) if config.programs == Programs::Profiler => {
                u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
            }
            _ => 0,
        };
        // The split is the profiler programs' (the benchmark's limits have no sched programs);
        // --slow needs it (a slow call's record carries it, and its kernel stack is taken at a
        // switch-out).
        let split =
            u8::from((config.off_cpu || slow_ns != 0) && config.programs == Programs::Profiler);
        let pid_max = environment::pid_max();
        // Per-thread state: arrays of pid_max entries, or hashes of the threads that can exist
        // (one entry for the kind not used).
        let per_thread_hash = config.per_thread.hash(pid_max);
        let (arrays, hashes) = if per_thread_hash {
            (
                1,
                environment::threads_max().clamp(1024, PER_THREAD_HASH_MAX),
            )
        } else {
            (pid_max, 1)
        };
        let mut layout = config.group_exit.layout(&config.syscalls)?;
        let sched_front = if split != 0 {
            let front = layout::add_off_cpu(&mut layout, config.sched_attach)?;
            if let SchedFront::Classic(why) = front {
                log::debug!("--off-cpu on the classic sched tracepoints: {why}");
            }
            Some(front)
        } else {
            None
        };
        if layout.sys_exit_nr != RECORD_HEADER {
            // The format file's header is not the 8 bytes every kernel's BPF context once had:
            // ask the kernel what its programs really see.
            (layout.sys_exit_nr, layout.sys_exit_ret) = probe_sys_exit_context(&layout)?;
        }
        log::debug!("record layout of this kernel: {layout:?}");
        let trace_all = u8::from(config.target == Target::All);
        let trace_cgroups = u8::from(matches!(config.target, Target::Cgroups(_)));
        let by_cgroup =
            u8::from(config.by_cgroup && trace_all != 0 && config.programs == Programs::Profiler);
        // The raw minimal timer times the first syscall of the set.
        let raw_timed_nr = config
            .syscalls
            .first()
            .map_or(u64::MAX, |s| u64::from(s.nr));
        let self_tgid = if config.exclude_self {
            std::process::id()
        } else {
            0
        };
        let compat = config.compat && config.programs == Programs::Profiler;
        let attach = match config.syscall_attach {
            Some(attach) => attach,
            None => SyscallAttach::default_choice().map_err(SetupError::BadAttachChoice)?,
        };
        // The profiler's front end, or the benchmark's floor on the one it names.
        let profiler = config.programs == Programs::Profiler;
        let syscall_front = match config.programs {
            Programs::Profiler => SyscallFront::plan(attach, &config.syscalls, compat, passed_by),
            Programs::Empty(point) => SyscallFront::floor(point, false, &config.syscalls),
            Programs::MinimalTimer(point) => SyscallFront::floor(point, true, &config.syscalls),
            Programs::EmptySched => Ok(SyscallFront::empty_sched()),
        }
        .map_err(|(point, why)| SetupError::FrontUnavailable {
            front: point.front().name,
            why,
        })?;
        // Where the compat programs will run (a front end that does not time 32-bit calls
        // itself), they count every call too, at a map lookup per syscall; decided before
        // load, from the planned front end (one refused at attach is loaded again for the
        // next: `Session::start`).
        let count_in_compat = compat
            && profiler
            && !syscall_front.front().times_32_bit
            && config.count_every != CountEvery::Never;
        let mut slot_entries = [0; MAX_SYSCALL_SLOTS];
        for (slot, s) in config.syscalls.iter().enumerate() {
            slot_entries[slot] = slot_entry(slot, s);
        }
        let mut ebpf = EbpfLoader::new()
            // The kernel's BTF, parsed once per process: the fentry front end's targets and
            // loads read the same (aya's loader would parse it again).
            .btf(front::kernel_btf().ok())
            .override_global(
                map::CONFIG,
                &profiler_common::Config {
                    slow_ns,
                    raw_timed_nr,
                    self_tgid,
                    trace_all,
                    trace_cgroups,
                    by_cgroup,
                    split_off_cpu: split,
                    per_thread_hash: u8::from(per_thread_hash),
                    count_every: u8::from(count_in_compat),
                    slot_entries,
                    ..profiler_common::Config::OFF
                },
                true,
            )
            .override_global(map::LAYOUT, &layout, true)
            .map_max_entries(
                map::CGROUP_STATS,
                if by_cgroup != 0 {
                    profiler_common::MAX_CGROUP_IDS
                } else {
                    1
                },
            )
            .map_max_entries(map::OFF_CPU, if split != 0 { arrays } else { 1 })
            .map_max_entries(map::OFF_CPU_BY_TID, if split != 0 { hashes } else { 1 })
            .map_max_entries(
                map::SLOW_CALLS,
                if slow_ns != 0 { SLOW_RING_BYTES } else { 4096 },
            )
            .map_max_entries(
                map::STACKS,
                if slow_ns != 0 { SLOW_STACK_ENTRIES } else { 1 },
            )
            .map_max_entries(map::ANNOUNCED, if slow_ns != 0 { arrays } else { 1 })
            .map_max_entries(
                map::ANNOUNCED_BY_TGID,
                if slow_ns != 0 { hashes } else { 1 },
            )
            .map_max_entries(
                map::HOLDER_OF,
                if slow_ns != 0 {
                    profiler_common::HOLDER_THREADS
                } else {
                    1
                },
            )
            .map_max_entries(map::TRACKED, arrays)
            .map_max_entries(map::TRACKED_BY_TGID, hashes)
            .map_max_entries(map::START, arrays)
            .map_max_entries(map::START_BY_TID, hashes)
            .map_max_entries(
                map::TIMER_START,
                if matches!(config.programs, Programs::MinimalTimer(_)) {
                    pid_max
                } else {
                    1
                },
            )
            .load(if config.programs == Programs::Profiler {
                EBPF_OBJECT
            } else {
                BENCH_OBJECT
            })
            .map_err(|e| SetupError::bpf("loading the eBPF object", e))?;
        // Kernel-side diagnostics (forks followed, table full) go to the `log` crate: `-v` shows them.
        let logger = aya_log::EbpfLogger::init(&mut ebpf).ok();

        let mut session = Self {
            ebpf,
            syscalls: config.syscalls.clone(),
            named: Vec::new(),
            // Under --all and --cgroup the derived index 0 is left unused.
            first_named: u32::from(trace_all != 0 || trace_cgroups != 0),
            paused: std::collections::HashMap::new(),
            cgroups: cgroups.iter().map(|c| c.label.clone()).collect(),
            logger,
            links: Vec::new(),
            armed_at: Instant::now(),
            off_cpu: split != 0,
            sched_front,
            slow: config.slow.filter(|_| slow_ns != 0),
            by_cgroup: by_cgroup != 0,
            // The traced cgroups' containers are named now, while their state is there to
            // read: a container that exits before the last snapshot takes it with it.
            shown_cgroups: std::sync::Mutex::default(),
            cgroup_names: std::sync::Mutex::default(),
            cgroup_top: config.cgroup_top.max(1),
            containers: std::sync::Mutex::new(crate::container::Resolver::knowing(
                cgroups.iter().map(|c| c.label.as_str()),
            )),
            compat,
            count_every: if config.programs == Programs::Profiler {
                config.count_every
            } else {
                CountEvery::Never
            },
            count_in_compat,
            every: false,
            syscall_front: syscall_front.clone(),
            pid_max,
            per_thread_hash,
        };
        session.write_slots()?;
        session.write_cgroups(&cgroups)?;
        for pid in initial {
            session.track(pid)?;
        }
        // Before the syscall programs, so that every traced call's switches are seen.
        session.attach_sched()?;
        if let Some((point, why)) = session.attach_syscalls(syscall_front, attach, profiler)? {
            return Ok(Attempt::Refused(point, why));
        }
        if config.programs == Programs::Profiler {
            session.attach_process_tracking(config.follow_forks)?;
        }
        session.arm()?;
        Ok(Attempt::Loaded(Box::new(session)))
    }

    /// Tells the exit program that every program is attached, so an exit without an entry is
    /// from now on a call that was in flight (counted as dropped, at most one per thread).
    fn arm(&mut self) -> Result<(), SetupError> {
        let mut armed: Array<&mut MapData, u32> = self.map_mut(map::ARMED)?;
        armed
            .set(0, 1, 0)
            .map_err(|e| SetupError::bpf("writing ARMED", e))?;
        self.armed_at = Instant::now();
        Ok(())
    }

    /// How long the counters have been counting: since every program was attached, or since the
    /// last [`Session::reset`]. Read it next to a snapshot: it excludes the load before and the
    /// detach after.
    #[must_use]
    pub fn traced_for(&self) -> Duration {
        self.armed_at.elapsed()
    }

    /// The syscalls being timed, in slot order.
    #[must_use]
    pub fn syscalls(&self) -> &[Syscall] {
        &self.syscalls
    }

    /// Starts timing process `pid` (and the children it forks from now on).
    ///
    /// A process that exits is untracked by the kernel program on `sched_process_exit`, so a pid
    /// reused later is not traced. One that exits before it is in the map would stay tracked: a
    /// pidfd taken first tells, without racing pid reuse, whether it exited meanwhile.
    pub fn track(&mut self, pid: u32) -> Result<(), SetupError> {
        if self.named.contains(&pid) {
            return Ok(());
        }
        let pidfd = crate::process::PidFd::open(pid).ok_or(SetupError::NoSuchProcess(pid))?;
        let index = u32::try_from(self.named.len()).unwrap_or(u32::MAX) + self.first_named;
        if index >= FIRST_FORKED_PROCESS {
            return Err(SetupError::TooManyPids(self.named.len() + 1));
        }
        let mut pids: Array<&mut MapData, u32> = self.map_mut(map::PROCESS_PIDS)?;
        pids.set(index, pid, 0)
            .map_err(|e| SetupError::bpf("writing PROCESS_PIDS", e))?;
        self.set_tracked(pid, index + 1)?;
        if pidfd.exited() {
            self.set_tracked(pid, 0)?;
        }
        self.named.push(pid);
        Ok(())
    }

    /// Sets `pid`'s tracking entry (dense index + 1; 0 untracks) in the array or the hash.
    fn set_tracked(&mut self, pid: u32, value: u32) -> Result<(), SetupError> {
        if self.per_thread_hash {
            let mut tracked: AyaHashMap<&mut MapData, u32, u32> =
                self.map_mut(map::TRACKED_BY_TGID)?;
            let result = if value == 0 {
                // Already gone if the kernel saw the process exit.
                match tracked.remove(&pid) {
                    Err(aya::maps::MapError::SyscallError(e))
                        if e.io_error.raw_os_error() == Some(libc::ENOENT) =>
                    {
                        Ok(())
                    }
                    other => other,
                }
            } else {
                tracked.insert(pid, value, 0)
            };
            return result
                .map_err(|e| SetupError::bpf(format!("tracking pid {pid} (TRACKED_BY_TGID)"), e));
        }
        let mut tracked: Array<&mut MapData, u32> = self.map_mut(map::TRACKED)?;
        tracked
            .set(pid, value, 0)
            .map_err(|e| SetupError::bpf(format!("tracking pid {pid} (beyond kernel.pid_max?)"), e))
    }

    /// Stops counting the processes `pids` until [`Session::resume`]: their tracking entries
    /// are set aside, so the programs still run for their calls (the attached floor: the
    /// lookup that finds them untracked) but count nothing. `run`'s baseline slices.
    pub fn pause(&mut self, pids: &[u32]) -> Result<(), SetupError> {
        for &pid in pids {
            if self.paused.contains_key(&pid) {
                continue;
            }
            let Some(entry) = self.tracking_entry(pid)? else {
                continue;
            };
            self.set_tracked(pid, 0)?;
            self.paused.insert(pid, entry);
        }
        Ok(())
    }

    /// Counts the processes [`Session::pause`] set aside again, with the entries they had.
    pub fn resume(&mut self, pids: &[u32]) -> Result<(), SetupError> {
        for pid in pids {
            if let Some(entry) = self.paused.remove(pid) {
                self.set_tracked(*pid, entry)?;
            }
        }
        Ok(())
    }

    /// `pid`'s tracking entry (dense index + 1); `None` when it is not tracked.
    fn tracking_entry(&self, pid: u32) -> Result<Option<u32>, SetupError> {
        if self.per_thread_hash {
            let tracked: AyaHashMap<&MapData, u32, u32> = self.map(map::TRACKED_BY_TGID)?;
            return match tracked.get(&pid, 0) {
                Ok(0) | Err(aya::maps::MapError::KeyNotFound) => Ok(None),
                Ok(entry) => Ok(Some(entry)),
                Err(e) => Err(SetupError::bpf("reading TRACKED_BY_TGID", e)),
            };
        }
        // A process numbered past the map (kernel.pid_max raised while tracing) was never
        // tracked: its fork was counted as lost, and the snapshot's `not_seen` says so.
        if pid >= self.pid_max {
            return Ok(None);
        }
        let tracked: Array<&MapData, u32> = self.map(map::TRACKED)?;
        let entry = tracked
            .get(&pid, 0)
            .map_err(|e| SetupError::bpf("reading TRACKED", e))?;
        Ok((entry != 0).then_some(entry))
    }

    /// [`Session::track`] for a process that may have exited since it was found (a running
    /// descendant seen in `/proc`): false, and nothing tracked, if it has.
    pub fn track_if_running(&mut self, pid: u32) -> Result<bool, SetupError> {
        match self.track(pid) {
            Ok(()) => Ok(true),
            Err(SetupError::NoSuchProcess(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Whether any process the session tracks (named or forked) is still alive, as the kernel
    /// programs see it: exits are seen on `sched_process_exit`, so an unrelated process that
    /// reuses a pid later does not count.
    pub fn any_tracked_alive(&self) -> Result<bool, SetupError> {
        for pid in self.tracked_pids()? {
            if self.is_tracking(pid)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether the kernel programs still count `pid` as tracked: false once its last thread
    /// has exited.
    pub fn is_tracking(&self, pid: u32) -> Result<bool, SetupError> {
        Ok(self.tracking_entry(pid)?.is_some())
    }

    /// `--slow`: starts the [`crate::slow::Collector`] that reads the slow calls (once; `None`
    /// without `--slow`), showing the `top` slowest stacks and skipping the calls that returned
    /// before `since_ns` (CLOCK_MONOTONIC; 0 for none).
    pub fn start_slow_collector(
        &mut self,
        top: u32,
        since_ns: u64,
    ) -> Result<Option<crate::slow::Collector>, SetupError> {
        let Some(threshold) = self.slow else {
            return Ok(None);
        };
        if self.ebpf.map(map::SLOW_CALLS).is_none() {
            return Ok(None);
        }
        let mut take = |name: &str| {
            self.ebpf.take_map(name).ok_or_else(|| {
                SetupError::bpf(format!("map {name}"), anyhow::anyhow!("already taken"))
            })
        };
        let (ring, stacks, lost) = (
            take(map::SLOW_CALLS)?,
            take(map::STACKS)?,
            take(map::SLOW_LOST)?,
        );
        let bpf = |name: &str, e: aya::maps::MapError| SetupError::bpf(format!("map {name}"), e);
        let maps = crate::slow::SlowMaps {
            ring: aya::maps::RingBuf::try_from(ring).map_err(|e| bpf(map::SLOW_CALLS, e))?,
            stacks: aya::maps::StackTraceMap::try_from(stacks).map_err(|e| bpf(map::STACKS, e))?,
            lost: PerCpuArray::try_from(lost).map_err(|e| bpf(map::SLOW_LOST, e))?,
        };
        let names = self.syscalls.iter().map(|s| s.name.clone()).collect();
        Ok(Some(crate::slow::Collector::spawn(
            maps, names, threshold, top, since_ns,
        )))
    }

    /// Moves kernel-side log records to the `log` crate.
    pub fn flush_logs(&mut self) {
        if let Some(logger) = &mut self.logger {
            logger.flush();
        }
    }

    /// `--by-cgroup`: names the cgroups that have made their first calls since the last look
    /// (at most every 250 ms), while they exist: a container that stops before the counters
    /// are read takes its cgroup, and its name, with it. Call it from the polling loop; a
    /// cgroup that lives less than that may still be shown by its id.
    pub fn remember_cgroup_names(&self) {
        if !self.by_cgroup {
            return;
        }
        let mut names = self
            .cgroup_names
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if names
            .looked
            .is_some_and(|t| t.elapsed() < Duration::from_millis(250))
        {
            return;
        }
        names.looked = Some(Instant::now());
        let Ok(map) =
            self.map::<aya::maps::PerCpuHashMap<&MapData, u64, RowStats>>(map::CGROUP_STATS)
        else {
            return;
        };
        let new: Vec<u64> = map
            .keys()
            .flatten()
            .filter(|id| !names.by_id.contains_key(id))
            .collect();
        if new.is_empty() {
            return;
        }
        let paths = crate::cgroup::paths_by_id();
        let mut resolver = self
            .containers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for id in new {
            let name = paths
                .get(&id)
                .map(|path| (path.clone(), resolver.resolve(path)));
            names.by_id.insert(id, name);
        }
    }

    /// Reads and merges every per-CPU counter.
    pub fn snapshot(&self) -> Result<Snapshot, SetupError> {
        // `--by-cgroup` rows first, then the totals: counters only grow, so the rows can never
        // add up to more than the totals (read the other way round, calls made between the two
        // reads were in the rows only).
        let cgroup_rows = self.read_cgroup_stats()?;
        let slots: PerCpuArray<&MapData, SyscallSlot> = self.map(map::SYSCALLS)?;
        let events: PerCpuArray<&MapData, LatencyBuckets> = self.map(map::EVENTS)?;
        let mut syscalls = Vec::with_capacity(self.syscalls.len());
        for (slot, syscall) in self.syscalls.iter().enumerate() {
            let slot = slot as u32;
            let per_cpu = slots
                .get(&slot, 0)
                .map_err(|e| SetupError::bpf("reading SYSCALLS", e))?;
            let mut summary = SyscallSummary {
                name: syscall.name.clone(),
                off_cpu: self.off_cpu.then(OffCpuSplit::default),
                returned: syscall.return_unit().map(|unit| crate::stats::Returned {
                    unit,
                    per_call: LatencyHistogram::default(),
                    total: 0,
                    short: crate::stats::ReturnUnit::sized(&syscall.name).then_some(0),
                }),
                ..Default::default()
            };
            for cpu in per_cpu.iter() {
                summary.add(&SyscallSummary::of_slot(&syscall.name, cpu, self.off_cpu));
            }
            if let Some(returned) = &mut summary.returned {
                let per_cpu = events
                    .get(&slot, 0)
                    .map_err(|e| SetupError::bpf("reading EVENTS", e))?;
                for cpu in per_cpu.iter() {
                    returned.per_call.add_counts(&cpu.counts);
                }
            }
            syscalls.push(summary);
        }
        let mut processes = self.read_processes(&syscalls)?;
        processes.extend(cgroup_rows);
        Ok(Snapshot {
            syscalls,
            processes,
            dropped: self.read_dropped()?,
            not_seen: self.not_seen(),
            every: self.read_every()?,
        })
    }

    /// Every call of the traced processes per syscall, when they are counted.
    fn read_every(&self) -> Result<Option<Vec<EveryCall>>, SetupError> {
        if !self.every {
            return Ok(None);
        }
        let map: PerCpuArray<&MapData, OtherCalls> = self.map(map::EVERY)?;
        let mut every = Vec::new();
        for key in 0..EVERY_KEYS {
            let per_cpu = map
                .get(&key, 0)
                .map_err(|e| SetupError::bpf("reading EVERY", e))?;
            let mut sum = OtherCalls::default();
            for cpu in per_cpu.iter() {
                sum.calls += cpu.calls;
                sum.errors += cpu.errors;
                sum.total_ns += cpu.total_ns;
            }
            if sum.calls == 0 {
                continue;
            }
            let ia32 = key >= MAX_SYSCALL_NR;
            let nr = key % MAX_SYSCALL_NR;
            let (name, in_table) = if ia32 {
                let name = syscalls::x86::Sysno::new(nr as usize)
                    .map_or_else(|| format!("ia32 syscall {nr}"), |s| s.name().to_owned());
                let timed = self.syscalls.iter().any(|s| s.ia32_nr == Some(nr));
                (name, timed)
            } else {
                let name = syscalls::Sysno::new(nr as usize)
                    .map_or_else(|| format!("syscall {nr}"), |s| s.name().to_owned());
                (name, self.syscalls.iter().any(|s| s.nr == nr))
            };
            every.push(EveryCall {
                name,
                ia32,
                in_table,
                calls: sum.calls,
                errors: sum.errors,
                total_ns: sum.total_ns,
            });
        }
        crate::stats::sort_every(&mut every);
        Ok(Some(every))
    }

    /// Zeroes every counter and histogram (not the tracking): what follows starts from nothing,
    /// with exact minimum and maximum. Calls completing while it runs may land on either side.
    pub fn reset(&mut self) -> Result<(), SetupError> {
        let cpus = aya::util::nr_cpus().map_err(|(_, e)| SetupError::bpf("counting CPUs", e))?;
        fn zero<T: aya::Pod + Default + Clone>(
            session: &mut Session,
            name: &str,
            entries: u32,
            cpus: usize,
        ) -> Result<(), SetupError> {
            let mut map: PerCpuArray<&mut MapData, T> = session.map_mut(name)?;
            for index in 0..entries {
                let zeros = aya::maps::PerCpuValues::try_from(vec![T::default(); cpus])
                    .map_err(|e| SetupError::bpf(format!("zeroing {name}"), e))?;
                map.set(index, zeros, 0)
                    .map_err(|e| SetupError::bpf(format!("zeroing {name}"), e))?;
            }
            Ok(())
        }
        self.armed_at = Instant::now();
        let slots = self.syscalls.len() as u32;
        zero::<SyscallSlot>(self, map::SYSCALLS, slots, cpus)?;
        zero::<LatencyBuckets>(self, map::EVENTS, slots, cpus)?;
        zero::<u64>(self, map::DROPPED, DROP_REASONS as u32, cpus)?;
        if self.every {
            zero::<OtherCalls>(self, map::EVERY, EVERY_KEYS, cpus)?;
        }
        let next: Array<&MapData, u64> = self.map(map::NEXT_PROCESS)?;
        let forked = next
            .get(&0, 0)
            .map_err(|e| SetupError::bpf("reading NEXT_PROCESS", e))?;
        let named = self.named.len() as u32 + self.first_named;
        let mut map: PerCpuArray<&mut MapData, RowStats> = self.map_mut(map::PROCESSES)?;
        for index in (0..named)
            .chain(forked_process_indexes(forked))
            .chain([OVERFLOW_PROCESS])
        {
            let zeros = aya::maps::PerCpuValues::try_from(vec![RowStats::default(); cpus])
                .map_err(|e| SetupError::bpf("zeroing PROCESSES", e))?;
            map.set(index, zeros, 0)
                .map_err(|e| SetupError::bpf("zeroing PROCESSES", e))?;
        }
        Ok(())
    }

    /// Per-process counters. The process at [`DERIVED_PROCESS`] is not counted in the kernel (the
    /// hot path skips it): its figures are the totals minus every other process's.
    fn read_processes(&self, totals: &[SyscallSummary]) -> Result<Vec<RowSummary>, SetupError> {
        let next: Array<&MapData, u64> = self.map(map::NEXT_PROCESS)?;
        let forked = next
            .get(&0, 0)
            .map_err(|e| SetupError::bpf("reading NEXT_PROCESS", e))?;

        let pids: Array<&MapData, u32> = self.map(map::PROCESS_PIDS)?;
        let stats: PerCpuArray<&MapData, RowStats> = self.map(map::PROCESSES)?;

        let named = self.first_named.max(1)..self.named.len() as u32 + self.first_named;
        let forked = forked_process_indexes(forked);
        let mut by_pid: BTreeMap<u32, RowSummary> = BTreeMap::new();
        for index in named.chain(forked).chain([OVERFLOW_PROCESS]) {
            let pid = if index == OVERFLOW_PROCESS {
                0
            } else {
                pids.get(&index, 0)
                    .map_err(|e| SetupError::bpf("reading PROCESS_PIDS", e))?
            };
            let summary = RowSummary {
                pid,
                syscalls: self.process_counters(&stats, index)?,
                cgroup: None,
                container: None,
            };
            if summary.total_calls() > 0 {
                // A pid reused by a later fork: add up rather than overwrite.
                let entry = by_pid.entry(pid).or_insert_with(|| RowSummary {
                    pid,
                    syscalls: vec![RowSyscall::default(); self.syscalls.len()],
                    cgroup: None,
                    container: None,
                });
                entry.add(&summary);
            }
        }
        if self.first_named == DERIVED_PROCESS
            && let Some(&pid) = self.named.first()
        {
            let mut derived = RowSummary {
                pid,
                syscalls: totals
                    .iter()
                    .map(|t| RowSyscall {
                        calls: t.calls,
                        errors: t.errors.total(),
                        total_ns: t.total_ns,
                    })
                    .collect(),
                cgroup: None,
                container: None,
            };
            for other in by_pid.values() {
                for (d, o) in derived.syscalls.iter_mut().zip(&other.syscalls) {
                    d.subtract(o);
                }
            }
            if derived.total_calls() > 0 {
                match by_pid.get_mut(&pid) {
                    // The same pid also under another index (reused): add up.
                    Some(entry) => entry.add(&derived),
                    None => {
                        by_pid.insert(pid, derived);
                    }
                }
            }
        }
        let mut processes: Vec<RowSummary> = by_pid.into_values().collect();
        processes.extend(self.read_cgroups(&stats)?);
        Ok(processes)
    }

    /// `--cgroup`: one row per traced cgroup, its processes' calls together.
    fn read_cgroups(
        &self,
        stats: &PerCpuArray<&MapData, RowStats>,
    ) -> Result<Vec<RowSummary>, SetupError> {
        self.cgroups
            .iter()
            .enumerate()
            .map(|(i, label)| {
                Ok(RowSummary {
                    pid: 0,
                    syscalls: self.process_counters(stats, i as u32 + 1)?,
                    container: self
                        .containers
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .resolve(label),
                    cgroup: Some(label.clone()),
                })
            })
            .collect()
    }

    /// `--all --by-cgroup`: one row per cgroup that made a timed call, named by its path below
    /// the cgroup root (looked up now: a cgroup removed since is named by its id).
    fn read_cgroup_stats(&self) -> Result<Vec<RowSummary>, SetupError> {
        if !self.by_cgroup {
            return Ok(Vec::new());
        }
        let map: aya::maps::PerCpuHashMap<&MapData, u64, RowStats> = self.map(map::CGROUP_STATS)?;
        let mut counted = Vec::new();
        for entry in &map {
            let (id, per_cpu) = entry.map_err(|e| SetupError::bpf("reading CGROUP_STATS", e))?;
            counted.push((id, self.sum_counters(per_cpu.iter())));
        }
        let mut shown = self
            .shown_cgroups
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let time = |counters: &[RowSyscall]| counters.iter().map(|c| c.total_ns).sum::<u64>();
        let mut candidates: Vec<&(u64, Vec<RowSyscall>)> = counted
            .iter()
            .filter(|(id, _)| !shown.contains(id))
            .collect();
        candidates.sort_by_key(|(_, c)| std::cmp::Reverse(time(c)));
        for (id, _) in candidates {
            if shown.len() >= self.cgroup_top {
                break;
            }
            shown.insert(*id);
        }
        let names = self
            .cgroup_names
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let paths = crate::cgroup::paths_by_id();
        let mut resolver = self
            .containers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut rows = Vec::new();
        let mut other: Option<RowSummary> = None;
        for (id, syscalls) in counted {
            if !shown.contains(&id) {
                let row = other.get_or_insert_with(|| RowSummary {
                    pid: 0,
                    syscalls: vec![RowSyscall::default(); self.syscalls.len()],
                    cgroup: Some(format!("other (past --cgroup-top {})", self.cgroup_top)),
                    container: None,
                });
                for (o, s) in row.syscalls.iter_mut().zip(&syscalls) {
                    o.add(s);
                }
                continue;
            }
            // Named while it existed, else now.
            let (cgroup, container) = match names.by_id.get(&id) {
                Some(Some((path, container))) => (path.clone(), container.clone()),
                _ => match paths.get(&id) {
                    Some(path) => (path.clone(), resolver.resolve(path)),
                    None => (format!("cgroup id {id} (removed)"), None),
                },
            };
            rows.push(RowSummary {
                pid: 0,
                syscalls,
                container,
                cgroup: Some(cgroup),
            });
        }
        rows.sort_by(|a, b| a.cgroup.cmp(&b.cgroup));
        rows.extend(other);
        Ok(rows)
    }

    /// The counters of process index `index`, summed over CPUs, per syscall slot.
    fn process_counters(
        &self,
        stats: &PerCpuArray<&MapData, RowStats>,
        index: u32,
    ) -> Result<Vec<RowSyscall>, SetupError> {
        let per_cpu = stats
            .get(&index, 0)
            .map_err(|e| SetupError::bpf("reading PROCESSES", e))?;
        Ok(self.sum_counters(per_cpu.iter()))
    }

    /// Per-CPU counters summed, per syscall slot.
    fn sum_counters<'a>(&self, per_cpu: impl Iterator<Item = &'a RowStats>) -> Vec<RowSyscall> {
        let mut counters = vec![RowSyscall::default(); self.syscalls.len()];
        for cpu in per_cpu {
            for (slot, s) in counters.iter_mut().enumerate() {
                s.add(&RowSyscall {
                    calls: cpu.calls[slot],
                    errors: cpu.errors[slot],
                    total_ns: cpu.total_ns[slot],
                });
            }
        }
        counters
    }

    fn read_dropped(&self) -> Result<DropCounts, SetupError> {
        let dropped: PerCpuArray<&MapData, u64> = self.map(map::DROPPED)?;
        let mut counts = DropCounts::default();
        for reason in 0..DROP_REASONS as u32 {
            let per_cpu = dropped
                .get(&reason, 0)
                .map_err(|e| SetupError::bpf("reading DROPPED", e))?;
            counts.0[reason as usize] = per_cpu.iter().sum();
        }
        Ok(counts)
    }

    /// Pids of every process the session has tracked so far (named and forked).
    pub fn tracked_pids(&self) -> Result<Vec<u32>, SetupError> {
        let next: Array<&MapData, u64> = self.map(map::NEXT_PROCESS)?;
        let forked = next
            .get(&0, 0)
            .map_err(|e| SetupError::bpf("reading NEXT_PROCESS", e))?;

        let pids: Array<&MapData, u32> = self.map(map::PROCESS_PIDS)?;
        let mut out = self.named.clone();
        for index in forked_process_indexes(forked) {
            out.push(
                pids.get(&index, 0)
                    .map_err(|e| SetupError::bpf("reading PROCESS_PIDS", e))?,
            );
        }
        Ok(out)
    }

    /// The minimal timer's total over every CPU (`Programs::MinimalTimer`; 0 otherwise).
    pub fn timer_total_ns(&self) -> Result<u64, SetupError> {
        let total: PerCpuArray<&MapData, u64> = self.map(map::TIMER_TOTAL)?;
        let values = total
            .get(&0, 0)
            .map_err(|e| SetupError::bpf("reading TIMER_TOTAL", e))?;
        Ok(values.iter().sum())
    }

    /// Per attached program: (name, runs, total run time) as the kernel counts them while
    /// the kernel's statistics are on ([`BpfStats`]; zeros otherwise). Used by `profiler bench overhead`.
    #[must_use]
    pub fn program_run_stats(&self) -> Vec<(String, u64, Duration)> {
        let mut names: Vec<&str> = self.links.iter().map(|(n, _)| n.as_str()).collect();
        names.dedup();
        names
            .into_iter()
            .filter_map(|name| {
                let info = self.ebpf.program(name)?.info().ok()?;
                Some((name.to_owned(), info.run_count(), info.run_time()))
            })
            .collect()
    }

    /// The slot tables: each syscall's x86_64 number, and its ia32 number where it has one,
    /// to its slot.
    fn write_slots(&mut self) -> Result<(), SetupError> {
        let entry = slot_entry;
        let native: Vec<(u32, u32)> = self
            .syscalls
            .iter()
            .enumerate()
            .map(|(slot, s)| (s.nr, entry(slot, s)))
            .collect();
        let mut ia32: Vec<(u32, u32)> = self
            .syscalls
            .iter()
            .enumerate()
            .filter_map(|(slot, s)| Some((s.ia32_nr?, entry(slot, s))))
            .collect();
        // A traced syscall without an ia32 number (accept): 32-bit processes reach it through
        // socketcall, whose calls are then counted as not timed.
        if self.syscalls.iter().any(|s| s.ia32_nr.is_none()) {
            let socketcall = syscalls::x86::Sysno::socketcall.id() as u32;
            if !ia32.iter().any(|&(nr, _)| nr == socketcall) {
                ia32.push((socketcall, profiler_common::IA32_NOT_TIMED));
            }
        }
        for (map, entries) in [(map::SLOT_OF_NR, native), (map::IA32_SLOT_OF_NR, ia32)] {
            let mut slot_of_nr: Array<&mut MapData, u32> = self.map_mut(map)?;
            for (nr, entry) in entries {
                slot_of_nr
                    .set(nr, entry, 0)
                    .map_err(|e| SetupError::bpf(format!("syscall number {nr} beyond {map}"), e))?;
            }
        }
        Ok(())
    }

    /// What these programs cannot see, for [`Snapshot::not_seen`].
    fn not_seen(&self) -> Vec<String> {
        let mut lines = Vec::new();
        // Without the compat programs (run, for a 64-bit server; c2c and the bench, for this
        // process), the caller has checked that what it traces is a 64-bit program.
        let missed = self.skipped_runs();
        if missed > 0 {
            lines.push(format!(
                "up to {missed} calls: the kernel skipped that many runs of the {} programs, each already running on its CPU when preempted ({}); --attach tracepoint never misses them",
                self.syscall_front.name(),
                front::preemptible_kernel().unwrap_or_else(|| "a preemptible kernel".to_owned())
            ));
        }
        if let Some((then, now)) = self.pid_max_raised() {
            lines.push(format!(
                "processes and threads numbered above {then}: kernel.pid_max was raised to {now} while tracing, and the per-thread maps were sized at the start"
            ));
        }
        lines
    }

    /// Runs of the front end's programs the kernel skipped (each a call not seen): only for
    /// one whose programs can be preempted ([`front::FrontEnd::may_skip_runs`]: fentry), on a
    /// kernel that preempts them, which `auto` does not use it on.
    #[must_use]
    pub fn skipped_runs(&self) -> u64 {
        if !self.syscall_front.front().may_skip_runs {
            return 0;
        }
        let mut names: Vec<&str> = self
            .syscall_front
            .attachments
            .iter()
            .map(|a| a.program.as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        names
            .into_iter()
            .filter_map(|n| attach::recursion_misses(&self.ebpf, n))
            .sum()
    }

    /// The `--off-cpu` front end, when the split is on.
    #[must_use]
    pub fn sched_front(&self) -> Option<SchedFront> {
        self.sched_front
    }

    /// Whether 32-bit (ia32) processes' calls are timed too.
    #[must_use]
    pub fn times_compat(&self) -> bool {
        self.compat
    }

    /// `kernel.pid_max` now, if it was raised past the size the per-thread maps were given at
    /// the start: threads and processes numbered above that size are not traced.
    #[must_use]
    pub fn pid_max_raised(&self) -> Option<(u32, u32)> {
        if self.per_thread_hash {
            return None;
        }
        let now = environment::pid_max();
        (now > self.pid_max).then_some((self.pid_max, now))
    }

    /// `--cgroup`: every id of cgroup i (itself and those below it) → process index i + 1.
    fn write_cgroups(&mut self, cgroups: &[crate::cgroup::Cgroup]) -> Result<(), SetupError> {
        if cgroups.is_empty() {
            return Ok(());
        }
        let mut map: aya::maps::HashMap<&mut MapData, u64, u32> = self.map_mut(map::CGROUPS)?;
        for (i, cgroup) in cgroups.iter().enumerate() {
            let index = i as u32 + 1;
            for &id in &cgroup.ids {
                map.insert(id, index, 0).map_err(|e| {
                    SetupError::bpf(format!("writing cgroup {} to CGROUPS", cgroup.label), e)
                })?;
            }
        }
        Ok(())
    }

    /// The front end timing the syscalls, and with `auto`, why those preferred were not used.
    #[must_use]
    pub fn syscall_front(&self) -> &SyscallFront {
        &self.syscall_front
    }

    /// `--off-cpu`'s programs, when the split is on.
    fn attach_sched(&mut self) -> Result<(), SetupError> {
        match self.sched_front {
            Some(SchedFront::Btf) => {
                self.attach(program::BTF_SCHED_WAKEUP, &AttachTo::btf("sched_wakeup"))?;
                self.attach(program::BTF_SCHED_SWITCH, &AttachTo::btf("sched_switch"))?;
            }
            Some(SchedFront::Classic(_)) => {
                self.attach(
                    program::SCHED_WAKEUP,
                    &AttachTo::tracepoint("sched", "sched_wakeup"),
                )?;
                self.attach(
                    program::SCHED_SWITCH,
                    &AttachTo::tracepoint("sched", "sched_switch"),
                )?;
            }
            None => {}
        }
        Ok(())
    }

    /// The programs `front` lists. Where a front end with another after it in `auto`'s order
    /// is refused at attach (fentry on a locked-down kernel), that front end and why, on
    /// which `Session::start` loads the programs again for the next and says why; where it
    /// was insisted on, one line of why.
    fn attach_syscalls(
        &mut self,
        front: SyscallFront,
        attach: SyscallAttach,
        profiler: bool,
    ) -> Result<Option<(AttachPoint, String)>, SetupError> {
        for (point, why) in &front.passed_by {
            log::debug!("syscalls not on {}: {why}", point.front().name);
        }
        // The compat programs run for every syscall, 64-bit ones too: attached so that they
        // run outside the window the front end's programs time (a tracepoint calls its probes
        // in the order they were attached): the enter program before the syscall
        // tracepoints', the exit program after them. Until compat_exit is attached a 32-bit
        // call's entry may go unanswered; that is before `arm`, and the thread's next traced
        // call replaces it.
        let compat = self.compat && !front.front().times_32_bit;
        if compat {
            self.attach(program::COMPAT_ENTER, &AttachTo::raw("sys_enter"))?;
        }
        let before = self.links.len();
        for a in &front.attachments {
            if let Err(e) = self.attach(&a.program, &a.to) {
                let point = front.point;
                // The last resort's error, or a floor's that --attach does not offer, as it is.
                if point == AttachPoint::last_resort() || point.front().help.is_none() {
                    return Err(e);
                }
                attach::detach_all(self.links.drain(before..).map(|(_, l)| l).collect());
                let why = why_refused(&e);
                if profiler && attach == SyscallAttach::Auto {
                    return Ok(Some((point, why)));
                }
                return Err(SetupError::FrontUnavailable {
                    front: point.front().name,
                    why,
                });
            }
        }
        if compat {
            self.attach(program::COMPAT_EXIT, &AttachTo::raw("sys_exit"))?;
        }
        self.syscall_front = front;
        if profiler {
            self.attach_every()?;
        }
        Ok(None)
    }

    /// Every call counted where [`CountEvery`] asks: inside the compat programs where they
    /// run (`count_in_compat`), else, for `Always` alone, by `every_enter`/`every_exit`.
    fn attach_every(&mut self) -> Result<(), SetupError> {
        if self.count_in_compat {
            self.every = true;
        } else if self.count_every == CountEvery::Always {
            self.attach(program::EVERY_ENTER, &AttachTo::raw("sys_enter"))?;
            self.attach(program::EVERY_EXIT, &AttachTo::raw("sys_exit"))?;
            self.every = true;
        }
        Ok(())
    }

    /// Forks followed, exits seen.
    fn attach_process_tracking(&mut self, follow_forks: bool) -> Result<(), SetupError> {
        if follow_forks {
            self.attach(
                program::TASK_NEWTASK,
                &AttachTo::tracepoint("task", "task_newtask"),
            )?;
        }
        let exit = AttachTo::tracepoint("sched", "sched_process_exit");
        self.attach(program::PROCESS_EXIT, &exit)
    }

    /// Attaches `program` to `to`, keeping the link until the session ends.
    fn attach(&mut self, program: &str, to: &AttachTo) -> Result<(), SetupError> {
        let link = attach::attach(&mut self.ebpf, program, to)?;
        self.links.push((program.to_owned(), link));
        Ok(())
    }

    fn map<'a, M>(&'a self, name: &str) -> Result<M, SetupError>
    where
        M: TryFrom<&'a aya::maps::Map>,
        <M as TryFrom<&'a aya::maps::Map>>::Error: Into<anyhow::Error>,
    {
        let map = self.ebpf.map(name).ok_or_else(|| {
            SetupError::bpf(
                format!("map {name}"),
                anyhow::anyhow!("missing from the object"),
            )
        })?;
        M::try_from(map).map_err(|e| SetupError::bpf(format!("map {name}"), e.into()))
    }

    fn map_mut<'a, M>(&'a mut self, name: &str) -> Result<M, SetupError>
    where
        M: TryFrom<&'a mut aya::maps::Map>,
        <M as TryFrom<&'a mut aya::maps::Map>>::Error: Into<anyhow::Error>,
    {
        let map = self.ebpf.map_mut(name).ok_or_else(|| {
            SetupError::bpf(
                format!("map {name}"),
                anyhow::anyhow!("missing from the object"),
            )
        })?;
        M::try_from(map).map_err(|e| SetupError::bpf(format!("map {name}"), e.into()))
    }
}

/// Where `__syscall_nr` and `ret` are in the context BPF programs on `sys_exit_*` really get.
/// The kernel hands them a copy of the record it builds itself (`perf_call_bpf_exit`). Kernels
/// that build it with `struct trace_entry` as its header agree with the format file; older ones
/// (seen: Debian's 6.1.0-57-rt, whose format file puts `__syscall_nr` at 12) used an 8-byte
/// header whatever the record's, with the number at 8 as an unsigned long. Nothing in tracefs or
/// BTF says which a kernel does, so `ctx_probe` is attached alone to sys_exit_getppid and this
/// process calls getppid(): the number is where 110 (x86_64's getppid) is, the return value
/// where our parent's pid is.
pub fn probe_sys_exit_context(format: &RecordLayout) -> Result<(u32, u32), SetupError> {
    const TRACEPOINT: &str = "syscalls:sys_exit_getppid";
    let me = std::process::id();
    let mut ebpf = EbpfLoader::new()
        .override_global(
            map::CONFIG,
            &profiler_common::Config {
                probe_tgid: me,
                ..profiler_common::Config::OFF
            },
            true,
        )
        .load(PROBE_OBJECT)
        .map_err(|e| SetupError::bpf("loading the eBPF object (context probe)", e))?;
    let link = attach::attach(
        &mut ebpf,
        program::CTX_PROBE,
        &AttachTo::tracepoint("syscalls", "sys_exit_getppid"),
    )?;
    // SAFETY: getppid cannot fail; the raw syscall, so libc cannot answer from a cache.
    let ppid = unsafe { libc::syscall(libc::SYS_getppid) } as u64;
    let seen: Array<&MapData, [u64; 3]> = Array::try_from(
        ebpf.map(map::CTX_PROBE)
            .ok_or_else(|| SetupError::bpf("map CTX_PROBE", anyhow::anyhow!("missing")))?,
    )
    .map_err(|e| SetupError::bpf("map CTX_PROBE", e))?;
    let [pid_tgid, first, second] = seen
        .get(&0, 0)
        .map_err(|e| SetupError::bpf("reading CTX_PROBE", e))?;
    drop(link);
    let getppid = libc::SYS_getppid as u64;
    let problem = |what: String| SetupError::RecordLayout {
        tracepoint: TRACEPOINT.to_owned(),
        problem: what,
    };
    if pid_tgid >> 32 != u64::from(me) {
        return Err(problem(
            "the probe saw no getppid() of this process return".to_owned(),
        ));
    }
    let nr = if first & 0xffff_ffff == getppid {
        RECORD_HEADER
    } else if first >> 32 == getppid && format.sys_exit_nr == RECORD_HEADER + 4 {
        RECORD_HEADER + 4
    } else {
        return Err(problem(format!(
            "no syscall number {getppid} in the context BPF gets (0x{first:x} after the header; the format file says {})",
            format.sys_exit_nr
        )));
    };
    if second != ppid {
        return Err(problem(format!(
            "no return value {ppid} in the context BPF gets (0x{second:x} at {}; the format file says {})",
            RECORD_HEADER + 8,
            format.sys_exit_ret
        )));
    }
    Ok((nr, RECORD_HEADER + 8))
}

// Compile-time guard: the per-process map must have room for the named and forked ranges.
const _: () = assert!(FIRST_FORKED_PROCESS < OVERFLOW_PROCESS && OVERFLOW_PROCESS < MAX_PROCESSES);

/// The kernel times every program run while this is alive (for `profiler bench overhead` and
/// `run --explain-cost`): the `BPF_ENABLE_STATS` command of bpf(2) (5.8+), whose statistics stay
/// on while its file descriptor is open. The kernel counts the holders, so two profilers at once,
/// or one killed with SIGKILL, leave `kernel.bpf_stats_enabled` as it was: nothing machine-wide
/// is written.
pub struct BpfStats {
    _fd: std::os::fd::OwnedFd,
}

impl BpfStats {
    /// Turns the statistics on until drop; one line naming what to do where the kernel refuses.
    pub fn enable() -> anyhow::Result<Self> {
        aya::sys::enable_stats(aya::sys::Stats::RunTime)
            .map(|fd| Self { _fd: fd })
            .map_err(|e| {
                anyhow::anyhow!(
                    "the kernel's program statistics (bpf(2) BPF_ENABLE_STATS, Linux 5.8+) could not be turned on: {e}; run as root or with CAP_SYS_ADMIN"
                )
            })
    }
}

/// A syscall's slot-table entry: its slot, and its flags (an event count returned, a return
/// in a new child).
fn slot_entry(slot: usize, s: &Syscall) -> u32 {
    let mut entry = encode_slot_entry(slot as u32, s.return_unit().is_some());
    if s.forks() {
        entry |= profiler_common::SLOT_FLAG_FORKS;
    }
    if crate::stats::ReturnUnit::sized(&s.name) {
        entry |= profiler_common::SLOT_FLAG_SIZED;
    }
    entry
}

/// Why the kernel refused a front end's program, in one line (the verifier's log left out).
fn why_refused(error: &SetupError) -> String {
    if let SetupError::FrontUnavailable { why, .. } = error {
        return why.clone();
    }
    let text = error.to_string();
    let line = text.lines().next().unwrap_or_default();
    let line = line.trim_end_matches("; verifier log tail:");
    match environment::locked_down() {
        Some(mode) => format!("the kernel is locked down ({mode}) and refused it"),
        None if line.contains("Operation not permitted") => {
            "the kernel refused it (EPERM: a kernel locked down for integrity refuses fentry and kprobes)"
                .to_owned()
        }
        None => format!("the kernel refused it ({line})"),
    }
}

/// Why this kernel will not run programs on `point`, or `None` when it does: its empty pair is
/// loaded and attached to close (`profiler bench overhead` and the tests ask).
#[must_use]
pub fn front_refused(point: AttachPoint) -> Option<String> {
    let close = match Syscall::resolve("close") {
        Ok(close) => close,
        Err(e) => return Some(e.to_string()),
    };
    let config = SessionConfig {
        programs: Programs::Empty(point),
        compat: false,
        ..SessionConfig::new(vec![close], Target::Processes(vec![std::process::id()]))
    };
    Session::start(&config).err().map(|e| why_refused(&e))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use profiler_common::names::{self, map};

    use super::{BENCH_OBJECT, EBPF_OBJECT, PROBE_OBJECT};

    /// The names user space looks maps and programs up by (`profiler_common::names`) are the
    /// kernel side's, both ways: every program of the objects has a role, every named program
    /// and map is in one of them.
    #[test]
    fn the_object_has_exactly_the_named_programs_and_maps() {
        let mut programs = BTreeSet::new();
        let mut maps = BTreeSet::new();
        for object in [EBPF_OBJECT, PROBE_OBJECT, BENCH_OBJECT] {
            let object = aya_obj::Object::parse(object).expect("the built objects parse");
            programs.extend(object.programs.into_keys());
            // Sections (.rodata: CONFIG and LAYOUT, .bss, license) are not maps of a name;
            // AYA_LOGS is aya-log's own.
            maps.extend(
                object
                    .maps
                    .into_keys()
                    .filter(|m| !m.starts_with('.') && m != "AYA_LOGS"),
            );
        }
        for p in &programs {
            assert!(
                names::role_of(p).is_some(),
                "program {p} has no role in profiler_common::names"
            );
        }
        for (p, _) in names::PROGRAMS {
            assert!(
                programs.contains(p),
                "names::PROGRAMS has {p}, no object does"
            );
        }
        let slots = programs
            .iter()
            .filter(|p| names::slot_program(p).is_some())
            .count();
        assert_eq!(
            slots,
            4 * profiler_common::MAX_SYSCALL_SLOTS,
            "{programs:?}"
        );
        let named: BTreeSet<String> = map::ALL.iter().map(|m| (*m).to_owned()).collect();
        assert_eq!(maps, named, "the objects' maps against names::map::ALL");
    }
}
