//! Awaiting completions with tokio (feature `tokio`): [`AsyncCompletionChannel`], a completion
//! channel registered with tokio's reactor, its awaited `ibv_get_cq_event`, and
//! [`CompletionQueue::poll_async`], the poll / arm / re-poll / await loop in one call.
//!
//! The channel's fd ([`CompletionChannel::fd`]) becomes readable when an event may be
//! waiting (the VFIO MSI-X eventfd, or on emulated devices the eventfd the channel's bridge
//! thread signals); tokio's `AsyncFd` waits on a duplicate of it, so no thread blocks.
//!
//! Several CQs may share one channel and several tasks may wait on one channel at once: an
//! event taken by a task that waits for another CQ is kept aside in the async handle (and
//! the other waiters woken) until [`CompletionQueue::poll_async`] of that CQ, or
//! [`AsyncCompletionChannel::get_cq_event`], takes it. A channel used through an async handle
//! should not also be read with the blocking [`CompletionChannel::get_cq_event`]: events kept
//! aside are not seen there.
//!
//! ```
//! use rnic_verbs::*;
//!
//! # fn main() -> Result<(), Error> {
//! # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
//! let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
//! rt.block_on(async {
//!     let chan = b.create_comp_channel()?;
//!     let cq = b.create_cq(8, Some(&chan))?;
//! #   let qr = pb.create_qp(QpType::Rc, &cq, &cq).build()?;
//! #   let qs = pa.create_qp(QpType::Rc, &ca, &ca).build()?;
//! #   connect_pair(&qs, &qr, &ConnectOptions::default())?;
//!     let chan = AsyncCompletionChannel::new(&chan)?;
//!     qr.post_recv(&[RecvWr::new(1, &[])])?;
//!     qs.post_send(&[SendWr::send(2, &[])])?;
//!     let mut wc = [WorkCompletion::default(); 4];
//!     let n = cq.poll_async(&chan, &mut wc).await?; // no thread blocks meanwhile
//!     assert_eq!((n, wc[0].wr_id(), wc[0].status()), (1, 1, WcStatus::Success));
//!     Ok(())
//! })
//! # }
//! ```

use crate::async_fd::{PerObject, Readiness, Waiters};
use crate::cq::{ChanInner, CqInner};
use crate::error::{Error, Result};
use crate::{CompletionChannel, CompletionQueue, WorkCompletion};
use std::collections::VecDeque;
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What every async handle of one channel shares.
#[derive(Debug, Default)]
struct ChannelState {
    /// Events taken from the channel by a task that waited for another CQ.
    kept: Mutex<VecDeque<Weak<CqInner>>>,
    waiters: Arc<Waiters>,
}

/// Each channel's [`ChannelState`], while an async handle of it lives.
static CHANNELS: PerObject<ChanInner, ChannelState> = PerObject::new();

#[derive(Debug)]
struct Shared {
    chan: CompletionChannel,
    // This handle's registration with its runtime's reactor.
    readiness: Readiness,
    state: Arc<ChannelState>,
}

/// A [`CompletionChannel`] that tokio tasks await (`struct ibv_comp_channel` whose fd sits in
/// the runtime's reactor): a cheap handle (an `Arc` inside). All async handles of one
/// channel (clones, and those of other `new` calls) share the events kept aside for other
/// CQs, and wake each other's waiting tasks.
///
/// Made inside a tokio runtime with IO enabled (`enable_io`).
///
/// ```
/// use rnic_verbs::*;
///
/// # fn main() -> Result<(), Error> {
/// let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
/// rt.block_on(async {
///     let ctx = Context::open("emu0")?;
///     let chan = ctx.create_comp_channel()?;
///     let achan = AsyncCompletionChannel::new(&chan)?;
///     assert_eq!(achan.channel().fd(), chan.fd());
///     Ok(())
/// })
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct AsyncCompletionChannel {
    shared: Arc<Shared>,
}

