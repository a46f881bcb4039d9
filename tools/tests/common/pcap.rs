//! RoCE v2 packets read back from the pcap files the `rnic` runs under test write. A test
//! file that needs them includes this module with `#[path = "common/pcap.rs"] mod pcap;`;
//! each uses a part of it, hence the allowance.
#![allow(dead_code)]

/// A RoCE v2 packet of a capture.
pub(crate) struct RocePacket {
    /// The IPv4 source address.
    pub src: [u8; 4],
    /// The bytes from the BTH on, ICRC included.
    pub bth: Vec<u8>,
}

impl RocePacket {
    /// The BTH opcode.
    pub(crate) fn opcode(&self) -> u8 {
        self.bth[0]
    }

    /// The BTH destination QP.
    pub(crate) fn dest_qp(&self) -> u32 {
        u32::from_be_bytes([0, self.bth[5], self.bth[6], self.bth[7]])
    }

    /// The BTH PSN.
    pub(crate) fn psn(&self) -> u32 {
        u32::from_be_bytes([0, self.bth[9], self.bth[10], self.bth[11]])
    }

    /// What follows the BTH, less the 4-byte ICRC.
    pub(crate) fn rest(&self) -> &[u8] {
        &self.bth[12..self.bth.len().saturating_sub(4)]
    }
}

/// The RoCE v2 packets (Ethernet, IPv4, UDP 4791) of a pcap file, in order; other frames are
/// skipped.
pub(crate) fn roce_packets(pcap: &std::path::Path) -> Vec<RocePacket> {
    let b = std::fs::read(pcap).unwrap();
    // The magic (a1b2c3d4 or, with nanoseconds, a1b23c4d) tells the header's byte order.
    let be = b[0] == 0xa1;
    let u32_at = |at: usize| {
        let w: [u8; 4] = b[at..at + 4].try_into().unwrap();
        if be {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        }
    };
    assert_eq!(u32_at(20), 1, "not Ethernet");
    let (mut at, mut packets) = (24, Vec::new());
    while at + 16 <= b.len() {
        let len = u32_at(at + 8) as usize;
        let f = &b[at + 16..(at + 16 + len).min(b.len())];
        at += 16 + len;
        if f.len() < 14 + 20 || f[12..14] != [0x08, 0x00] {
            continue;
        }
        let udp = 14 + usize::from(f[14] & 0x0f) * 4;
        if f.get(udp + 2..udp + 4) != Some(&[0x12, 0xb7][..]) || f.len() < udp + 8 + 12 {
            continue;
        }
        packets.push(RocePacket {
            src: f[14 + 12..14 + 16].try_into().unwrap(),
            bth: f[udp + 8..].to_vec(),
        });
    }
    packets
}
