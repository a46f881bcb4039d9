//! [`CompletionQueue`] (`struct ibv_cq`) and [`CompletionChannel`]
//! (`struct ibv_comp_channel`).
//!
//! # Completion channels and their file descriptor
//!
//! A channel is an event queue of the device raising its own interrupt vector. Its
//! [`CompletionChannel::fd`] becomes readable when the vector fires, so epoll, `poll(2)` or an
//! async runtime (tokio's `AsyncFd`) can wait for completion events:
//!
//! - on a real device, it is the VFIO MSI-X eventfd of the vector ([`rnic_hw_regs::Bus::irq_fd`]);
//! - on an emulated device (whose bus has no eventfd), the channel makes an eventfd and a
//!   small thread that waits for the vector ([`rnic_hw_regs::Bus::wait_irq`]) and signals the
//!   eventfd each time it fires: one thread per channel, stopped when the channel is dropped.
//!
//! The fd is level-triggered: [`CompletionChannel::get_cq_event`] consumes the signal. The
//! usual loop (as with `ibv_get_cq_event`): arm the CQ ([`CompletionQueue::req_notify`]), wait
//! for the fd, take the event, arm again, then poll the CQ empty (arming before polling means a
//! completion that arrives in between raises a new event).
//!
//! There is no `ibv_ack_cq_events`: a CQ cannot be destroyed while a handle to it exists, and
//! [`CompletionChannel::get_cq_event`] returns one, so there is nothing to count.
//! A thread blocked in `get_cq_event` without a timeout also looks at the event queue every
//! 100 ms, a safety net against an interrupt consumed between a drain and the wait.

use crate::context::VectorLease;
use crate::error::{Error, Result};
use crate::wc::as_driver_mut;
use crate::{Context, WorkCompletion};
use rnic_driver::cq::{CompChannel, Cq};
use rnic_hw_regs::Bus;
use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long one wait on the fd lasts at most before the channel looks at its event queue
/// again (a safety net against a signal consumed between a drain and the wait).
const WAIT_SLICE: Duration = Duration::from_millis(100);

#[derive(Debug)]
struct Bridge {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug)]
pub(crate) struct ChanInner {
    chan: Arc<CompChannel>,
    /// Our eventfd (emulated buses), or `None` when the bus's own fd is used.
    own_fd: Option<OwnedFd>,
    raw_fd: RawFd,
    bridge: Mutex<Option<Bridge>>,
    cqs: Mutex<HashMap<u32, Weak<CqInner>>>,
    pending: Mutex<VecDeque<u32>>,
    ctx: Context,
    /// Last: the vector goes back to the device after the channel's EQ is destroyed.
    _vector: VectorLease,
}

