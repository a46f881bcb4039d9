//! The VFIO ioctl vfio-ioctls does not wrap: VFIO_IOMMU_GET_INFO with its IOVA range
//! capability, and the parser of its reply (a pure function).

use std::io;
use std::os::fd::RawFd;

/// `VFIO_IOMMU_GET_INFO` = `_IO(';', 100 + 12)`.
const VFIO_IOMMU_GET_INFO: libc::c_ulong = (0x3B << 8) | (100 + 12);
/// `VFIO_IOMMU_INFO_CAPS`: the reply has a capability chain.
const INFO_CAPS: u32 = vfio_bindings::bindings::vfio::VFIO_IOMMU_INFO_CAPS;
/// Capability id of the IOVA ranges.
const CAP_IOVA_RANGE: u16 =
    vfio_bindings::bindings::vfio::VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE as u16;
/// Size of `struct vfio_iommu_type1_info` (argsz, flags, iova_pgsizes, cap_offset, pad).
const INFO_SIZE: usize =
    std::mem::size_of::<vfio_bindings::bindings::vfio::vfio_iommu_type1_info>();

/// What VFIO_IOMMU_GET_INFO says.
///
/// ```
/// use rnic_driver::vfio::sys::{parse_iommu_info, IommuInfo};
///
/// // A reply without a capability chain (older kernels): no ranges, the whole space is valid.
/// let mut reply = vec![0u8; 24];
/// reply[8..16].copy_from_slice(&0x4020_1000u64.to_ne_bytes()); // 4 KiB, 2 MiB, 1 GiB pages
/// assert_eq!(parse_iommu_info(&reply), IommuInfo { iova_pgsizes: 0x4020_1000, iova_ranges: vec![] });
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IommuInfo {
    /// Supported IOMMU page sizes (bit n = 2^n bytes).
    pub iova_pgsizes: u64,
    /// Valid IOVA ranges, inclusive `(start, end)`; empty if the kernel reports none (older
    /// kernels): then the whole space below the DMA mask is assumed valid.
    pub iova_ranges: Vec<(u64, u64)>,
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(off..off + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// Parses a VFIO_IOMMU_GET_INFO reply (native-endian `vfio_iommu_type1_info` followed by its
/// capability chain). Malformed chains end the walk; they never panic.
///
/// ```
/// use rnic_driver::vfio::sys::parse_iommu_info;
///
/// let mut b = Vec::new();
/// for w in [56u32, 2, 0x1000, 0, 24, 0] { b.extend(w.to_ne_bytes()); } // argsz, CAPS, pgsizes, cap_offset
/// b.extend(1u16.to_ne_bytes()); // capability: IOVA ranges
/// b.extend(1u16.to_ne_bytes()); // version
/// for w in [0u32, 1, 0] { b.extend(w.to_ne_bytes()); } // next: none; one range
/// for q in [0u64, 0xFEDF_FFFF] { b.extend(q.to_ne_bytes()); }
/// assert_eq!(parse_iommu_info(&b).iova_ranges, vec![(0, 0xFEDF_FFFF)]);
/// ```
pub fn parse_iommu_info(buf: &[u8]) -> IommuInfo {
    let mut info = IommuInfo {
        iova_pgsizes: u64_at(buf, 8).unwrap_or(0),
        iova_ranges: Vec::new(),
    };
    let flags = u32_at(buf, 4).unwrap_or(0);
    if flags & INFO_CAPS == 0 {
        return info;
    }
    let mut off = u32_at(buf, 16).unwrap_or(0) as usize;
    let mut hops = 0;
    while off != 0 && hops < 64 {
        hops += 1;
        let (Some(id), Some(next)) = (u16_at(buf, off), u32_at(buf, off + 4)) else {
            break;
        };
        if id == CAP_IOVA_RANGE {
            let n = u32_at(buf, off + 8).unwrap_or(0) as usize;
            for i in 0..n.min(4096) {
                let at = off + 16 + i * 16;
                match (u64_at(buf, at), u64_at(buf, at + 8)) {
                    (Some(s), Some(e)) if s <= e => info.iova_ranges.push((s, e)),
                    _ => break,
                }
            }
        }
        if next as usize <= off {
            break; // chains only go forward
        }
        off = next as usize;
    }
    info
}

/// Issues VFIO_IOMMU_GET_INFO on a container whose IOMMU type is set.
///
/// ```
/// use rnic_driver::vfio::sys::iommu_get_info;
/// // A VFIO container's fd is needed (VfioBus::open has one); any other fd is refused.
/// let err = iommu_get_info(-1).unwrap_err();
/// assert_eq!(err.raw_os_error(), Some(libc::EBADF));
/// ```
pub fn iommu_get_info(container: RawFd) -> io::Result<IommuInfo> {
    let mut len = INFO_SIZE.max(64);
    for _ in 0..4 {
        let mut buf = vec![0u8; len];
        buf[..4].copy_from_slice(&(len as u32).to_ne_bytes());
        // SAFETY: the ioctl reads argsz from the buffer and writes at most argsz bytes into
        // it; the buffer is `len` bytes long and argsz says so.
        let rc = unsafe { libc::ioctl(container, VFIO_IOMMU_GET_INFO as _, buf.as_mut_ptr()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let want = u32_at(&buf, 0).unwrap_or(0) as usize;
        if want <= len {
            return Ok(parse_iommu_info(&buf));
        }
        len = want;
    }
    Err(io::Error::other("VFIO_IOMMU_GET_INFO keeps growing"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(ranges: &[(u64, u64)]) -> Vec<u8> {
        let mut b = vec![0u8; 24];
        b[4..8].copy_from_slice(&INFO_CAPS.to_ne_bytes());
        b[8..16].copy_from_slice(&0x4020_1000u64.to_ne_bytes());
        b[16..20].copy_from_slice(&24u32.to_ne_bytes());
        // Capability header: id, version, next.
        b.extend_from_slice(&CAP_IOVA_RANGE.to_ne_bytes());
        b.extend_from_slice(&1u16.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&(ranges.len() as u32).to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        for (s, e) in ranges {
            b.extend_from_slice(&s.to_ne_bytes());
            b.extend_from_slice(&e.to_ne_bytes());
        }
        let len = b.len() as u32;
        b[0..4].copy_from_slice(&len.to_ne_bytes());
        b
    }

    #[test]
    fn parses_the_iova_range_capability() {
        let r = [(0, 0xFEDF_FFFF), (0xFEF0_0000, 0xFFFF_FFFF_FFFF)];
        let info = parse_iommu_info(&reply(&r));
        assert_eq!(info.iova_pgsizes, 0x4020_1000);
        assert_eq!(info.iova_ranges, r.to_vec());
        // Truncated: the walk stops without panicking.
        let full = reply(&r);
        for cut in 0..full.len() {
            let _ = parse_iommu_info(&full[..cut]);
        }
        // No capability flag: no ranges.
        let mut b = reply(&r);
        b[4..8].copy_from_slice(&0u32.to_ne_bytes());
        assert!(parse_iommu_info(&b).iova_ranges.is_empty());
        // A looping chain ends.
        let mut b = reply(&r);
        b[28..32].copy_from_slice(&24u32.to_ne_bytes());
        assert_eq!(parse_iommu_info(&b).iova_ranges.len(), 2);
        assert_eq!(VFIO_IOMMU_GET_INFO, 0x3B70);
    }
}
