//! The port's receive side: takes frames from the loopback queue and the link, checks each
//! (structure, ICRC, destination QP, destination IP; DestQP 1 means the port's QP1) and
//! hands it to the responder
//! (requests) or the completer (ACKs and responses); when idle, or after its budget, it
//! sends what the responder owes (READ responses, coalesced ACKs).

use super::tx::{dest_gid, is_own_gid};
use crate::ctx::{Ctx, count_drop, count_drops};
use crate::link::FrameForm;
use crate::state::{DeviceState, RxDrops};
use crate::transport::poll_timers;
use crate::wire::{GsoRun, Opcode, PacketRepr, RocePacket, WireError};
use rnic_hw_regs::roce::GSI_QPN;

/// Frames processed per device step at most, so a livelock between QPs cannot hang the
/// device.
pub(crate) const MAX_FRAMES_PER_RUN: usize = 1 << 20;

/// Frames `run` takes before it does what the port does when idle (READ responses, the
/// coalesced ACKs) and returns, like a NIC driver's poll budget: a link that never runs dry
/// (a flood) must not starve the ACKs, the timers and the doorbells.
const RX_BUDGET: usize = 256;

/// Adds the frames the link dropped since the last call to the counters (full ring:
/// `ring_full`; oversize and malformed: `malformed`; overflow: `link_overflow`; all to
/// `rx_dropped`).
pub(crate) fn sync_link_drops(st: &mut DeviceState) {
    let d = st.port.take_link_drops();
    let counters = &mut st.counters;
    counters.drops.ring_full += d.ring_full;
    counters.drops.malformed += d.oversize + d.malformed;
    counters.drops.link_overflow += d.overflow;
    counters.rx_dropped += d.ring_full + d.oversize + d.overflow + d.malformed;
}

/// Processes received frames until the port is idle or [`RX_BUDGET`] frames were taken,
/// then the due timers; returns how many frames and timers there were, and whether it
/// stopped for the budget (frames may be waiting).
///
/// Frames first: what is waiting arrived before this step began, so an ACK that came in
/// time retires its packets before their timer is looked at. (A device whose thread was
/// not scheduled for longer than a QP's ACK timeout would otherwise fire the timer, resend
/// and count a retry for every such stall while the ACK sat in its ring: a loaded machine
/// ended RC connections in RetryExcErr that way.)
pub(crate) fn run(ctx: &mut Ctx<'_>) -> (usize, bool) {
    sync_link_drops(ctx.state);
    let (n, more) = run_frames(ctx);
    let fired = poll_timers(ctx);
    if fired == 0 || more {
        return (n + fired, more);
    }
    // What the timers sent (resends, RNR retries) goes out now, and whatever it brings back
    // on a loopback link is served in this same step, as when timers ran first.
    ctx.state.port.link.flush();
    let (m, more) = run_frames(ctx);
    (n + fired + m, more)
}

/// The frames part of [`run`].
fn run_frames(ctx: &mut Ctx<'_>) -> (usize, bool) {
    let mut n = 0;
    let mut frames = 0;
    loop {
        if frames >= RX_BUDGET {
            // Not idle, but the transport must go on as if: READ responses, then ACKs.
            crate::transport::responder::pump_reads(ctx);
            if !ctx.state.port.ack_pending.is_empty() {
                crate::transport::responder::flush_acks(ctx);
            }
            // What a batching link holds back goes out now, not at the next step's receive.
            ctx.state.port.link.flush();
            return (n, true);
        }
        let (mut frame, from_link, form) = match ctx.state.port.rx.pop_front() {
            Some(f) => (f, false, FrameForm::Sealed),
            None => {
                if let Some((b, form)) = ctx.state.port.receive_from_link() {
                    (b, true, form)
                } else {
                    // Idle: READ responses left to send, then the coalesced ACKs.
                    if crate::transport::responder::pump_reads(ctx) {
                        continue;
                    }
                    if ctx.state.port.ack_pending.is_empty() {
                        break;
                    }
                    crate::transport::responder::flush_acks(ctx);
                    continue;
                }
            }
        };
        let packets = match form {
            FrameForm::Run(run) => usize::from(run.count.max(1)),
            _ => 1,
        };
        n += packets;
        frames += packets;
        let exact = if from_link {
            if let Some(c) = ctx.state.port.capture.as_mut() {
                c.write(ctx.clock.now_ns(), &frame);
            }
            ctx.state.port.link.rx_ip_header_exact()
        } else {
            true
        };
        match form {
            FrameForm::Run(run) => receive_run(ctx, &frame, run),
            _ => receive(ctx, &mut frame, exact, form == FrameForm::Sealed),
        }
        ctx.state.port.recycle(frame);
    }
    (n, false)
}

