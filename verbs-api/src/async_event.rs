//! Awaiting asynchronous events with tokio (feature `tokio`): [`AsyncEvents`], the awaited
//! `ibv_get_async_event` of a [`Context`].
//!
//! The device writes asynchronous events (and firmware page requests) to the HCA's own event
//! queue, which raises interrupt vector 0. The blocking [`Context::get_async_event`] polls
//! that queue; here the vector is waited for instead, as ibverbs' `async_fd`:
//!
//! - on a real device, vector 0's VFIO MSI-X eventfd;
//! - on an emulated device, an eventfd that a small thread signals each time the vector
//!   fires (as a completion channel's bridge does): one thread per open device, however many
//!   [`AsyncEvents`] handles it has, stopped when the last is dropped.
//!
//! Events are the context's: the blocking and the async verb take from the same queue.

use crate::async_fd::{PerObject, Readiness, Waiters};
use crate::context::DeviceHandle;
use crate::cq::{consume_irq_signal, new_eventfd, spawn_bridge};
use crate::error::Result;
use crate::{AsyncEvent, Context};
use rnic_hw_regs::Bus;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// The HCA's event queue's interrupt vector (`EventQueue::create`'s `intr`).
const ASYNC_VECTOR: u16 = 0;

/// The fd that becomes readable when vector 0 fires, one per open device.
struct EventFd {
    bus: Arc<dyn Bus>,
    /// Our eventfd (emulated buses), or `None` when the bus's own fd is used.
    own_fd: Option<OwnedFd>,
    raw_fd: RawFd,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// The tasks waiting for the device's events, through any handle.
    waiters: Arc<Waiters>,
}

impl std::fmt::Debug for EventFd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventFd")
            .field("fd", &self.raw_fd)
            .field("bridged", &self.own_fd.is_some())
            .finish_non_exhaustive()
    }
}

impl Drop for EventFd {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Each open device's [`EventFd`], while an [`AsyncEvents`] of it lives.
static EVENT_FDS: PerObject<DeviceHandle, EventFd> = PerObject::new();

impl EventFd {
    /// The device's fd, made on first use.
    fn of(ctx: &Context) -> Result<Arc<EventFd>> {
        EVENT_FDS.get_or_make(&ctx.inner, || EventFd::make(ctx))
    }

    fn make(ctx: &Context) -> Result<EventFd> {
        let bus = ctx.hca().bus().clone();
        Ok(match bus.irq_fd(ASYNC_VECTOR) {
            Some(fd) => EventFd {
                bus,
                own_fd: None,
                raw_fd: fd,
                stop: Arc::new(AtomicBool::new(false)),
                thread: None,
                waiters: Arc::default(),
            },
            None => {
                let owned = new_eventfd("ibv_get_async_event")?;
                let raw = owned.as_raw_fd();
                let stop = Arc::new(AtomicBool::new(false));
                // The thread writes to `raw`, which `owned` keeps open until `drop` joined it.
                let thread = spawn_bridge(bus.clone(), ASYNC_VECTOR, raw, stop.clone())?;
                EventFd {
                    bus,
                    own_fd: Some(owned),
                    raw_fd: raw,
                    stop,
                    thread: Some(thread),
                    waiters: Arc::default(),
                }
            }
        })
    }

    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor stays open while `self` lives (ours, or the bus's, which
        // `self.bus` keeps).
        unsafe { BorrowedFd::borrow_raw(self.raw_fd) }
    }

