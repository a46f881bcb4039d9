//! The RoCE v2 transport, in the shape of Linux rxe: a requester that turns send WQEs into
//! packets, a responder that executes incoming requests and answers them, and a completer
//! that matches ACKs and responses to WQEs and writes the requester's CQEs.
//!
//! Every frame goes through the device's port ([`crate::port`]): frames for its own GIDs
//! loop back inside it, the rest leave on its link ([`crate::link`]) to other devices or to
//! Linux rxe. The state that makes RC reliable lives here per QP ([`QpTransport`], in
//! [`crate::resources::Qp::tr`]; PSNs and MSN in the QP context).
//!
//! What exists: PSN assignment and 24-bit arithmetic; segmentation by path MTU; SEND (+IMM,
//! +INV), RDMA WRITE (+IMM), RDMA READ with multi-packet responses, CMP_SWAP and FETCH_ADD;
//! AckReq on the last packet of a message (and every 64 packets); ACK, NAK (PSN sequence,
//! invalid request, remote access, remote operational) and RNR NAK generation; RNR retry on
//! the RNR timer and go-back-N on a PSN sequence NAK; fence and max_rd_atomic on the
//! requester; UD with DETH, Q_Key and the 40-byte GRH area; UC without ACKs. Errors complete
//! the failing WQE with an error CQE, move the QP to ERR and flush the rest; a send WQE that
//! fails on a UD or UC QP moves it to SQE instead, which flushes the send queue only.
//!
//! Reliability as rxe does it: the local ACK timeout (4.096 us x 2^timeout on the device
//! clock, virtual in deterministic mode) retransmits go-back-N from the oldest unacknowledged
//! PSN, bounded by `retry_count`; a READ that lost part of its responses is reissued for the
//! remaining bytes (and its responses accepted whether they continue the original opcode
//! sequence, as rxe replays them, or restart it); the responder answers duplicates (re-ACK, re-read for READs within a
//! saved resource, replay of the saved original value for atomics) from a ring of
//! `2^log_rra_max` READ / atomic resources; READ responses are generated resumably, in
//! bursts; ACKs are coalesced per burst of received frames; SEND_WITH_INVALIDATE invalidates
//! the named rkey when its MKey was created with `en_rinval` (otherwise: invalid request).
//! Every receive-side drop is counted per rule ([`crate::RxDrops`]).
//!
//! Choices where rxe and the IBTA leave room, written down:
//! - `retry_count` 7 is 7 retries, not infinite (IBTA; rxe treats it as infinite);
//!   `rnr_retry` 7 is infinite. Retries count consecutive failures: progress gives them back.
//! - A gap in READ responses, or an ACK beyond an unanswered READ / atomic, starts one
//!   go-back-N retry (without consuming `retry_count`) until progress, as rxe's
//!   `started_retry`; the local ACK timeout covers a retry that is lost in turn.
//! - A READ / atomic holds its `max_rd_atomic` credit until it leaves the send queue, so the
//!   responder's ring of `max_dest_rd_atomic` resources always holds every request the
//!   requester may retry (when `log_sra_max <= log_rra_max`, as connected peers set).
//! - Requests execute in order: READ responses still owed go out before the next request
//!   of that QP touches memory; resumable generation interleaves them with other QPs and
//!   with incoming responses only.

pub(crate) mod completer;
pub(crate) mod requester;
pub(crate) mod responder;
mod share;
mod timers;

pub(crate) use timers::{next_deadline, poll_timers, rearm};

use std::net::{Ipv4Addr, Ipv6Addr};

use rnic_hw_regs::cqe::CqeSyndrome;
use rnic_hw_regs::ctx::{QpState, Qpc};

use crate::ctx::Ctx;
use crate::resources::{QpTransport, UdDest};
use crate::wire::{
    BthRepr, EthRepr, EthernetAddress, GsoRun, IpRepr, Ipv4Repr, Ipv6Repr, Opcode, PacketRepr,
    UdpRepr, VlanTag, rdma_get_udp_sport,
};

/// Payload bytes per packet for an IB MTU code (1 = 256 .. 5 = 4096).
pub(crate) const fn mtu_bytes(code: u8) -> Option<u32> {
    match code {
        1..=5 => Some(128 << code),
        _ => None,
    }
}

