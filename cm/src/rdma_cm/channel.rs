//! [`EventChannel`] (`struct rdma_event_channel`): where the events of the ids created on
//! it queue ([`CmEvent`], by [`EventKind`] name), taken by a blocking wait with a timeout
//! ([`EventChannel::get_event`]) or after a file descriptor an async runtime polls became
//! readable ([`EventChannel::fd`], an eventfd readable while an event is queued).

use crate::cma::ConnParam;
use crate::rdma_cm::error::{Error, Result};
use crate::rdma_cm::id::CmId;
use rnic_verbs::AhAttr;
use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What happened (`enum rdma_cm_event_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// `RDMA_CM_EVENT_ADDR_RESOLVED`: the destination's neighbour is known.
    AddrResolved,
    /// `RDMA_CM_EVENT_ADDR_ERROR`: it could not be resolved.
    AddrError,
    /// `RDMA_CM_EVENT_ROUTE_RESOLVED`: the path is known; connect next.
    RouteResolved,
    /// `RDMA_CM_EVENT_CONNECT_REQUEST`: a REQ for a listening id; the event's id is the new
    /// connection's, to accept or reject.
    ConnectRequest,
    /// `RDMA_CM_EVENT_CONNECT_ERROR`: the local side could not go on with the connection
    /// (its QP did not take the peer's attributes); the peer was rejected.
    ConnectError,
    /// `RDMA_CM_EVENT_UNREACHABLE`: the peer did not answer, retries included
    /// ([`CmEvent::status`] `-ETIMEDOUT`), or (UD) its SIDR REP refused the service
    /// (`status` is the SIDR REP's status: 1 no such service, 2 rejected, ...).
    Unreachable,
    /// `RDMA_CM_EVENT_REJECTED`: the peer sent a REJ ([`CmEvent::status`] is its reason).
    Rejected,
    /// `RDMA_CM_EVENT_ESTABLISHED`: the QP is in RTS on both sides; for a UD id (port
    /// space UDP), the SIDR REP accepted: [`CmEvent::ud`] says where to send.
    Established,
    /// `RDMA_CM_EVENT_DISCONNECTED`: a DREQ came (the QP is in error now) or our own
    /// disconnect finished.
    Disconnected,
    /// `RDMA_CM_EVENT_TIMEWAIT_EXIT`: the connection's timewait is over; its QP may be
    /// reused.
    TimewaitExit,
}

impl EventKind {
    /// librdmacm's name of the event (`rdma_event_str`), what its tools print.
    ///
    /// ```
    /// use rnic_cm::rdma_cm::EventKind;
    /// assert_eq!(EventKind::Unreachable.as_str(), "RDMA_CM_EVENT_UNREACHABLE");
    /// assert_eq!(EventKind::TimewaitExit.to_string(), "RDMA_CM_EVENT_TIMEWAIT_EXIT");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::AddrResolved => "RDMA_CM_EVENT_ADDR_RESOLVED",
            EventKind::AddrError => "RDMA_CM_EVENT_ADDR_ERROR",
            EventKind::RouteResolved => "RDMA_CM_EVENT_ROUTE_RESOLVED",
            EventKind::ConnectRequest => "RDMA_CM_EVENT_CONNECT_REQUEST",
            EventKind::ConnectError => "RDMA_CM_EVENT_CONNECT_ERROR",
            EventKind::Unreachable => "RDMA_CM_EVENT_UNREACHABLE",
            EventKind::Rejected => "RDMA_CM_EVENT_REJECTED",
            EventKind::Established => "RDMA_CM_EVENT_ESTABLISHED",
            EventKind::Disconnected => "RDMA_CM_EVENT_DISCONNECTED",
            EventKind::TimewaitExit => "RDMA_CM_EVENT_TIMEWAIT_EXIT",
        }
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An event (`struct rdma_cm_event`). Take it with [`EventChannel::get_event`], then
/// [`ack`](CmEvent::ack) it (or drop it: the same).
#[derive(Debug)]
pub struct CmEvent {
    /// What happened.
    pub kind: EventKind,
    /// The id it happened to (for [`EventKind::ConnectRequest`], the new connection's).
    pub id: CmId,
    /// For [`EventKind::ConnectRequest`]: the listening id.
    pub listen_id: Option<CmId>,
    /// `event->status`, as librdmacm reports it: the REJ's reason for
    /// [`EventKind::Rejected`]; `-ETIMEDOUT` (-110) for an [`EventKind::Unreachable`] whose
    /// retries ran out, the SIDR REP's status for one the peer refused; `-EINVAL` (-22) for
    /// an [`EventKind::AddrError`] (a SIDR REP whose Q_Key is not the id's), -1 (a failed
    /// verb, as librdmacm's) for an [`EventKind::ConnectError`]; 0 otherwise.
    pub status: i32,
    /// The peer's connection parameters (`event->param.conn`, ids of connected port
    /// spaces): private data (the consumer's, without rdma_cm's header) of the REQ, REP or
    /// REJ; retry and RNR retry counts and the peer's QPN of a REQ; its responder resources
    /// and initiator depth from this side's view, as the kernel's CM turns them
    /// (`responder_resources` is the REQ's initiator depth, what this side's QP is to
    /// serve; `initiator_depth` the REQ's responder resources).
    pub param: ConnParam,
    /// `event->param.ud`, events of UD ids (port space UDP): the SIDR REQ's private data
    /// in a ConnectRequest, the service's QPN, Q_Key and address in an Established, the
    /// SIDR REP's private data in an Unreachable it caused.
    pub ud: Option<UdParam>,
}

