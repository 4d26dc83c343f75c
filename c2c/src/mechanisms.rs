//! The ways two threads exchange a 64-byte message and an acknowledgement, each split into the
//! side that starts and times a round trip (the initiator) and the side that answers (the
//! responder), and the ping-pong driver that pins them, times each round trip and bounds the run.

use std::{
    io::{self, Read, Write},
    mem,
    os::{
        fd::{AsRawFd, FromRawFd, OwnedFd},
        unix::net::UnixStream,
    },
    sync::{
        Arc, Condvar, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering, fence},
        mpsc,
    },
    thread,
    time::Duration,
};

use anyhow::{Context, Result, anyhow, bail};
use cpuset::affinity;
use hdrhistogram::Histogram;

use super::{Mechanism, SyscallTime, SyscallTimer, tsc};

/// Bytes in one message.
pub const MESSAGE_BYTES: usize = 64;

/// Sequence number that tells a responder to stop.
const STOP: u64 = u64::MAX;

/// Spins between checks of the abort flag.
const SPINS_PER_CHECK: u32 = 1 << 10;

/// Spins after which a waiter also yields, so a preempted peer can run on a busy machine.
const SPINS_BEFORE_YIELD: u32 = 1 << 16;

/// How long a condition-variable waiter sleeps before checking the abort flag.
const CONDVAR_CHECK: Duration = Duration::from_millis(50);

/// The error a waiter returns when the other side has failed.
const PEER_FAILED: &str = "the other thread failed";

/// Starts each round trip: sends message `seq` and waits for its acknowledgement.
pub(crate) trait Initiator {
    /// One round trip for message `seq` (never 0 or [`STOP`]).
    fn round_trip(&mut self, seq: u64) -> Result<()>;
    /// Tells the responder to stop, without waiting for an acknowledgement.
    fn stop(&mut self) -> Result<()>;
}

/// Answers each message with an acknowledgement.
pub(crate) trait Responder: Send {
    /// Waits for one message and acknowledges it; `Ok(false)` when told to stop.
    fn serve(&mut self) -> Result<bool>;
    /// Wakes an initiator blocked on this side after this side failed (dropping the
    /// endpoint is enough for sockets and pipes).
    fn wake_peer(&mut self) {}
}

/// Message and acknowledgement sizes of a mechanism, as carried.
pub(crate) fn wire_sizes(mechanism: Mechanism) -> (usize, usize) {
    match mechanism {
        // The 64-byte message line holds the initiator's flag, 4 bytes of padding and 56
        // payload bytes; the acknowledgement is a 4-byte flag.
        Mechanism::SpinFalseSharing | Mechanism::SpinAligned => (MESSAGE_BYTES, 4),
        _ => (MESSAGE_BYTES, mem::size_of::<u64>()),
    }
}

/// Builds both ends of `mechanism` (not RDMA).
pub(crate) fn endpoints(
    mechanism: Mechanism,
    abort: &Arc<AtomicBool>,
) -> Result<(Box<dyn Initiator>, Box<dyn Responder>)> {
    Ok(match mechanism {
        Mechanism::SpinFalseSharing => spin_pair(Arc::new(FalseSharingLines::default()), abort),
        Mechanism::SpinAligned => spin_pair(Arc::new(AlignedLines::default()), abort),
        Mechanism::SpscRing => ring_pair(abort),
        Mechanism::MutexCondvar => condvar_pair(abort),
        Mechanism::UnixSocket => {
            let (a, b) = UnixStream::pair().context("socketpair")?;
            let (a2, b2) = (a.try_clone()?, b.try_clone()?);
            stream_pair(a, a2, b, b2)
        }
        Mechanism::Pipe => {
            let (to_responder_rx, to_responder_tx) = io::pipe().context("pipe")?;
            let (to_initiator_rx, to_initiator_tx) = io::pipe().context("pipe")?;
            stream_pair(
                to_initiator_rx,
                to_responder_tx,
                to_responder_rx,
                to_initiator_tx,
            )
        }
        Mechanism::EventFd => eventfd_pair(abort)?,
        Mechanism::Rdma => bail!("the RDMA path is not implemented in this build"),
    })
}

