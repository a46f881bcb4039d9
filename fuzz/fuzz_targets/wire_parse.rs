//! The emulator's wire parser (`rnic_emulator::wire`): every header view and `Repr`, the
//! extension headers of every opcode, and whole frames.
//!
//! Whatever parses must re-emit, and the round trip is what the code promises: a `Repr`
//! emitted and parsed again is the same `Repr` (with the same payload for a frame), emitting
//! is deterministic (the same `Repr` gives the same bytes), an emitted frame carries a valid
//! ICRC, and a frame's lengths agree with [`PacketRepr::buffer_len`]; a run of packets in one
//! buffer ([`GsoRun`]) that parses cuts into packets that are each a valid frame. Bytes the `Repr`s do not
//! keep (reserved bits, a wrong IPv4 checksum, pad bytes, Ethernet padding) are not compared
//! with the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnic_emulator::wire::*;

/// Parses `$data` as `$view` / `$repr`, re-emits into a `$len`-byte buffer and checks the
/// round trip.
macro_rules! round_trip {
    ($data:expr, $view:ident, $repr:ident) => {{
        if let Ok(h) = $view::new_checked($data) {
            if let Ok(r) = $repr::parse(&h) {
                let mut buf = [0u8; $view::<&[u8]>::LEN];
                r.emit(&mut $view::new_unchecked(&mut buf[..]));
                let again = $repr::parse(&$view::new_checked(&buf[..]).expect("LEN bytes"))
                    .expect(concat!(stringify!($repr), " re-parses"));
                assert_eq!(again, r, concat!(stringify!($repr), " round trip"));
            }
        }
    }};
}

fuzz_target!(|data: &[u8]| {
    // Fixed-length headers.
    round_trip!(data, BthHeader, BthRepr);
    round_trip!(data, DethHeader, DethRepr);
    round_trip!(data, RethHeader, RethRepr);
    round_trip!(data, AethHeader, AethRepr);
    round_trip!(data, AtomicEthHeader, AtomicEthRepr);
    round_trip!(data, AtomicAckEthHeader, AtomicAckEthRepr);
    round_trip!(data, ImmDtHeader, ImmDtRepr);
    round_trip!(data, IethHeader, IethRepr);
    round_trip!(data, CnpHeader, CnpRepr);
    headers_below_bth(data);

    // The extension headers of every opcode.
    for opcode in Opcode::ALL {
        if let Ok(ext) = ExtHeaders::parse(opcode, data) {
            assert!(ext.matches(opcode), "{opcode:?}: parse gave {ext:?}");
            assert_eq!(ext.buffer_len(), opcode.ext_header_len(), "{opcode:?}");
            let mut buf = [0u8; 64];
            ext.emit(&mut buf)
                .expect("64 bytes hold any extension headers");
            let again = ExtHeaders::parse(opcode, &buf[..ext.buffer_len()]).expect("re-parses");
            assert_eq!(again, ext, "{opcode:?}");
        }
    }

    // A whole frame.
    frame(data);
    // A run of packets in one buffer.
    run(data);
});

/// The input as a run of packets ([`GsoRun`]): its first 6 bytes the description (as the
/// `rx_runs` target reads them), the rest the buffer. A run that parses cuts into packets
/// that are each a frame on their own (they parse with a valid ICRC) with the run's
/// payload slice, the PSNs in a row, AckReq only where the run says, and the first packet
/// the buffer's own.
fn run(data: &[u8]) {
    let Some((head, buffer)) = data.split_first_chunk::<6>() else {
        return;
    };
    let Some(last_opcode) = Opcode::from_u8(head[4]) else {
        return;
    };
    let run = GsoRun {
        count: u16::from_le_bytes([head[0], head[1]]),
        mss: u16::from_le_bytes([head[2], head[3]]),
        last_opcode,
        last_ack_req: head[5] & 1 != 0,
        last_solicited: head[5] & 2 != 0,
    };
    let Ok(first) = run.parse(buffer) else {
        return;
    };
    let payload = &buffer[first.header_len()..];
    let mut out = vec![0u8; first.buffer_len(usize::from(run.mss))];
    for i in 0..run.count {
        let n = run
            .emit_packet(&first, payload, i, &mut out)
            .expect("a checked run's packets emit");
        let (p, data) = PacketRepr::parse(&out[..n]).expect("each packet is a frame");
        // PadCnt is derived on emit (from the payload length), not carried by the run.
        let mut want = run.packet(&first, i);
        want.bth.pad_count = PacketRepr::pad_count(data.len());
        assert_eq!(p, want);
        assert_eq!(data, &payload[run.payload_range(payload.len(), i)]);
        assert_eq!(p.bth.ack_req, i + 1 == run.count && run.last_ack_req);
        if i == 0 {
            assert_eq!(p, first, "the first packet is the buffer's");
        }
    }
}

