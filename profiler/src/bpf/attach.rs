//! How a program is attached: one variant of [`AttachTo`] per kind of attach point, one of
//! [`Link`] for what attaching it returns. A new mechanism (a BTF tracepoint, fentry) is a
//! variant in each and an arm in [`attach`].

use aya::{
    Ebpf,
    programs::{
        BtfTracePoint, FEntry, FExit, ProgramError, RawTracePoint, TracePoint, fentry::FEntryLink,
        fexit::FExitLink, raw_trace_point::RawTracePointLink, tp_btf::BtfTracePointLink,
        trace_point::TracePointLink,
    },
};

use super::environment;
use crate::error::SetupError;

/// Where a program attaches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttachTo {
    /// A classic tracepoint, `category:name` (a perf event; its id comes from tracefs).
    Tracepoint {
        /// e.g. `syscalls`.
        category: String,
        /// e.g. `sys_enter_close`.
        name: String,
    },
    /// A raw tracepoint by name (`sys_enter`): the tracepoint's arguments, no record.
    Raw {
        /// e.g. `sys_enter`.
        name: String,
    },
    /// A BTF-typed raw tracepoint (`tp_btf/NAME`): the raw tracepoint's arguments, typed by
    /// the kernel's BTF, which the program is checked against at load.
    Btf {
        /// e.g. `sched_switch`.
        name: String,
    },
    /// The entry of a kernel function (fentry), typed by its BTF.
    Fentry {
        /// e.g. `__x64_sys_close`.
        function: String,
    },
    /// The return of a kernel function (fexit), with its arguments and return value.
    Fexit {
        /// e.g. `__x64_sys_close`.
        function: String,
    },
}

impl AttachTo {
    /// `category:name`.
    #[must_use]
    pub fn tracepoint(category: &str, name: &str) -> Self {
        Self::Tracepoint {
            category: category.to_owned(),
            name: name.to_owned(),
        }
    }

    /// A raw tracepoint.
    #[must_use]
    pub fn raw(name: &str) -> Self {
        Self::Raw {
            name: name.to_owned(),
        }
    }

    #[must_use]
    pub fn btf(name: &str) -> Self {
        Self::Btf {
            name: name.to_owned(),
        }
    }
}

impl std::fmt::Display for AttachTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Tracepoint { category, name } => write!(f, "{category}:{name}"),
            Self::Raw { name } => write!(f, "raw tracepoint {name}"),
            Self::Btf { name } => write!(f, "BTF tracepoint {name}"),
            Self::Fentry { function } => write!(f, "fentry {function}"),
            Self::Fexit { function } => write!(f, "fexit {function}"),
        }
    }
}

/// An attached program, owned: dropping it detaches it.
pub enum Link {
    /// On a classic tracepoint.
    Tracepoint(TracePointLink),
    /// On a raw tracepoint.
    Raw(RawTracePointLink),
    /// On a BTF tracepoint.
    Btf(BtfTracePointLink),
    /// On a function's entry.
    Fentry(FEntryLink),
    /// On a function's return.
    Fexit(FExitLink),
}

/// The program `$name` of `$ebpf` as a `$kind`, loaded (verified) once: the program kinds have
/// no common trait for `load`, so this is a macro.
macro_rules! loaded {
    ($ebpf:expr, $name:expr, $kind:ty) => {{
        let name = $name;
        let program: &mut $kind = typed($ebpf, name)?;
        if program.fd().is_err() {
            program.load().map_err(|e| load_error(name, e))?;
        }
        program
    }};
}

/// The same for the programs typed by the kernel's BTF, loaded for one `$target` (a BTF
/// tracepoint's name, a function's), attached, their link wrapped in `$link`.
macro_rules! btf_attached {
    ($ebpf:expr, $name:expr, $kind:ty, $target:expr, $link:path, $failed:expr) => {{
        let name = $name;
        let program: &mut $kind = typed($ebpf, name)?;
        if program.fd().is_err() {
            program
                .load($target, kernel_btf()?)
                .map_err(|e| load_error(name, e))?;
        }
        let id = program.attach().map_err($failed)?;
        program.take_link(id).map($link).map_err($failed)
    }};
}

