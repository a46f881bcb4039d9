//! Runs of RoCE v2 packets carried as one buffer: segmentation offload for a link nothing
//! observes, as Linux carries a 64 KiB TCP segment across its loopback in one piece.
//!
//! A run is consecutive packets of one SEND or RDMA WRITE message (RC or UC). Its buffer
//! holds the first packet's headers exactly as that packet alone would have them (IP and UDP
//! lengths for one packet of [`GsoRun::mss`] bytes), then the payload of every packet of the
//! run, back to back, with no pad and no ICRC; the first packet lies whole in it (its ICRC
//! field under the next packet's payload), so it parses as a frame. Packet `i` of the run is
//! the first with:
//!
//! - PSN `first + i`, no RETH, AckReq and SE clear, opcode the MIDDLE of its message;
//! - for the last packet: [`GsoRun::last_opcode`] (MIDDLE, or the message's plain LAST),
//!   [`GsoRun::last_ack_req`] and [`GsoRun::last_solicited`];
//! - payload bytes `i * mss ..`, a whole `mss` for every packet but the last.
//!
//! A run never holds a packet with ImmDt or IETH (the LAST of a `*_WITH_IMMEDIATE` or
//! `*_WITH_INVALIDATE` message travels as a frame of its own), nor an AckReq before its last
//! packet, so every packet of it is described by the first header and these fields.
//! Whoever takes frames as frames (a capture, [`crate::link::Link::receive`]) gets each packet
//! emitted whole and sealed ([`GsoRun::emit_packet`]): the same bytes the sender would have
//! sent one by one.

use core::ops::Range;

use super::icrc::ICRC_LEN;
use super::{Opcode, PacketRepr, WireError};

/// The most payload one run carries (as Linux's `GSO_MAX_SIZE`, 64 KiB).
pub const GSO_MAX_BYTES: usize = 1 << 16;

/// How a run of packets is cut from its first packet (see the module documentation).
///
/// ```
/// use rnic_emulator::wire::{GsoRun, Opcode};
///
/// // A 10 000-byte WRITE at MTU 4096: FIRST, MIDDLE and LAST in one run.
/// let run = GsoRun { count: 3, mss: 4096, last_opcode: Opcode::RcRdmaWriteLast,
///                    last_ack_req: true, last_solicited: false };
/// assert_eq!(run.payload_range(10_000, 2), 8192..10_000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GsoRun {
    /// Packets in the run, at least 2.
    pub count: u16,
    /// Payload bytes of every packet but the last: the path MTU.
    pub mss: u16,
    /// The last packet's opcode: a MIDDLE, or the plain LAST of the first packet's message.
    pub last_opcode: Opcode,
    /// The last packet's AckReq.
    pub last_ack_req: bool,
    /// The last packet's Solicited Event bit (a SEND's LAST).
    pub last_solicited: bool,
}

/// The MIDDLE opcode of the message `op` (a FIRST or MIDDLE of a SEND or RDMA WRITE, RC or
/// UC) is part of.
///
/// ```
/// use rnic_emulator::wire::{Opcode, gso_middle_of};
///
/// assert_eq!(gso_middle_of(Opcode::RcRdmaWriteFirst), Some(Opcode::RcRdmaWriteMiddle));
/// assert_eq!(gso_middle_of(Opcode::UcSendMiddle), Some(Opcode::UcSendMiddle));
/// assert_eq!(gso_middle_of(Opcode::RcSendOnly), None); // a one-packet message has none
/// ```
pub const fn gso_middle_of(op: Opcode) -> Option<Opcode> {
    use Opcode::*;
    // FIRST and MIDDLE are shared by a family's variants (SEND, with immediate, with
    // invalidate; WRITE, with immediate).
    Some(match op {
        RcSendFirst | RcSendMiddle => RcSendMiddle,
        RcRdmaWriteFirst | RcRdmaWriteMiddle => RcRdmaWriteMiddle,
        UcSendFirst | UcSendMiddle => UcSendMiddle,
        UcRdmaWriteFirst | UcRdmaWriteMiddle => UcRdmaWriteMiddle,
        _ => return None,
    })
}

