//! What the kernel programs need from the machine: privileges, tracefs, `pid_max`.

use std::{ffi::CString, fs, path::Path};

use crate::error::SetupError;

/// Where tracefs is normally mounted.
pub const TRACEFS: &str = "/sys/kernel/tracing";

const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// The one check before anything touches the tracing interfaces (resolving a syscall name reads
/// tracefs; a session loads programs): the privileges first, so that theirs is the error shown,
/// then tracefs mounted with its syscall tracepoints.
pub fn prepare() -> Result<(), SetupError> {
    check_privileges()?;
    ensure_tracefs().map_err(explain_lockdown)
}

/// The kernel's lockdown mode (`none`, `integrity`, `confidentiality`), when securityfs says.
#[must_use]
pub fn lockdown_mode() -> Option<String> {
    let text = fs::read_to_string("/sys/kernel/security/lockdown").ok()?;
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    Some(text[start..end].to_owned())
}

/// The lockdown mode where the kernel is locked down (`integrity` or `confidentiality`: both
/// refuse fentry and kprobes); `None` where it is not, or securityfs does not say.
#[must_use]
pub fn locked_down() -> Option<String> {
    lockdown_mode().filter(|mode| mode == "integrity" || mode == "confidentiality")
}

/// A setup failure on a kernel locked down for confidentiality, which refuses tracefs and BPF
/// reads of kernel memory, says that this is why (in one line). Integrity mode, which refuses
/// kprobes and fentry only, does not stop the profiler.
#[must_use]
pub fn explain_lockdown(error: SetupError) -> SetupError {
    if matches!(error, SetupError::NotPrivileged(_))
        || lockdown_mode().as_deref() != Some("confidentiality")
    {
        return error;
    }
    let cause = match error {
        SetupError::TracefsNotMounted => "tracefs could not be mounted".to_owned(),
        other => other
            .to_string()
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned(),
    };
    SetupError::LockedDown(cause)
}

/// Fails unless this process may load tracing programs: root, or CAP_BPF and CAP_PERFMON.
fn check_privileges() -> Result<(), SetupError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return Ok(());
    }
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let effective = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    let missing: Vec<&str> = [(CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON")]
        .into_iter()
        .filter(|&(cap, _)| effective & (1 << cap) == 0)
        .map(|(_, name)| name)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(SetupError::NotPrivileged(missing.join(" and ")))
    }
}

/// Fails when the kernel has no bpf() system call at all. An invalid command answers EINVAL
/// where BPF exists and ENOSYS where it was compiled out.
pub fn check_bpf() -> Result<(), SetupError> {
    // SAFETY: a bpf() call with an invalid command and no attribute pointer reads nothing.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, -1i32, std::ptr::null::<u8>(), 0u32) };
    if rc < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
        return Err(SetupError::NoBpf);
    }
    Ok(())
}

/// Makes sure `/sys/kernel/tracing/events/syscalls` can be read. The profiler never mounts
/// tracefs where the rest of the machine would see it: [`mount_tracefs_privately`], called
/// first thing by the binary, mounts it in a mount namespace of the profiler's own.
fn ensure_tracefs() -> Result<(), SetupError> {
    let events = Path::new(TRACEFS).join("events");
    match fs::read_dir(&events) {
        Ok(_) if events.join("syscalls").is_dir() => Ok(()),
        Ok(_) => Err(SetupError::NoSyscallTracepoints),
        // Mounted, but mode 0700 and this process is not root.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            Err(SetupError::TracefsUnreadable)
        }
        Err(_) => Err(SetupError::TracefsNotMounted),
    }
}

/// Whether tracefs is mounted at [`TRACEFS`] (its `events` folder is there).
#[must_use]
pub fn tracefs_mounted() -> bool {
    Path::new(TRACEFS).join("events").exists()
}

/// When tracefs is not mounted: moves this process into a mount namespace of its own (all
/// mounts private, so nothing propagates back) and mounts tracefs there, leaving the machine's
/// mount table as it was. The traced command started by `attach -- CMD` inherits the namespace.
///
/// Must run while the process has one thread: a namespace is per thread, and threads started
/// before would keep the old one. Returns whether it mounted; failures are left for
/// [`prepare`] to report.
///
/// # Panics
///
/// Never: the strings it builds are constants without NUL bytes.
pub fn mount_tracefs_privately() -> std::io::Result<bool> {
    if tracefs_mounted() {
        return Ok(false);
    }
    // SAFETY: unshare and mount take no pointers but the NUL-terminated strings below.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let root = CString::new("/").expect("no NUL in a constant");
        if libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        let target = CString::new(TRACEFS).expect("no NUL in a constant");
        let fstype = CString::new("tracefs").expect("no NUL in a constant");
        if libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    log::info!("mounted tracefs at {TRACEFS} in the profiler's own mount namespace");
    Ok(true)
}

/// `kernel.perf_event_paranoid`, or `None` when it cannot be read.
#[must_use]
pub fn perf_event_paranoid() -> Option<i32> {
    fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// `kernel.pid_max`: the size of the per-thread and per-process tables.
pub fn pid_max() -> u32 {
    fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4_194_304)
}

/// `kernel.threads-max`: how many threads can exist at once (the per-thread hash maps' bound).
#[must_use]
pub fn threads_max() -> u32 {
    fs::read_to_string("/proc/sys/kernel/threads-max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(u32::MAX)
}

/// Lifts RLIMIT_MEMLOCK for kernels that still charge BPF maps to it (before 5.11).
pub fn raise_memlock_limit() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: a valid rlimit struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &raw const unlimited) } != 0 {
        log::debug!(
            "could not lift RLIMIT_MEMLOCK: {}",
            std::io::Error::last_os_error()
        );
    }
}
