//! The front ends: the mechanisms that run programs at a syscall's entry and exit. Each is one
//! [`FrontEnd`] below, which declares everything the rest of the profiler knows of it: whether
//! `--attach` offers it, why `auto` would pass it by, where the profiler's programs attach
//! for a set of syscalls, whether they run for the whole machine, and the floors
//! `profiler bench overhead` measures it by (a do-nothing pair, a minimal timer). The session
//! ([`super::Session`]) attaches what a front end lists, in its order, and asks it nothing
//! by name.
//!
//! Once any syscall tracepoint is enabled, every task of the machine takes the syscall
//! entry's slow path on every call (`SYSCALL_WORK_SYSCALL_TRACEPOINT`), traced or not, and a
//! traced call's record is built before the program runs. fentry/fexit attach a trampoline to
//! the traced functions only: untraced syscalls cost nothing. The kernel refuses them where
//! it is locked down (integrity) and needs BTF; `auto` tries them and falls back to the
//! tracepoints, saying why ([`SyscallFront::describe`]).

use std::sync::{LazyLock, OnceLock};

use aya::{Btf, BtfError};
use aya_obj::btf::BtfKind;
use profiler_common::names::program;

use super::{
    Syscall,
    attach::AttachTo,
    syscall_entries::{IA32_ENTRIES, X64_ENTRIES, function_of},
};

/// A front end, by name: the key of [`FrontEnd`]'s descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttachPoint {
    /// `syscalls:sys_enter_NAME` / `sys_exit_NAME`, one pair per syscall.
    Tracepoint,
    /// The raw `sys_enter` / `sys_exit` tracepoints: one pair for every syscall of every
    /// process (the benchmark's floors; the profiler's 32-bit and every-call programs use
    /// them beside a front end).
    RawTracepoint,
    /// fentry/fexit on the functions the syscall tables call.
    Fentry,
}

impl AttachPoint {
    /// Every front end, in `auto`'s order of preference: the first that this kernel gives
    /// the profiler is used.
    pub const ALL: [Self; 3] = [Self::Fentry, Self::Tracepoint, Self::RawTracepoint];

    /// Its descriptor.
    #[must_use]
    pub fn front(self) -> &'static FrontEnd {
        match self {
            Self::Tracepoint => &TRACEPOINT,
            Self::RawTracepoint => &RAW_TRACEPOINT,
            Self::Fentry => &FENTRY,
        }
    }

    /// The front ends the profiler times syscalls on, in `auto`'s order.
    pub fn profiler_fronts() -> impl Iterator<Item = Self> {
        Self::ALL.into_iter().filter(|p| p.front().help.is_some())
    }

    /// The front end `auto` falls back to, which it never passes by: the last it offers
    /// (a unit test holds it to the tracepoints).
    #[must_use]
    pub fn last_resort() -> Self {
        Self::profiler_fronts().last().unwrap_or(Self::Tracepoint)
    }
}

/// A program and where it attaches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attachment {
    /// The program's name in the object.
    pub program: String,
    /// Where it goes.
    pub to: AttachTo,
}

impl Attachment {
    fn new(program: impl Into<String>, to: AttachTo) -> Self {
        Self {
            program: program.into(),
            to,
        }
    }
}

/// Two programs, one at a syscall's entry and one at its exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pair {
    /// The entry's program.
    pub enter: &'static str,
    /// The exit's.
    pub exit: &'static str,
}

/// What the profiler knows of a front end. Where its programs attach is always listed exits
/// first: a call that enters once its entry program is attached then finds its exit program
/// there.
pub struct FrontEnd {
    /// As `--attach`, `PROFILER_ATTACH` and the reports name it.
    pub name: &'static str,
    /// `--attach`'s help for it; `None` where the profiler does not time syscalls on it
    /// (the raw tracepoints: the benchmark's floors only).
    pub help: Option<&'static str>,
    /// Whether its programs run for every syscall of the machine, traced or not.
    pub machine_wide: bool,
    /// Whether its own attach points time 32-bit calls; where not, the raw compat pair is
    /// attached around them (and counts every call too, where asked).
    pub times_32_bit: bool,
    /// Whether its programs can be preempted, so that a run the kernel skips (its
    /// `recursion_misses`) is a call not seen, and reported.
    pub may_skip_runs: bool,
    /// Why `auto` passes it by on this kernel, before its attach points are looked for
    /// (`None`: it is tried).
    pub passed_by: fn() -> Option<String>,
    /// Where the profiler's programs attach to time `syscalls` (and their 32-bit calls too,
    /// with `compat`, where it times them), or why this kernel has no place for them.
    pub profiler: fn(&[Syscall], bool) -> Result<Vec<Attachment>, String>,
    /// The benchmark's floors on it: do-nothing programs, and the least a syscall timer must
    /// do (a clock read at each end, the difference added to one counter).
    pub empty: Pair,
    pub timer: Pair,
    /// Where a floor pair attaches to time `syscalls`.
    pub floor: fn(&[Syscall], Pair) -> Result<Vec<Attachment>, String>,
    /// How the benchmark's rows name its floors: `empty pair{row}`.
    pub row: &'static str,
}