impl Drop for ChanInner {
    fn drop(&mut self) {
        if let Some(mut b) = lock(&self.bridge).take() {
            b.stop.store(true, Ordering::Release);
            if let Some(t) = b.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// A completion channel (`ibv_create_comp_channel`): where the events of the CQs created
/// with it arrive, with a file descriptor to wait on. A cheap handle (an `Arc` inside).
///
/// ```
/// use rnic_verbs::Context;
/// use std::time::Duration;
///
/// # fn main() -> Result<(), rnic_verbs::Error> {
/// let ctx = Context::open("emu0")?;
/// let chan = ctx.create_comp_channel()?;
/// let cq = ctx.create_cq(64, Some(&chan))?;
/// cq.req_notify(false)?;
/// // Nothing completed: no event within 10 ms.
/// assert!(chan.get_cq_event(Some(Duration::from_millis(10)))?.is_none());
/// assert!(chan.fd() >= 0);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct CompletionChannel {
    pub(crate) inner: Arc<ChanInner>,
}

impl CompletionChannel {
    pub(crate) fn create(ctx: &Context) -> Result<CompletionChannel> {
        let lease = ctx.lease_vector()?;
        let vector = lease.vector;
        let chan = CompChannel::create(ctx.hca(), vector)
            .map_err(Error::driver("ibv_create_comp_channel"))?;
        let bus = ctx.hca().bus().clone();
        let (own_fd, raw_fd, bridge) = match bus.irq_fd(vector) {
            Some(fd) => (None, fd, None),
            None => {
                let owned = new_eventfd("ibv_create_comp_channel")?;
                let fd = owned.as_raw_fd();
                let stop = Arc::new(AtomicBool::new(false));
                let thread = spawn_bridge(bus, vector, fd, stop.clone())?;
                (
                    Some(owned),
                    fd,
                    Some(Bridge {
                        stop,
                        thread: Some(thread),
                    }),
                )
            }
        };
        Ok(CompletionChannel {
            inner: Arc::new(ChanInner {
                chan: Arc::new(chan),
                own_fd,
                raw_fd,
                bridge: Mutex::new(bridge),
                cqs: Mutex::new(HashMap::new()),
                pending: Mutex::new(VecDeque::new()),
                ctx: ctx.clone(),
                _vector: lease,
            }),
        })
    }

    /// The file descriptor (`ibv_comp_channel.fd`): readable when an event may be waiting.
    /// Owned by the channel: valid while it lives.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// use std::os::fd::AsRawFd;
    /// let chan = ctx.create_comp_channel()?;
    /// assert!(chan.fd() >= 0); // hand it to epoll / poll(2) / an async runtime
    /// assert_eq!(chan.fd(), chan.as_raw_fd());
    /// # Ok(()) }
    /// ```
    pub fn fd(&self) -> RawFd {
        self.inner.raw_fd
    }

    /// The context.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let chan = ctx.create_comp_channel()?;
    /// assert!(chan.context().same_device(&ctx));
    /// # Ok(()) }
    /// ```
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// `ibv_get_cq_event`: the CQ of the next completion event, waiting up to `timeout`
    /// (`None`: without limit; `Some(Duration::ZERO)`: just look). `Ok(None)` when the
    /// time ran out. Each event needs a new [`CompletionQueue::req_notify`] for the next.
    /// Events of CQs dropped since are skipped.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let chan = b.create_comp_channel()?;
    /// let cq = b.create_cq(8, Some(&chan))?;
    /// # let qr = pb.create_qp(QpType::Rc, &cq, &cq).build()?;
    /// # let qs = pa.create_qp(QpType::Rc, &ca, &ca).build()?;
    /// # connect_pair(&qs, &qr, &ConnectOptions::default())?;
    /// cq.req_notify(false)?; // arm, then wait for the event
    /// qr.post_recv(&[RecvWr::new(1, &[])])?;
    /// qs.post_send(&[SendWr::send(1, &[])])?;
    /// let ev = chan.get_cq_event(Some(t))?.expect("a completion event");
    /// assert_eq!(ev.cqn(), cq.cqn());
    /// ev.req_notify(false)?; // re-arm before draining
    /// let mut wc = [WorkCompletion::default(); 4];
    /// assert_eq!(ev.poll(&mut wc)?, 1);
    /// # Ok(()) }
    /// ```
    pub fn get_cq_event(&self, timeout: Option<Duration>) -> Result<Option<CompletionQueue>> {
        // A timeout past what `Instant` holds (`Duration::MAX`) is no timeout.
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut cqns = [0u32; 16];
        loop {
            // Clear the fd first, then look: an interrupt after this point makes it readable
            // again, so no event is ever left behind a clear fd.
            self.consume_signal()?;
            loop {
                let mut pending = lock(&self.inner.pending);
                let Some(cqn) = pending.pop_front() else {
                    break;
                };
                let more = !pending.is_empty();
                drop(pending);
                let cq = lock(&self.inner.cqs).get(&cqn).and_then(Weak::upgrade);
                if let Some(inner) = cq {
                    if more {
                        // Events already taken from the device stay visible on the fd.
                        self.signal();
                    }
                    inner.cq.note_event();
                    return Ok(Some(CompletionQueue { inner }));
                }
            }
            let n = self
                .inner
                .chan
                .wait(Duration::ZERO, &mut cqns)
                .map_err(Error::driver("ibv_get_cq_event"))?;
            if n > 0 {
                lock(&self.inner.pending).extend(&cqns[..n]);
                continue;
            }
            let left = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(None);
                    }
                    left
                }
                None => WAIT_SLICE,
            };
            wait_readable(self.inner.raw_fd, left.min(WAIT_SLICE))?;
        }
    }

    /// Makes the fd readable (an eventfd: adds 1).
    fn signal(&self) {
        let one = 1u64;
        // SAFETY: writes 8 bytes to the channel's eventfd, open while `self` lives.
        let _ = unsafe {
            libc::write(
                self.inner.raw_fd,
                (&raw const one).cast(),
                std::mem::size_of::<u64>(),
            )
        };
    }

    /// Clears the fd's readiness.
    fn consume_signal(&self) -> Result<()> {
        consume_irq_signal(
            self.inner.own_fd.as_ref(),
            &**self.inner.ctx.hca().bus(),
            self.inner.chan.vector(),
            "ibv_get_cq_event",
        )
    }
}