impl AsyncCompletionChannel {
    /// Registers `channel`'s fd (a duplicate of it) with the current tokio runtime.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, or in one built without IO (as tokio's `AsyncFd::new`).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    /// # let _guard = rt.enter();
    /// let chan = Context::open("emu0")?.create_comp_channel()?;
    /// // Any number of async handles of one channel: each registers its own duplicate.
    /// let (one, two) = (AsyncCompletionChannel::new(&chan)?, AsyncCompletionChannel::new(&chan)?);
    /// # drop((one, two));
    /// # Ok(()) }
    /// ```
    pub fn new(channel: &CompletionChannel) -> Result<AsyncCompletionChannel> {
        let state = CHANNELS.get_or_make(&channel.inner, || Ok(ChannelState::default()))?;
        let readiness = Readiness::new(channel.as_fd(), state.waiters.clone(), "ibv_get_cq_event")?;
        Ok(AsyncCompletionChannel {
            shared: Arc::new(Shared {
                chan: channel.clone(),
                readiness,
                state,
            }),
        })
    }

    /// The completion channel.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    /// # let _guard = rt.enter();
    /// let ctx = Context::open("emu0")?;
    /// let achan = AsyncCompletionChannel::new(&ctx.create_comp_channel()?)?;
    /// let cq = ctx.create_cq(8, Some(achan.channel()))?; // CQs are created on the channel
    /// assert_eq!(cq.channel().map(|c| c.fd()), Some(achan.channel().fd()));
    /// # Ok(()) }
    /// ```
    pub fn channel(&self) -> &CompletionChannel {
        &self.shared.chan
    }

    /// `ibv_get_cq_event`, awaited: the CQ of the next completion event (of any CQ on the
    /// channel). Each event needs a new [`CompletionQueue::req_notify`] for the next; arm
    /// again before draining the CQ. Cancel-safe: an event is taken only when the future
    /// returns it.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    /// rt.block_on(async {
    ///     let chan = AsyncCompletionChannel::new(&b.create_comp_channel()?)?;
    ///     let cq = b.create_cq(8, Some(chan.channel()))?;
    /// #   let qr = pb.create_qp(QpType::Rc, &cq, &cq).build()?;
    /// #   let qs = pa.create_qp(QpType::Rc, &ca, &ca).build()?;
    /// #   connect_pair(&qs, &qr, &ConnectOptions::default())?;
    ///     cq.req_notify(false)?; // arm, then wait for the event
    ///     qr.post_recv(&[RecvWr::new(1, &[])])?;
    ///     qs.post_send(&[SendWr::send(1, &[])])?;
    ///     let ev = chan.get_cq_event().await?;
    ///     assert_eq!(ev.cqn(), cq.cqn());
    ///     ev.req_notify(false)?; // re-arm before draining
    ///     let mut wc = [WorkCompletion::default(); 4];
    ///     assert_eq!(ev.poll(&mut wc)?, 1);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub async fn get_cq_event(&self) -> Result<CompletionQueue> {
        self.shared
            .readiness
            .wait("ibv_get_cq_event", || self.take(None))
            .await
    }

    /// Refuses a CQ of another channel.
    pub(crate) fn check_cq(&self, cq: &CompletionQueue) -> Result<()> {
        if cq.channel().map(CompletionChannel::fd) != Some(self.channel().fd()) {
            return Err(Error::invalid(
                "ibv_poll_cq",
                "an async wait needs the CQ's own completion channel",
            ));
        }
        Ok(())
    }

    /// The next event (of `want`, or of any CQ), without waiting: first the events kept
    /// aside, then the channel's. Events of other CQs are kept aside and the other waiters
    /// woken.
    fn take(&self, want: Option<&Arc<CqInner>>) -> Result<Option<CompletionQueue>> {
        let wanted = |w: &Weak<CqInner>| want.is_none_or(|c| std::ptr::eq(w.as_ptr(), &**c));
        {
            let mut kept = lock(&self.shared.state.kept);
            // Events of CQs dropped since are skipped (as the channel skips them).
            kept.retain(|w| w.strong_count() > 0);
            if let Some(i) = kept.iter().position(wanted) {
                if let Some(inner) = kept.remove(i).and_then(|w| w.upgrade()) {
                    return Ok(Some(CompletionQueue { inner }));
                }
            }
        }
        loop {
            let Some(cq) = self.shared.chan.get_cq_event(Some(Duration::ZERO))? else {
                return Ok(None);
            };
            if want.is_none_or(|c| Arc::ptr_eq(&cq.inner, c)) {
                return Ok(Some(cq));
            }
            lock(&self.shared.state.kept).push_back(Arc::downgrade(&cq.inner));
            self.shared.readiness.wake_all();
        }
    }
}