/// The `syscalls:` tracepoints: a pair per syscall; 32-bit calls need the raw compat pair
/// (they do not reach these tracepoints).
pub static TRACEPOINT: FrontEnd = FrontEnd {
    name: "tracepoint",
    help: Some("the syscalls:sys_enter_NAME/sys_exit_NAME tracepoints (every kernel)"),
    machine_wide: false,
    times_32_bit: false,
    may_skip_runs: false,
    passed_by: || None,
    profiler: |syscalls, _compat| {
        // The sized syscalls (read's count) enter through the program that keeps their
        // requested size.
        let enter = |s: &Syscall| {
            if crate::stats::ReturnUnit::sized(&s.name) {
                program::SYSCALL_ENTER_SIZED
            } else {
                program::SYSCALL_ENTER
            }
        };
        Ok(tracepoint_pairs(syscalls, |_| program::SYSCALL_EXIT, enter))
    },
    empty: Pair {
        enter: program::NOOP,
        exit: program::NOOP,
    },
    timer: Pair {
        enter: program::TIMER_ENTER,
        exit: program::TIMER_EXIT,
    },
    floor: |syscalls, pair| Ok(tracepoint_pairs(syscalls, |_| pair.exit, |_| pair.enter)),
    row: "",
};

/// The raw `sys_enter`/`sys_exit` tracepoints: every syscall of the machine runs them.
pub static RAW_TRACEPOINT: FrontEnd = FrontEnd {
    name: "raw_tp",
    help: None,
    machine_wide: true,
    times_32_bit: true,
    may_skip_runs: false,
    passed_by: || None,
    profiler: |_, _| Err("the profiler does not time syscalls on the raw tracepoints".to_owned()),
    empty: Pair {
        enter: program::RAW_NOOP,
        exit: program::RAW_NOOP,
    },
    timer: Pair {
        enter: program::RAW_TIMER_ENTER,
        exit: program::RAW_TIMER_EXIT,
    },
    floor: |_, pair| {
        Ok(vec![
            Attachment::new(pair.exit, AttachTo::raw("sys_exit")),
            Attachment::new(pair.enter, AttachTo::raw("sys_enter")),
        ])
    },
    row: ", raw_tp",
};

/// fentry/fexit on the functions the syscall tables call: a pair of programs per slot and per
/// table (a loaded tracing program has one target).
pub static FENTRY: FrontEnd = FrontEnd {
    name: "fentry",
    help: Some(
        "fentry/fexit on the syscalls' functions: untraced syscalls cost nothing (needs BTF; a locked-down kernel refuses it)",
    ),
    machine_wide: false,
    times_32_bit: true,
    may_skip_runs: true,
    passed_by: || {
        // A locked-down kernel refuses fentry whatever else holds: said first.
        super::environment::locked_down()
            .map(|mode| format!("the kernel is locked down ({mode}): fentry is refused there"))
            .or_else(preemptible_kernel)
    },
    profiler: |syscalls, compat| {
        let targets = fentry_targets(syscalls, compat)?;
        let mut attachments = Vec::new();
        let slot = |prefix: &str, slot: usize| format!("{prefix}{slot}");
        for (n, function) in targets.x64.iter().enumerate() {
            attachments.extend(fentry_pair(
                &slot(program::FENTRY_SLOT, n),
                &slot(program::FEXIT_SLOT, n),
                function,
            ));
        }
        for (n, function) in targets.ia32.iter().enumerate() {
            if let Some(function) = function {
                attachments.extend(fentry_pair(
                    &slot(program::FENTRY32_SLOT, n),
                    &slot(program::FEXIT32_SLOT, n),
                    function,
                ));
            }
        }
        if let Some(function) = targets.socketcall {
            attachments.push(Attachment::new(
                program::FENTRY_SOCKETCALL,
                AttachTo::Fentry { function },
            ));
        }
        Ok(attachments)
    },
    empty: Pair {
        enter: program::FENTRY_NOOP,
        exit: program::FEXIT_NOOP,
    },
    timer: Pair {
        enter: program::FENTRY_TIMER,
        exit: program::FEXIT_TIMER,
    },
    // The floors have one program each, so one target: the first syscall's function.
    floor: |syscalls, pair| {
        let targets = fentry_targets(&syscalls[..1], false)?;
        Ok(fentry_pair(pair.enter, pair.exit, &targets.x64[0]).to_vec())
    },
    row: ", fentry",
};