/// Whether a frame (with match fields `f`) takes the RoCE v2 path rather than flow
/// steering: IP / UDP to port 4791 (first fragment), addressed to one of the device's GIDs.
/// Without a NIC RX root table every UDP 4791 frame takes it, so RoCE traffic for other
/// addresses is counted under the RoCE rules (`not_our_ip`), as before steering existed.
fn is_roce_for_us(ctx: &Ctx<'_>, frame: &[u8], f: &rnic_hw_regs::ctx::FteMatchSetLyr24) -> bool {
    crate::steering::fields_are_roce_v2(f)
        && (ctx.state.res.flow.nic_rx_root.is_none()
            || dest_gid(frame).is_some_and(|g| is_own_gid(ctx, &g)))
}

/// Checks one received frame and hands it to the transport (RoCE v2), or to flow steering. `exact`: the IP header is the
/// sender's (false for a UDP link: the IP ID is unknown, see [`crate::link::udp`]).
/// `sealed`: the frame carries its ICRC; an unsealed one came over an in-process link that
/// nothing observes ([`crate::link::Link::receive_unsealed`]) and has no ICRC to check.
#[inline(always)]
fn receive(ctx: &mut Ctx<'_>, frame: &mut [u8], exact: bool, sealed: bool) {
    // Without a root table every RoCE v2 frame is the transport's: no fields to lay out.
    let roce = ctx.state.res.flow.nic_rx_root.is_none() && crate::steering::is_roce_v2(frame);
    if !roce
        && let Some(fields) = crate::steering::packet_fields(frame)
        && !is_roce_for_us(ctx, frame, &fields)
    {
        crate::steering::steer(ctx, frame, &fields);
        return;
    }
    let Ok(mut packet) = RocePacket::new_checked(&*frame) else {
        count_drop(ctx, |d| &mut d.malformed);
        return;
    };
    let checked = if sealed { packet.verify_icrc() } else { Ok(()) };
    if let Err(e) = checked {
        let ip_start = if frame.get(12..14) == Some(&[0x81, 0x00]) {
            18
        } else {
            14
        };
        // The ID is solved from the ICRC just computed: a bad frame costs one CRC pass.
        let solved = match e {
            WireError::IcrcMismatch { expected, .. } if !exact => frame
                .get_mut(ip_start..)
                .is_some_and(|ip| crate::link::udp::solve_ip_id_with(ip, expected)),
            _ => false,
        };
        if !solved {
            count_drop(ctx, |d| &mut d.bad_icrc);
            return;
        }
        ctx.state.counters.transport.icrc_ip_id_solved += 1;
        // The IP ID and header checksum changed: check the frame again.
        let Ok(p) = RocePacket::new_checked(&*frame) else {
            count_drop(ctx, |d| &mut d.malformed);
            return;
        };
        packet = p;
    }
    let frame = &*frame;
    let Ok(repr) = PacketRepr::parse_packet(&packet) else {
        count_drop(ctx, |d| &mut d.malformed);
        return;
    };
    let payload = packet.payload();
    let qpn = match route(ctx, frame, &repr) {
        Ok(qpn) => qpn,
        Err(rule) => return count_drop(ctx, rule),
    };
    ctx.state.counters.frames_rx += 1;
    if repr.bth.opcode.is_response() {
        crate::transport::completer::handle(ctx, qpn, &repr, payload);
    } else {
        crate::transport::responder::handle(ctx, qpn, &repr, payload, ip_header(frame, &repr));
    }
}