// ---------------------------------------------------------------------------------------------
// Spin-waiting on shared memory.

/// Spins until `ready` holds, failing if the other side sets `abort`.
#[inline(always)]
fn spin_until(abort: &AtomicBool, mut ready: impl FnMut() -> bool) -> Result<()> {
    let mut spins: u32 = 0;
    while !ready() {
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(SPINS_PER_CHECK) {
            if abort.load(Ordering::Relaxed) {
                bail!(PEER_FAILED);
            }
            if spins >= SPINS_BEFORE_YIELD {
                thread::yield_now();
            }
        }
    }
    Ok(())
}

/// One side's live counters, kept with atomic adds as it works (so a monitor could read them
/// while the ping-pong runs); the other side never touches them.
#[derive(Default)]
#[repr(C)]
struct SideStats {
    polls: AtomicU32,
    messages: AtomicU32,
    bytes: AtomicU64,
}

impl SideStats {
    #[inline(always)]
    fn count_message(&self) {
        self.messages.fetch_add(1, Ordering::Relaxed);
        self.bytes
            .fetch_add(MESSAGE_BYTES as u64, Ordering::Relaxed);
    }
}

/// Polls `flag` until `done` holds, counting every poll in `stats`.
#[inline(always)]
fn poll_flag(
    abort: &AtomicBool,
    flag: &AtomicU32,
    stats: &SideStats,
    done: impl Fn(u32) -> bool,
) -> Result<u32> {
    let mut seen = 0;
    spin_until(abort, || {
        stats.polls.fetch_add(1, Ordering::Relaxed);
        seen = flag.load(Ordering::Acquire);
        done(seen)
    })?;
    Ok(seen)
}

/// A 4-byte flag value for message `seq`: never 0 (the initial value) nor [`SPIN_STOP`].
fn spin_flag(seq: u64) -> u32 {
    (seq % (u64::from(u32::MAX) - 1)) as u32 + 1
}

/// The flag value that tells a spinning responder to stop.
const SPIN_STOP: u32 = u32::MAX;

/// Payload words after the message flag and its padding.
const SPIN_PAYLOAD_WORDS: usize = (MESSAGE_BYTES - 8) / 8;

/// Where the flags, the payload and each side's counters live.
trait SpinLines: Send + Sync + 'static {
    fn ping(&self) -> &AtomicU32;
    fn ack(&self) -> &AtomicU32;
    fn payload(&self) -> &[AtomicU64; SPIN_PAYLOAD_WORDS];
    fn initiator_stats(&self) -> &SideStats;
    fn responder_stats(&self) -> &SideStats;
}

/// The 64-byte message: the initiator's flag, 4 bytes of padding and 56 payload bytes.
#[derive(Default)]
#[repr(C, align(64))]
struct MessageLine {
    ping: AtomicU32,
    _pad: u32,
    payload: [AtomicU64; SPIN_PAYLOAD_WORDS],
}

/// One value alone on a 128-byte-aligned line (adjacent-line prefetch pairs 64-byte lines).
#[derive(Default)]
#[repr(C, align(128))]
struct OwnLine<T>(T);

/// Message and acknowledgement on lines of their own, but both sides' counters side by side
/// on one line (`[SideStats; 2]`, the usual mistake): each side's adds steal the line from the
/// other, which is adding to its own counters at the same time.
#[derive(Default)]
#[repr(C)]
struct FalseSharingLines {
    message: OwnLine<MessageLine>,
    ack: OwnLine<AtomicU32>,
    stats: OwnLine<[SideStats; 2]>,
}

impl SpinLines for FalseSharingLines {
    fn ping(&self) -> &AtomicU32 {
        &self.message.0.ping
    }
    fn ack(&self) -> &AtomicU32 {
        &self.ack.0
    }
    fn payload(&self) -> &[AtomicU64; SPIN_PAYLOAD_WORDS] {
        &self.message.0.payload
    }
    fn initiator_stats(&self) -> &SideStats {
        &self.stats.0[0]
    }
    fn responder_stats(&self) -> &SideStats {
        &self.stats.0[1]
    }
}