/// The IB MTU code of the largest IB MTU that fits Ethernet MTU `eth_mtu` with RoCE headers
/// ([`rnic_hw_regs::roce::roce_mtu_code`], the driver's `active_mtu` too), at least 1 (256).
pub(crate) fn port_mtu_code(eth_mtu: u16) -> u8 {
    rnic_hw_regs::roce::roce_mtu_code(u32::from(eth_mtu)).max(1)
}

/// Error returned while building a frame: the WQE fails with this syndrome.
pub(crate) type Fail = CqeSyndrome;

/// The 4 IPv4 address bytes of an IPv4-mapped GID (`::ffff:a.b.c.d`).
pub(crate) fn gid_v4(gid: &[u8; 16]) -> Option<Ipv4Addr> {
    (gid[..10].iter().all(|b| *b == 0) && gid[10] == 0xFF && gid[11] == 0xFF)
        .then(|| Ipv4Addr::new(gid[12], gid[13], gid[14], gid[15]))
}

/// The IPv4-mapped GID of `ip` (crate tests).
#[cfg(test)]
pub(crate) fn tests_gid(ip: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xFF;
    g[11] = 0xFF;
    g[12..].copy_from_slice(&ip);
    g
}

/// The IP address a GID stands for.
pub(crate) fn gid_ip(gid: &[u8; 16]) -> std::net::IpAddr {
    match gid_v4(gid) {
        Some(v4) => v4.into(),
        None => Ipv6Addr::from(*gid).into(),
    }
}

/// Whether a packet with IP header `ip` may touch QP `qpc`, as rxe's `check_addr`: for a
/// connected QP (RC, UC) its source must be the peer (the address path's `rgid_rip`) and its
/// destination the QP's own address (its source GID, GID table entry `src_addr_index`);
/// UD QPs (and QP1) take datagrams from anyone. Requests (the responder) and responses (the completer)
/// are checked alike. The UDP source port is no part of it: RoCE v2 senders pick it per flow.
pub(crate) fn addr_ok(ctx: &Ctx<'_>, qpc: &Qpc, ip: &IpRepr) -> bool {
    if rnic_hw_regs::ctx::QpSt::try_from(qpc.st()).is_ok_and(rnic_hw_regs::ctx::QpSt::is_datagram) {
        return true;
    }
    let a = qpc.primary_address_path();
    let own = ctx
        .state
        .res
        .gids
        .get(usize::from(a.src_addr_index()))
        .and_then(|e| e.as_ref())
        .map(|e| gid_ip(&e.source_l3_address()));
    ip.src() == gid_ip(&a.rgid_rip()) && own == Some(ip.dst())
}

/// The addressing of a QP's packets: who sends, to whom, and how.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Path {
    /// Destination GID.
    pub rgid: [u8; 16],
    /// Destination MAC.
    pub rmac: [u8; 6],
    /// Source GID table index.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// DSCP << 2 | ECN.
    pub tclass: u8,
    /// Flow label.
    pub flow_label: u32,
    /// UDP source port (0: derive from the QPNs).
    pub udp_sport: u16,
    /// Service level (VLAN priority).
    pub sl: u8,
    /// Destination QPN.
    pub dqpn: u32,
}

impl Path {
    /// The primary address path of a connected QP.
    pub(crate) fn of_qp(qpc: &Qpc) -> Path {
        let a = qpc.primary_address_path();
        Path {
            rgid: a.rgid_rip(),
            rmac: a.rmac(),
            sgid_index: a.src_addr_index(),
            hop_limit: a.hop_limit(),
            // RoCE v2 on ConnectX takes the IP DSCP and ECN from the address path's `dscp`
            // and `ecn`; a path that only set `tclass` (as for a GRH) uses its DSCP bits.
            tclass: if a.dscp() == 0 && a.ecn() == 0 {
                a.tclass() & !3
            } else {
                (a.dscp() << 2) | a.ecn()
            },
            flow_label: a.flow_label(),
            udp_sport: a.udp_sport(),
            sl: a.sl(),
            dqpn: qpc.remote_qpn(),
        }
    }

    /// A UD WQE's destination.
    pub(crate) fn of_ud(ud: &UdDest) -> Path {
        Path {
            rgid: ud.rgid,
            rmac: ud.rmac,
            sgid_index: ud.sgid_index,
            hop_limit: ud.hop_limit,
            tclass: ud.tclass,
            flow_label: ud.flow_label,
            udp_sport: ud.udp_sport,
            sl: 0,
            dqpn: ud.dqpn,
        }
    }
}

