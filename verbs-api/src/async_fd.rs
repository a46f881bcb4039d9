//! The plumbing the `tokio` feature's waits share: a duplicate of an object's file descriptor
//! registered with tokio's reactor, and the wakers of the tasks waiting on that object.
//!
//! The descriptor is duplicated so that any number of async handles of one channel (or one
//! device) can register with the same reactor: epoll refuses the same descriptor twice, but a
//! duplicate is a descriptor of its own, and a signal on the shared eventfd wakes them all.
//!
//! A wait always looks before it sleeps and clears the reactor's readiness before it looks
//! again, so a signal that arrives after a look is never lost. The waker list covers what the
//! descriptor cannot say: a task that takes something meant for another (an event of another
//! CQ, kept aside) wakes the others, so they look again.

use crate::error::{Error, Result};
use std::future::{Future, poll_fn};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Poll, Waker};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Waiters kept at most before they are all woken and forgotten (a woken task that still
/// waits registers again; this bounds the list when tasks come and go).
const MAX_WAITERS: usize = 64;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The tasks waiting on one object (a channel, a device), whichever async handle of it they
/// wait through.
#[derive(Debug, Default)]
pub(crate) struct Waiters(Mutex<Vec<Waker>>);

impl Waiters {
    /// Wakes every task waiting here (they look again).
    pub(crate) fn wake_all(&self) {
        let waiters = std::mem::take(&mut *lock(&self.0));
        for w in waiters {
            w.wake();
        }
    }

    fn register(&self, waker: &Waker) {
        let mut ws = lock(&self.0);
        if ws.iter().any(|w| w.will_wake(waker)) {
            return;
        }
        if ws.len() >= MAX_WAITERS {
            let old = std::mem::take(&mut *ws);
            drop(ws);
            old.into_iter().for_each(Waker::wake);
            ws = lock(&self.0);
        }
        ws.push(waker.clone());
    }
}

/// What every async handle of one object shares, made by the first handle and kept while one
/// lives: `K` is the object (`ChanInner`, `DeviceHandle`), `V` the shared state.
#[derive(Debug)]
pub(crate) struct PerObject<K, V>(Mutex<Vec<(Weak<K>, Weak<V>)>>);

impl<K, V> PerObject<K, V> {
    /// An empty table (for a `static`).
    pub(crate) const fn new() -> Self {
        PerObject(Mutex::new(Vec::new()))
    }

    /// The state of `key`, made with `make` when no handle of it lives.
    pub(crate) fn get_or_make(
        &self,
        key: &Arc<K>,
        make: impl FnOnce() -> Result<V>,
    ) -> Result<Arc<V>> {
        let mut all = lock(&self.0);
        all.retain(|(k, v)| k.strong_count() > 0 && v.strong_count() > 0);
        let found = all
            .iter()
            .find(|(k, _)| std::ptr::eq(k.as_ptr(), Arc::as_ptr(key)))
            .and_then(|(_, v)| v.upgrade());
        if let Some(v) = found {
            return Ok(v);
        }
        let v = Arc::new(make()?);
        all.push((Arc::downgrade(key), Arc::downgrade(&v)));
        Ok(v)
    }
}

/// A descriptor's readiness in tokio's reactor (one registration per async handle), and the
/// tasks waiting on its object.
#[derive(Debug)]
pub(crate) struct Readiness {
    afd: AsyncFd<OwnedFd>,
    waiters: Arc<Waiters>,
}

impl Readiness {
    /// Registers a duplicate of `fd` with the current runtime's reactor; `waiters` are its
    /// object's.
    ///
    /// Panics outside a tokio runtime with IO enabled (as `AsyncFd::new` does).
    pub(crate) fn new(
        fd: BorrowedFd<'_>,
        waiters: Arc<Waiters>,
        verb: &'static str,
    ) -> Result<Readiness> {
        let dup = fd
            .try_clone_to_owned()
            .map_err(Error::io(format!("{verb}: duplicating the fd")))?;
        // SAFETY: `dup` is an `OwnedFd`: open, and the same descriptor, while the AsyncFd
        // owns it.
        let afd = unsafe { AsyncFd::register_with_interest(dup, Interest::READABLE) }
            .map_err(|e| Error::io(format!("{verb}: registering the fd with tokio"))(e.into()))?;
        Ok(Readiness { afd, waiters })
    }

    /// Wakes every task waiting on the object (they look again).
    pub(crate) fn wake_all(&self) {
        self.waiters.wake_all();
    }

    /// Waits until `look` finds something: `look` runs at once, after each signal on the
    /// descriptor and after each [`Readiness::wake_all`]. `look` must consume the signal it
    /// acts on (read the eventfd) before it looks at the queue, as the sync waits do.
    ///
    /// Cancel-safe as long as `look` is: nothing is held across an await.
    pub(crate) async fn wait<T>(
        &self,
        verb: &'static str,
        mut look: impl FnMut() -> Result<Option<T>>,
    ) -> Result<T> {
        loop {
            let readable = self.afd.readable();
            let mut readable = std::pin::pin!(readable);
            let found = poll_fn(|cx| {
                // Registered before the look: a wake_all after it reaches this task.
                self.waiters.register(cx.waker());
                match look() {
                    Ok(Some(t)) => return Poll::Ready(Ok(Some(t))),
                    Ok(None) => {}
                    Err(e) => return Poll::Ready(Err(e)),
                }
                match readable.as_mut().poll(cx) {
                    Poll::Ready(Ok(mut guard)) => {
                        // Cleared before the next look, which consumes the signal: a signal
                        // after that look sets the readiness again.
                        guard.clear_ready();
                        Poll::Ready(Ok(None))
                    }
                    Poll::Ready(Err(e)) => {
                        Poll::Ready(Err(Error::io(format!("{verb}: waiting for the fd"))(e)))
                    }
                    Poll::Pending => Poll::Pending,
                }
            })
            .await?;
            if let Some(t) = found {
                return Ok(t);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    /// The runtime the async tests run in: current-thread, with IO and time.
    pub(crate) fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .unwrap()
    }
}