/// The same, each side's counters on a line of their own.
#[derive(Default)]
#[repr(C)]
struct AlignedLines {
    message: OwnLine<MessageLine>,
    ack: OwnLine<AtomicU32>,
    initiator_stats: OwnLine<SideStats>,
    responder_stats: OwnLine<SideStats>,
}

impl SpinLines for AlignedLines {
    fn ping(&self) -> &AtomicU32 {
        &self.message.0.ping
    }
    fn ack(&self) -> &AtomicU32 {
        &self.ack.0
    }
    fn payload(&self) -> &[AtomicU64; SPIN_PAYLOAD_WORDS] {
        &self.message.0.payload
    }
    fn initiator_stats(&self) -> &SideStats {
        &self.initiator_stats.0
    }
    fn responder_stats(&self) -> &SideStats {
        &self.responder_stats.0
    }
}

struct SpinInitiator<L> {
    lines: Arc<L>,
    abort: Arc<AtomicBool>,
}

struct SpinResponder<L> {
    lines: Arc<L>,
    abort: Arc<AtomicBool>,
    last: u32,
}

fn spin_pair<L: SpinLines>(
    lines: Arc<L>,
    abort: &Arc<AtomicBool>,
) -> (Box<dyn Initiator>, Box<dyn Responder>) {
    (
        Box::new(SpinInitiator {
            lines: Arc::clone(&lines),
            abort: Arc::clone(abort),
        }),
        Box::new(SpinResponder {
            lines,
            abort: Arc::clone(abort),
            last: 0,
        }),
    )
}

impl<L: SpinLines> Initiator for SpinInitiator<L> {
    #[inline]
    fn round_trip(&mut self, seq: u64) -> Result<()> {
        let lines = &*self.lines;
        for (i, word) in lines.payload().iter().enumerate() {
            word.store(seq ^ i as u64, Ordering::Relaxed);
        }
        let flag = spin_flag(seq);
        lines.ping().store(flag, Ordering::Release);
        let stats = lines.initiator_stats();
        poll_flag(&self.abort, lines.ack(), stats, |ack| ack == flag)?;
        stats.count_message();
        Ok(())
    }

    fn stop(&mut self) -> Result<()> {
        self.lines.ping().store(SPIN_STOP, Ordering::Release);
        Ok(())
    }
}

impl<L: SpinLines> Responder for SpinResponder<L> {
    #[inline]
    fn serve(&mut self) -> Result<bool> {
        let lines = &*self.lines;
        let last = self.last;
        let stats = lines.responder_stats();
        let flag = poll_flag(&self.abort, lines.ping(), stats, |ping| ping != last)?;
        if flag == SPIN_STOP {
            return Ok(false);
        }
        let payload = lines.payload();
        let seq = payload[0].load(Ordering::Relaxed);
        let intact = spin_flag(seq) == flag
            && payload
                .iter()
                .enumerate()
                .all(|(i, w)| w.load(Ordering::Relaxed) == seq ^ i as u64);
        if !intact {
            bail!("shared-memory message {flag} arrived corrupted");
        }
        stats.count_message();
        lines.ack().store(flag, Ordering::Release);
        self.last = flag;
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------
// Lock-free SPSC rings (rtrb): one carries messages, the other acknowledgements.

type Message = [u8; MESSAGE_BYTES];

fn message(seq: u64) -> Message {
    let mut msg = [0u8; MESSAGE_BYTES];
    for (i, chunk) in msg.chunks_exact_mut(8).enumerate() {
        chunk.copy_from_slice(&(seq ^ i as u64).to_le_bytes());
    }
    msg
}

/// The sequence number in `msg`, or an error if the message is not one [`message`] made.
fn message_seq(msg: &Message) -> Result<u64> {
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&msg[i * 8..i * 8 + 8]);
        u64::from_le_bytes(w)
    };
    let seq = word(0);
    if (0..MESSAGE_BYTES / 8).all(|i| word(i) == seq ^ i as u64) {
        Ok(seq)
    } else {
        bail!("message arrived corrupted")
    }
}

