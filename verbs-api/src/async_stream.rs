//! A CQ's completions as a `Stream` (feature `tokio`): [`Completions`], from
//! [`CompletionQueue::completions`], one [`WorkCompletion`] per item, refilled in batches by
//! [`CompletionQueue::poll_async`].

use crate::error::Result;
use crate::{AsyncCompletionChannel, CompletionQueue, WorkCompletion};
use futures_core::Stream;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Completions polled at most per refill.
const BATCH: usize = 16;

/// A batch: the completions polled and how many of them there are.
type Batch = Result<([WorkCompletion; BATCH], usize)>;

/// The completions of a CQ, awaited one by one: a [`Stream`] (`futures_core`'s, what
/// `futures::StreamExt` and `tokio_stream::StreamExt` work on) that never ends; an item is
/// an error when a poll or the wait failed. A `next()` that is cancelled (a timeout) loses
/// nothing: the stream keeps its state. Dropping the stream drops the completions it polled
/// and has not yielded yet (up to a batch): drop it when done with the CQ.
///
/// Each refill of the batch is one [`CompletionQueue::poll_async`] in a boxed future (an
/// allocation per batch of up to 16 completions); `poll_async` into a caller's slice has no
/// such cost.
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
///     let mut completions = cq.completions(&chan)?;
///     for i in 0..3 {
///         let wc = completions.next().await.expect("never ends")?;
///         assert_eq!((wc.wr_id(), wc.status()), (i, WcStatus::Success));
///     }
///     Ok(())
/// })
/// # }
/// ```
pub struct Completions {
    cq: CompletionQueue,
    channel: AsyncCompletionChannel,
    buf: [WorkCompletion; BATCH],
    head: usize,
    len: usize,
    refill: Option<Pin<Box<dyn Future<Output = Batch> + Send>>>,
}

impl std::fmt::Debug for Completions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completions")
            .field("cqn", &self.cq.cqn())
            .field("buffered", &(self.len - self.head))
            .finish_non_exhaustive()
    }
}

impl CompletionQueue {
    /// The CQ's completions as a [`Stream`] ([`Completions`]), awaited on `channel` (the
    /// CQ's own, as for [`CompletionQueue::poll_async`]; another is refused here).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    /// # let _guard = rt.enter();
    /// let ctx = Context::open("emu0")?;
    /// let chan = AsyncCompletionChannel::new(&ctx.create_comp_channel()?)?;
    /// let cq = ctx.create_cq(8, Some(chan.channel()))?;
    /// assert!(cq.completions(&chan).is_ok());
    /// let other = AsyncCompletionChannel::new(&ctx.create_comp_channel()?)?;
    /// assert!(cq.completions(&other).is_err());
    /// # Ok(()) }
    /// ```
    pub fn completions(&self, channel: &AsyncCompletionChannel) -> Result<Completions> {
        channel.check_cq(self)?;
        Ok(Completions {
            cq: self.clone(),
            channel: channel.clone(),
            buf: [WorkCompletion::default(); BATCH],
            head: 0,
            len: 0,
            refill: None,
        })
    }
}

impl Completions {
    /// The next completion (what `StreamExt::next` gives, without needing the trait).
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
    ///     let mut received = cq.completions(&chan)?;
    ///     qr.post_recv(&[RecvWr::new(5, &[])])?;
    ///     qs.post_send(&[SendWr::send(1, &[])])?;
    ///     let wc = received.next().await.expect("never ends")?;
    ///     assert_eq!((wc.wr_id(), wc.opcode()), (5, WcOpcode::Recv));
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub async fn next(&mut self) -> Option<Result<WorkCompletion>> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }
}

impl Stream for Completions {
    type Item = Result<WorkCompletion>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.head < this.len {
                let wc = this.buf[this.head];
                this.head += 1;
                return Poll::Ready(Some(Ok(wc)));
            }
            let refill = this.refill.get_or_insert_with(|| {
                let (cq, channel) = (this.cq.clone(), this.channel.clone());
                Box::pin(async move {
                    let mut buf = [WorkCompletion::default(); BATCH];
                    let n = cq.poll_async(&channel, &mut buf).await?;
                    Ok((buf, n))
                })
            });
            let batch = std::task::ready!(refill.as_mut().poll(cx));
            this.refill = None;
            match batch {
                Ok((buf, n)) => {
                    (this.buf, this.head, this.len) = (buf, 0, n);
                }
                Err(e) => return Poll::Ready(Some(Err(e))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::async_fd::tests::runtime;
    use crate::*;
    use std::time::Duration;

    #[test]
    fn async_handles_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<AsyncCompletionChannel>();
        send_sync::<AsyncEvents>();
        send::<Completions>();
    }

    #[test]
    fn a_stream_yields_every_completion_in_order() {
        let rt = runtime();
        let _in_rt = rt.enter();
        let doc_fixture::Pair { a, pa, cb, qb, .. } = doc_fixture::Pair::connected().unwrap();
        let chan = AsyncCompletionChannel::new(&a.create_comp_channel().unwrap()).unwrap();
        let cq = a.create_cq(64, Some(chan.channel())).unwrap();
        let qs = pa.create_qp(QpType::Rc, &cq, &cq).build().unwrap();
        let qr = qb.pd().create_qp(QpType::Rc, &cb, &cb).build().unwrap();
        connect_pair(&qs, &qr, &ConnectOptions::default()).unwrap();
        rt.block_on(async {
            let mut s = cq.completions(&chan).unwrap();
            for round in 0..10u64 {
                // Bursts of 40: more than one batch of the stream each.
                for i in 0..40 {
                    let wr = SendWr::write(round * 40 + i, &[], RemoteAddr::default());
                    qs.post_send(&[wr.signaled()]).unwrap();
                }
                for i in 0..40 {
                    let next = tokio::time::timeout(Duration::from_secs(10), s.next());
                    let wc = next.await.expect("within 10 s").unwrap().unwrap();
                    assert_eq!(wc.wr_id(), round * 40 + i);
                }
            }
        });
    }
}
