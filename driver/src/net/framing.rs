//! Ethernet II framing for the `net` frames, over smoltcp's [`EthernetFrame`]: the header
//! every ARP / ICMP / ND frame starts with, the padding to the 60-byte minimum, and the
//! MAC classes the responder and resolver tell apart.

use std::net::Ipv6Addr;

use smoltcp::wire::{ETHERNET_HEADER_LEN, EthernetAddress, EthernetFrame, EthernetProtocol};

use super::FrameError;

/// The broadcast MAC.
pub const BROADCAST: [u8; 6] = [0xFF; 6];

/// The smallest Ethernet frame without its FCS: shorter frames are padded with zeroes.
pub const MIN_FRAME: usize = 60;

/// EtherType of ARP.
pub(crate) const ETHERTYPE_ARP: u16 = 0x0806;
/// EtherType of IPv4.
pub(crate) const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub(crate) const ETHERTYPE_IPV6: u16 = 0x86DD;

/// Whether `mac` is one a single station can have (not zero, not a group address).
///
/// ```
/// use rnic_driver::net::framing::{is_unicast, BROADCAST};
///
/// assert!(is_unicast([2, 0, 0, 0, 0, 1]));
/// assert!(!is_unicast(BROADCAST) && !is_unicast([0; 6]));
/// ```
pub fn is_unicast(mac: [u8; 6]) -> bool {
    mac[0] & 1 == 0 && mac != [0; 6]
}

/// The MAC an IPv6 multicast address maps to (RFC 2464 section 7): `33:33` and its last
/// four bytes.
///
/// ```
/// use rnic_driver::net::framing::ipv6_multicast_mac;
///
/// let m = ipv6_multicast_mac("ff02::1:ff00:1".parse().unwrap());
/// assert_eq!(m, [0x33, 0x33, 0xFF, 0, 0, 1]);
/// ```
pub fn ipv6_multicast_mac(ip: Ipv6Addr) -> [u8; 6] {
    let o = ip.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}

/// The Ethernet header of a received frame and what follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct L2<'a> {
    /// Destination MAC.
    pub(crate) dst: [u8; 6],
    /// Source MAC.
    pub(crate) src: [u8; 6],
    /// The EtherType.
    pub(crate) ethertype: u16,
    /// Everything after the header (with any padding).
    pub(crate) payload: &'a [u8],
}

/// Splits an untagged Ethernet II frame (an 802.1Q tag is [`FrameError::Unsupported`]: the
/// port's addresses live on its untagged network).
pub(crate) fn parse(frame: &[u8]) -> Result<L2<'_>, FrameError> {
    let f = EthernetFrame::new_checked(frame).map_err(|_| FrameError::Short)?;
    let ethertype = u16::from(f.ethertype());
    if ethertype == 0x8100 || ethertype == 0x88A8 {
        return Err(FrameError::Unsupported);
    }
    Ok(L2 {
        dst: f.dst_addr().0,
        src: f.src_addr().0,
        ethertype,
        payload: &frame[ETHERNET_HEADER_LEN..],
    })
}

/// Writes an Ethernet header (`dst`, `src`, `ethertype`) into `out` for a payload of
/// `payload_len` bytes, zeroing the padding up to [`MIN_FRAME`]; returns the frame's length
/// and the payload's place (`out[ETHERNET_HEADER_LEN..][..payload_len]`).
pub(crate) fn emit(
    out: &mut [u8],
    dst: [u8; 6],
    src: [u8; 6],
    ethertype: u16,
    payload_len: usize,
) -> Result<usize, FrameError> {
    let len = (ETHERNET_HEADER_LEN + payload_len).max(MIN_FRAME);
    let frame = out.get_mut(..len).ok_or(FrameError::BufferTooSmall)?;
    frame[ETHERNET_HEADER_LEN + payload_len..].fill(0);
    let mut f = EthernetFrame::new_unchecked(frame);
    f.set_dst_addr(EthernetAddress(dst));
    f.set_src_addr(EthernetAddress(src));
    f.set_ethertype(EthernetProtocol::from(ethertype));
    Ok(len)
}

/// The payload place of a frame [`emit`] wrote.
pub(crate) fn payload_mut(out: &mut [u8], payload_len: usize) -> &mut [u8] {
    &mut out[ETHERNET_HEADER_LEN..ETHERNET_HEADER_LEN + payload_len]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_padding() {
        let mut out = [0xAAu8; 80];
        let n = emit(&mut out, BROADCAST, [2, 0, 0, 0, 0, 1], ETHERTYPE_ARP, 28).unwrap();
        assert_eq!(n, MIN_FRAME, "padded to the minimum");
        assert!(out[14 + 28..60].iter().all(|&b| b == 0), "padding is zero");
        let l2 = parse(&out[..n]).unwrap();
        assert_eq!(
            (l2.dst, l2.src, l2.ethertype),
            (BROADCAST, [2, 0, 0, 0, 0, 1], ETHERTYPE_ARP)
        );
        assert_eq!(l2.payload.len(), 46);
    }

    #[test]
    fn bad_frames() {
        assert_eq!(parse(&[0; 13]), Err(FrameError::Short));
        let mut tagged = [0u8; 60];
        tagged[12..14].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(parse(&tagged), Err(FrameError::Unsupported));
        let mut small = [0u8; 59];
        assert_eq!(
            emit(&mut small, BROADCAST, BROADCAST, ETHERTYPE_ARP, 28),
            Err(FrameError::BufferTooSmall)
        );
    }
}