struct RingInitiator {
    messages: rtrb::Producer<Message>,
    acks: rtrb::Consumer<u64>,
    abort: Arc<AtomicBool>,
}

struct RingResponder {
    messages: rtrb::Consumer<Message>,
    acks: rtrb::Producer<u64>,
    abort: Arc<AtomicBool>,
}

fn ring_pair(abort: &Arc<AtomicBool>) -> (Box<dyn Initiator>, Box<dyn Responder>) {
    let (msg_tx, msg_rx) = rtrb::RingBuffer::new(16);
    let (ack_tx, ack_rx) = rtrb::RingBuffer::new(16);
    (
        Box::new(RingInitiator {
            messages: msg_tx,
            acks: ack_rx,
            abort: Arc::clone(abort),
        }),
        Box::new(RingResponder {
            messages: msg_rx,
            acks: ack_tx,
            abort: Arc::clone(abort),
        }),
    )
}

impl RingInitiator {
    fn send(&mut self, seq: u64) -> Result<()> {
        let msg = message(seq);
        // A full ring hands the (copied) message back; it is pushed again on the next spin.
        spin_until(&self.abort, || self.messages.push(msg).is_ok())
    }
}

impl Initiator for RingInitiator {
    #[inline]
    fn round_trip(&mut self, seq: u64) -> Result<()> {
        self.send(seq)?;
        let mut ack = None;
        spin_until(&self.abort, || {
            ack = self.acks.pop().ok();
            ack.is_some()
        })?;
        match ack {
            Some(a) if a == seq => Ok(()),
            other => bail!("ring acknowledgement {other:?} for message {seq}"),
        }
    }

    fn stop(&mut self) -> Result<()> {
        self.send(STOP)
    }
}

