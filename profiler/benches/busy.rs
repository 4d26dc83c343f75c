//! What the benches trace: forked children that close a dup'd fd every `every`, until the
//! returned guard is dropped (a panicking bench included), which kills and reaps them.

use std::time::Duration;

/// The busy children; killed (SIGKILL) and reaped when dropped.
pub struct Children(pub Vec<i32>);

impl Children {
    /// `n` children, each doing close(dup(0)) every `every`.
    pub fn spawn(n: usize, every: Duration) -> Self {
        let micros = u32::try_from(every.as_micros()).unwrap_or(u32::MAX);
        Self(
            (0..n)
                .map(|_| {
                    // SAFETY: the child runs only raw libc calls and never returns.
                    let pid = unsafe { libc::fork() };
                    assert!(pid >= 0, "fork failed");
                    if pid == 0 {
                        // SAFETY: see above.
                        unsafe {
                            loop {
                                libc::close(libc::dup(0));
                                libc::usleep(micros);
                            }
                        }
                    }
                    pid
                })
                .collect(),
        )
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for &pid in &self.0 {
            // SAFETY: our own children.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
        }
    }
}
