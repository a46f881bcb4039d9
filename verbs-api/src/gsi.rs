//! [`MadChannel`]: the port's QP1 (the General Services Interface QP, [`QpType::Gsi`]) as a
//! channel of 256-byte MADs, which a Communication Manager sends and receives, as the
//! kernel's `ib_mad` layer offers its agents.
//!
//! The channel owns the GSI QP (one per port: a second channel on the port fails with the
//! device's status), a CQ each way and the receive buffers (the 40-byte GRH area, then the
//! MAD). Sends go inline to QP 1 with the GSI Q_Key through an address handle of the
//! channel's PD ([`MadChannel::create_ah`], or [`MadChannel::reply_ah`] towards the sender
//! of a received MAD, as `ibv_create_ah_from_wc`). Receives give the MAD with who sent it
//! (source QP, and the addresses of the GRH area), and the buffer goes back to the device.

use crate::error::{Error, Result};
use crate::{
    AccessFlags, AddressHandle, AhAttr, CompletionQueue, Context, GRH_LEN, Gid, InitAttr,
    MemoryRegion, QpType, QueuePair, RecvWr, RtrAttr, RtsAttr, SendWr, WorkCompletion,
};
use std::time::Duration;

/// The GSI QP's number and Q_Key (IBTA Vol. 1, 3.9.1 and 13.4.5.3): the driver's.
///
/// ```
/// assert_eq!((rnic_verbs::GSI_QPN, rnic_verbs::GSI_QKEY), (1, 0x8001_0000));
/// ```
pub use rnic_driver::qp::{GSI_QKEY, GSI_QPN};

/// Bytes of a MAD on QP1 (IBTA Vol. 1, 13.4.2): a 24-byte common header and its data.
///
/// ```
/// assert_eq!(rnic_verbs::MAD_SIZE, 256);
/// ```
pub const MAD_SIZE: usize = 256;

/// One receive buffer: the GRH area, then a whole MAD.
const SLOT: usize = GRH_LEN + MAD_SIZE;
/// How long [`MadChannel::send`] waits for a send to complete when all are outstanding.
const SEND_WAIT: Duration = Duration::from_secs(1);

/// A MAD received on QP1, with where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceivedMad {
    /// The MAD, zero-filled past [`ReceivedMad::len`].
    pub mad: [u8; MAD_SIZE],
    /// Bytes the datagram carried (a MAD is [`MAD_SIZE`]; shorter ones are the consumer's
    /// to refuse).
    pub len: usize,
    /// The sender's QP (1 for another port's GSI QP).
    pub src_qp: u32,
    /// The sender's address (the GRH area's source: an IPv4 one as `::ffff:a.b.c.d`).
    pub sgid: Gid,
    /// The address it was sent to: one of this port's GIDs.
    pub dgid: Gid,
}

/// The GSI QP of a port as a channel of MADs.
///
/// Two emulated devices, emu0 sending a MAD to emu1's QP1, and emu1 answering the sender:
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
/// let (a, b) = (Context::open("emu0")?, Context::open("emu1")?);
/// let (mut ma, mut mb) = (MadChannel::open(&a, 1, 8)?, MadChannel::open(&b, 1, 8)?);
/// // A second channel on the port: the device has one QP1 per port.
/// assert!(MadChannel::open(&a, 1, 8).is_err());
/// let to_b = ma.create_ah(&AhAttr { hop_limit: 64, ..AhAttr::new(b.query_gid(1, 1)?, 1) })?;
/// ma.send(&to_b, &[0x01; MAD_SIZE])?;
/// let got = mb.recv(t)?.expect("a MAD");
/// assert_eq!((got.mad, got.len, got.src_qp), ([0x01; MAD_SIZE], MAD_SIZE, GSI_QPN));
/// assert_eq!((got.sgid, got.dgid), (a.query_gid(1, 1)?, b.query_gid(1, 1)?));
/// let back = mb.reply_ah(&got)?;
/// mb.send(&back, &[0x02; MAD_SIZE])?;
/// assert_eq!(ma.recv(t)?.expect("the answer").mad, [0x02; MAD_SIZE]);
/// assert_eq!(ma.recv(std::time::Duration::from_millis(10))?, None); // nothing more
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct MadChannel {
    // Dropped in this order: the QP before its CQs, the buffers after the QP.
    qp: QueuePair,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    recv_mr: MemoryRegion,
    depth: u32,
    /// Sends posted whose completion was not reaped yet.
    sends_out: u32,
    /// Sends that completed with an error status.
    send_errors: u64,
}