/// The plain LAST (no ImmDt, no IETH) of the message a MIDDLE opcode `middle` belongs to.
const fn plain_last_of(middle: Opcode) -> Option<Opcode> {
    use Opcode::*;
    Some(match middle {
        RcSendMiddle => RcSendLast,
        RcRdmaWriteMiddle => RcRdmaWriteLast,
        UcSendMiddle => UcSendLast,
        UcRdmaWriteMiddle => UcRdmaWriteLast,
        _ => return None,
    })
}

/// A run that does not describe packets a sender could have sent.
const fn bad(reason: &'static str) -> WireError {
    WireError::BadGsoRun { reason }
}

impl GsoRun {
    /// Checks the run against its first packet's headers and the run's `payload_len`:
    /// [`WireError::BadGsoRun`] unless every packet it describes is one a sender could have
    /// sent (see the module documentation).
    ///
    /// ```
    /// use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let ip = IpRepr::V4(Ipv4Repr::new(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)));
    /// let first = PacketRepr::new(eth, ip, UdpRepr::new(0xC000), BthRepr::new(Opcode::RcSendMiddle, 0x11, 7));
    /// let run = GsoRun { count: 2, mss: 1024, last_opcode: Opcode::RcSendLast,
    ///                    last_ack_req: true, last_solicited: false };
    /// assert!(run.check(&first, 1500).is_ok());
    /// assert!(run.check(&first, 1024).is_err()); // the LAST would be empty
    /// ```
    pub fn check(&self, first: &PacketRepr, payload_len: usize) -> Result<(), WireError> {
        if self.count < 2 {
            return Err(bad("fewer than two packets"));
        }
        if !matches!(self.mss, 256 | 512 | 1024 | 2048 | 4096) {
            return Err(bad("segment size is not an IB MTU"));
        }
        let op = first.bth.opcode;
        let Some(middle) = gso_middle_of(op) else {
            return Err(bad(
                "first packet is not a FIRST or MIDDLE of a SEND or WRITE",
            ));
        };
        if first.bth.ack_req || first.bth.solicited {
            return Err(bad("AckReq or SE before the last packet"));
        }
        if first.ext.imm.is_some() || first.ext.ieth.is_some() || first.ext.deth.is_some() {
            return Err(bad("first packet carries headers a run cannot repeat"));
        }
        let ends_message = self.last_opcode != middle;
        if ends_message && Some(self.last_opcode) != plain_last_of(middle) {
            return Err(bad("last opcode is not the message's MIDDLE or plain LAST"));
        }
        if self.last_solicited && !ends_message {
            return Err(bad("SE on a MIDDLE packet"));
        }
        let mss = usize::from(self.mss);
        let before_last = (usize::from(self.count) - 1) * mss;
        let full = before_last + mss;
        // The first packet lies whole in the buffer: its ICRC field too.
        let fits = if ends_message {
            payload_len > before_last && payload_len <= full && payload_len >= mss + ICRC_LEN
        } else {
            payload_len == full
        };
        if !fits || payload_len > GSO_MAX_BYTES {
            return Err(bad("payload length does not fit the packets"));
        }
        Ok(())
    }