impl Responder for RingResponder {
    #[inline]
    fn serve(&mut self) -> Result<bool> {
        let mut msg = None;
        spin_until(&self.abort, || {
            msg = self.messages.pop().ok();
            msg.is_some()
        })?;
        let seq = message_seq(&msg.unwrap_or([0; MESSAGE_BYTES]))?;
        if seq == STOP {
            return Ok(false);
        }
        spin_until(&self.abort, || self.acks.push(seq).is_ok())?;
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------
// A mutex and two condition variables (futex sleeps and wakeups).

struct MailBox {
    message: Message,
    ack: u64,
}

struct CondvarShared {
    mailbox: Mutex<MailBox>,
    to_responder: Condvar,
    to_initiator: Condvar,
    abort: Arc<AtomicBool>,
}

struct CondvarInitiator(Arc<CondvarShared>);

struct CondvarResponder {
    shared: Arc<CondvarShared>,
    last: u64,
}

fn condvar_pair(abort: &Arc<AtomicBool>) -> (Box<dyn Initiator>, Box<dyn Responder>) {
    let shared = Arc::new(CondvarShared {
        mailbox: Mutex::new(MailBox {
            message: message(0),
            ack: 0,
        }),
        to_responder: Condvar::new(),
        to_initiator: Condvar::new(),
        abort: Arc::clone(abort),
    });
    (
        Box::new(CondvarInitiator(Arc::clone(&shared))),
        Box::new(CondvarResponder { shared, last: 0 }),
    )
}

impl CondvarInitiator {
    fn post(&self, seq: u64) {
        let shared = &*self.0;
        let mut mailbox = shared
            .mailbox
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        mailbox.message = message(seq);
        drop(mailbox);
        shared.to_responder.notify_one();
    }
}

impl Initiator for CondvarInitiator {
    fn round_trip(&mut self, seq: u64) -> Result<()> {
        self.post(seq);
        let shared = &*self.0;
        let mut mailbox = shared
            .mailbox
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while mailbox.ack != seq {
            if shared.abort.load(Ordering::Relaxed) {
                bail!(PEER_FAILED);
            }
            mailbox = shared
                .to_initiator
                .wait_timeout(mailbox, CONDVAR_CHECK)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        Ok(())
    }

    fn stop(&mut self) -> Result<()> {
        self.post(STOP);
        Ok(())
    }
}

impl Responder for CondvarResponder {
    fn serve(&mut self) -> Result<bool> {
        let shared = &*self.shared;
        let mut mailbox = shared
            .mailbox
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let seq = loop {
            let seq = message_seq(&mailbox.message)?;
            if seq != self.last {
                break seq;
            }
            if shared.abort.load(Ordering::Relaxed) {
                bail!(PEER_FAILED);
            }
            mailbox = shared
                .to_responder
                .wait_timeout(mailbox, CONDVAR_CHECK)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        };
        if seq == STOP {
            return Ok(false);
        }
        mailbox.ack = seq;
        self.last = seq;
        drop(mailbox);
        shared.to_initiator.notify_one();
        Ok(true)
    }

    fn wake_peer(&mut self) {
        self.shared.to_initiator.notify_all();
    }
}

// ---------------------------------------------------------------------------------------------
// Byte streams: a UNIX socket pair or two pipes, with blocking reads and writes.

struct StreamInitiator<R, W> {
    rx: R,
    tx: W,
}

struct StreamResponder<R, W> {
    rx: R,
    tx: W,
}

fn stream_pair<R1, W1, R2, W2>(
    initiator_rx: R1,
    initiator_tx: W1,
    responder_rx: R2,
    responder_tx: W2,
) -> (Box<dyn Initiator>, Box<dyn Responder>)
where
    R1: Read + 'static,
    W1: Write + 'static,
    R2: Read + Send + 'static,
    W2: Write + Send + 'static,
{
    (
        Box::new(StreamInitiator {
            rx: initiator_rx,
            tx: initiator_tx,
        }),
        Box::new(StreamResponder {
            rx: responder_rx,
            tx: responder_tx,
        }),
    )
}

fn peer_closed(e: io::Error) -> anyhow::Error {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        anyhow!("{PEER_FAILED} (it closed its end)")
    } else {
        anyhow::Error::new(e)
    }
}

impl<R: Read, W: Write> Initiator for StreamInitiator<R, W> {
    fn round_trip(&mut self, seq: u64) -> Result<()> {
        self.tx.write_all(&message(seq)).map_err(peer_closed)?;
        let mut ack = [0u8; 8];
        self.rx.read_exact(&mut ack).map_err(peer_closed)?;
        let ack = u64::from_le_bytes(ack);
        if ack != seq {
            bail!("acknowledgement {ack} for message {seq}");
        }
        Ok(())
    }

    fn stop(&mut self) -> Result<()> {
        Ok(self.tx.write_all(&message(STOP))?)
    }
}

impl<R: Read + Send, W: Write + Send> Responder for StreamResponder<R, W> {
    fn serve(&mut self) -> Result<bool> {
        let mut msg = [0u8; MESSAGE_BYTES];
        self.rx.read_exact(&mut msg).map_err(peer_closed)?;
        let seq = message_seq(&msg)?;
        if seq == STOP {
            return Ok(false);
        }
        self.tx.write_all(&seq.to_le_bytes()).map_err(peer_closed)?;
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------
// Two eventfds: the 64-byte message goes through shared memory, each eventfd write (8 bytes)
// is the doorbell, and the acknowledgement's value is the message's sequence number.

#[repr(C, align(128))]
struct EventFdMailbox {
    message: [AtomicU64; MESSAGE_BYTES / 8],
}

struct EventFdShared {
    mailbox: EventFdMailbox,
    to_responder: OwnedFd,
    to_initiator: OwnedFd,
    abort: Arc<AtomicBool>,
}

struct EventFdInitiator(Arc<EventFdShared>);

struct EventFdResponder(Arc<EventFdShared>);

fn new_eventfd() -> Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers; a non-negative result is a new fd we own.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error()).context("eventfd");
    }
    // SAFETY: `fd` was just returned by eventfd and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn eventfd_pair(abort: &Arc<AtomicBool>) -> Result<(Box<dyn Initiator>, Box<dyn Responder>)> {
    let shared = Arc::new(EventFdShared {
        mailbox: EventFdMailbox {
            message: Default::default(),
        },
        to_responder: new_eventfd()?,
        to_initiator: new_eventfd()?,
        abort: Arc::clone(abort),
    });
    Ok((
        Box::new(EventFdInitiator(Arc::clone(&shared))),
        Box::new(EventFdResponder(shared)),
    ))
}

/// Adds `value` to an eventfd's counter with one blocking `write`.
fn eventfd_write(fd: &OwnedFd, value: u64) -> Result<()> {
    let buf = value.to_ne_bytes();
    // SAFETY: `buf` is 8 readable bytes that outlive the call; `fd` is open.
    let n = unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
    if n != 8 {
        return Err(io::Error::last_os_error()).context("eventfd write");
    }
    Ok(())
}

/// Takes an eventfd's counter with one blocking `read`.
fn eventfd_read(fd: &OwnedFd) -> Result<u64> {
    let mut buf = [0u8; 8];
    loop {
        // SAFETY: `buf` is 8 writable bytes that outlive the call; `fd` is open.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n == 8 {
            return Ok(u64::from_ne_bytes(buf));
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err).context("eventfd read");
        }
    }
}