/// Each syscall's exit tracepoint, then each one's entry tracepoint.
fn tracepoint_pairs(
    syscalls: &[Syscall],
    exit: impl Fn(&Syscall) -> &'static str,
    enter: impl Fn(&Syscall) -> &'static str,
) -> Vec<Attachment> {
    let at = |s: &Syscall, end: &str| {
        AttachTo::tracepoint("syscalls", &format!("sys_{end}_{}", s.tracepoint))
    };
    let exits = syscalls
        .iter()
        .map(|s| Attachment::new(exit(s), at(s, "exit")));
    let enters = syscalls
        .iter()
        .map(|s| Attachment::new(enter(s), at(s, "enter")));
    exits.chain(enters).collect()
}

/// `enter` and `exit` on `function`'s entry and return, the exit first.
fn fentry_pair(enter: &str, exit: &str, function: &str) -> [Attachment; 2] {
    let function = function.to_owned();
    [
        Attachment::new(
            exit,
            AttachTo::Fexit {
                function: function.clone(),
            },
        ),
        Attachment::new(enter, AttachTo::Fentry { function }),
    ]
}

/// How the user asked syscalls to be timed (`--attach`): one front end, or `auto`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SyscallAttach {
    /// The first front end in [`AttachPoint::ALL`]'s order that this kernel gives the
    /// profiler, the others' reasons said.
    #[default]
    Auto,
    /// This one; an error where the kernel refuses it.
    Only(AttachPoint),
}

impl clap::ValueEnum for SyscallAttach {
    fn value_variants<'a>() -> &'a [Self] {
        static VARIANTS: LazyLock<Vec<SyscallAttach>> = LazyLock::new(|| {
            std::iter::once(SyscallAttach::Auto)
                .chain(AttachPoint::profiler_fronts().map(SyscallAttach::Only))
                .collect()
        });
        &VARIANTS
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(match self {
            Self::Auto => clap::builder::PossibleValue::new("auto").help(
                "the first of those below that this kernel gives, saying why not the others (-vv)",
            ),
            Self::Only(point) => {
                let front = point.front();
                clap::builder::PossibleValue::new(front.name).help(front.help?)
            }
        })
    }
}

impl SyscallAttach {
    /// The environment variable that sets the default where no `--attach` is given (the
    /// guest suite runs the kernel tests under each front end with it).
    pub const ENV: &'static str = "PROFILER_ATTACH";

    /// The default where a session's configuration names none (`--attach` travels in
    /// [`SessionConfig::syscall_attach`](super::SessionConfig::syscall_attach)):
    /// `PROFILER_ATTACH`, else `auto`. An unknown value of the variable is refused when a
    /// session starts.
    pub fn default_choice() -> Result<Self, String> {
        match std::env::var(Self::ENV) {
            Err(_) => Ok(Self::Auto),
            Ok(value) => <Self as clap::ValueEnum>::from_str(&value, true).map_err(|_| {
                let names: Vec<&str> = AttachPoint::profiler_fronts()
                    .map(|p| p.front().name)
                    .collect();
                format!(
                    "{}={value}: expected {} or auto",
                    Self::ENV,
                    names.join(", ")
                )
            }),
        }
    }

    /// The front ends to try, in order.
    #[must_use]
    pub fn candidates(self) -> Vec<AttachPoint> {
        match self {
            Self::Auto => AttachPoint::profiler_fronts().collect(),
            Self::Only(point) => vec![point],
        }
    }
}