    /// The headers of packet `i` (`0 <= i < count`) of a run whose first packet has
    /// headers `first`.
    ///
    /// ```
    /// use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let ip = IpRepr::V4(Ipv4Repr::new(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)));
    /// let mut first = PacketRepr::new(eth, ip, UdpRepr::new(0xC000), BthRepr::new(Opcode::RcRdmaWriteFirst, 0x11, 7));
    /// first.ext.reth = Some(RethRepr { virtual_addr: 0x1000, rkey: 9, dma_len: 3000 });
    /// let run = GsoRun { count: 3, mss: 1024, last_opcode: Opcode::RcRdmaWriteLast,
    ///                    last_ack_req: true, last_solicited: false };
    /// let (mid, last) = (run.packet(&first, 1), run.packet(&first, 2));
    /// assert_eq!((mid.bth.opcode, mid.bth.psn, mid.ext.reth), (Opcode::RcRdmaWriteMiddle, 8, None));
    /// assert_eq!((last.bth.opcode, last.bth.psn, last.bth.ack_req), (Opcode::RcRdmaWriteLast, 9, true));
    /// ```
    pub fn packet(&self, first: &PacketRepr, i: u16) -> PacketRepr {
        if i == 0 {
            return *first;
        }
        let mut p = *first;
        p.bth.psn = super::psn::psn_add(first.bth.psn, u32::from(i));
        p.ext.reth = None;
        if i + 1 == self.count {
            p.bth.opcode = self.last_opcode;
            p.bth.ack_req = self.last_ack_req;
            p.bth.solicited = self.last_solicited;
        } else if let Some(m) = gso_middle_of(first.bth.opcode) {
            p.bth.opcode = m;
        }
        p
    }

    /// Where packet `i`'s payload lies in the run's `payload_len` bytes of payload.
    ///
    /// ```
    /// use rnic_emulator::wire::{GsoRun, Opcode};
    ///
    /// let run = GsoRun { count: 2, mss: 256, last_opcode: Opcode::RcSendMiddle,
    ///                    last_ack_req: false, last_solicited: false };
    /// assert_eq!((run.payload_range(512, 0), run.payload_range(512, 1)), (0..256, 256..512));
    /// ```
    pub fn payload_range(&self, payload_len: usize, i: u16) -> Range<usize> {
        let mss = usize::from(self.mss);
        let start = (usize::from(i) * mss).min(payload_len);
        start..(start + mss).min(payload_len)
    }

    /// The first packet's headers of the run in `frame` (its payload starts at their
    /// [`PacketRepr::header_len`]), checked with [`GsoRun::check`] and against the first
    /// packet's own lengths (one segment of [`GsoRun::mss`] bytes, no pad): the structure
    /// errors of [`crate::wire::RocePacket::new_checked`], or [`WireError::BadGsoRun`].
    ///
    /// ```
    /// use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let ip = IpRepr::V4(Ipv4Repr::new(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)));
    /// let first = PacketRepr::new(eth, ip, UdpRepr::new(0xC000), BthRepr::new(Opcode::RcSendFirst, 0x11, 7));
    /// let run = GsoRun { count: 2, mss: 256, last_opcode: Opcode::RcSendLast,
    ///                    last_ack_req: true, last_solicited: false };
    /// let mut frame = vec![0u8; first.buffer_len(256)];
    /// first.emit(&mut frame, &[0; 256])?;
    /// frame.truncate(first.header_len());
    /// frame.extend_from_slice(&[1; 400]);
    /// assert_eq!(run.parse(&frame)?, first);
    /// let three = GsoRun { count: 3, ..run }; // 400 bytes do not make three packets
    /// assert!(matches!(three.parse(&frame), Err(WireError::BadGsoRun { .. })));
    /// # Ok::<(), WireError>(())
    /// ```
    pub fn parse(&self, frame: &[u8]) -> Result<PacketRepr, WireError> {
        let packet = super::RocePacket::new_checked(frame)?;
        // The first packet's own lengths are those of one whole segment, with no pad.
        if packet.payload().len() != usize::from(self.mss) || !packet.pad().is_empty() {
            return Err(bad("the first packet's lengths are not one segment"));
        }
        let first = PacketRepr::parse_packet(&packet)?;
        self.check(&first, frame.len().saturating_sub(first.header_len()))?;
        Ok(first)
    }