/// A drop rule: which [`RxDrops`] counter a dropped frame goes to.
type Rule = fn(&mut RxDrops) -> &mut u64;

/// The QP a RoCE v2 packet `repr` (in `frame`) is for: its destination QP, DestQP 1 being
/// the port's QP1; or the rule it is dropped under (not for one of the device's IPs, a
/// CNP, QP 0, RoCE disabled, no QP1, no such QP).
#[inline(always)]
fn route(ctx: &Ctx<'_>, frame: &[u8], repr: &PacketRepr) -> Result<u32, Rule> {
    let qpn = repr.bth.dest_qp;
    if !dest_gid(frame).is_some_and(|g| is_own_gid(ctx, &g)) {
        return Err(|d| &mut d.not_our_ip);
    }
    if repr.bth.opcode == Opcode::Cnp {
        return Err(|d| &mut d.cnp);
    }
    if qpn == 0 {
        return Err(|d| &mut d.dest_qp_zero);
    }
    if !ctx.state.res.vport.roce_en {
        return Err(|d| &mut d.roce_disabled);
    }
    // DestQP 1 is the port's QP1, which has a QPN of its own (as mlx5 firmware steers it).
    let qpn = if qpn == GSI_QPN {
        let Some(gsi) = ctx.state.res.gsi_qpn else {
            return Err(|d| &mut d.no_gsi_qp);
        };
        gsi
    } else {
        qpn
    };
    if ctx.state.res.qps.get(qpn).is_none() {
        return Err(|d| &mut d.unknown_qp);
    }
    Ok(qpn)
}

/// The IP header of `frame`, whose headers are `repr` (for the UD GRH area).
fn ip_header<'f>(frame: &'f [u8], repr: &PacketRepr) -> &'f [u8] {
    let ip_start = repr.eth.buffer_len();
    frame
        .get(ip_start..ip_start + repr.ip.buffer_len())
        .unwrap_or(&[])
}

