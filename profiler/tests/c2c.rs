//! `profiler c2c` with the kernel programs timing the sending syscalls (root, as in CI).

use std::time::Duration;

use c2c::{C2cOptions, Mechanism, SyscallTimer};
use profiler::c2c_timer::KernelSyscallTimer;

mod common;

#[test]
fn syscall_mechanisms_get_kernel_timed_send_columns() {
    let _serial = common::serial();
    let mut timer = KernelSyscallTimer::new(None).expect("loading the kernel programs (root?)");
    let options = C2cOptions {
        cpus: None,
        round_trips: 2_000,
        mechanisms: vec![
            Mechanism::Pipe,
            Mechanism::UnixSocket,
            Mechanism::EventFd,
            Mechanism::SpinAligned,
        ],
        time_limit: Duration::from_secs(10),
        interrupt: None,
        on_result: None,
    };
    let report = c2c::run(&options, Some(&mut timer as &mut dyn SyscallTimer)).expect("c2c runs");
    for result in &report.results {
        let m = result
            .outcome
            .measurement()
            .unwrap_or_else(|| panic!("{} was not measured", result.mechanism));
        match result.mechanism {
            Mechanism::SpinAligned => assert!(m.syscalls.is_none(), "spinning makes no syscalls"),
            mechanism => {
                let share = m
                    .syscalls
                    .as_ref()
                    .unwrap_or_else(|| panic!("{mechanism}: no syscall columns"));
                // One send each way per round trip.
                assert!(
                    (1.9..=2.2).contains(&share.calls_per_round_trip),
                    "{mechanism}: {} sends per round trip",
                    share.calls_per_round_trip
                );
                assert!(share.ns_per_round_trip > 0.0 && share.share_of_round_trip > 0.0);
                assert!(
                    share.share_of_round_trip < 1.0,
                    "{mechanism}: sends cannot take the whole round trip"
                );
            }
        }
    }
}

/// `profiler c2c` says how it goes, a line per mechanism on stderr as each finishes, whether or
/// not stderr is a terminal (a run of every mechanism takes tens of seconds); the table follows
/// on stdout.
#[test]
fn c2c_prints_a_line_per_mechanism_as_it_finishes() {
    let _serial = common::serial();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_profiler"))
        .args([
            "c2c",
            "--round-trips",
            "500",
            "--mechanisms",
            "pipe,rdma",
            "--no-syscalls",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(lines[0].starts_with("[1/2] pipe: p50 "), "{stderr}");
    assert!(lines[1].starts_with("[2/2] rdma: not measured"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("pipe"));
}
