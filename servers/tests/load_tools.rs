//! `wrk` and `ab -k` against the HTTP protocol of every mode: 0 socket errors, 0 non-2xx.
//! Needs the Debian packages wrk and apache2-utils (`.ci/run` installs them).

mod common;

use common::*;

fn wrk_and_ab(mode: &str) {
    let mut server = Server::start(&["--mode", mode, "--protocol", "http"]);
    let url = format!("http://{}/", server.addr);

    let wrk = run_tool("wrk", &["-t1", "-c20", "-d1s", "--timeout", "2s", &url]);
    assert!(
        !wrk.contains("Socket errors"),
        "{mode}: wrk saw socket errors:\n{wrk}"
    );
    assert!(
        !wrk.contains("Non-2xx"),
        "{mode}: wrk saw non-2xx responses:\n{wrk}"
    );
    let rps = field(&wrk, "Requests/sec:")
        .unwrap_or_else(|| panic!("no Requests/sec in wrk output:\n{wrk}"));
    assert!(
        rps > 100.0,
        "{mode}: implausibly low wrk rate {rps}:\n{wrk}"
    );

    // ab -k: HTTP/1.0 keep-alive, so the reply must carry `Connection: keep-alive`.
    let ab = run_tool(
        "ab",
        &["-k", "-q", "-n", "5000", "-c", "20", "-s", "5", &url],
    );
    assert_eq!(
        field(&ab, "Complete requests:"),
        Some(5000.0),
        "{mode}: ab -k output:\n{ab}"
    );
    assert_eq!(
        field(&ab, "Failed requests:"),
        Some(0.0),
        "{mode}: ab -k output:\n{ab}"
    );
    assert_eq!(
        field(&ab, "Keep-Alive requests:"),
        Some(5000.0),
        "{mode}: ab -k output:\n{ab}"
    );
    assert!(
        !ab.contains("Non-2xx"),
        "{mode}: ab -k saw non-2xx responses:\n{ab}"
    );

    // Plain ab: one connection per request, closed by the server (HTTP/1.0 without keep-alive).
    let ab = run_tool("ab", &["-q", "-n", "1000", "-c", "10", "-s", "5", &url]);
    assert_eq!(
        field(&ab, "Complete requests:"),
        Some(1000.0),
        "{mode}: ab output:\n{ab}"
    );
    assert_eq!(
        field(&ab, "Failed requests:"),
        Some(0.0),
        "{mode}: ab output:\n{ab}"
    );
    assert!(
        !ab.contains("Non-2xx"),
        "{mode}: ab saw non-2xx responses:\n{ab}"
    );

    server.assert_alive();
    server.stop();
}

#[test]
fn lt_wrk_and_ab() {
    wrk_and_ab("lt");
}

#[test]
fn lt_pure_wrk_and_ab() {
    wrk_and_ab("lt-pure");
}

#[test]
fn et_wrk_and_ab() {
    wrk_and_ab("et");
}

#[test]
fn mp_wrk_and_ab() {
    wrk_and_ab("mp");
}