/// `struct rdma_ud_param`: what a UD id's event says about the peer's UD QP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdParam {
    /// The consumer's private data: of the SIDR REQ (without rdma_cm's IP header, 180
    /// bytes) in a ConnectRequest, of the SIDR REP (136 bytes) otherwise.
    pub private_data: Vec<u8>,
    /// The address to send to the peer with (`ibv_create_ah` takes it): towards the
    /// service in an Established (the route's path, as `ib_init_ah_attr_from_path`), towards
    /// the requester in a ConnectRequest; none in an Unreachable.
    pub ah_attr: Option<AhAttr>,
    /// The peer's UD QP number (0 in a ConnectRequest: the SIDR REQ carries none).
    pub qp_num: u32,
    /// The Q_Key to send to it with (0 in a ConnectRequest).
    pub qkey: u32,
}

impl CmEvent {
    /// `rdma_ack_cm_event`: done with the event.
    pub fn ack(self) {}
}

#[derive(Debug)]
pub(crate) struct ChanInner {
    queue: Mutex<VecDeque<CmEvent>>,
    ready: Condvar,
    /// Readable (counter > 0) exactly while `queue` is not empty.
    efd: OwnedFd,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ChanInner {
    /// Queues `ev` and makes the fd readable.
    pub(crate) fn push(&self, ev: CmEvent) {
        let mut q = lock(&self.queue);
        if q.is_empty() {
            let one = 1u64;
            // SAFETY: writes 8 bytes to the channel's eventfd, open while `self` lives. A
            // failure (the counter at its maximum) leaves it readable anyway.
            let _ = unsafe {
                libc::write(
                    self.efd.as_raw_fd(),
                    (&raw const one).cast::<libc::c_void>(),
                    8,
                )
            };
        }
        q.push_back(ev);
        self.ready.notify_all();
    }

    /// Takes the queued events of `id` out, in their order (`rdma_migrate_id`).
    pub(crate) fn take_of(&self, id: &CmId) -> Vec<CmEvent> {
        let mut q = lock(&self.queue);
        let (mine, rest): (VecDeque<CmEvent>, VecDeque<CmEvent>) =
            q.drain(..).partition(|ev| ev.id == *id);
        *q = rest;
        if q.is_empty() && !mine.is_empty() {
            self.clear();
        }
        mine.into()
    }

    /// Clears the fd's readiness (the queue became empty; called with the queue locked).
    fn clear(&self) {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into `v` from the non-blocking eventfd; EAGAIN (already
        // clear) is fine.
        let _ = unsafe { libc::read(self.efd.as_raw_fd(), (&raw mut v).cast::<libc::c_void>(), 8) };
    }
}

/// An event channel (`rdma_create_event_channel`). A cheap handle; ids created on it keep
/// it alive.
///
/// ```
/// use rnic_cm::rdma_cm::EventChannel;
/// # fn main() -> Result<(), rnic_cm::rdma_cm::Error> {
/// let ch = EventChannel::new()?;
/// // Nothing queued: the wait ends at its timeout, the fd is not readable.
/// assert!(ch.get_event(Some(std::time::Duration::from_millis(1)))?.is_none());
/// assert!(ch.fd() >= 0);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct EventChannel {
    pub(crate) inner: Arc<ChanInner>,
}

impl EventChannel {
    /// A new channel with its eventfd.
    pub fn new() -> Result<EventChannel> {
        // SAFETY: eventfd(2) with constant flags; the result is checked before use.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(Error::Io {
                what: "rdma_create_event_channel: eventfd",
                source: std::io::Error::last_os_error(),
            });
        }
        // SAFETY: `fd` is a new descriptor nobody else owns.
        let efd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(EventChannel {
            inner: Arc::new(ChanInner {
                queue: Mutex::new(VecDeque::new()),
                ready: Condvar::new(),
                efd,
            }),
        })
    }

    /// `rdma_get_cm_event`: the next event, waiting up to `timeout` (`None`: until one
    /// comes); `Ok(None)` when none came in time.
    pub fn get_event(&self, timeout: Option<Duration>) -> Result<Option<CmEvent>> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut q = lock(&self.inner.queue);
        loop {
            if let Some(ev) = q.pop_front() {
                if q.is_empty() {
                    self.inner.clear();
                }
                return Ok(Some(ev));
            }
            q = match deadline {
                None => self.inner.ready.wait(q).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Ok(None);
                    }
                    let w = self.inner.ready.wait_timeout(q, d - now);
                    w.unwrap_or_else(|e| e.into_inner()).0
                }
            };
        }
    }

    /// The next event if one is queued, without waiting (what to call once
    /// [`fd`](Self::fd) polled readable).
    pub fn try_get_event(&self) -> Option<CmEvent> {
        self.get_event(Some(Duration::ZERO)).ok().flatten()
    }

    /// The channel's file descriptor (`channel->fd`): readable while an event is queued.
    pub fn fd(&self) -> RawFd {
        self.inner.efd.as_raw_fd()
    }
}

impl AsRawFd for EventChannel {
    fn as_raw_fd(&self) -> RawFd {
        self.fd()
    }
}

impl AsFd for EventChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.efd.as_fd()
    }
}