    /// Clears the fd's readiness.
    fn consume(&self) -> Result<()> {
        consume_irq_signal(
            self.own_fd.as_ref(),
            &*self.bus,
            ASYNC_VECTOR,
            "ibv_get_async_event",
        )
    }
}

/// A [`Context`]'s asynchronous events, awaited (ibverbs' `async_fd` in the runtime's
/// reactor): a cheap handle (an `Arc` inside). Any number of handles, and tasks, may wait on
/// one device; each event goes to one of them.
///
/// Made inside a tokio runtime with IO enabled (`enable_io`).
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> {
/// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
/// let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
/// rt.block_on(async {
///     let events = AsyncEvents::new(&b)?;
///     // A WRITE to an rkey emu1 never gave out: emu1's QP reports the access violation.
///     qa.post_send(&[SendWr::write(1, &[], RemoteAddr { addr: 0, rkey: 0x99 }).inline(b"x")])?;
///     let ev = events.get_async_event().await?;
///     assert_eq!(ev, AsyncEvent::QpAccessErr { qpn: qb.qp_num() });
///     Ok(())
/// })
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct AsyncEvents {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    // Dropped first: the reactor's registration of the duplicate, then the fd.
    readiness: Readiness,
    fd: Arc<EventFd>,
    ctx: Context,
}

impl AsyncEvents {
    /// Registers the device's event fd (a duplicate of it) with the current tokio runtime.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, or in one built without IO (as tokio's `AsyncFd::new`).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    /// # let _guard = rt.enter();
    /// let ctx = Context::open("emu0")?;
    /// let (one, two) = (AsyncEvents::new(&ctx)?, AsyncEvents::new(&ctx)?); // one thread
    /// assert!(one.context().same_device(two.context()));
    /// # Ok(()) }
    /// ```
    pub fn new(ctx: &Context) -> Result<AsyncEvents> {
        let fd = EventFd::of(ctx)?;
        let readiness = Readiness::new(fd.as_fd(), fd.waiters.clone(), "ibv_get_async_event")?;
        Ok(AsyncEvents {
            inner: Arc::new(Inner {
                readiness,
                fd,
                ctx: ctx.clone(),
            }),
        })
    }

    /// The context.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    /// # let _guard = rt.enter();
    /// let ctx = Context::open("emu0")?;
    /// assert_eq!(AsyncEvents::new(&ctx)?.context().name(), "emu0");
    /// # Ok(()) }
    /// ```
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// `ibv_get_async_event`, awaited: the device's next asynchronous event. Firmware page
    /// requests on the way are served, as [`Context::get_async_event`] does. Cancel-safe:
    /// an event is taken only when the future returns it.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let rt = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build().unwrap();
    /// rt.block_on(async {
    ///     let events = AsyncEvents::new(&a)?;
    ///     // Nothing happened: no event within 10 ms.
    ///     let wait = tokio::time::timeout(std::time::Duration::from_millis(10), events.get_async_event());
    ///     assert!(wait.await.is_err());
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub async fn get_async_event(&self) -> Result<AsyncEvent> {
        let inner = &*self.inner;
        inner
            .readiness
            .wait("ibv_get_async_event", || {
                // Clear the fd first, then look: an interrupt after this makes it readable.
                inner.fd.consume()?;
                let ev = inner.ctx.get_async_event(Duration::ZERO)?;
                if ev.is_some() {
                    // More may have been queued by this look: the other waiters look again.
                    inner.readiness.wake_all();
                }
                Ok(ev)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use crate::async_fd::tests::runtime;
    use crate::*;
    use std::time::Duration;

    #[test]
    fn an_async_event_wakes_the_waiting_task() {
        let doc_fixture::Pair { b, qa, qb, .. } = doc_fixture::Pair::connected().unwrap();
        runtime().block_on(async {
            let events = AsyncEvents::new(&b).unwrap();
            // A wait cancelled by a timeout first: the event after it is not lost.
            let early = tokio::time::timeout(Duration::from_millis(10), events.get_async_event());
            assert!(early.await.is_err());
            let e2 = events.clone();
            let waiter = tokio::spawn(async move { e2.get_async_event().await });
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(!waiter.is_finished());
            let bad = RemoteAddr {
                addr: 0,
                rkey: 0x99,
            };
            qa.post_send(&[SendWr::write(1, &[], bad).inline(b"x")])
                .unwrap();
            let ev = tokio::time::timeout(Duration::from_secs(10), waiter)
                .await
                .expect("the event wakes the task")
                .unwrap()
                .unwrap();
            assert_eq!(ev, AsyncEvent::QpAccessErr { qpn: qb.qp_num() });
            // Taken: neither verb sees it again.
            assert_eq!(b.get_async_event(Duration::ZERO).unwrap(), None);
            let again =
                tokio::time::timeout(Duration::from_millis(10), events.get_async_event()).await;
            assert!(again.is_err());
        });
    }

    #[test]
    fn handles_of_one_device_share_one_fd() {
        let ctx = Context::open("emu0").unwrap();
        let rt = runtime();
        let _g = rt.enter();
        let (one, two) = (
            AsyncEvents::new(&ctx).unwrap(),
            AsyncEvents::new(&ctx).unwrap(),
        );
        assert!(std::sync::Arc::ptr_eq(&one.inner.fd, &two.inner.fd));
    }
}