/// The front end a session uses: where its programs are, and why `auto` passed others by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyscallFront {
    /// Which.
    pub point: AttachPoint,
    /// The profiler's programs on it, in the order attached.
    pub attachments: Vec<Attachment>,
    /// The front ends `auto` preferred and passed by, with why.
    pub passed_by: Vec<(AttachPoint, String)>,
}

impl SyscallFront {
    /// Its descriptor.
    #[must_use]
    pub fn front(&self) -> &'static FrontEnd {
        self.point.front()
    }

    /// As `--attach` names it.
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.front().name
    }

    /// Why `auto` did not use `point`, where it passed it by.
    #[must_use]
    pub fn why_not(&self, point: AttachPoint) -> Option<&str> {
        self.passed_by
            .iter()
            .find(|(p, _)| *p == point)
            .map(|(_, why)| why.as_str())
    }

    /// For a report's settings: `fentry`, `tracepoint`, or `tracepoint (fentry: why not)`.
    #[must_use]
    pub fn describe(&self) -> String {
        let mut text = self.name().to_owned();
        if !self.passed_by.is_empty() {
            let why: Vec<String> = self
                .passed_by
                .iter()
                .map(|(p, why)| format!("{}: {why}", p.front().name))
                .collect();
            text.push_str(&format!(" ({})", why.join("; ")));
        }
        text
    }

    /// A floor of the benchmark on `point`: its do-nothing pair, or with `timer` its minimal
    /// timer, timing `syscalls`.
    pub(super) fn floor(
        point: AttachPoint,
        timer: bool,
        syscalls: &[Syscall],
    ) -> Result<Self, (AttachPoint, String)> {
        let front = point.front();
        let pair = if timer { front.timer } else { front.empty };
        Ok(Self {
            point,
            attachments: (front.floor)(syscalls, pair).map_err(|why| (point, why))?,
            passed_by: Vec::new(),
        })
    }

    /// The floor of `--off-cpu`: a do-nothing program on the raw `sched_wakeup` and
    /// `sched_switch`, and no syscall's.
    pub(super) fn empty_sched() -> Self {
        Self {
            point: AttachPoint::RawTracepoint,
            attachments: ["sched_wakeup", "sched_switch"]
                .into_iter()
                .map(|name| Attachment::new(program::RAW_NOOP, AttachTo::raw(name)))
                .collect(),
            passed_by: Vec::new(),
        }
    }

    /// The front end `attach` asks for, with the reasons of those passed by so far: the
    /// first of the candidates this kernel gives the profiler. `Err`: none (why, for the
    /// last one tried).
    pub(super) fn plan(
        attach: SyscallAttach,
        syscalls: &[Syscall],
        compat: bool,
        mut passed_by: Vec<(AttachPoint, String)>,
    ) -> Result<Self, (AttachPoint, String)> {
        let candidates: Vec<AttachPoint> = attach
            .candidates()
            .into_iter()
            .filter(|p| !passed_by.iter().any(|(q, _)| q == p))
            .collect();
        let mut last = None;
        for (i, point) in candidates.iter().copied().enumerate() {
            let front = point.front();
            // Passed by only where another follows (never where insisted on: one candidate).
            let fallback = i + 1 < candidates.len();
            let why = match fallback.then(front.passed_by).flatten() {
                Some(why) => Err(why),
                None => (front.profiler)(syscalls, compat),
            };
            match why {
                Ok(attachments) => {
                    return Ok(Self {
                        point,
                        attachments,
                        passed_by,
                    });
                }
                Err(why) if fallback => passed_by.push((point, why)),
                Err(why) => last = Some((point, why)),
            }
        }
        Err(last.unwrap_or_else(|| {
            (
                AttachPoint::last_resort(),
                "every front end was refused".to_owned(),
            )
        }))
    }
}

/// The kernel functions the fentry front end attaches to, by slot.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FentryTargets {
    /// Each slot's 64-bit function (`__x64_sys_close`).
    x64: Vec<String>,
    /// Each slot's ia32 function where 32-bit calls are timed and the syscall has one.
    ia32: Vec<Option<String>>,
    /// The ia32 socketcall function, when a traced syscall (accept) is reached only through it
    /// by 32-bit processes (counted as not timed there).
    socketcall: Option<String>,
}