impl MadChannel {
    /// Creates port `port_num`'s GSI QP with `depth` sends and receives outstanding, moves
    /// it to RTS with the GSI Q_Key and posts every receive buffer.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// let ctx = Context::open("emu0")?;
    /// assert!(MadChannel::open(&ctx, 2, 8).is_err()); // no port 2
    /// assert!(MadChannel::open(&ctx, 1, 0).is_err()); // no buffers
    /// let ch = MadChannel::open(&ctx, 1, 4)?;
    /// assert_eq!(ch.qp().qp_type(), QpType::Gsi);
    /// drop(ch);
    /// MadChannel::open(&ctx, 1, 4)?; // the port's QP1 is free again
    /// # Ok(()) }
    /// ```
    pub fn open(ctx: &Context, port_num: u8, depth: u32) -> Result<MadChannel> {
        const V: &str = "MadChannel::open";
        if depth == 0 {
            return Err(Error::invalid(V, "depth 0: no receive buffers"));
        }
        let slots = usize::try_from(depth)
            .ok()
            .and_then(|d| d.checked_mul(SLOT))
            .ok_or_else(|| Error::invalid(V, format!("depth {depth}: too many buffers")))?;
        let pd = ctx.alloc_pd()?;
        let send_cq = ctx.create_cq(depth, None)?;
        let recv_cq = ctx.create_cq(depth, None)?;
        let qp = pd
            .create_qp(QpType::Gsi, &send_cq, &recv_cq)
            .max_send_wr(depth)
            .max_recv_wr(depth)
            .max_send_sge(1)
            .max_recv_sge(1)
            .max_inline_data(MAD_SIZE as u32)
            .sq_sig_all(true)
            .build()?;
        qp.to_init(&InitAttr {
            port_num,
            qkey: Some(GSI_QKEY),
            ..InitAttr::default()
        })?;
        qp.to_rtr(&RtrAttr::default())?;
        qp.to_rts(&RtsAttr::default())?;
        let recv_mr = pd.reg_mr(slots, AccessFlags::LOCAL_WRITE)?;
        let ch = MadChannel {
            qp,
            send_cq,
            recv_cq,
            recv_mr,
            depth,
            sends_out: 0,
            send_errors: 0,
        };
        for slot in 0..depth {
            ch.post_slot(slot)?;
        }
        Ok(ch)
    }

    /// The GSI QP (for its state and counters; post through the channel).
    pub fn qp(&self) -> &QueuePair {
        &self.qp
    }

    /// Sends that completed with an error status so far (a MAD is a datagram: a lost one
    /// is the protocol's to retry).
    pub fn send_errors(&self) -> u64 {
        self.send_errors
    }

    /// An address handle of the channel's PD towards `attr` (`ibv_create_ah`).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let ch = MadChannel::open(&ctx, 1, 4)?;
    /// let ah = ch.create_ah(&AhAttr::new(Gid::from_ipv4([192, 0, 2, 7].into()), 1))?;
    /// assert_eq!(ah.pd().pdn(), ch.qp().pd().pdn());
    /// # Ok(()) }
    /// ```
    pub fn create_ah(&self, attr: &AhAttr) -> Result<AddressHandle> {
        self.qp.pd().create_ah(attr)
    }

    /// An address handle towards the sender of `m`, from the local GID it was sent to
    /// (`ibv_create_ah_from_wc`); fails if that GID is not the port's.
    pub fn reply_ah(&self, m: &ReceivedMad) -> Result<AddressHandle> {
        let ctx = self.qp.pd().context();
        self.create_ah(&crate::ah::reply_to(
            ctx,
            m.sgid,
            m.dgid,
            "MadChannel::reply_ah",
        )?)
    }