/// A new non-blocking eventfd, for a bridge thread to signal (`verb` names it in errors).
pub(crate) fn new_eventfd(verb: &str) -> Result<OwnedFd> {
    // SAFETY: plain system call; the result is checked.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(Error::Io {
            what: format!("{verb}: eventfd"),
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: `fd` is a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Clears the readiness of the fd of interrupt `vector`: our bridge's eventfd `own_fd`
/// (non-blocking), or, with `None`, the bus's own eventfd.
pub(crate) fn consume_irq_signal(
    own_fd: Option<&OwnedFd>,
    bus: &dyn Bus,
    vector: u16,
    verb: &str,
) -> Result<()> {
    match own_fd {
        Some(fd) => {
            let mut v = 0u64;
            // SAFETY: reads 8 bytes into `v` from our non-blocking eventfd.
            let r = unsafe {
                libc::read(
                    fd.as_raw_fd(),
                    (&raw mut v).cast(),
                    std::mem::size_of::<u64>(),
                )
            };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::WouldBlock {
                    return Err(Error::io(format!("{verb}: reading the eventfd"))(e));
                }
            }
        }
        None => {
            // The bus's eventfd: `wait_irq` with no wait consumes what has fired.
            while bus.wait_irq(vector, Duration::ZERO).unwrap_or(false) {}
        }
    }
    Ok(())
}

impl AsRawFd for CompletionChannel {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.raw_fd
    }
}

impl AsFd for CompletionChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor stays open while the channel (and so `self`) lives.
        unsafe { BorrowedFd::borrow_raw(self.inner.raw_fd) }
    }
}

/// Waits up to `timeout` for `fd` to become readable.
fn wait_readable(fd: RawFd, timeout: Duration) -> Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(timeout.as_millis().max(1)).unwrap_or(i32::MAX);
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, ms) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(Error::io("ibv_get_cq_event: poll")(e));
    }
    Ok(r > 0)
}

pub(crate) fn spawn_bridge(
    bus: Arc<dyn Bus>,
    vector: u16,
    fd: RawFd,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("rnic-irq{vector}"))
        .spawn(move || {
            while !stop.load(Ordering::Acquire) {
                match bus.wait_irq(vector, Duration::from_millis(20)) {
                    Ok(true) => {
                        let one = 1u64;
                        // SAFETY: writes 8 bytes to the eventfd, which outlives this thread
                        // (the channel joins it before closing the fd).
                        let _ = unsafe {
                            libc::write(fd, (&raw const one).cast(), std::mem::size_of::<u64>())
                        };
                    }
                    Ok(false) => {}
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        })
        .map_err(Error::io(
            "ibv_create_comp_channel: spawning the interrupt thread",
        ))
}

#[derive(Debug)]
pub(crate) struct CqInner {
    // Dropped first: the driver CQ, then the channel, then the context.
    pub(crate) cq: Arc<Cq>,
    channel: Option<CompletionChannel>,
    ctx: Context,
}

/// A completion queue (`ibv_create_cq`): a cheap handle (an `Arc` inside). QPs keep their
/// CQs alive, so a CQ cannot go away under a QP that uses it.
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
/// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
/// let cq = a.create_cq(64, None)?;
/// let qp = pa.create_qp(QpType::Rc, &cq, &cq).build()?;
/// // The QP holds a handle: destroying the CQ under it is refused.
/// let err = cq.clone().destroy().unwrap_err();
/// assert!(matches!(err, Error::InUse { verb: "ibv_destroy_cq", .. }));
/// drop(qp);
/// cq.destroy()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct CompletionQueue {
    pub(crate) inner: Arc<CqInner>,
}