/// Checks a run of packets ([`GsoRun`]; only an in-process link nothing observes carries
/// one) and hands them to the responder together, as [`receive`] hands each frame: the same
/// checks, once for the run (its packets share every header they check), and the same
/// counters, once per packet. A run that does not describe real packets is dropped whole
/// as malformed; one that flow steering would see (the device has a NIC RX root table and
/// the run is not for one of its IPs) is cut into its packets, and each is received as a
/// frame.
fn receive_run(ctx: &mut Ctx<'_>, frame: &[u8], run: GsoRun) {
    let n = u64::from(run.count);
    let Ok(first) = run.parse(frame) else {
        // Each packet it claims, and at least the buffer that came.
        return count_drops(ctx, n.max(1), |d| &mut d.malformed);
    };
    if ctx.state.res.flow.nic_rx_root.is_some()
        && !dest_gid(frame).is_some_and(|g| is_own_gid(ctx, &g))
    {
        let mut cut = crate::link::Cutter::of(first, run);
        let mut packet = ctx.state.port.buffer();
        while cut.next_packet(frame, &mut packet) {
            receive(ctx, &mut packet, true, true);
        }
        ctx.state.port.recycle(packet);
        return;
    }
    let qpn = match route(ctx, frame, &first) {
        Ok(qpn) => qpn,
        Err(rule) => return count_drops(ctx, n, rule),
    };
    ctx.state.counters.frames_rx += n;
    let payload = &frame[first.header_len()..];
    crate::transport::responder::handle_run(ctx, qpn, &first, run, payload);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{Link, LinkRxDrops};
    use crate::port::tx::transmit;
    use crate::{Device, Profile, RunMode};
    use rnic_hw_regs::ctx::{ROCE_VERSION_2, RoceAddrLayout};
    use std::collections::VecDeque;

    use crate::wire::{BthRepr, EthRepr, EthernetAddress, IpRepr, Ipv4Repr, UdpRepr};
    use std::net::Ipv4Addr;

    /// A link that records what it was given.
    #[derive(Debug, Default)]
    struct Recorder(Vec<Vec<u8>>);

    impl Link for Recorder {
        fn transmit(&mut self, frame: &[u8]) {
            self.0.push(frame.to_vec());
        }
        fn receive(&mut self, _buf: &mut Vec<u8>) -> bool {
            false
        }
    }

    fn frame(dst: Ipv4Addr) -> Vec<u8> {
        let repr = PacketRepr::new(
            EthRepr::new(EthernetAddress([2; 6]), EthernetAddress([4; 6])),
            IpRepr::V4(Ipv4Repr::new(Ipv4Addr::new(10, 0, 0, 1), dst)),
            UdpRepr::new(0xC000),
            BthRepr::new(Opcode::RcSendOnly, 0x999, 0),
        );
        let mut b = vec![0u8; repr.buffer_len(4)];
        let n = repr.emit(&mut b, b"data").unwrap();
        b.truncate(n);
        b
    }

    #[test]
    fn a_frame_that_cannot_be_emitted_is_a_transmit_drop() {
        let dev = Device::new(Profile::default(), RunMode::Deterministic);
        dev.with_ctx(|ctx| {
            ctx.state.port.link = Box::new(Recorder::default());
            let repr = PacketRepr::new(
                EthRepr::new(EthernetAddress([2; 6]), EthernetAddress([4; 6])),
                IpRepr::V4(Ipv4Repr::new(
                    Ipv4Addr::new(10, 0, 0, 1),
                    Ipv4Addr::new(10, 0, 0, 2),
                )),
                UdpRepr::new(0xC000),
                BthRepr::new(Opcode::RcSendOnly, 0x999, 0),
            );
            // More than the 16-bit IP and UDP lengths can carry.
            crate::transport::send_frame(ctx, &repr, &[0u8; 70_000]);
            assert_eq!(ctx.state.counters.tx_dropped, 1);
            assert_eq!(ctx.state.counters.frames_tx, 0);
            // Received-frame accounting is untouched: rx_dropped is still the sum of the rules.
            assert_eq!(ctx.state.counters.rx_dropped, 0);
            assert_eq!(
                ctx.state.counters.rx_dropped,
                ctx.state.counters.drops.total()
            );
        });
    }

    #[test]
    fn own_gids_loop_back_and_the_rest_goes_to_the_link() {
        let dev = Device::new(Profile::default(), RunMode::Deterministic);
        dev.with_ctx(|ctx| {
            let mut gid = RoceAddrLayout::default();
            gid.set_source_l3_address(crate::transport::tests_gid([10, 0, 0, 1]));
            gid.set_roce_version(ROCE_VERSION_2);
            ctx.state.res.set_gid(0, Some(gid));
            ctx.state.port.link = Box::new(Recorder::default());
            transmit(ctx, frame(Ipv4Addr::new(10, 0, 0, 1)), true);
            transmit(ctx, frame(Ipv4Addr::new(10, 0, 0, 2)), true);
            assert_eq!(ctx.state.port.queued(), 1, "looped back");
            assert!(format!("{:?}", ctx.state.port).contains("Recorder"));
            // The looped-back frame names an unknown QP: dropped and counted.
            assert_eq!(run(ctx), (1, false));
            assert_eq!(ctx.state.counters.rx_dropped, 1);
            assert_eq!(ctx.state.counters.frames_tx, 2);
            // Garbage and a corrupted ICRC are dropped too.
            let mut bad = frame(Ipv4Addr::new(10, 0, 0, 1));
            let last = bad.len() - 1;
            bad[last] ^= 1;
            ctx.state.port.rx.push_back(bad);
            ctx.state.port.rx.push_back(vec![0xFF; 7]);
            assert_eq!(run(ctx), (2, false));
            assert_eq!(ctx.state.counters.rx_dropped, 3);
            assert_eq!(ctx.state.counters.frames_rx, 0);
        });
    }

    /// A link that hands out frames like a UDP socket does (no exact IP header).
    #[derive(Debug, Default)]
    struct SocketLike(VecDeque<Vec<u8>>);

    impl Link for SocketLike {
        fn transmit(&mut self, _frame: &[u8]) {}
        fn receive(&mut self, buf: &mut Vec<u8>) -> bool {
            self.0.pop_front().map(|f| *buf = f).is_some()
        }
        fn rx_ip_header_exact(&self) -> bool {
            false
        }
    }

    /// A frame whose ICRC matches no IP ID costs one CRC pass (the check), not one per ID
    /// bit; a frame from a sender with a non-zero IP ID is still recovered.
    #[test]
    fn a_bad_icrc_costs_one_crc_pass() {
        use crate::wire::icrc::PASSES;
        let dev = Device::new(Profile::default(), RunMode::Deterministic);
        dev.with_ctx(|ctx| {
            let mut bad = frame(Ipv4Addr::new(10, 0, 0, 1));
            bad[50] ^= 0x10;
            let mut link = SocketLike::default();
            for _ in 0..100 {
                link.0.push_back(bad.clone());
            }
            // A good frame whose sender used IP ID 0x1234, seen with ID 0 (the socket).
            let mut v4 = Ipv4Repr::new(Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(10, 0, 0, 1));
            v4.ident = 0x1234;
            let repr = PacketRepr::new(
                EthRepr::new(EthernetAddress([2; 6]), EthernetAddress([4; 6])),
                IpRepr::V4(v4),
                UdpRepr::new(0xC000),
                BthRepr::new(Opcode::RcSendOnly, 0x999, 0),
            );
            let mut good = vec![0u8; repr.buffer_len(4)];
            let n = repr.emit(&mut good, b"data").unwrap();
            good.truncate(n);
            let mut ip = crate::wire::Ipv4Packet::new_unchecked(&mut good[14..34]);
            ip.set_ident(0);
            ip.fill_checksum();
            link.0.push_back(good);
            ctx.state.port.link = Box::new(link);
            let before = PASSES.with(std::cell::Cell::get);
            assert_eq!(run(ctx), (101, false));
            let passes = PASSES.with(std::cell::Cell::get) - before;
            assert_eq!(ctx.state.counters.drops.bad_icrc, 100);
            assert_eq!(ctx.state.counters.transport.icrc_ip_id_solved, 1);
            // The good frame is for an IP the device does not have: dropped after its ICRC
            // verified.
            assert_eq!(ctx.state.counters.drops.not_our_ip, 1);
            assert_eq!(passes, 101, "one ICRC pass per frame");
        });
    }

    /// A link that reports drops of its own.
    #[derive(Debug)]
    struct Dropping(LinkRxDrops);

    impl Link for Dropping {
        fn transmit(&mut self, _frame: &[u8]) {}
        fn receive(&mut self, _buf: &mut Vec<u8>) -> bool {
            false
        }
        fn rx_drops(&self) -> LinkRxDrops {
            self.0
        }
    }

    /// The link's drops reach the device's counters once each, under their rules, and
    /// keep `rx_dropped` the sum of the rules.
    #[test]
    fn the_links_drops_are_counted_once() {
        let dev = Device::new(Profile::default(), RunMode::Deterministic);
        let drops = LinkRxDrops {
            ring_full: 2,
            oversize: 1,
            overflow: 4,
            malformed: 3,
        };
        dev.set_link(Box::new(Dropping(drops)));
        assert_eq!(
            dev.counters().rx_dropped,
            0,
            "what the link had before it was attached"
        );
        dev.with_ctx(|ctx| {
            ctx.state.port.link = Box::new(Dropping(LinkRxDrops {
                ring_full: 5,
                oversize: 2,
                overflow: 8,
                malformed: 5,
            }));
        });
        for _ in 0..2 {
            dev.step();
            let c = dev.counters();
            let d = c.drops;
            // Oversize and malformed frames both count as malformed.
            assert_eq!((d.ring_full, d.malformed, d.link_overflow), (3, 1 + 2, 4));
            assert_eq!((c.rx_dropped, d.total()), (10, 10));
        }
    }
}