impl EventFdInitiator {
    fn post(&self, seq: u64) -> Result<()> {
        for (i, word) in self.0.mailbox.message.iter().enumerate() {
            word.store(seq ^ i as u64, Ordering::Relaxed);
        }
        fence(Ordering::Release);
        eventfd_write(&self.0.to_responder, 1)
    }
}

impl Initiator for EventFdInitiator {
    fn round_trip(&mut self, seq: u64) -> Result<()> {
        self.post(seq)?;
        let ack = eventfd_read(&self.0.to_initiator)?;
        if self.0.abort.load(Ordering::Relaxed) {
            bail!(PEER_FAILED);
        }
        if ack != seq {
            bail!("eventfd acknowledgement {ack} for message {seq}");
        }
        Ok(())
    }

    fn stop(&mut self) -> Result<()> {
        self.post(STOP)
    }
}

impl Responder for EventFdResponder {
    fn serve(&mut self) -> Result<bool> {
        eventfd_read(&self.0.to_responder)?;
        if self.0.abort.load(Ordering::Relaxed) {
            bail!(PEER_FAILED);
        }
        fence(Ordering::Acquire);
        let words = &self.0.mailbox.message;
        let seq = words[0].load(Ordering::Relaxed);
        if !words
            .iter()
            .enumerate()
            .all(|(i, w)| w.load(Ordering::Relaxed) == seq ^ i as u64)
        {
            bail!("eventfd message arrived corrupted");
        }
        if seq == STOP {
            return Ok(false);
        }
        // 0 and u64::MAX cannot be written to an eventfd; sequence numbers start at 1 and
        // STOP never gets here.
        eventfd_write(&self.0.to_initiator, seq)?;
        Ok(true)
    }

    fn wake_peer(&mut self) {
        let _ = eventfd_write(&self.0.to_initiator, 1);
    }
}

// ---------------------------------------------------------------------------------------------
// The ping-pong driver.

/// What one bounded ping-pong measured, before summarising.
pub(crate) struct PingPong {
    /// Round trips timed.
    pub done: u64,
    /// The time limit stopped the run before `round_trips`.
    pub hit_time_limit: bool,
    /// Counter ticks from the first timed round trip's start to the last one's end.
    pub elapsed_ticks: u64,
    /// Sum of the per-round-trip ticks (for an exact mean).
    pub sum_ticks: u128,
    /// Per-round-trip latency in counter ticks.
    pub ticks: Histogram<u64>,
    /// Per-round-trip latency in nanoseconds.
    pub ns: Histogram<u64>,
    /// Kernel time of the syscalls made during the timed loop, when a timer was given.
    pub syscalls: Option<SyscallTime>,
}