    /// Writes packet `i` of the run (first packet's headers `first`, the run's payload
    /// `payload`) into `buffer` as a whole frame with its ICRC, as the sender would have
    /// sent it alone; returns its length ([`PacketRepr::emit`]'s errors).
    ///
    /// ```
    /// use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let ip = IpRepr::V4(Ipv4Repr::new(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)));
    /// let first = PacketRepr::new(eth, ip, UdpRepr::new(0xC000), BthRepr::new(Opcode::RcSendFirst, 0x11, 7));
    /// let run = GsoRun { count: 2, mss: 256, last_opcode: Opcode::RcSendLast,
    ///                    last_ack_req: true, last_solicited: false };
    /// let payload = [0xAB; 300];
    /// let mut frame = [0u8; 512];
    /// let n = run.emit_packet(&first, &payload, 1, &mut frame)?;
    /// let (last, data) = PacketRepr::parse(&frame[..n])?; // a real packet, ICRC and all
    /// assert_eq!((last.bth.opcode, last.bth.psn, data.len()), (Opcode::RcSendLast, 8, 44));
    /// # Ok::<(), WireError>(())
    /// ```
    pub fn emit_packet(
        &self,
        first: &PacketRepr,
        payload: &[u8],
        i: u16,
        buffer: &mut [u8],
    ) -> Result<usize, WireError> {
        let p = self.packet(first, i);
        p.emit(buffer, &payload[self.payload_range(payload.len(), i)])
    }
}

#[cfg(test)]
mod tests {
    use core::net::Ipv4Addr;

    use super::*;
    use crate::wire::{BthRepr, EthRepr, EthernetAddress, IpRepr, Ipv4Repr, RethRepr, UdpRepr};