/// The headers of a packet of QP `qpn` along `path` with `bth` (extension headers empty),
/// or the error the WQE gets when the path is unusable (no RoCE v2 source GID, mixed IP
/// versions).
pub(crate) fn packet_repr(
    ctx: &Ctx<'_>,
    qpn: u32,
    path: &Path,
    bth: BthRepr,
) -> Result<PacketRepr, Fail> {
    let entry = ctx
        .state
        .res
        .gids
        .get(usize::from(path.sgid_index))
        .and_then(|e| e.as_ref())
        .filter(|e| e.roce_version() == rnic_hw_regs::ctx::ROCE_VERSION_2)
        .ok_or(CqeSyndrome::LocalQpOp)?;
    let sgid = entry.source_l3_address();
    let mut eth = EthRepr::new(
        EthernetAddress(path.rmac),
        EthernetAddress(entry.source_mac()),
    );
    if entry.vlan_valid() {
        eth.vlan = Some(VlanTag {
            pcp: path.sl & 7,
            dei: false,
            vid: entry.vlan_id(),
        });
    }
    let ip = match (gid_v4(&sgid), gid_v4(&path.rgid)) {
        (Some(src), Some(dst)) => {
            let mut v4 = Ipv4Repr::new(src, dst);
            v4.dscp = path.tclass >> 2;
            v4.ecn = path.tclass & 3;
            v4.ttl = path.hop_limit;
            IpRepr::V4(v4)
        }
        (None, None) => {
            let mut v6 = Ipv6Repr::new(Ipv6Addr::from(sgid), Ipv6Addr::from(path.rgid));
            v6.traffic_class = path.tclass;
            v6.flow_label = path.flow_label & 0xF_FFFF;
            v6.hop_limit = path.hop_limit;
            IpRepr::V6(v6)
        }
        _ => return Err(CqeSyndrome::LocalQpOp),
    };
    let sport = if path.udp_sport != 0 {
        path.udp_sport
    } else {
        rdma_get_udp_sport(path.flow_label, qpn, path.dqpn)
    };
    Ok(PacketRepr::new(eth, ip, UdpRepr::new(sport), bth))
}

/// Emits `repr` with `payload` into a port buffer and transmits it.
pub(crate) fn send_frame(ctx: &mut Ctx<'_>, repr: &PacketRepr, payload: &[u8]) {
    // The emitter writes every byte of the frame (headers, payload, pad, ICRC, Ethernet
    // padding): the buffer is not zeroed first.
    let mut frame = ctx.state.port.frame_buffer(repr.buffer_len(payload.len()));
    // Nothing observes a frame on an in-process link while the port does not capture: its
    // ICRC is left out (the receiver skips the check), as Linux's loopback leaves out
    // checksums.
    let sealed = !ctx.state.port.takes_unsealed();
    let emitted = if sealed {
        repr.emit(&mut frame, payload)
    } else {
        repr.emit_unsealed(&mut frame, payload)
    };
    match emitted {
        Ok(n) => {
            frame.truncate(n);
            crate::port::tx::transmit(ctx, frame, sealed);
        }
        Err(_) => {
            // The requester sizes packets by the path MTU, so this is an internal bug; the
            // packet is lost like a frame dropped on the wire, and counted as a transmit drop.
            ctx.state.counters.tx_dropped += 1;
            ctx.state.port.recycle(frame);
        }
    }
}