impl CompletionQueue {
    pub(crate) fn create(
        ctx: &Context,
        cqe: u32,
        channel: Option<&CompletionChannel>,
    ) -> Result<CompletionQueue> {
        if let Some(ch) = channel {
            if !ch.context().same_device(ctx) {
                return Err(Error::invalid(
                    "ibv_create_cq",
                    "the completion channel belongs to another device",
                ));
            }
        }
        if cqe == 0 {
            return Err(Error::invalid("ibv_create_cq", "cqe must be at least 1"));
        }
        let max = ctx.query_device().max_cqe;
        if cqe > max {
            return Err(Error::invalid(
                "ibv_create_cq",
                format!("cqe {cqe} exceeds the device's max_cqe {max}"),
            ));
        }
        let cq = Cq::create(
            ctx.hca(),
            cqe.saturating_add(1),
            channel.map(|c| &c.inner.chan),
        )
        .map_err(Error::driver("ibv_create_cq"))?;
        let inner = Arc::new(CqInner {
            cq: Arc::new(cq),
            channel: channel.cloned(),
            ctx: ctx.clone(),
        });
        if let Some(ch) = channel {
            let mut cqs = lock(&ch.inner.cqs);
            cqs.retain(|_, w| w.strong_count() > 0);
            cqs.insert(inner.cq.cqn(), Arc::downgrade(&inner));
        }
        Ok(CompletionQueue { inner })
    }

    /// The CQ number.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let (cq1, cq2) = (ctx.create_cq(8, None)?, ctx.create_cq(8, None)?);
    /// assert_ne!(cq1.cqn(), cq2.cqn());
    /// # Ok(()) }
    /// ```
    pub fn cqn(&self) -> u32 {
        self.inner.cq.cqn()
    }

    /// Entries (`cqe`; at least what was asked for).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let cq = ctx.create_cq(100, None)?;
    /// assert!(cq.capacity() >= 100);
    /// assert!(ctx.create_cq(ctx.query_device().max_cqe + 1, None).is_err());
    /// # Ok(()) }
    /// ```
    pub fn capacity(&self) -> u32 {
        self.inner.cq.capacity() - 1
    }

    /// The context.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let cq = ctx.create_cq(8, None)?;
    /// assert_eq!(cq.context().name(), "emu0");
    /// # Ok(()) }
    /// ```
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// The completion channel, if any.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let chan = ctx.create_comp_channel()?;
    /// let cq = ctx.create_cq(8, Some(&chan))?;
    /// assert_eq!(cq.channel().map(|c| c.fd()), Some(chan.fd()));
    /// assert!(ctx.create_cq(8, None)?.channel().is_none());
    /// # Ok(()) }
    /// ```
    pub fn channel(&self) -> Option<&CompletionChannel> {
        self.inner.channel.as_ref()
    }