/// Loads `program` of `ebpf` (once) and attaches it to `to`.
pub fn attach(ebpf: &mut Ebpf, program: &str, to: &AttachTo) -> Result<Link, SetupError> {
    let failed = |e: ProgramError| SetupError::bpf(format!("attaching {program} to {to}"), e);
    match to {
        AttachTo::Tracepoint { category, name } => {
            let p = loaded!(ebpf, program, TracePoint);
            let id = p.attach(category, name).map_err(|e| {
                if refused_to_non_root(&e) {
                    return SetupError::PerfEventRefused {
                        paranoid: environment::perf_event_paranoid(),
                    };
                }
                failed(e)
            })?;
            p.take_link(id).map(Link::Tracepoint).map_err(failed)
        }
        AttachTo::Raw { name } => {
            let p = loaded!(ebpf, program, RawTracePoint);
            let id = p.attach(name).map_err(failed)?;
            p.take_link(id).map(Link::Raw).map_err(failed)
        }
        AttachTo::Btf { name } => {
            btf_attached!(ebpf, program, BtfTracePoint, name, Link::Btf, failed)
        }
        AttachTo::Fentry { function } => {
            btf_attached!(ebpf, program, FEntry, function, Link::Fentry, failed)
        }
        AttachTo::Fexit { function } => {
            btf_attached!(ebpf, program, FExit, function, Link::Fexit, failed)
        }
    }
}

/// The program `name` of `ebpf` as a `T`, not loaded yet.
fn typed<'a, T>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut T, SetupError>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = ProgramError>,
{
    ebpf.program_mut(name)
        .ok_or_else(|| missing_program(name))?
        .try_into()
        .map_err(|e| SetupError::bpf(format!("program {name}"), e))
}

/// The kernel's BTF, parsed once.
fn kernel_btf() -> Result<&'static aya::Btf, SetupError> {
    super::front::kernel_btf().map_err(SetupError::NoBtf)
}

/// Whether perf_event_open refused this non-root process (Debian's `perf_event_paranoid` 3).
fn refused_to_non_root(error: &ProgramError) -> bool {
    let denied = std::error::Error::source(error)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .is_some_and(|io| io.kind() == std::io::ErrorKind::PermissionDenied)
        || error.to_string().contains("Permission denied");
    // SAFETY: geteuid has no preconditions.
    denied && unsafe { libc::geteuid() } != 0
}

/// Detaches `links`. Detaching a tracepoint waits for an RCU grace period (~70 ms here); one
/// after the other that is seconds for the default set. Grace periods overlap when the
/// detaches run concurrently, so each link is dropped on its own thread.
pub fn detach_all(links: Vec<Link>) {
    let threads: Vec<_> = links
        .into_iter()
        .map(|link| std::thread::spawn(move || drop(link)))
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

pub(super) fn missing_program(name: &str) -> SetupError {
    SetupError::bpf(
        format!("program {name}"),
        anyhow::anyhow!("missing from the object"),
    )
}

/// Turns a load failure into a one-line cause plus the tail of the verifier log.
pub(super) fn load_error(program: &str, error: ProgramError) -> SetupError {
    match error {
        ProgramError::LoadError {
            io_error,
            verifier_log,
        } => {
            let log = verifier_log.to_string();
            let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
            let tail = lines[lines.len().saturating_sub(15)..].join("\n");
            SetupError::VerifierRejected {
                program: program.to_owned(),
                cause: io_error.to_string(),
                log_tail: tail,
            }
        }
        other => SetupError::bpf(format!("loading program {program}"), other),
    }
}

/// How many times the kernel skipped program `name` because it was already running on that
/// CPU (`recursion_misses`, 5.12+): for fentry/fexit, which run preemptibly, a skipped run is a
/// call not seen. `None` when the kernel does not say.
#[must_use]
pub fn recursion_misses(ebpf: &Ebpf, name: &str) -> Option<u64> {
    use std::os::fd::{AsFd as _, AsRawFd as _};
    /// `bpf_attr` for BPF_OBJ_GET_INFO_BY_FD.
    #[repr(C)]
    struct InfoByFd {
        bpf_fd: u32,
        info_len: u32,
        info: u64,
    }
    const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
    let program = ebpf.program(name)?;
    let fd = program.fd().ok()?;
    let mut info: aya_obj::generated::bpf_prog_info =
        // SAFETY: a plain C struct of integers, valid zeroed.
        unsafe { std::mem::zeroed() };
    let attr = InfoByFd {
        bpf_fd: fd.as_fd().as_raw_fd() as u32,
        info_len: std::mem::size_of_val(&info) as u32,
        info: (&raw mut info) as u64,
    };
    // SAFETY: the attr names our own program's fd and a buffer of the size given.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_GET_INFO_BY_FD,
            &raw const attr,
            std::mem::size_of::<InfoByFd>(),
        )
    };
    (ret == 0).then_some(info.recursion_misses)
}