/// Settings of one ping-pong.
pub(crate) struct PingPongConfig<'a> {
    pub mechanism: Mechanism,
    pub initiator_cpu: usize,
    pub responder_cpu: usize,
    pub round_trips: u64,
    pub time_limit: Duration,
    pub tsc: &'a tsc::TscInfo,
}

/// Untimed round trips before the timed loop: caches, page tables and wakeup paths warm.
const WARM_UP_MAX: u64 = 10_000;

fn histogram() -> Result<Histogram<u64>> {
    // Up to an hour, 3 significant figures.
    Histogram::new_with_bounds(1, 3_600 * 1_000_000_000_000, 3).context("histogram")
}

/// Runs one ping-pong: the calling thread is pinned to the initiator CPU (its affinity is
/// restored afterwards), a scoped thread pinned to the responder CPU answers.
pub(crate) fn ping_pong(
    config: &PingPongConfig<'_>,
    timer: Option<&mut dyn SyscallTimer>,
) -> Result<PingPong> {
    let abort = Arc::new(AtomicBool::new(false));
    let (mut initiator, mut responder) = endpoints(config.mechanism, &abort)?;
    let _restore = affinity::RestoreOnDrop(affinity::current()?);
    affinity::pin_current(config.initiator_cpu)?;

    thread::scope(|scope| {
        let (ready_tx, ready_rx) = mpsc::channel::<()>();
        let responder_abort = Arc::clone(&abort);
        let responder_cpu = config.responder_cpu;
        let handle = thread::Builder::new()
            .name("c2c-responder".into())
            .spawn_scoped(scope, move || -> Result<()> {
                let result = (|| {
                    affinity::pin_current(responder_cpu)?;
                    let _ = ready_tx.send(());
                    while responder.serve()? {}
                    Ok(())
                })();
                if result.is_err() {
                    responder_abort.store(true, Ordering::SeqCst);
                    responder.wake_peer();
                }
                result
            })
            .context("spawning the responder thread")?;
        let join = |handle: thread::ScopedJoinHandle<'_, Result<()>>| -> Result<()> {
            handle
                .join()
                .map_err(|_| anyhow!("the responder thread panicked"))?
                .context("responder")
        };
        if ready_rx.recv().is_err() {
            join(handle)?;
            bail!("the responder thread stopped before it was ready");
        }
        let result = timed_loop(config, &mut *initiator, timer);
        if result.is_err() {
            abort.store(true, Ordering::SeqCst);
        }
        let stopped = initiator.stop();
        drop(initiator);
        let joined = join(handle);
        let run = result?;
        joined?;
        stopped.context("stopping the responder")?;
        Ok(run)
    })
}