    /// `ibv_poll_cq`: up to `wc.len()` completions into `wc`; returns how many. No
    /// allocation, lock or system call. One thread polls a CQ at a time: a concurrent poll
    /// fails with [`Error::Poll`] (`Busy`).
    ///
    /// On an emulated device the NIC runs on this machine's CPUs: a busy-poll loop should
    /// call [`std::thread::yield_now`] when a poll returns 0 (as
    /// [`CompletionQueue::poll_blocking`] does), or wait on a completion channel. Spinning
    /// without yielding on a machine with few cores starves the device threads and turns
    /// microseconds per operation into milliseconds.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// qa.post_send(&[SendWr::write(1, &[], RemoteAddr::default()).signaled()])?; // 0 bytes: no buffer needed
    /// let mut wc = [WorkCompletion::default(); 8];
    /// let deadline = std::time::Instant::now() + t;
    /// let n = loop {
    ///     match ca.poll(&mut wc)? {
    ///         0 if std::time::Instant::now() < deadline => std::thread::yield_now(),
    ///         n => break n,
    ///     }
    /// };
    /// assert_eq!((n, wc[0].wr_id(), wc[0].status()), (1, 1, WcStatus::Success));
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn poll(&self, wc: &mut [WorkCompletion]) -> Result<usize> {
        self.inner
            .cq
            .poll(as_driver_mut(wc))
            .map_err(|source| Error::Poll {
                cqn: self.inner.cq.cqn(),
                source,
            })
    }

    /// `ibv_req_notify_cq`: one completion event for the next completion (or, with
    /// `solicited_only`, the next solicited or error one) on the CQ's channel.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let chan = ctx.create_comp_channel()?;
    /// ctx.create_cq(8, Some(&chan))?.req_notify(true)?; // solicited (and error) completions only
    /// // Without a channel there is nothing to notify.
    /// assert!(ctx.create_cq(8, None)?.req_notify(false).is_err());
    /// # Ok(()) }
    /// ```
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        if self.inner.channel.is_none() {
            return Err(Error::invalid(
                "ibv_req_notify_cq",
                "the CQ was created without a completion channel",
            ));
        }
        self.inner.cq.req_notify(solicited_only);
        Ok(())
    }

    /// Polls until `wc` holds `n` completions or `timeout` passes (a convenience for
    /// examples and tests; spins with `yield_now`). Returns how many were polled.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// qb.post_recv(&[RecvWr::new(1, &[]), RecvWr::new(2, &[])])?;
    /// qa.post_send(&[SendWr::send(1, &[]), SendWr::send(2, &[])])?;
    /// let mut wc = [WorkCompletion::default(); 2];
    /// assert_eq!(cb.poll_blocking(&mut wc, t)?, 2);
    /// // Nothing more comes: the wait ends at the timeout with 0.
    /// assert_eq!(cb.poll_blocking(&mut wc[..1], std::time::Duration::from_millis(10))?, 0);
    /// # Ok(()) }
    /// ```
    pub fn poll_blocking(&self, wc: &mut [WorkCompletion], timeout: Duration) -> Result<usize> {
        // `None` (a timeout past what `Instant` holds, `Duration::MAX`): no deadline.
        let deadline = Instant::now().checked_add(timeout);
        let mut got = 0;
        while got < wc.len() {
            got += self.poll(&mut wc[got..])?;
            if got < wc.len() {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                std::thread::yield_now();
            }
        }
        Ok(got)
    }

    /// `ibv_destroy_cq`: fails with [`Error::InUse`] while QPs (or clones) hold it; dropping
    /// the last handle destroys it too.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let cq = ctx.create_cq(8, None)?;
    /// let other = cq.clone();
    /// assert!(matches!(cq.destroy(), Err(Error::InUse { users: 1, .. })));
    /// other.destroy()?; // the last handle
    /// # Ok(()) }
    /// ```
    pub fn destroy(self) -> Result<()> {
        let users = Arc::strong_count(&self.inner) - 1;
        let inner = Arc::try_unwrap(self.inner).map_err(|_| Error::InUse {
            verb: "ibv_destroy_cq",
            users,
        })?;
        let CqInner { cq, channel, ctx } = inner;
        let cq = Arc::try_unwrap(cq).map_err(|_| Error::InUse {
            verb: "ibv_destroy_cq",
            users: 1,
        })?;
        let r = cq.destroy().map_err(Error::driver("ibv_destroy_cq"));
        drop(channel);
        drop(ctx);
        r
    }
}