/// Why fentry programs would not be exact on this kernel, or `None`: it preempts kernel code
/// (`PREEMPT_RT`, `preempt=full` or `lazy`). Tracepoint programs run with preemption disabled;
/// fentry/fexit ones run only with migration disabled, so on such a kernel a program can be
/// preempted mid-update and a second run on its CPU is skipped (a call missed) or interleaved.
/// `none` and `voluntary`, Debian's default, never preempt a program.
#[must_use]
pub fn preemptible_kernel() -> Option<String> {
    let version = std::fs::read_to_string("/proc/sys/kernel/version").unwrap_or_default();
    if version.contains("PREEMPT_RT") {
        return Some("the kernel is PREEMPT_RT".to_owned());
    }
    let model = if version.contains("PREEMPT_DYNAMIC") {
        // The mode chosen at boot or since, in parentheses: "none voluntary (full) lazy".
        let debugfs = std::fs::read_to_string("/sys/kernel/debug/sched/preempt")
            .ok()
            .and_then(|t| {
                let start = t.find('(')? + 1;
                Some(t[start..start + t[start..].find(')')?].to_owned())
            });
        let cmdline = || {
            std::fs::read_to_string("/proc/cmdline")
                .ok()?
                .split_whitespace()
                .find_map(|w| w.strip_prefix("preempt=").map(str::to_owned))
        };
        let built = || {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
            // The build config: /boot's copy, else the kernel's own (/proc/config.gz).
            let config = std::fs::read_to_string(format!("/boot/config-{}", release.trim()))
                .ok()
                .or_else(proc_config)?;
            ["NONE", "VOLUNTARY", "LAZY"]
                .into_iter()
                .find(|m| config.lines().any(|l| l == format!("CONFIG_PREEMPT_{m}=y")))
                .map(str::to_lowercase)
                .or_else(|| Some("full".to_owned()))
        };
        debugfs.or_else(cmdline).or_else(built)
    } else if version.contains("PREEMPT") {
        Some("full".to_owned())
    } else {
        Some("voluntary".to_owned())
    };
    match model.as_deref() {
        Some("none" | "voluntary") => None,
        Some(model) => Some(format!("the kernel preempts kernel code (preempt={model})")),
        None => Some("the kernel's preemption model could not be read".to_owned()),
    }
}

