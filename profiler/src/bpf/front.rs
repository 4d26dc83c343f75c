//! Which front end times the syscalls, chosen at load (`--attach tracepoint|fentry|auto`):
//! the `syscalls:` tracepoints, or fentry/fexit on the functions the syscall tables call.
//!
//! Once any syscall tracepoint is enabled, every task of the machine takes the syscall
//! entry's slow path on every call (`SYSCALL_WORK_SYSCALL_TRACEPOINT`), traced or not, and a
//! traced call's record is built before the program runs. fentry/fexit attach a trampoline to
//! the traced functions only: untraced syscalls cost nothing. The kernel refuses them where
//! it is locked down (integrity) and needs BTF; `auto` tries them and falls back to the
//! tracepoints, saying why (`Session::syscall_front`).

use std::sync::OnceLock;

use aya::{Btf, BtfError};
use aya_obj::btf::BtfKind;

use super::{
    Syscall,
    syscall_entries::{IA32_ENTRIES, X64_ENTRIES, function_of},
};

/// How the user asked syscalls to be timed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SyscallAttach {
    /// fentry/fexit where the kernel accepts them, the tracepoints otherwise.
    #[default]
    Auto,
    /// The `syscalls:sys_enter_*`/`sys_exit_*` tracepoints.
    Tracepoint,
    /// fentry/fexit on the syscalls' functions; an error where the kernel refuses them.
    Fentry,
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
            Ok(value) => <Self as clap::ValueEnum>::from_str(&value, true)
                .map_err(|_| format!("{}={value}: expected tracepoint, fentry or auto", Self::ENV)),
        }
    }
}

/// The front end a session uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyscallFront {
    /// The `syscalls:` tracepoints; with `auto`, why fentry was not used.
    Tracepoint(Option<String>),
    /// fentry/fexit on these functions.
    Fentry(FentryTargets),
}

impl SyscallFront {
    /// `tracepoint` or `fentry`, as `--attach` names them.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Tracepoint(_) => "tracepoint",
            Self::Fentry(_) => "fentry",
        }
    }

    /// For a report's settings: `fentry`, `tracepoint`, or `tracepoint (fentry: why not)`.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Self::Tracepoint(Some(why)) => format!("tracepoint (fentry: {why})"),
            other => other.name().to_owned(),
        }
    }
}

/// The kernel functions the fentry front end attaches to, by slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FentryTargets {
    /// Each slot's 64-bit function (`__x64_sys_close`).
    pub x64: Vec<String>,
    /// Each slot's ia32 function where 32-bit calls are timed and the syscall has one.
    pub ia32: Vec<Option<String>>,
    /// The ia32 socketcall function, when a traced syscall (accept) is reached only through it
    /// by 32-bit processes (counted as not timed there).
    pub socketcall: Option<String>,
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
pub(super) fn fentry_targets(syscalls: &[Syscall], compat: bool) -> Result<FentryTargets, String> {
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

    #[test]
    fn the_environment_names_a_front_end_or_is_refused() {
        for (value, expected) in [
            ("fentry", Ok(SyscallAttach::Fentry)),
            ("Tracepoint", Ok(SyscallAttach::Tracepoint)),
            ("auto", Ok(SyscallAttach::Auto)),
        ] {
            assert_eq!(
                <SyscallAttach as clap::ValueEnum>::from_str(value, true).map_err(|_| ()),
                expected
            );
        }
        assert!(<SyscallAttach as clap::ValueEnum>::from_str("kprobe", true).is_err());
    }
}
