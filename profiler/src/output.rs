//! Printing that never panics. `print!` panics when stdout is a closed pipe (`profiler attach … |
//! head -1`), which would lose the exports and leave a started command running untraced. Here a
//! stream that fails is marked closed and skipped from then on; tracing, exports and the exit
//! status go on as if it had been read.

use std::{
    io::Write,
    sync::atomic::{AtomicBool, Ordering},
};

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
static STDERR_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` to stdout and flushes it, unless stdout has failed before.
pub fn stdout(text: &str) {
    write_to(&mut std::io::stdout().lock(), &STDOUT_CLOSED, text);
}

/// Writes `text` to stderr, unless stderr has failed before.
pub fn stderr(text: &str) {
    write_to(&mut std::io::stderr().lock(), &STDERR_CLOSED, text);
}

/// Whether a write to stdout has failed (its reader went away).
#[must_use]
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

fn write_to(stream: &mut impl Write, closed: &AtomicBool, text: &str) {
    if closed.load(Ordering::Relaxed) {
        return;
    }
    if stream
        .write_all(text.as_bytes())
        .and_then(|()| stream.flush())
        .is_err()
    {
        closed.store(true, Ordering::Relaxed);
    }
}

/// `println!` that never panics: see the module documentation.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::stdout(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` that never panics: see the module documentation.
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::stderr(&format!("{}\n", format_args!($($arg)*)))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose reader has gone, as a closed pipe is.
    struct Closed(usize);
    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            self.0 += 1;
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_broken_pipe_marks_the_stream_closed_and_later_writes_are_skipped() {
        let closed = AtomicBool::new(false);
        let mut pipe = Closed(0);
        write_to(&mut pipe, &closed, "first");
        assert!(closed.load(Ordering::Relaxed));
        write_to(&mut pipe, &closed, "second");
        assert_eq!(pipe.0, 1, "nothing is written once the stream is closed");
    }
}

/// `text` with control characters written as `\xNN`: a process name is chosen by whoever
/// started the process, and terminal escapes in it must not reach a terminal or a Markdown
/// table raw.
#[must_use]
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.push_str(&format!("\\x{:02x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod printable_tests {
    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(super::printable("a\x1b[31mb\n"), "a\\x1b[31mb\\x0a");
        assert_eq!(super::printable("nginx: wörker"), "nginx: wörker");
    }
}