    /// Sends `mad` to QP 1 at `to` with the GSI Q_Key. When all `depth` sends are
    /// outstanding it waits up to a second for one to complete ([`Error::Timeout`]).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let mut ch = MadChannel::open(&ctx, 1, 4)?;
    /// let other_pd = ctx.alloc_pd()?.create_ah(&AhAttr::new(ctx.query_gid(1, 1)?, 1))?;
    /// assert!(matches!(ch.send(&other_pd, &[0; MAD_SIZE]), Err(Error::Post { .. })));
    /// # Ok(()) }
    /// ```
    pub fn send(&mut self, to: &AddressHandle, mad: &[u8; MAD_SIZE]) -> Result<()> {
        self.reap_sends(Duration::ZERO)?;
        if self.sends_out >= self.depth {
            self.reap_sends(SEND_WAIT)?;
            if self.sends_out >= self.depth {
                return Err(Error::Timeout {
                    what: "MadChannel::send: a free send slot".into(),
                    after: SEND_WAIT,
                });
            }
        }
        let wr = SendWr::send(0, &[]).inline(mad).ud(to, GSI_QPN, GSI_QKEY);
        self.qp.post_send(&[wr])?;
        self.sends_out += 1;
        Ok(())
    }

    /// The next MAD received, waiting up to `timeout`; `None` if none came. Its buffer is
    /// posted again before this returns. A receive that completed with an error (the QP
    /// went to ERR) is [`Error::Completion`].
    pub fn recv(&mut self, timeout: Duration) -> Result<Option<ReceivedMad>> {
        let mut wc = [WorkCompletion::default(); 1];
        if self.recv_cq.poll_blocking(&mut wc, timeout)? == 0 {
            return Ok(None);
        }
        let wc = wc[0];
        if !wc.is_success() {
            return Err(Error::Completion {
                verb: "MadChannel::recv",
                wr_id: wc.wr_id(),
                status: wc.status(),
            });
        }
        let slot = u32::try_from(wc.wr_id())
            .ok()
            .filter(|s| *s < self.depth)
            .ok_or_else(|| {
                Error::invalid(
                    "MadChannel::recv",
                    format!("a receive of unknown slot {}", wc.wr_id()),
                )
            })?;
        let at = slot as usize * SLOT;
        let mut buf = [0u8; SLOT];
        let got = (wc.byte_len() as usize).min(SLOT);
        self.recv_mr.read(at, &mut buf[..got])?;
        self.post_slot(slot)?;
        let (sgid, dgid) = crate::ah::grh_addresses(&buf[..GRH_LEN]);
        let len = got.saturating_sub(GRH_LEN);
        let mut mad = [0u8; MAD_SIZE];
        mad[..len].copy_from_slice(&buf[GRH_LEN..GRH_LEN + len]);
        Ok(Some(ReceivedMad {
            mad,
            len,
            src_qp: wc.src_qp(),
            sgid,
            dgid,
        }))
    }

    /// Posts receive buffer `slot`.
    fn post_slot(&self, slot: u32) -> Result<()> {
        let sge = self.recv_mr.sge(slot as usize * SLOT, SLOT as u32)?;
        self.qp.post_recv(&[RecvWr::new(u64::from(slot), &[sge])])
    }

    /// Waits up to `timeout` until every MAD sent so far has left (its send completed), so
    /// that what was sent last is on the wire before the channel goes. `Ok(false)` when some
    /// were still outstanding at the timeout.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let mut ch = MadChannel::open(&ctx, 1, 4)?;
    /// let ah = ch.create_ah(&AhAttr::new(Gid::from_ipv4([192, 0, 2, 2].into()), 1))?;
    /// ch.send(&ah, &[0; MAD_SIZE])?;
    /// assert!(ch.drain(std::time::Duration::from_secs(5))?);
    /// # Ok(()) }
    /// ```
    pub fn drain(&mut self, timeout: Duration) -> Result<bool> {
        let deadline = std::time::Instant::now() + timeout;
        while self.sends_out > 0 {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            self.reap_sends(left)?;
        }
        Ok(true)
    }

    /// Reaps send completions, waiting up to `wait` for the first.
    fn reap_sends(&mut self, wait: Duration) -> Result<()> {
        let mut wc = [WorkCompletion::default(); 8];
        let mut n = self.send_cq.poll_blocking(&mut wc[..1], wait)?;
        if n == 1 {
            n += self.send_cq.poll(&mut wc[1..])?;
        }
        for c in &wc[..n] {
            self.sends_out = self.sends_out.saturating_sub(1);
            if !c.is_success() {
                self.send_errors += 1;
            }
        }
        Ok(())
    }
}
