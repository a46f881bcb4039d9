//! A verbs-compatible safe Rust API over the rnic mlx5 driver, for real ConnectX devices
//! (bound to vfio-pci) and emulated ones.
//!
//! If you know ibverbs you know this crate: [`Context::open`] is `ibv_open_device`,
//! [`Context::alloc_pd`], [`ProtectionDomain::reg_mr`], [`Context::create_cq`],
//! [`ProtectionDomain::create_qp`], [`QueuePair::post_send`], [`CompletionQueue::poll`]
//! (`ibv_poll_cq`), the QP states and the work completion statuses keep their names, and
//! errors name the verb that failed. What differs is ownership:
//!
//! - objects hold `Arc`s of what they depend on (a QP keeps its PD, CQs and SRQ alive; every
//!   object keeps its [`Context`] open), so there are no lifetime parameters to carry and no
//!   order of destruction to get wrong: a CQ cannot be destroyed under a QP that uses it
//!   ([`CompletionQueue::destroy`] says [`Error::InUse`], and dropping just waits for the QP);
//! - memory a peer can write is never handed out as `&mut [u8]`: a [`MemoryRegion`] owns its
//!   buffer and is read and written by copies, or is registered from raw parts with an
//!   `unsafe` contract ([`MemoryRegion::register_raw`]);
//! - posting takes slices of work requests and rings one doorbell per call; polling fills a
//!   caller's slice; neither allocates, locks or makes a system call.
//!
//! Devices: see [`device`] for the names (`mlx5_0`, PCI addresses, `emu0` / `emu1`,
//! `emu:<IPv4>`) and [`devices`] for the list. Connecting: [`connect_pair`] in one process,
//! [`tcp_server`] / [`tcp_client`] between two. Management datagrams (the CM's MADs on the
//! port's QP1): [`MadChannel`].
//!
//! # Example: an RDMA WRITE between the emulated pair
//!
//! ```
//! use rnic_verbs::*;
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), Error> {
//! // Two emulated ConnectX devices of this process, joined by a link.
//! let (ctx_a, ctx_b) = (Context::open("emu0")?, Context::open("emu1")?);
//! let (pd_a, pd_b) = (ctx_a.alloc_pd()?, ctx_b.alloc_pd()?);
//! let (cq_a, cq_b) = (ctx_a.create_cq(16, None)?, ctx_b.create_cq(16, None)?);
//! let qp_a = pd_a.create_qp(QpType::Rc, &cq_a, &cq_a).build()?;
//! let qp_b = pd_b.create_qp(QpType::Rc, &cq_b, &cq_b).build()?;
//! connect_pair(&qp_a, &qp_b, &ConnectOptions::default())?;
//!
//! // A's source buffer; B's target, which A may write.
//! let src = pd_a.reg_mr(4096, AccessFlags::LOCAL_WRITE)?;
//! let dst = pd_b.reg_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
//! src.write(0, b"written by emu0")?;
//!
//! // The rkey and address of B's region travel to A (connect_pair's peers are local).
//! let sgl = [src.sge(0, 15)?];
//! qp_a.post_send(&[SendWr::write(7, &sgl, dst.remote(0)).signaled()])?;
//!
//! let mut wc = [WorkCompletion::default(); 1];
//! let n = cq_a.poll_blocking(&mut wc, Duration::from_secs(10))?;
//! assert_eq!(n, 1);
//! assert_eq!(wc[0].status(), WcStatus::Success);
//! assert_eq!((wc[0].wr_id(), wc[0].opcode()), (7, WcOpcode::RdmaWrite));
//!
//! let mut got = [0u8; 15];
//! dst.read(0, &mut got)?;
//! assert_eq!(&got, b"written by emu0");
//! # Ok(()) }
//! ```
//!
//! `examples/rc_pingpong.rs` and `examples/write_bw.rs` are larger programs on the same pair.
//!
//! # Async (feature `tokio`)
//!
//! With the `tokio` feature (off by default), completion channels and asynchronous events
//! are awaited in tokio's reactor instead of blocking a thread: `AsyncCompletionChannel`
//! (an awaited `ibv_get_cq_event`), `CompletionQueue::poll_async` (poll, arm, re-poll,
//! await the event, in one call), `CompletionQueue::completions` (a `Stream` of them) and
//! `AsyncEvents` (an awaited `ibv_get_async_event`). `examples/async_pingpong.rs` bounces
//! SENDs between the emulated pair with them. Without the feature the crate does not
//! depend on tokio.
//!
//! # What the types rule out
//!
//! These do not compile (checked as `compile_fail` doctests).
//!
//! A work request cannot outlive the scatter/gather list it points at:
//!
//! ```compile_fail,E0597
//! use rnic_verbs::{SendWr, Sge};
//!
//! let wr = {
//!     let sgl = [Sge { addr: 0, len: 8, lkey: 1 }];
//!     SendWr::send(1, &sgl)
//! };
//! let _ = wr.wr_id();
//! ```
//!
//! A destroyed CQ cannot be polled (destroying consumes the handle), so "poll after destroy"
//! cannot be written:
//!
//! ```compile_fail,E0382
//! # fn f(cq: rnic_verbs::CompletionQueue) {
//! let mut wc = [rnic_verbs::WorkCompletion::default(); 4];
//! let _ = cq.destroy();
//! let _ = cq.poll(&mut wc);
//! # }
//! ```
//!
//! A deregistered region cannot be read or used for an SGE:
//!
//! ```compile_fail,E0382
//! # fn f(mr: rnic_verbs::MemoryRegion) {
//! let _ = mr.dereg();
//! let _ = mr.sge(0, 8);
//! # }
//! ```
//!
//! Registered memory is never a Rust slice: there is no way to borrow it mutably.
//!
//! ```compile_fail,E0599
//! # fn f(mr: &rnic_verbs::MemoryRegion) {
//! let bytes: &mut [u8] = mr.as_mut_slice();
//! # }
//! ```
//!
//! Registration from raw parts is `unsafe`:
//!
//! ```compile_fail,E0133
//! # fn f(pd: &rnic_verbs::ProtectionDomain) {
//! let mut v = vec![0u8; 64];
//! let _ = pd.reg_mr_raw(v.as_mut_ptr(), 64, rnic_verbs::AccessFlags::LOCAL_WRITE);
//! # }
//! ```

mod ah;
#[cfg(feature = "tokio")]
mod async_cq;
#[cfg(feature = "tokio")]
mod async_event;
#[cfg(feature = "tokio")]
mod async_fd;
#[cfg(feature = "tokio")]
mod async_stream;
mod connect;
mod context;
mod cq;
pub mod device;
#[doc(hidden)]
pub mod doc_fixture;
mod error;
mod event;
mod gsi;
mod mr;
mod mw;
mod neighbor;
mod pd;
mod qp;
mod qp_state;
mod registry;
mod srq;
mod wc;
mod wr;

pub use ah::{AddressHandle, AhAttr, MAX_SL};
#[cfg(feature = "tokio")]
pub use async_cq::AsyncCompletionChannel;
#[cfg(feature = "tokio")]
pub use async_event::AsyncEvents;
#[cfg(feature = "tokio")]
pub use async_stream::Completions;
pub use connect::{
    ConnectOptions, DEFAULT_PORT, DEFAULT_QKEY, Endpoint, PINGPONG_LEN, WIRE_LEN, connect_pair,
    connect_qp, tcp_client, tcp_server, tcp_server_on,
};
pub use context::Context;
pub use cq::{CompletionChannel, CompletionQueue};
pub use device::{
    AtomicCap, DeviceAttr, DeviceInfo, DeviceKind, DeviceName, EmuOptions, Gid, GidEntry, GidType,
    LinkLayer, OpenOptions, PortAttr, PortState, devices, devices_in, emulated_mac, format_guid,
    node_guid_from_mac,
};
pub use error::{Error, Result};
pub use event::AsyncEvent;
pub use gsi::{GSI_QKEY, GSI_QPN, MAD_SIZE, MadChannel, ReceivedMad};
pub use mr::{AccessFlags, MemoryRegion};
pub use mw::{MemoryWindow, MwType};
pub use pd::ProtectionDomain;
pub use qp::{
    InitAttr, ModifyQp, Mtu, QpAttr, QpCap, QpState, QpType, QueuePair, QueuePairBuilder, RtrAttr,
    RtsAttr, RtsModifyAttr,
};
/// The emulated device's counters ([`Context::emulator_counters`]): the emulator's type, so a
/// tool that prints them depends on verbs alone.
///
/// ```
/// let c = rnic_verbs::EmulatorCounters::default();
/// assert_eq!(c.rx_dropped, c.drops.total());
/// ```
pub use rnic_driver::port_agent::PortAgentCounters;
/// Why a CQ poll failed ([`Error::Poll`]'s source): the driver's type.
///
/// ```
/// use rnic_verbs::{Error, PollError};
///
/// let e = Error::Poll { cqn: 0x20, source: PollError::Busy };
/// assert!(e.to_string().starts_with("ibv_poll_cq on CQ 0x20: "));
/// ```
pub use rnic_driver::wr::PollError;
/// Why a work request was refused ([`Error::Post`]'s `kind`): the driver's type.
///
/// ```
/// use rnic_verbs::*;
///
/// # fn main() -> Result<(), Error> {
/// # let (a, b) = (Context::open("emu0")?, Context::open("emu1")?);
/// # let (pa, pb, ca, cb) = (a.alloc_pd()?, b.alloc_pd()?, a.create_cq(8, None)?, b.create_cq(8, None)?);
/// let qa = pa.create_qp(QpType::Rc, &ca, &ca).max_inline_data(16).build()?;
/// # let qb = pb.create_qp(QpType::Rc, &cb, &cb).build()?;
/// # connect_pair(&qa, &qb, &ConnectOptions::default())?;
/// let max = qa.cap().max_inline_data as usize;
/// let big = vec![0u8; max + 1];
/// let err = qa.post_send(&[SendWr::send(1, &[]).inline(&big)]).unwrap_err();
/// assert!(matches!(
///     err,
///     Error::Post { index: 0, kind: PostErrorKind::InlineTooLong { given, .. }, .. } if given == max + 1
/// ));
/// # Ok(()) }
/// ```
pub use rnic_driver::wr::PostErrorKind;
pub use rnic_emulator::Counters as EmulatorCounters;
/// The GRH area a UD receive buffer holds in front of the payload (`sizeof(struct ibv_grh)`).
///
/// ```
/// assert_eq!(rnic_verbs::GRH_LEN, 40);
/// ```
pub use rnic_hw_regs::roce::GRH_LEN;
pub use srq::{SharedReceiveQueue, SrqAttr};
pub use wc::{WcFlags, WcOpcode, WcStatus, WorkCompletion};
pub use wr::{RecvWr, RemoteAddr, SendFlags, SendWr, Sge};

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync<T: Send + Sync>() {}

    #[test]
    fn handles_and_errors_cross_threads() {
        send_sync::<Context>();
        send_sync::<ProtectionDomain>();
        send_sync::<MemoryRegion>();
        send_sync::<CompletionQueue>();
        send_sync::<CompletionChannel>();
        send_sync::<QueuePair>();
        send_sync::<SharedReceiveQueue>();
        send_sync::<AddressHandle>();
        send_sync::<WorkCompletion>();
        send_sync::<Error>();
        fn boxed(e: Error) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            Box::new(e)
        }
        let _ = boxed;
    }

    #[test]
    fn duration_max_is_a_wait_without_deadline() {
        let ctx = Context::open("emu0").unwrap();
        let cq = ctx.create_cq(1, None).unwrap();
        // Nothing to wait for: returns at once instead of overflowing `Instant`.
        assert_eq!(
            cq.poll_blocking(&mut [], std::time::Duration::MAX).unwrap(),
            0
        );
    }
}