fn timed_loop(
    config: &PingPongConfig<'_>,
    initiator: &mut dyn Initiator,
    timer: Option<&mut dyn SyscallTimer>,
) -> Result<PingPong> {
    let tsc = config.tsc;
    let mut seq: u64 = 1;
    let warm_up_budget = tsc.to_ticks(config.time_limit.as_nanos() as f64 / 10.0);
    let warm_up_start = tsc::now();
    for _ in 0..WARM_UP_MAX.min(config.round_trips) {
        initiator.round_trip(seq)?;
        seq += 1;
        if tsc::now().wrapping_sub(warm_up_start) >= warm_up_budget {
            break;
        }
    }

    let mut run = PingPong {
        done: 0,
        hit_time_limit: false,
        elapsed_ticks: 0,
        sum_ticks: 0,
        ticks: histogram()?,
        ns: histogram()?,
        syscalls: None,
    };
    let deadline = tsc.to_ticks(config.time_limit.as_nanos() as f64);
    let ns_per_tick = 1e9 / tsc.frequency_hz;
    let mut timer = timer;
    if let Some(t) = timer.as_deref_mut() {
        t.begin().context("starting the syscall timer")?;
    }
    let start = tsc::now();
    let mut end = start;
    let looped: Result<()> = (|| {
        while run.done < config.round_trips {
            let t0 = tsc::now();
            initiator.round_trip(seq)?;
            end = tsc::now();
            seq += 1;
            let ticks = end.wrapping_sub(t0);
            run.ticks.saturating_record(ticks);
            run.ns
                .saturating_record((ticks as f64 * ns_per_tick) as u64);
            run.sum_ticks += u128::from(ticks);
            run.done += 1;
            if end.wrapping_sub(start) >= deadline {
                run.hit_time_limit = run.done < config.round_trips;
                break;
            }
        }
        Ok(())
    })();
    let syscalls = timer.map(|t| t.end().context("reading the syscall timer"));
    looped?;
    run.syscalls = syscalls.transpose()?;
    run.elapsed_ticks = end.wrapping_sub(start);
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_put_lines_where_the_variants_say() {
        fn line<B, T>(base: &B, field: &T, size: usize) -> usize {
            (std::ptr::from_ref::<T>(field) as usize - std::ptr::from_ref::<B>(base) as usize)
                / size
        }
        assert_eq!(mem::size_of::<MessageLine>(), MESSAGE_BYTES);
        let shared = FalseSharingLines::default();
        assert_eq!(line(&shared, shared.ping(), 64), 0);
        assert_eq!(
            line(&shared, &shared.payload()[SPIN_PAYLOAD_WORDS - 1], 64),
            0
        );
        let initiator = line(&shared, &shared.initiator_stats().bytes, 64);
        assert_eq!(
            initiator,
            line(&shared, &shared.responder_stats().polls, 64)
        );
        assert_eq!(initiator, 4, "both sides' counters on one 64-byte line");
        let aligned = AlignedLines::default();
        let lines: Vec<usize> = [
            line(&aligned, aligned.ping(), 128),
            line(&aligned, aligned.ack(), 128),
            line(&aligned, &aligned.initiator_stats().polls, 128),
            line(&aligned, &aligned.initiator_stats().bytes, 128),
            line(&aligned, &aligned.responder_stats().polls, 128),
            line(&aligned, &aligned.responder_stats().bytes, 128),
        ]
        .to_vec();
        assert_eq!(
            lines,
            [0, 1, 2, 2, 3, 3],
            "each side on a 128-byte line of its own"
        );
    }

    #[test]
    fn messages_round_trip_and_corruption_is_caught() {
        assert_eq!(message_seq(&message(42)).unwrap(), 42);
        assert_eq!(message_seq(&message(STOP)).unwrap(), STOP);
        let mut bad = message(7);
        bad[63] ^= 1;
        assert!(message_seq(&bad).is_err());
        assert_ne!(spin_flag(0), 0);
        assert_ne!(spin_flag(u64::from(u32::MAX) - 2), SPIN_STOP);
        assert_ne!(spin_flag(5), spin_flag(6));
    }

    #[test]
    fn a_dead_responder_does_not_hang_the_initiator() {
        for mechanism in [
            Mechanism::SpinFalseSharing,
            Mechanism::SpscRing,
            Mechanism::MutexCondvar,
            Mechanism::UnixSocket,
            Mechanism::Pipe,
            Mechanism::EventFd,
        ] {
            let abort = Arc::new(AtomicBool::new(false));
            let (mut initiator, mut responder) = endpoints(mechanism, &abort).unwrap();
            // The responder "fails" before serving anything.
            abort.store(true, Ordering::SeqCst);
            responder.wake_peer();
            drop(responder);
            assert!(initiator.round_trip(1).is_err(), "{mechanism}");
        }
    }

    #[test]
    fn unimplemented_rdma_has_no_endpoints() {
        let abort = Arc::new(AtomicBool::new(false));
        assert!(endpoints(Mechanism::Rdma, &abort).is_err());
    }
}