    fn first(op: Opcode) -> PacketRepr {
        let mut p = PacketRepr::new(
            EthRepr::new(EthernetAddress([2; 6]), EthernetAddress([4; 6])),
            IpRepr::V4(Ipv4Repr::new(
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 0, 0, 2),
            )),
            UdpRepr::new(0xC000),
            BthRepr::new(op, 0x42, 0xFF_FFFE),
        );
        if op.has_reth() {
            p.ext.reth = Some(RethRepr {
                virtual_addr: 0x10_0000,
                rkey: 0x77,
                dma_len: 5000,
            });
        }
        p
    }

    fn run(count: u16, last: Opcode) -> GsoRun {
        GsoRun {
            count,
            mss: 1024,
            last_opcode: last,
            last_ack_req: true,
            last_solicited: false,
        }
    }

    #[test]
    fn packets_follow_the_message_and_wrap_the_psn() {
        let f = first(Opcode::RcRdmaWriteFirst);
        let r = run(5, Opcode::RcRdmaWriteLast);
        r.check(&f, 5000).unwrap();
        let ops: Vec<_> = (0..5).map(|i| r.packet(&f, i).bth.opcode).collect();
        use Opcode::*;
        assert_eq!(
            ops,
            [
                RcRdmaWriteFirst,
                RcRdmaWriteMiddle,
                RcRdmaWriteMiddle,
                RcRdmaWriteMiddle,
                RcRdmaWriteLast
            ]
        );
        let psns: Vec<_> = (0..5).map(|i| r.packet(&f, i).bth.psn).collect();
        assert_eq!(psns, [0xFF_FFFE, 0xFF_FFFF, 0, 1, 2]);
        assert!((1..5).all(|i| r.packet(&f, i).ext.reth.is_none()));
        assert!((0..4).all(|i| !r.packet(&f, i).bth.ack_req));
        assert!(r.packet(&f, 4).bth.ack_req);
        assert_eq!(r.payload_range(5000, 4), 4096..5000);
    }

    #[test]
    fn runs_that_no_sender_sends_are_refused() {
        let mid = first(Opcode::UcSendMiddle);
        assert!(run(2, Opcode::UcSendLast).check(&mid, 2048).is_ok());
        assert!(run(2, Opcode::UcSendMiddle).check(&mid, 2048).is_ok());
        // A MIDDLE last packet must be whole; a LAST must have a byte.
        assert!(run(2, Opcode::UcSendMiddle).check(&mid, 2047).is_err());
        assert!(run(2, Opcode::UcSendLast).check(&mid, 1024).is_err());
        assert!(run(2, Opcode::UcSendLast).check(&mid, 2049).is_err());
        // The first packet's ICRC field must lie in the buffer: a LAST of at least 4 bytes
        // in a run of two.
        assert!(run(2, Opcode::UcSendLast).check(&mid, 1027).is_err());
        assert!(run(2, Opcode::UcSendLast).check(&mid, 1028).is_ok());
        assert!(run(3, Opcode::UcSendLast).check(&mid, 2049).is_ok());
        // Another transport's or operation's LAST, or one with ImmDt.
        assert!(run(2, Opcode::RcSendLast).check(&mid, 2048).is_err());
        assert!(run(2, Opcode::UcRdmaWriteLast).check(&mid, 2048).is_err());
        assert!(run(2, Opcode::UcSendLastWithImm).check(&mid, 2048).is_err());
        // One packet, a bad segment size, a first packet that cannot start a run.
        assert!(run(1, Opcode::UcSendLast).check(&mid, 100).is_err());
        let mut odd = run(2, Opcode::UcSendLast);
        odd.mss = 1000;
        assert!(odd.check(&mid, 1500).is_err());
        for op in [
            Opcode::RcSendOnly,
            Opcode::RcRdmaReadRequest,
            Opcode::UdSendOnly,
        ] {
            assert!(
                run(2, Opcode::RcSendLast).check(&first(op), 1500).is_err(),
                "{op:?}"
            );
        }
        let mut asks = first(Opcode::RcSendFirst);
        asks.bth.ack_req = true;
        assert!(run(2, Opcode::RcSendLast).check(&asks, 1500).is_err());
        let mut se = run(2, Opcode::RcSendMiddle);
        se.last_solicited = true;
        assert!(se.check(&first(Opcode::RcSendFirst), 2048).is_err());
        // No more than GSO_MAX_BYTES.
        let big = GsoRun {
            count: 17,
            mss: 4096,
            ..run(2, Opcode::RcSendMiddle)
        };
        assert!(big.check(&first(Opcode::RcSendMiddle), 17 * 4096).is_err());
    }

    /// A first header whose own lengths are not one segment (a pad, another payload
    /// length) does not make a run, whatever the description says.
    #[test]
    fn the_first_packet_must_be_one_segment() {
        let f = first(Opcode::RcSendFirst);
        let r = run(2, Opcode::RcSendLast);
        let mut frame = vec![0u8; f.buffer_len(1024)];
        f.emit(&mut frame, &[1; 1024]).unwrap();
        frame.truncate(f.header_len());
        frame.extend_from_slice(&[1; 1500]);
        assert_eq!(r.parse(&frame), Ok(f));
        let bth = 14 + 20 + 8;
        let mut padded = frame.clone();
        padded[bth + 1] |= 1 << 4; // PadCnt 1
        assert!(matches!(r.parse(&padded), Err(WireError::BadGsoRun { .. })));
        let short = GsoRun { mss: 512, ..r }; // the header says 1024
        assert!(matches!(
            short.parse(&frame),
            Err(WireError::BadGsoRun { .. })
        ));
    }

    /// Every packet emitted from a run is the packet the sender emits alone.
    #[test]
    fn emitted_packets_are_the_single_packets() {
        let f = first(Opcode::RcRdmaWriteFirst);
        let r = run(5, Opcode::RcRdmaWriteLast);
        let payload: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        let mut frame = vec![0u8; 2048];
        let mut alone = vec![0u8; 2048];
        for i in 0..5 {
            let n = r.emit_packet(&f, &payload, i, &mut frame).unwrap();
            let p = r.packet(&f, i);
            let m = p
                .emit(&mut alone, &payload[r.payload_range(5000, i)])
                .unwrap();
            assert_eq!(frame[..n], alone[..m]);
            let (parsed, data) = PacketRepr::parse(&frame[..n]).unwrap();
            assert_eq!(parsed.bth.psn, p.bth.psn);
            assert_eq!(data, &payload[r.payload_range(5000, i)]);
        }
    }
}
