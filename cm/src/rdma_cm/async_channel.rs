//! Feature `tokio`: [`AsyncEventChannel`], an [`EventChannel`] whose events tokio tasks
//! await (`rdma_get_cm_event` without a blocked thread): its eventfd, readable while an
//! event is queued, sits in the runtime's reactor (a duplicate of it, so any number of async
//! handles of one channel can register). [`AsyncEventChannel::get_event`] awaits the next
//! event; the handle is also a [`Stream`] of them.
//!
//! A wait looks at the queue before it sleeps, and clears the reactor's readiness before it
//! looks again, so an event queued between a look and the sleep is never missed.
//!
//! ```
//! use rnic_cm::rdma_cm::{AsyncEventChannel, CmId, EventChannel, EventKind};
//! use rnic_cm::wire::ip::PortSpace;
//!
//! # fn main() -> Result<(), rnic_cm::rdma_cm::Error> {
//! let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
//! rt.block_on(async {
//!     let ch = EventChannel::new()?;
//!     let events = AsyncEventChannel::new(&ch)?;
//!     let id = CmId::new(&ch, PortSpace::Tcp);
//!     id.resolve_addr(None, "192.0.2.2:7471".parse().unwrap(), std::time::Duration::from_secs(2))?;
//!     let ev = events.get_event().await?; // no thread blocks meanwhile
//!     assert_eq!((ev.kind, ev.id == id), (EventKind::AddrResolved, true));
//!     Ok(())
//! })
//! # }
//! ```

use crate::rdma_cm::channel::{CmEvent, EventChannel};
use crate::rdma_cm::error::{Error, Result};
use futures_core::Stream;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// An [`EventChannel`] registered with tokio's reactor. Made inside a tokio runtime with IO
/// enabled (`enable_io`). Taking events through it and through the blocking
/// [`EventChannel::get_event`] at once is allowed: each event goes to one taker.
#[derive(Debug)]
pub struct AsyncEventChannel {
    chan: EventChannel,
    afd: AsyncFd<OwnedFd>,
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { what, source }
}

impl AsyncEventChannel {
    /// Registers (a duplicate of) `channel`'s fd with the current tokio runtime.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, or in one built without IO (as tokio's `AsyncFd::new`).
    pub fn new(channel: &EventChannel) -> Result<AsyncEventChannel> {
        let dup = channel
            .as_fd()
            .try_clone_to_owned()
            .map_err(io("rdma_get_cm_event: duplicating the channel's fd"))?;
        // SAFETY: `dup` is an `OwnedFd`: open, and the same descriptor, while the AsyncFd
        // owns it.
        let afd = unsafe { AsyncFd::register_with_interest(dup, Interest::READABLE) }
            .map_err(|e| io("rdma_get_cm_event: registering the fd with tokio")(e.into()))?;
        Ok(AsyncEventChannel {
            chan: channel.clone(),
            afd,
        })
    }

    /// The event channel (for the ids: `CmId::new` takes it).
    pub fn channel(&self) -> &EventChannel {
        &self.chan
    }

    /// `rdma_get_cm_event`, awaited: the next event. Cancel-safe: an event is taken only
    /// when the future returns it. Any number of tasks may await one handle.
    pub async fn get_event(&self) -> Result<CmEvent> {
        loop {
            if let Some(ev) = self.chan.try_get_event() {
                return Ok(ev);
            }
            let mut ready = self
                .afd
                .readable()
                .await
                .map_err(io("rdma_get_cm_event: waiting for the fd"))?;
            // Cleared before the next look: an event queued after that look signals again.
            ready.clear_ready();
        }
    }

    /// The next event if one is queued; otherwise `Pending`, and `cx`'s task is woken when
    /// one may be (only the last task to poll a handle this way is woken; tasks that share
    /// a handle await [`get_event`](Self::get_event) instead).
    pub fn poll_event(&self, cx: &mut Context<'_>) -> Poll<Result<CmEvent>> {
        loop {
            if let Some(ev) = self.chan.try_get_event() {
                return Poll::Ready(Ok(ev));
            }
            match self.afd.poll_read_ready(cx) {
                Poll::Ready(Ok(mut ready)) => ready.clear_ready(),
                Poll::Ready(Err(e)) => {
                    return Poll::Ready(Err(io("rdma_get_cm_event: waiting for the fd")(e)));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// The channel's events, in order; the stream never ends (a channel lives as long as its
/// handles).
impl Stream for AsyncEventChannel {
    type Item = Result<CmEvent>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.poll_event(cx).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdma_cm::{CmId, EventKind};
    use crate::wire::ip::PortSpace;
    use std::time::Duration;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .unwrap()
    }

    #[test]
    fn an_event_queued_while_a_task_waits_wakes_it_and_the_stream_yields_in_order() {
        runtime().block_on(async {
            let ch = EventChannel::new().unwrap();
            let a = AsyncEventChannel::new(&ch).unwrap();
            // Nothing queued: the wait does not end by itself.
            let none = tokio::time::timeout(Duration::from_millis(50), a.get_event()).await;
            assert!(none.is_err());
            // An event queued from another thread while the task waits wakes it.
            let ch2 = ch.clone();
            let t = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                let id = CmId::new(&ch2, PortSpace::Tcp);
                id.resolve_addr(None, "192.0.2.2:1".parse().unwrap(), Duration::ZERO)
                    .unwrap();
                id.resolve_route(Duration::ZERO).unwrap();
                id
            });
            let ev = tokio::time::timeout(Duration::from_secs(20), a.get_event())
                .await
                .expect("woken by the event")
                .unwrap();
            assert_eq!(ev.kind, EventKind::AddrResolved);
            let id = t.join().unwrap();
            // The stream: the next one, through poll_next.
            let mut a = a;
            let ev = std::future::poll_fn(|cx| Pin::new(&mut a).poll_next(cx))
                .await
                .unwrap()
                .unwrap();
            assert!(ev.kind == EventKind::RouteResolved && ev.id == id);
            assert!(ch.try_get_event().is_none());
        });
    }
}