/// Ethernet (with 802.1Q), IPv4, IPv6 and UDP on their own.
fn headers_below_bth(data: &[u8]) {
    if let Ok(f) = ethernet_frame(data) {
        if let Ok(r) = EthRepr::parse(&f) {
            let mut buf = [0u8; 18];
            r.emit(&mut EthernetFrame::new_unchecked(
                &mut buf[..r.buffer_len()],
            ));
            let again = EthRepr::parse(&EthernetFrame::new_unchecked(&buf[..r.buffer_len()]));
            assert_eq!(again, Ok(r), "EthRepr round trip");
        }
    }
    for version in [4, 6] {
        if let Ok((ip, len)) = IpRepr::parse(version, data) {
            assert!(
                len >= ip.buffer_len() && len <= data.len(),
                "IP length {len}"
            );
            let mut buf = vec![0u8; len];
            ip.emit(&mut buf, len - ip.buffer_len());
            assert_eq!(
                IpRepr::parse(version, &buf),
                Ok((ip, len)),
                "IpRepr round trip"
            );
        }
    }
    if let Ok(u) = udp_packet(data) {
        if let Ok(r) = UdpRepr::parse(&u) {
            let mut buf = [0u8; 8];
            r.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), 0);
            assert_eq!(UdpRepr::parse(&UdpPacket::new_unchecked(&buf[..])), Ok(r));
        }
    }
}

/// A whole RoCE v2 frame: the checked view's parts add up, and the parsed frame re-emits to
/// a frame that parses (ICRC included) to the same headers and payload, byte for byte the
/// same on a second emit.
fn frame(data: &[u8]) {
    let Ok(pkt) = RocePacket::new_checked(data) else {
        return;
    };
    // The view's parts lie inside the frame and inside the IP packet.
    assert!(pkt.packet_len() <= data.len());
    assert_eq!(
        (pkt.payload().len() + pkt.pad().len()) % 4,
        0,
        "pad aligns the payload"
    );
    let icrc_ok = pkt.verify_icrc().is_ok();
    assert_eq!(icrc_ok, pkt.icrc() == pkt.compute_icrc());
    let Ok(repr) = PacketRepr::parse_packet(&pkt) else {
        return;
    };
    assert_eq!(repr.bth.opcode, pkt.opcode());
    assert!(repr.ext.matches(repr.bth.opcode));
    let payload = pkt.payload();
    assert_eq!(
        usize::from(repr.bth.pad_count),
        pkt.pad().len(),
        "PadCnt is the pad's length"
    );
    assert_eq!(
        usize::from(PacketRepr::pad_count(payload.len())),
        pkt.pad().len()
    );
    // parse_unverified agrees with the view; parse agrees when the ICRC is right.
    let (u, up) = PacketRepr::parse_unverified(data).expect("the view parsed");
    assert_eq!((u, up), (repr, payload));
    match PacketRepr::parse(data) {
        Ok((p, pp)) => assert!(icrc_ok && p == repr && pp == payload),
        Err(e) => assert!(!icrc_ok, "parse failed with a good ICRC: {e}"),
    }

    let len = repr.buffer_len(payload.len());
    let mut out = vec![0u8; len];
    let n = match repr.emit(&mut out, payload) {
        Ok(n) => n,
        // A received frame's lengths fit 16 bits, so only the emit checks of the opcode's
        // payload rule can refuse; a frame that parsed satisfies them.
        Err(e) => panic!("a parsed frame does not re-emit: {e} ({repr:?})"),
    };
    assert_eq!(n, len, "emit writes buffer_len bytes");
    let (again, again_payload) = PacketRepr::parse(&out[..n]).expect("the emitted frame parses");
    assert_eq!(again, repr, "PacketRepr round trip");
    assert_eq!(again_payload, payload);
    let mut second = vec![0u8; len];
    assert_eq!(again.emit(&mut second, again_payload), Ok(n));
    assert_eq!(second, out, "emit is deterministic");
    // The checked view of the emitted frame agrees too.
    let p2 = RocePacket::new_checked(&out[..n]).expect("view");
    assert_eq!(p2.payload(), payload);
    assert!(p2.pad().iter().all(|&b| b == 0), "emit zeroes the pad");
}