impl CompletionQueue {
    /// `ibv_poll_cq`, awaited: up to `wc.len()` completions into `wc`, waiting for at least
    /// one (returns 0 only for an empty `wc`). The loop of an event-driven ibverbs program in
    /// one call: poll; when the CQ is empty, arm it ([`CompletionQueue::req_notify`]) and poll
    /// again (a completion that arrived before the arm raises no event), then await the
    /// CQ's next event on `channel`, and go round.
    ///
    /// `channel` must be (an async handle of) the CQ's own completion channel. The CQ is left
    /// armed when the wait ended with a poll after the arm; its next event is then taken by
    /// the next wait (which just polls once more). Cancel-safe: completions are only taken
    /// by the poll that returns them, and an event taken is acted on before any await.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    /// rt.block_on(async {
    ///     let chan = AsyncCompletionChannel::new(&a.create_comp_channel()?)?;
    ///     let cq = a.create_cq(16, Some(chan.channel()))?;
    /// #   let qs = pa.create_qp(QpType::Rc, &cq, &cq).build()?;
    /// #   let qr = pb.create_qp(QpType::Rc, &cb, &cb).build()?;
    /// #   connect_pair(&qs, &qr, &ConnectOptions::default())?;
    ///     for i in 0..3 {
    ///         qs.post_send(&[SendWr::write(i, &[], RemoteAddr::default()).signaled()])?;
    ///     }
    ///     let mut wc = [WorkCompletion::default(); 4];
    ///     let mut done = 0;
    ///     while done < 3 {
    ///         done += cq.poll_async(&chan, &mut wc).await?;
    ///     }
    ///     // A CQ of another channel is refused.
    ///     let other = AsyncCompletionChannel::new(&a.create_comp_channel()?)?;
    ///     assert!(cq.poll_async(&other, &mut wc).await.is_err());
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub async fn poll_async(
        &self,
        channel: &AsyncCompletionChannel,
        wc: &mut [WorkCompletion],
    ) -> Result<usize> {
        channel.check_cq(self)?;
        if wc.is_empty() {
            return Ok(0);
        }
        loop {
            let n = self.poll(wc)?;
            if n > 0 {
                return Ok(n);
            }
            self.req_notify(false)?;
            // Arm, then poll: a completion that came before the arm is found here, one after
            // it raises an event.
            let n = self.poll(wc)?;
            if n > 0 {
                return Ok(n);
            }
            channel
                .shared
                .readiness
                .wait("ibv_get_cq_event", || channel.take(Some(&self.inner)))
                .await?;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::async_fd::tests::runtime;
    use crate::*;
    use std::time::Duration;

    /// emu0 sends to emu1; emu1's receive CQ is on `chan`; both CQs on channels of their own.
    struct Rig {
        qs: QueuePair,
        qr: QueuePair,
        send_cq: CompletionQueue,
        recv_cq: CompletionQueue,
        send_chan: AsyncCompletionChannel,
        recv_chan: AsyncCompletionChannel,
    }

    /// A spawned wait's result, which must come within 10 s.
    async fn within_10s<T>(task: tokio::task::JoinHandle<Result<T>>, what: &str) -> T {
        let joined = tokio::time::timeout(Duration::from_secs(10), task).await;
        joined.expect(what).unwrap().unwrap()
    }

    /// Made inside the runtime (the channels register with its reactor).
    fn rig() -> Rig {
        let (a, b) = (
            Context::open("emu0").unwrap(),
            Context::open("emu1").unwrap(),
        );
        let send_chan = AsyncCompletionChannel::new(&a.create_comp_channel().unwrap()).unwrap();
        let recv_chan = AsyncCompletionChannel::new(&b.create_comp_channel().unwrap()).unwrap();
        let send_cq = a.create_cq(64, Some(send_chan.channel())).unwrap();
        let recv_cq = b.create_cq(64, Some(recv_chan.channel())).unwrap();
        let (pa, pb) = (a.alloc_pd().unwrap(), b.alloc_pd().unwrap());
        let qs = pa
            .create_qp(QpType::Rc, &send_cq, &send_cq)
            .build()
            .unwrap();
        let qr = pb
            .create_qp(QpType::Rc, &recv_cq, &recv_cq)
            .build()
            .unwrap();
        connect_pair(&qs, &qr, &ConnectOptions::default()).unwrap();
        Rig {
            qs,
            qr,
            send_cq,
            recv_cq,
            send_chan,
            recv_chan,
        }
    }

    /// Runs `test` on a new rig in a new runtime.
    fn on_rig<F: std::future::Future<Output = ()>>(test: impl FnOnce(Rig) -> F) {
        let rt = runtime();
        let _in_rt = rt.enter();
        let r = rig();
        rt.block_on(test(r));
    }

    #[test]
    fn completions_are_awaited_across_many_messages() {
        on_rig(|r| async move {
            const N: u64 = 200;
            let mut wc = [WorkCompletion::default(); 8];
            let (mut sent, mut received) = (0u64, 0u64);
            for i in 0..N {
                r.qr.post_recv(&[RecvWr::new(i, &[])]).unwrap();
                r.qs.post_send(&[SendWr::send(i, &[]).signaled()]).unwrap();
                // One message in flight at a time: every wait really waits.
                while received <= i {
                    let n = r.recv_cq.poll_async(&r.recv_chan, &mut wc).await.unwrap();
                    for w in &wc[..n] {
                        assert_eq!((w.wr_id(), w.status()), (received, WcStatus::Success));
                        received += 1;
                    }
                }
                while sent <= i {
                    let n = r.send_cq.poll_async(&r.send_chan, &mut wc).await.unwrap();
                    sent += n as u64;
                }
            }
            assert_eq!((sent, received), (N, N));
        });
    }

    #[test]
    fn an_event_on_an_armed_cq_wakes_the_waiting_task() {
        on_rig(|r| async move {
            r.recv_cq.req_notify(false).unwrap();
            let chan = r.recv_chan.clone();
            let waiter = tokio::spawn(async move { chan.get_cq_event().await.map(|c| c.cqn()) });
            // The task is parked on the fd before anything completes.
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(!waiter.is_finished());
            r.qr.post_recv(&[RecvWr::new(1, &[])]).unwrap();
            r.qs.post_send(&[SendWr::send(1, &[])]).unwrap();
            let cqn = within_10s(waiter, "the event wakes the task").await;
            assert_eq!(cqn, r.recv_cq.cqn());
        });
    }

    /// The receive CQ's next completion's wr_id, which must come within 10 s.
    async fn next_recv(r: &Rig) -> u64 {
        let mut wc = [WorkCompletion::default(); 4];
        let wait = r.recv_cq.poll_async(&r.recv_chan, &mut wc);
        let n = tokio::time::timeout(Duration::from_secs(10), wait)
            .await
            .expect("a completion within 10 s")
            .unwrap();
        assert_eq!(n, 1);
        wc[0].wr_id()
    }

    /// Whether a wait on the receive CQ times out after `ms` (nothing to complete).
    async fn times_out(r: &Rig, ms: u64) -> bool {
        let mut wc = [WorkCompletion::default(); 4];
        let wait = r.recv_cq.poll_async(&r.recv_chan, &mut wc);
        tokio::time::timeout(Duration::from_millis(ms), wait)
            .await
            .is_err()
    }

    #[test]
    fn a_timeout_loses_no_event() {
        on_rig(|r| async move {
            // Nothing to complete: the wait times out (the CQ is left armed).
            assert!(times_out(&r, 20).await);
            // The completion that comes now raises the event the cancelled wait armed for;
            // the next wait gets it.
            r.qr.post_recv(&[RecvWr::new(7, &[])]).unwrap();
            r.qs.post_send(&[SendWr::send(7, &[])]).unwrap();
            assert_eq!(next_recv(&r).await, 7);
            // Timeouts in a row, each cancelling a wait parked on the fd, then a message.
            for _ in 0..5 {
                assert!(times_out(&r, 5).await);
            }
            r.qr.post_recv(&[RecvWr::new(8, &[])]).unwrap();
            r.qs.post_send(&[SendWr::send(8, &[])]).unwrap();
            assert_eq!(next_recv(&r).await, 8);
            // A completion that arrives while no task waits (after a timeout) is found too.
            assert!(times_out(&r, 5).await);
            r.qr.post_recv(&[RecvWr::new(9, &[])]).unwrap();
            r.qs.post_send(&[SendWr::send(9, &[])]).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            assert_eq!(next_recv(&r).await, 9);
        });
    }

    /// emu0's QP `qa` completes its SENDs on `cq1` and its receives on `cq2`, both CQs on
    /// one channel; `qb` on emu1 (CQ `cb`, no channel) is its peer.
    struct SharedRig {
        cq1: CompletionQueue,
        cq2: CompletionQueue,
        cb: CompletionQueue,
        qa: QueuePair,
        qb: QueuePair,
    }

    fn shared_rig(chan: &CompletionChannel, cqe: u32) -> SharedRig {
        let a = chan.context();
        let b = Context::open("emu1").unwrap();
        let cq1 = a.create_cq(cqe, Some(chan)).unwrap();
        let cq2 = a.create_cq(cqe, Some(chan)).unwrap();
        let cb = b.create_cq(cqe, None).unwrap();
        let (pa, pb) = (a.alloc_pd().unwrap(), b.alloc_pd().unwrap());
        let qa = pa.create_qp(QpType::Rc, &cq1, &cq2).build().unwrap();
        let qb = pb.create_qp(QpType::Rc, &cb, &cb).build().unwrap();
        connect_pair(&qa, &qb, &ConnectOptions::default()).unwrap();
        SharedRig {
            cq1,
            cq2,
            cb,
            qa,
            qb,
        }
    }

    #[test]
    fn cqs_sharing_a_channel_each_get_their_events() {
        let a = Context::open("emu0").unwrap();
        let rt = runtime();
        rt.block_on(async {
            let chan = AsyncCompletionChannel::new(&a.create_comp_channel().unwrap()).unwrap();
            let SharedRig {
                cq1, cq2, qa, qb, ..
            } = shared_rig(chan.channel(), 8);
            // The receiving task waits through a handle of its own (events kept aside by
            // one handle are the other's too).
            let (c2, ch2) = (
                cq2.clone(),
                AsyncCompletionChannel::new(chan.channel()).unwrap(),
            );
            let recv = tokio::spawn(async move {
                let mut wc = [WorkCompletion::default(); 2];
                c2.poll_async(&ch2, &mut wc)
                    .await
                    .map(|n| (n, wc[0].wr_id()))
            });
            // Both waits parked on the one channel before anything completes.
            tokio::task::yield_now().await;
            qa.post_recv(&[RecvWr::new(2, &[])]).unwrap();
            qb.post_recv(&[RecvWr::new(9, &[])]).unwrap();
            qa.post_send(&[SendWr::send(1, &[]).signaled()]).unwrap();
            let mut wc = [WorkCompletion::default(); 2];
            let n = tokio::time::timeout(Duration::from_secs(10), cq1.poll_async(&chan, &mut wc))
                .await
                .expect("the send completion")
                .unwrap();
            assert_eq!((n, wc[0].wr_id()), (1, 1));
            qb.post_send(&[SendWr::send(3, &[])]).unwrap();
            let got = within_10s(recv, "the receive completion").await;
            assert_eq!(got, (1, 2));
        });
    }

    #[test]
    fn tasks_of_a_multi_thread_runtime_share_a_channel_across_many_messages() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let _in_rt = rt.enter();
        let a = Context::open("emu0").unwrap();
        let chan = AsyncCompletionChannel::new(&a.create_comp_channel().unwrap()).unwrap();
        let SharedRig {
            cq1,
            cq2,
            cb,
            qa,
            qb,
        } = shared_rig(chan.channel(), 64);
        const ROUNDS: u64 = 15;
        const PER: usize = 20;
        let count = |cq: &CompletionQueue| {
            let (cq, chan) = (cq.clone(), chan.clone());
            tokio::spawn(async move {
                let mut wc = [WorkCompletion::default(); 8];
                let mut ids = Vec::new();
                while ids.len() < PER {
                    let n = cq.poll_async(&chan, &mut wc).await.unwrap();
                    ids.extend(wc[..n].iter().map(|w| (w.wr_id(), w.status())));
                }
                ids
            })
        };
        rt.block_on(async {
            for round in 0..ROUNDS {
                let ids: Vec<u64> = (0..PER as u64).map(|i| round * 100 + i).collect();
                let (sends, recvs) = (count(&cq1), count(&cq2));
                let recv: Vec<_> = ids.iter().map(|&i| RecvWr::new(i, &[])).collect();
                qa.post_recv(&recv).unwrap();
                qb.post_recv(&recv).unwrap();
                let send: Vec<_> = ids
                    .iter()
                    .map(|&i| SendWr::send(i, &[]).signaled())
                    .collect();
                qa.post_send(&send).unwrap();
                qb.post_send(&send).unwrap();
                let ok: Vec<_> = ids.iter().map(|&i| (i, WcStatus::Success)).collect();
                let wait = Duration::from_secs(10);
                let sent = tokio::time::timeout(wait, sends).await.expect("sends");
                let received = tokio::time::timeout(wait, recvs).await.expect("receives");
                assert_eq!(sent.unwrap(), ok, "round {round}");
                assert_eq!(received.unwrap(), ok, "round {round}");
                // emu1's completions: 2 * PER per round (its receives and its SENDs).
                let mut wc = [WorkCompletion::default(); 2 * PER];
                assert_eq!(cb.poll_blocking(&mut wc, wait).unwrap(), 2 * PER);
            }
        });
    }

    #[test]
    fn an_event_kept_aside_by_one_handle_is_taken_through_another() {
        let a = Context::open("emu0").unwrap();
        let rt = runtime();
        rt.block_on(async {
            let chan = a.create_comp_channel().unwrap();
            let h1 = AsyncCompletionChannel::new(&chan).unwrap();
            let h2 = AsyncCompletionChannel::new(&chan).unwrap();
            let SharedRig {
                cq1, cq2, qa, qb, ..
            } = shared_rig(&chan, 8);
            cq2.req_notify(false).unwrap();
            // A task waits for cq1 through h1; cq2's event reaches it first and is kept.
            let c1 = cq1.clone();
            let waiter = tokio::spawn(async move {
                let mut wc = [WorkCompletion::default(); 2];
                c1.poll_async(&h1, &mut wc)
                    .await
                    .map(|n| (n, wc[0].wr_id()))
            });
            tokio::time::sleep(Duration::from_millis(20)).await;
            qa.post_recv(&[RecvWr::new(2, &[])]).unwrap();
            qb.post_send(&[SendWr::send(3, &[])]).unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(!waiter.is_finished());
            let ev = tokio::time::timeout(Duration::from_secs(10), h2.get_cq_event())
                .await
                .expect("cq2's event, through the other handle")
                .unwrap();
            assert_eq!(ev.cqn(), cq2.cqn());
            qb.post_recv(&[RecvWr::new(9, &[])]).unwrap();
            qa.post_send(&[SendWr::send(1, &[]).signaled()]).unwrap();
            let got = within_10s(waiter, "cq1's completion").await;
            assert_eq!(got, (1, 1));
        });
    }
}
