//! 10000 idle connections held open while 100 active clients are served correctly, and a
//! client that sends without reading cannot grow the server's memory. Runs its cases one after
//! another: each holds tens of thousands of descriptors.

mod common;

use std::{
    io::{BufReader, Write},
    net::TcpStream,
    thread,
    time::{Duration, Instant},
};

use common::*;

const IDLE: usize = 10_000;

fn idle_plus_active(args: &[&str], http: bool) {
    let mut full_args = args.to_vec();
    full_args.extend(["--nofile", "20000"]);
    if http {
        full_args.extend(["--protocol", "http"]);
    }
    let mut server = Server::start(&full_args);
    let addr = server.addr;
    let start = Instant::now();
    let idle: Vec<TcpStream> = (0..IDLE).map(|_| connect(addr)).collect();
    let opened = start.elapsed();

    let handles: Vec<_> = (0..100)
        .map(|i| {
            thread::spawn(move || {
                let mut stream = connect(addr);
                if http {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    for _ in 0..10 {
                        stream.write_all(get("").as_bytes()).unwrap();
                        read_response(&mut reader, false).assert_ok(false);
                    }
                } else {
                    for j in 0..10 {
                        echo_roundtrip(&mut stream, &payload(100 + j * 50, i));
                    }
                }
            })
        })
        .collect();
    for handle in handles {
        handle
            .join()
            .expect("an active client failed while 10000 connections idled");
    }

    // The idle connections were really accepted and still work.
    for (i, stream) in idle.iter().enumerate().step_by(IDLE / 100) {
        let mut stream = stream.try_clone().unwrap();
        if http {
            stream.write_all(get("").as_bytes()).unwrap();
            read_response(&mut BufReader::new(&stream), false).assert_ok(false);
        } else {
            echo_roundtrip(&mut stream, &payload(64, i));
        }
    }
    server.assert_alive();
    let stderr = server.stop();
    let open = open_at_shutdown(&stderr);
    assert!(
        open >= IDLE as u64,
        "{args:?}: only {open} connections open at shutdown; stderr:\n{stderr}"
    );
    eprintln!("{args:?}: opened {IDLE} idle connections in {opened:?}; {open} open at shutdown");
    drop(idle);
}

#[test]
fn ten_thousand_idle_connections_every_mode() {
    raise_nofile(IDLE as u64 + 1000);
    idle_plus_active(&["--mode", "lt"], false);
    idle_plus_active(&["--mode", "lt", "--lt-epollout"], false);
    idle_plus_active(&["--mode", "lt-pure"], true);
    idle_plus_active(&["--mode", "et"], false);
    idle_plus_active(&["--mode", "et"], true);
    idle_plus_active(&["--mode", "mp"], true);
}

/// Resident memory of a process in KiB.
fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

/// A client that sends without reading fills the kernel buffers, not the server: the server
/// stops reading once its per-connection output is backed up, so its memory stays flat, and
/// other clients are still served meanwhile.
#[test]
fn sender_that_never_reads_cannot_grow_the_server() {
    for (mode, protocol) in [
        ("lt", "echo"),
        ("et", "echo"),
        ("lt-pure", "http"),
        ("et", "http"),
    ] {
        let mut server = Server::start(&["--mode", mode, "--protocol", protocol]);
        let addr = server.addr;
        let before = rss_kib(server.pid());
        let hog = connect(addr);
        hog.set_write_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let chunk = if protocol == "http" {
            get("").repeat(1000).into_bytes()
        } else {
            vec![b'x'; 64 * 1024]
        };
        let mut sent = 0usize;
        // Send up to 64 MiB; the writes stall (time out) once the server stops reading.
        let deadline = Instant::now() + Duration::from_secs(5);
        while sent < 64 << 20 && Instant::now() < deadline {
            match (&hog).write(&chunk) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
        assert!(
            sent < 64 << 20,
            "{mode}/{protocol}: the server absorbed 64 MiB from a client that never reads"
        );
        let after = rss_kib(server.pid());
        assert!(
            after < before + 4 * 1024,
            "{mode}/{protocol}: server RSS grew from {before} KiB to {after} KiB after {sent} bytes from a non-reader"
        );
        // Others are unaffected.
        let mut other = connect(addr);
        if protocol == "http" {
            other.write_all(get("").as_bytes()).unwrap();
            read_response(&mut BufReader::new(&other), false).assert_ok(false);
        } else {
            echo_roundtrip(&mut other, b"still served");
        }
        drop(hog);
        server.assert_alive();
        server.stop();
    }
}
