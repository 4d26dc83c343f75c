//! Every mode × protocol: 1000 serial short connections and 100 concurrent ones, every echo
//! byte-exact, every HTTP response valid.

mod common;

use std::{
    io::{BufReader, Write},
    net::SocketAddr,
    thread,
};

use common::*;

/// 1000 serial connections, each echoing one payload of a varying size, client closes first.
fn serial_echo(addr: SocketAddr, server_closes: bool) {
    for i in 0..1000 {
        let mut stream = connect(addr);
        echo_roundtrip(&mut stream, &payload(1 + (i * 37) % 3000, i));
        if server_closes {
            assert_closed_by_server(&mut stream);
        }
    }
}

/// 100 concurrent connections, each echoing several chunks (one larger than the server's
/// buffer, so reads and writes are partial).
fn concurrent_echo(addr: SocketAddr, server_closes: bool) {
    let handles: Vec<_> = (0..100)
        .map(|i| {
            thread::spawn(move || {
                let mut stream = connect(addr);
                let sizes: &[usize] = if server_closes {
                    &[1000]
                } else {
                    &[1, 1000, 50_000, 7]
                };
                for (j, &size) in sizes.iter().enumerate() {
                    echo_roundtrip(&mut stream, &payload(size, i * 10 + j));
                }
                if server_closes {
                    assert_closed_by_server(&mut stream);
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("a concurrent echo client failed");
    }
}

/// 1000 serial connections, each one request with `Connection: close`.
fn serial_http(addr: SocketAddr) {
    for _ in 0..1000 {
        let mut stream = connect(addr);
        stream
            .write_all(get("Connection: close\r\n").as_bytes())
            .unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let response = read_response(&mut reader, false);
        response.assert_ok(false);
        assert_eq!(response.header("Connection"), Some("close"));
        assert_closed_by_server(&mut stream);
    }
}

/// 100 concurrent keep-alive connections: 5 sequential requests, then 3 pipelined in one write.
fn concurrent_http(addr: SocketAddr) {
    let handles: Vec<_> = (0..100)
        .map(|_| {
            thread::spawn(move || {
                let mut stream = connect(addr);
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                for _ in 0..5 {
                    stream.write_all(get("").as_bytes()).unwrap();
                    read_response(&mut reader, false).assert_ok(false);
                }
                stream.write_all(get("").repeat(3).as_bytes()).unwrap();
                for _ in 0..3 {
                    read_response(&mut reader, false).assert_ok(false);
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("a concurrent HTTP client failed");
    }
}

fn check_echo(args: &[&str], server_closes: bool) {
    let mut server = Server::start(args);
    serial_echo(server.addr, server_closes);
    concurrent_echo(server.addr, server_closes);
    server.assert_alive();
    server.stop();
}

fn check_http(mode: &str) {
    let mut server = Server::start(&["--mode", mode, "--protocol", "http"]);
    serial_http(server.addr);
    concurrent_http(server.addr);
    server.assert_alive();
    server.stop();
}

#[test]
fn lt_echo() {
    check_echo(&["--mode", "lt"], false);
}

#[test]
fn lt_pure_echo() {
    check_echo(&["--mode", "lt-pure"], false);
}

#[test]
fn et_echo() {
    check_echo(&["--mode", "et"], false);
}

#[test]
fn mp_echo() {
    check_echo(&["--mode", "mp"], false);
}

#[test]
fn lt_epollout_echo() {
    check_echo(&["--mode", "lt", "--lt-epollout"], false);
}

#[test]
fn server_closes_echo_every_mode() {
    for mode in MODES {
        check_echo(&["--mode", mode, "--server-closes"], true);
    }
}

#[test]
fn small_buffer_echo() {
    // A 64-byte buffer forces many partial reads and the backpressure path on every chunk.
    check_echo(&["--mode", "et", "--buffer-size", "64"], false);
    check_echo(&["--mode", "lt", "--buffer-size", "64"], false);
}

#[test]
fn lt_http() {
    check_http("lt");
}

#[test]
fn lt_pure_http() {
    check_http("lt-pure");
}

#[test]
fn et_http() {
    check_http("et");
}

#[test]
fn mp_http() {
    check_http("mp");
}