/// [`send_frame`] for `len` payload bytes that `fill` writes straight into the frame (the
/// requester's gather from host memory: one copy per byte, not two). Nothing is sent when
/// `fill` fails; its error is returned.
pub(crate) fn send_frame_filled<E>(
    ctx: &mut Ctx<'_>,
    repr: &PacketRepr,
    len: usize,
    fill: impl FnOnce(&mut Ctx<'_>, &mut [u8]) -> Result<(), E>,
) -> Result<(), E> {
    let mut frame = ctx.state.port.frame_buffer(repr.buffer_len(len));
    let (n, payload) = match repr.emit_around_payload(&mut frame, len) {
        Ok(r) => r,
        Err(_) => {
            // As in `send_frame`: an internal bug, counted as a transmit drop.
            ctx.state.counters.tx_dropped += 1;
            ctx.state.port.recycle(frame);
            return Ok(());
        }
    };
    frame.truncate(n);
    if let Err(e) = fill(ctx, &mut frame[payload]) {
        ctx.state.port.recycle(frame);
        return Err(e);
    }
    let sealed = !ctx.state.port.takes_unsealed();
    if sealed {
        crate::wire::icrc::seal(&mut frame);
    }
    crate::port::tx::transmit(ctx, frame, sealed);
    Ok(())
}

/// [`send_frame_filled`] for a run of packets in one buffer ([`GsoRun`]): `first`'s
/// headers, as for the first packet alone, then the `len` payload bytes of every packet,
/// which `fill` writes. For a port that takes runs ([`crate::port::Port::takes_runs`]).
pub(crate) fn send_run_filled<E>(
    ctx: &mut Ctx<'_>,
    first: &PacketRepr,
    run: GsoRun,
    len: usize,
    fill: impl FnOnce(&mut Ctx<'_>, &mut [u8]) -> Result<(), E>,
) -> Result<(), E> {
    let header = first.header_len();
    let mss = usize::from(run.mss);
    // The first packet's headers are emitted as for it alone (its payload, pad and ICRC
    // fields laid out for one packet); the run's payload then covers those fields.
    let mut frame = ctx
        .state
        .port
        .frame_buffer(first.buffer_len(mss).max(header + len));
    if first.emit_around_payload(&mut frame, mss).is_err() {
        // As in `send_frame`: an internal bug, counted as transmit drops.
        ctx.state.counters.tx_dropped += u64::from(run.count);
        ctx.state.port.recycle(frame);
        return Ok(());
    }
    frame.truncate(header + len);
    if let Err(e) = fill(ctx, &mut frame[header..]) {
        ctx.state.port.recycle(frame);
        return Err(e);
    }
    crate::port::tx::transmit_run(ctx, frame, run);
    Ok(())
}

/// A BTH with the P_Key rxe and ConnectX use by default (0xFFFF).
pub(crate) fn bth(opcode: Opcode, dest_qp: u32, psn: u32) -> BthRepr {
    BthRepr::new(opcode, dest_qp, psn)
}

/// Whether 8-byte atomic values (the responder's target, the requester's result buffer)
/// are big-endian in memory: yes unless the host set `atomic_req_8B_endianness_mode` 1
/// (host byte order, as ACCESS_REG HOST_ENDIANNESS told) with SET_HCA_CAP.
pub(crate) fn atomic_big_endian(ctx: &Ctx<'_>) -> bool {
    if ctx.state.caps.atomic().atomic_req_8B_endianness_mode() == 1 {
        ctx.state.hca.host_big_endian
    } else {
        true
    }
}

/// Whether the QP's state lets it receive (RTR and later, not ERR / RST / INIT).
pub(crate) fn can_receive(qpc: &Qpc) -> bool {
    matches!(
        QpState::try_from(qpc.state()),
        Ok(QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqer)
    )
}

/// Posts an affiliated QP event (`kind`, QPN at 0x38) to the EQ subscribed to it.
pub(crate) fn qp_event(ctx: &mut Ctx<'_>, kind: rnic_hw_regs::eqe::EventType, qpn: u32) {
    let mut e = rnic_hw_regs::eqe::Eqe::of(kind);
    e.set_qp_srq_n(qpn & 0xFF_FFFF);
    crate::eq::post_event(ctx, &e);
}

/// Moves QP `qpn` to SQE (send queue error) and flushes its outstanding send WQEs; the
/// receive side keeps working and SQERR2RTS resumes sending (IBTA: SQE is the error state of
/// a UD or UC send queue, RC has none); `tr` as for [`enter_error`].
pub(crate) fn enter_sq_error(ctx: &mut Ctx<'_>, qpn: u32, tr: &mut QpTransport) {
    if let Some(qp) = ctx.state.res.qps.get_mut(qpn) {
        qp.ctx.set_state(QpState::Sqer.into());
    }
    crate::sq::flush_send(ctx, qpn, tr);
}

/// Moves QP `qpn` to ERR and flushes its outstanding work; `tr` is the QP's transport state
/// (taken out of the QP by the caller, who puts it back).
pub(crate) fn enter_error(ctx: &mut Ctx<'_>, qpn: u32, tr: &mut QpTransport) {
    if let Some(qp) = ctx.state.res.qps.get_mut(qpn) {
        qp.ctx.set_state(QpState::Err.into());
    }
    crate::sq::flush_with(ctx, qpn, tr);
}
