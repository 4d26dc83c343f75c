//! Malformed and oversized HTTP, clients that reset or vanish, shutdown, MP supervision and
//! command-line errors.

mod common;

use std::{
    io::{BufReader, Read, Write},
    net::TcpStream,
    process::Command,
    thread,
    time::{Duration, Instant},
};

use common::*;

/// Sends `request`, returns the single response and asserts the server then closes.
fn one_response_then_close(stream: &mut TcpStream, request: &[u8]) -> Response {
    stream.write_all(request).unwrap();
    let response = read_response(&mut BufReader::new(&*stream), false);
    assert_closed_by_server(stream);
    response
}

#[test]
fn http_errors_and_connection_rules_every_mode() {
    for mode in MODES {
        let server = Server::start(&["--mode", mode, "--protocol", "http"]);
        let addr = server.addr;

        for bad in [
            &b"garbage\r\n\r\n"[..],
            b"GET / HTTP/9.9\r\n\r\n",
            b"GET / HTTP/1.1\r\nno colon here\r\n\r\n",
        ] {
            let response = one_response_then_close(&mut connect(addr), bad);
            assert_eq!(
                response.status,
                400,
                "{mode}: {:?}",
                String::from_utf8_lossy(bad)
            );
            assert_eq!(response.header("Connection"), Some("close"));
        }

        let huge = format!("GET / HTTP/1.1\r\nX-Big: {}\r\n\r\n", "a".repeat(9000));
        let response = one_response_then_close(&mut connect(addr), huge.as_bytes());
        assert_eq!(response.status, 431, "{mode}: oversized headers");
        // Oversized even before the terminating blank line arrives.
        let response = one_response_then_close(&mut connect(addr), "a".repeat(8192).as_bytes());
        assert_eq!(response.status, 431, "{mode}: 8 KiB without CRLFCRLF");

        // HTTP/1.0 without keep-alive: answered, then closed.
        let response = one_response_then_close(&mut connect(addr), b"GET / HTTP/1.0\r\n\r\n");
        response.assert_ok(false);

        // HTTP/1.0 with keep-alive: stays open, says so.
        let mut stream = connect(addr);
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        for _ in 0..3 {
            stream
                .write_all(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
                .unwrap();
            let response = read_response(&mut reader, false);
            response.assert_ok(false);
            assert_eq!(response.header("Connection"), Some("keep-alive"));
        }

        // Pipelining: a body, 10 requests and a HEAD in one write, answered in order.
        let mut batch =
            b"POST /form HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello".to_vec();
        batch.extend(get("").repeat(10).into_bytes());
        batch.extend(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n");
        stream.write_all(&batch).unwrap();
        for _ in 0..11 {
            read_response(&mut reader, false).assert_ok(false);
        }
        read_response(&mut reader, true).assert_ok(true);

        // A request trickling in byte by byte (every read partial).
        for byte in get("").bytes() {
            stream.write_all(&[byte]).unwrap();
            thread::sleep(Duration::from_micros(200));
        }
        read_response(&mut reader, false).assert_ok(false);
        server.stop();
    }
}

/// Clients that reset mid-request or vanish while the server is writing to them do not
/// disturb the others, in either protocol.
#[test]
fn resetting_and_vanishing_clients_do_not_disturb_others_every_mode() {
    for mode in MODES {
        for http in [false, true] {
            let protocol = if http { "http" } else { "echo" };
            let mut server = Server::start(&["--mode", mode, "--protocol", protocol]);
            let addr = server.addr;
            let mut good: Vec<TcpStream> = (0..20).map(|_| connect(addr)).collect();
            let exercise = |good: &mut Vec<TcpStream>| {
                for (i, stream) in good.iter_mut().enumerate() {
                    if http {
                        stream.write_all(get("").as_bytes()).unwrap();
                        read_response(&mut BufReader::new(&*stream), false).assert_ok(false);
                    } else {
                        echo_roundtrip(stream, &payload(500, i));
                    }
                }
            };
            exercise(&mut good);
            for i in 0..20 {
                // Reset in the middle of a request.
                let stream = connect(addr);
                (&stream)
                    .write_all(if http { b"GET / HT" } else { b"partial" })
                    .unwrap();
                if i % 2 == 0 {
                    thread::sleep(Duration::from_millis(1));
                }
                reset_on_close(&stream);
                drop(stream);
                // Vanish while the server still has lots to write back.
                let stream = connect(addr);
                let flood = if http {
                    get("").repeat(5000).into_bytes()
                } else {
                    vec![b'z'; 1 << 20]
                };
                stream
                    .set_write_timeout(Some(Duration::from_millis(200)))
                    .unwrap();
                let _ = (&stream).write(&flood);
                reset_on_close(&stream);
                drop(stream);
            }
            exercise(&mut good);
            server.assert_alive();
            server.stop();
        }
    }
}

/// SIGTERM (and SIGINT) with idle, mid-request and mid-write clients: exit 0 within 1 s, and
/// every client sees its connection closed.
#[test]
fn signal_exits_zero_promptly_with_clients_connected_every_mode() {
    for (i, mode) in MODES.iter().enumerate() {
        let server = Server::start(&["--mode", mode]);
        let addr = server.addr;
        let mut clients: Vec<TcpStream> = (0..10).map(|_| connect(addr)).collect();
        for _ in 0..10 {
            let stream = connect(addr);
            (&stream).write_all(b"half a message").unwrap();
            clients.push(stream);
        }
        for _ in 0..5 {
            let stream = connect(addr);
            stream
                .set_write_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            let _ = (&stream).write(&vec![b'w'; 4 << 20]);
            clients.push(stream);
        }
        thread::sleep(Duration::from_millis(100));
        let signal = if i % 2 == 0 {
            libc::SIGTERM
        } else {
            libc::SIGINT
        };
        let (status, took, stderr) = server.stop_with(signal, Duration::from_secs(3));
        assert_eq!(
            status.code(),
            Some(0),
            "{mode}: exit status after signal {signal}; stderr: {stderr}"
        );
        assert!(
            took < Duration::from_secs(1),
            "{mode}: took {took:?} to exit"
        );
        assert_eq!(
            open_at_shutdown(&stderr),
            25,
            "{mode}: connections closed at shutdown; stderr: {stderr}"
        );
        for mut stream in clients {
            let mut sink = vec![0; 1 << 16];
            let deadline = Instant::now() + Duration::from_secs(2);
            // Drain any echoed bytes; the connection must end (EOF or reset), not hang.
            loop {
                match stream.read(&mut sink) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => assert!(
                        Instant::now() < deadline,
                        "{mode}: connection still open after exit"
                    ),
                }
            }
        }
    }
}

#[test]
fn mp_spreads_connections_across_workers() {
    let server = Server::start(&["--mode", "mp", "--workers", "4"]);
    assert_eq!(
        worker_pids(&server.stderr()).len(),
        4,
        "stderr: {}",
        server.stderr()
    );
    for i in 0..400 {
        echo_roundtrip(&mut connect(server.addr), &payload(10, i));
    }
    let stderr = server.stop();
    let accepts = worker_accepts(&stderr);
    assert_eq!(
        accepts.len(),
        4,
        "one summary line per worker expected; stderr:\n{stderr}"
    );
    assert_eq!(
        accepts.iter().map(|(_, n)| n).sum::<u64>(),
        400,
        "stderr:\n{stderr}"
    );
    for (worker, n) in &accepts {
        assert!(
            *n > 0,
            "worker {worker} served no connection; stderr:\n{stderr}"
        );
    }
}

#[test]
fn mp_reports_a_worker_that_died() {
    let server = Server::start(&["--mode", "mp", "--workers", "2"]);
    let pids = server.wait_worker_pids(2);
    assert_eq!(pids.len(), 2, "stderr: {}", server.stderr());
    let (index, pid) = pids[1];
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let (status, _, stderr) = server.stop_with(0, Duration::from_secs(3));
    assert_eq!(
        status.code(),
        Some(1),
        "parent exit status; stderr:\n{stderr}"
    );
    let expected = format!("Error: worker {index} (pid {pid}) died: it was killed by signal 9");
    assert!(
        stderr.contains(&expected),
        "expected {expected:?} in stderr:\n{stderr}"
    );
}

#[test]
fn cpus_pins_the_server_and_mp_workers() {
    for mode in ["et", "mp"] {
        let server = Server::start(&["--mode", mode, "--cpus", "0"]);
        let workers = if mode == "mp" {
            server.wait_worker_pids(1)
        } else {
            Vec::new()
        };
        let mut pids = vec![server.pid()];
        pids.extend(workers.iter().map(|&(_, pid)| pid));
        for pid in pids {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
            assert!(
                status.contains("Cpus_allowed_list:\t0\n"),
                "{mode}: pid {pid} not pinned to CPU 0:\n{status}"
            );
        }
        if mode == "mp" {
            // Default worker count: the CPUs the server may use.
            // Give a (wrong) second worker line time to show up before counting.
            thread::sleep(Duration::from_millis(50));
            assert_eq!(
                worker_pids(&server.stderr()).len(),
                1,
                "{}",
                server.stderr()
            );
        }
        server.stop();
    }
}

/// Runs the binary to completion and returns (exit code, stderr).
fn run_cli(args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_servers"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.stdout.is_empty(),
        "{args:?}: nothing may go to stdout on error"
    );
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn bad_command_lines_get_one_error_line() {
    let usage_errors: &[&[&str]] = &[
        &[],
        &["--mode", "bogus"],
        &["--mode", "et", "--protocol", "smtp"],
        &["--mode", "et", "--lt-epollout"],
        &["--mode", "lt", "--workers", "2"],
        &["--mode", "mp", "--workers", "0"],
        &["--mode", "et", "--protocol", "http", "--server-closes"],
        &["--mode", "et", "--cpus", "1-x"],
        &["--mode", "et", "--port", "70000"],
        &["--mode", "et", "--bind", "localhost:80"],
        &["--mode", "et", "--buffer-size", "1"],
    ];
    for args in usage_errors {
        let (code, stderr) = run_cli(args);
        assert_eq!(code, Some(2), "{args:?}: stderr {stderr}");
        assert!(
            stderr.starts_with("Error: ") && stderr.lines().count() == 1,
            "{args:?}: stderr {stderr:?}"
        );
    }

    let (code, stderr) = run_cli(&["--mode", "et", "--cpus", "1000"]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.starts_with("Error: --cpus 1000") && stderr.lines().count() == 1,
        "{stderr:?}"
    );

    let server = Server::start(&["--mode", "et"]);
    let port = server.addr.port().to_string();
    for mode in ["et", "mp"] {
        let (code, stderr) = run_cli(&["--mode", mode, "--port", &port]);
        assert_eq!(
            code,
            Some(1),
            "{mode}: second server on a busy port; stderr {stderr}"
        );
        assert!(
            stderr.starts_with("Error: cannot bind") && stderr.lines().count() == 1,
            "{mode}: {stderr:?}"
        );
    }
    server.stop();
}

/// Pipelined requests held back by the output limit are answered once the output drains,
/// without the client sending anything more: with a 64-byte limit (smaller than one response)
/// and with 2000 requests in one write at the default limit.
#[test]
fn held_back_pipelined_requests_are_all_answered_every_mode() {
    for mode in MODES {
        for (buffer_size, requests) in [("64", 2), ("16384", 2000)] {
            let server = Server::start(&[
                "--mode",
                mode,
                "--protocol",
                "http",
                "--buffer-size",
                buffer_size,
            ]);
            let stream = connect(server.addr);
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let writer = {
                let mut stream = stream.try_clone().unwrap();
                let batch = get("").repeat(requests);
                thread::spawn(move || stream.write_all(batch.as_bytes()).unwrap())
            };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            for _ in 0..requests {
                read_response(&mut reader, false).assert_ok(false);
            }
            writer.join().unwrap();
            drop(reader);
            drop(stream);
            server.stop();
        }
    }
}

/// CPU seconds (user + system) the process has used so far.
fn cpu_seconds(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command name.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks as f64 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// At the descriptor limit the server closes the connections it cannot take instead of
/// spinning on a listener that stays readable, and serves again once descriptors free up.
#[test]
fn at_the_descriptor_limit_new_connections_are_shed_without_spinning() {
    for mode in ["lt", "lt-pure", "et"] {
        let server = Server::start(&["--mode", mode, "--nofile", "40"]);
        let held: Vec<TcpStream> = (0..80).map(|_| connect(server.addr)).collect();
        thread::sleep(Duration::from_millis(300));
        let before = cpu_seconds(server.pid());
        thread::sleep(Duration::from_secs(1));
        let used = cpu_seconds(server.pid()) - before;
        assert!(
            used < 0.3,
            "{mode}: {used:.2} s of CPU in 1 s at the fd limit (spinning)"
        );
        let shed = held
            .iter()
            .filter(|s| {
                s.set_nonblocking(true).unwrap();
                // Closed by the server: EOF or a reset; a kept connection has nothing to read.
                match (&**s).read(&mut [0u8; 1]) {
                    Ok(n) => n == 0,
                    Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                }
            })
            .count();
        assert!(
            shed >= 40,
            "{mode}: only {shed} of 80 connections were shed"
        );
        drop(held);
        thread::sleep(Duration::from_millis(200));
        echo_roundtrip(&mut connect(server.addr), b"after the limit");
        assert!(
            server.stderr().contains("closing new connections"),
            "{mode}: {}",
            server.stderr()
        );
        server.stop();
    }
}