/// `/proc/config.gz` (CONFIG_IKCONFIG_PROC), decompressed by `zcat`; `None` without either.
fn proc_config() -> Option<String> {
    let out = std::process::Command::new("zcat")
        .arg("/proc/config.gz")
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The parsed kernel BTF, read once per process (a few MB; each fentry program's load needs
/// it).
pub(super) fn kernel_btf() -> Result<&'static Btf, String> {
    static BTF: OnceLock<Result<Btf, String>> = OnceLock::new();
    BTF.get_or_init(|| Btf::from_sys_fs().map_err(|e: BtfError| e.to_string()))
        .as_ref()
        .map_err(Clone::clone)
}

/// The functions that time `syscalls` (and their 32-bit calls, with `compat`) on this kernel,
/// or why there are none: no BTF, or a function this kernel's BTF lacks.
fn fentry_targets(syscalls: &[Syscall], compat: bool) -> Result<FentryTargets, String> {
    let btf = kernel_btf().map_err(|e| format!("the kernel's BTF could not be read ({e})"))?;
    let has = |function: &str| btf.id_by_type_name_kind(function, BtfKind::Func).is_ok();
    let mut targets = FentryTargets {
        x64: Vec::new(),
        ia32: Vec::new(),
        socketcall: None,
    };
    for s in syscalls {
        let x64 = function_of(X64_ENTRIES, s.nr)
            .filter(|f| has(f))
            .ok_or_else(|| format!("the kernel has no function for {} in its BTF", s.name))?;
        targets.x64.push(x64.to_owned());
        let ia32 = match s.ia32_nr {
            Some(nr) if compat => Some(
                function_of(IA32_ENTRIES, nr)
                    .filter(|f| has(f))
                    .ok_or_else(|| {
                        format!(
                            "the kernel has no function for 32-bit {} in its BTF",
                            s.name
                        )
                    })?
                    .to_owned(),
            ),
            _ => None,
        };
        targets.ia32.push(ia32);
    }
    if compat && syscalls.iter().any(|s| s.ia32_nr.is_none()) {
        let socketcall = syscalls::x86::Sysno::socketcall.id() as u32;
        let function = function_of(IA32_ENTRIES, socketcall)
            .filter(|f| has(f))
            .ok_or("the kernel has no 32-bit socketcall function in its BTF")?;
        targets.socketcall = Some(function.to_owned());
    }
    Ok(targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_name_the_functions_32_bit_calls_really_enter() {
        let ia32 = |nr| function_of(IA32_ENTRIES, nr);
        assert_eq!(ia32(6), Some("__ia32_sys_close"));
        assert_eq!(ia32(180), Some("__ia32_sys_ia32_pread64"));
        assert_eq!(ia32(102), Some("__ia32_compat_sys_socketcall"));
        assert_eq!(ia32(17), None, "sys_ni_syscall is left out");
        let x64 = |nr| function_of(X64_ENTRIES, nr);
        assert_eq!(x64(3), Some("__x64_sys_close"));
        assert_eq!(x64(4), Some("__x64_sys_newstat"));
    }

    /// A syscall as `Syscall::resolve` would give it, without tracefs.
    fn syscall(name: &str, nr: u32) -> Syscall {
        Syscall {
            name: name.to_owned(),
            tracepoint: name.to_owned(),
            nr,
            ia32_nr: None,
        }
    }

    /// What the descriptors declare is what the object has: every program they attach is
    /// named in `profiler_common::names` with the role it plays there (the profiler's time
    /// syscalls, the floors are the benchmark's), and the tracepoints list each syscall's exit
    /// before any entry.
    #[test]
    fn each_front_end_declares_named_programs_exits_first() {
        use profiler_common::names::{Role, role_of};
        let syscalls = [syscall("close", 3), syscall("read", 0)];
        let tracepoint = (TRACEPOINT.profiler)(&syscalls, true).expect("always a place");
        let names: Vec<String> = tracepoint
            .iter()
            .map(|a| format!("{} {}", a.program, a.to))
            .collect();
        assert_eq!(
            names,
            [
                "syscall_exit syscalls:sys_exit_close",
                "syscall_exit syscalls:sys_exit_read",
                "syscall_enter syscalls:sys_enter_close",
                "syscall_enter_sized syscalls:sys_enter_read",
            ]
        );
        for a in &tracepoint {
            assert_eq!(role_of(&a.program), Some(Role::SyscallTiming), "{a:?}");
        }
        for point in AttachPoint::ALL {
            let front = point.front();
            for pair in [front.empty, front.timer] {
                for name in [pair.enter, pair.exit] {
                    assert_eq!(role_of(name), Some(Role::Probe), "{}: {name}", front.name);
                }
            }
            if point != AttachPoint::Fentry {
                let floor = (front.floor)(&syscalls, front.timer).expect("a place");
                let machine_wide = floor.iter().all(|a| matches!(a.to, AttachTo::Raw { .. }));
                assert_eq!(machine_wide, front.machine_wide, "{}", front.name);
            }
        }
        assert_eq!(AttachPoint::last_resort(), AttachPoint::Tracepoint);
        assert_eq!(
            AttachPoint::profiler_fronts().collect::<Vec<_>>(),
            [AttachPoint::Fentry, AttachPoint::Tracepoint]
        );
        // Insisting on the tracepoints gives them, with nothing passed by.
        let front = SyscallFront::plan(
            SyscallAttach::Only(AttachPoint::Tracepoint),
            &syscalls,
            true,
            Vec::new(),
        )
        .expect("the tracepoints are always planned");
        assert_eq!(
            (front.point, front.describe()),
            (AttachPoint::Tracepoint, "tracepoint".to_owned())
        );
        // auto, fentry refused at attach: the tracepoints, saying why.
        let front = SyscallFront::plan(
            SyscallAttach::Auto,
            &syscalls,
            true,
            vec![(AttachPoint::Fentry, "refused".to_owned())],
        )
        .expect("the tracepoints are always planned");
        assert_eq!(front.describe(), "tracepoint (fentry: refused)");
    }

    #[test]
    fn the_environment_names_a_front_end_or_is_refused() {
        for (value, expected) in [
            ("fentry", Ok(SyscallAttach::Only(AttachPoint::Fentry))),
            (
                "Tracepoint",
                Ok(SyscallAttach::Only(AttachPoint::Tracepoint)),
            ),
            ("auto", Ok(SyscallAttach::Auto)),
        ] {
            assert_eq!(
                <SyscallAttach as clap::ValueEnum>::from_str(value, true).map_err(|_| ()),
                expected
            );
        }
        for value in ["kprobe", "raw_tp"] {
            assert!(<SyscallAttach as clap::ValueEnum>::from_str(value, true).is_err());
        }
    }
}
