//! NIC receive flow steering: where a received frame that is not RoCE v2 traffic for this
//! function goes. The port's receive side ([`crate::port::rx`]) sends it here; it is matched
//! against the NIC RX root flow table and delivered to the RQ behind the matching entry's
//! TIR ([`crate::raw_rq`]), or dropped and counted by reason (no root table, no match, a drop
//! rule, and the RQ's own reasons).
//!
//! Matching is the PRM's: a frame's outer L2-L4 fields are laid out as an
//! `fte_match_set_lyr_2_4` ([`packet_fields`]); an entry of a group matches when those fields,
//! masked by the group's criteria, equal the entry's value. Entries are tried in flow index
//! order; the first that matches acts (forward to a TIR, forward to a table of a higher
//! level, or drop); a table with no match takes its miss action (on to the miss table, or
//! drop). Levels only go up, so a frame visits at most as many tables as there are levels.

use rnic_hw_regs::ctx::{FteMatchParam, FteMatchSetLyr24, match_criteria, table_miss_action};
use rnic_hw_regs::roce::ROCE_V2_PORT;
use zerocopy::IntoBytes;

use crate::ctx::{Ctx, count_drop};
use crate::resources::{FlowDest, FlowSteering};
use crate::wire::{EthernetProtocol, IpProtocol, TPID_8021Q};

/// Tables a frame may visit (levels are 8 bits, and each hop goes one level up at least).
const MAX_HOPS: usize = 256;

/// What steering decided for a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// To the RQ of TIR `tirn`, with the entry's flow tag.
    Tir { tirn: u32, flow_tag: u32 },
    /// No root table.
    NoRoot,
    /// Nothing matched and the miss action drops.
    NoMatch,
    /// A drop rule matched.
    DropRule,
}

/// The frame's outer L2-L4 header fields as a flow match sees them, or `None` for a frame
/// shorter than an Ethernet header. Fields a frame does not have stay zero; the L4 ports and
/// TCP flags are read only from the first fragment.
pub(crate) fn packet_fields(frame: &[u8]) -> Option<FteMatchSetLyr24> {
    let be16 = |at: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]))
    };
    let (ipv4, ipv6, vlan) = (
        u16::from(EthernetProtocol::Ipv4),
        u16::from(EthernetProtocol::Ipv6),
        TPID_8021Q,
    );
    let mut f = FteMatchSetLyr24::default();
    f.set_dmac(frame.get(0..6)?.try_into().ok()?);
    f.set_smac(frame.get(6..12)?.try_into().ok()?);
    let mut ethertype = be16(12)?;
    let mut l3 = 14;
    if ethertype == vlan {
        if let (Some(tci), Some(inner)) = (be16(14), be16(16)) {
            f.set_cvlan_tag(true);
            f.set_first_prio((tci >> 13) as u8);
            f.set_first_cfi(tci & 0x1000 != 0);
            f.set_first_vid(tci & 0x0FFF);
            ethertype = inner;
            l3 = 18;
        }
    }
    f.set_ethertype(ethertype);
    let (proto, l4) = match ethertype {
        t if t == ipv4 => {
            let Some(ip) = frame.get(l3..l3 + 20) else {
                return Some(f);
            };
            if ip[0] >> 4 != 4 {
                return Some(f);
            }
            let ihl = ip[0] & 0x0F;
            f.set_ip_version(4);
            f.set_ipv4_ihl(ihl);
            f.set_ip_dscp(ip[1] >> 2);
            f.set_ip_ecn(ip[1] & 3);
            let frag_field = u16::from_be_bytes([ip[6], ip[7]]);
            let first = frag_field & 0x1FFF == 0;
            f.set_frag(frag_field & 0x3FFF != 0);
            f.set_ttl_hoplimit(ip[8]);
            f.set_ip_protocol(ip[9]);
            f.src_ipv4_src_ipv6_mut()
                .ipv4_layout_mut()
                .set_ipv4(u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]));
            f.set_dst_ipv4(u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]));
            (first.then_some(ip[9]), l3 + usize::from(ihl) * 4)
        }
        t if t == ipv6 => {
            let Some(ip) = frame.get(l3..l3 + 40) else {
                return Some(f);
            };
            if ip[0] >> 4 != 6 {
                return Some(f);
            }
            let tclass = (ip[0] << 4) | (ip[1] >> 4);
            f.set_ip_version(6);
            f.set_ip_dscp(tclass >> 2);
            f.set_ip_ecn(tclass & 3);
            f.set_ip_protocol(ip[6]);
            f.set_ttl_hoplimit(ip[7]);
            let mut a = [0u8; 16];
            a.copy_from_slice(&ip[8..24]);
            f.src_ipv4_src_ipv6_mut().ipv6_layout_mut().set_ipv6(a);
            a.copy_from_slice(&ip[24..40]);
            f.dst_ipv4_dst_ipv6_mut().ipv6_layout_mut().set_ipv6(a);
            (Some(ip[6]), l3 + 40)
        }
        _ => (None, 0),
    };
    match proto.map(IpProtocol::from) {
        Some(IpProtocol::Tcp) => {
            if let (Some(sp), Some(dp), Some(off), Some(fl)) = (
                be16(l4),
                be16(l4 + 2),
                frame.get(l4 + 12),
                frame.get(l4 + 13),
            ) {
                f.set_tcp_sport(sp);
                f.set_tcp_dport(dp);
                f.set_tcp_flags((u16::from(off & 1) << 8) | u16::from(*fl));
            }
        }
        Some(IpProtocol::Udp) => {
            if let (Some(sp), Some(dp)) = (be16(l4), be16(l4 + 2)) {
                f.set_udp_sport(sp);
                f.set_udp_dport(dp);
            }
        }
        _ => {}
    }
    Some(f)
}

/// Whether a frame with match fields `f` is RoCE v2 as the port sees it: IPv4 or IPv6, UDP
/// to port 4791, not a fragment.
pub(crate) fn fields_are_roce_v2(f: &FteMatchSetLyr24) -> bool {
    matches!(f.ip_version(), 4 | 6)
        && f.ip_protocol() == u8::from(IpProtocol::Udp)
        && f.udp_dport() == ROCE_V2_PORT
        && !f.frag()
}

/// [`fields_are_roce_v2`] of [`packet_fields`], read straight from the frame's bytes: the
/// receive path's common case (RoCE v2 with no NIC RX root table) needs no other field, and
/// laying out all of them cost about a tenth of a frame's receive work.
pub(crate) fn is_roce_v2(frame: &[u8]) -> bool {
    let be16 = |at: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]))
    };
    let Some(mut ethertype) = be16(12) else {
        return false;
    };
    let mut l3 = 14;
    if ethertype == TPID_8021Q {
        if let Some(inner) = be16(16) {
            ethertype = inner;
            l3 = 18;
        }
    }
    let udp = u8::from(IpProtocol::Udp);
    let l4 = if ethertype == u16::from(EthernetProtocol::Ipv4) {
        let Some(ip) = frame.get(l3..l3 + 20) else {
            return false;
        };
        let frag_field = u16::from_be_bytes([ip[6], ip[7]]);
        if ip[0] >> 4 != 4 || ip[9] != udp || frag_field & 0x3FFF != 0 {
            return false;
        }
        l3 + usize::from(ip[0] & 0x0F) * 4
    } else if ethertype == u16::from(EthernetProtocol::Ipv6) {
        let Some(ip) = frame.get(l3..l3 + 40) else {
            return false;
        };
        if ip[0] >> 4 != 6 || ip[6] != udp {
            return false;
        }
        l3 + 40
    } else {
        return false;
    };
    be16(l4 + 2) == Some(ROCE_V2_PORT)
}

/// Whether `fields` match `value` under `criteria` (the sets `enable` names; outer headers
/// are the one set this device models, so with it off every frame matches).
fn matches(
    fields: &FteMatchSetLyr24,
    enable: u8,
    criteria: &FteMatchParam,
    value: &FteMatchParam,
) -> bool {
    if enable & match_criteria::OUTER_HEADERS == 0 {
        return true;
    }
    let (m, v) = (
        criteria.outer_headers().as_bytes(),
        value.outer_headers().as_bytes(),
    );
    fields
        .as_bytes()
        .iter()
        .zip(m)
        .zip(v)
        .all(|((f, m), v)| f & m == v & m)
}

/// Walks the tables from the root for a frame with `fields`.
fn decide(flow: &FlowSteering, fields: &FteMatchSetLyr24) -> Verdict {
    let Some(mut table) = flow.nic_rx_root else {
        return Verdict::NoRoot;
    };
    for _ in 0..MAX_HOPS {
        let Some(t) = flow.tables.get(&table) else {
            break;
        };
        let hit = t.entries.values().find(|e| {
            flow.groups
                .get(&e.group)
                .is_some_and(|g| matches(fields, g.criteria_enable, &g.criteria, &e.value))
        });
        match hit {
            Some(e) => match e.dests.first() {
                Some(&FlowDest::Tir(tirn)) => {
                    return Verdict::Tir {
                        tirn,
                        flow_tag: e.flow_tag,
                    };
                }
                Some(&FlowDest::Table(next)) => table = next,
                None => return Verdict::DropRule,
            },
            None if t.miss_action == table_miss_action::GOTO_TABLE => table = t.miss_table,
            None => return Verdict::NoMatch,
        }
    }
    Verdict::NoMatch
}

/// Steers one received frame whose fields are `fields`: delivered into an RQ, or dropped
/// and counted under one rule.
pub(crate) fn steer(ctx: &mut Ctx<'_>, frame: &[u8], fields: &FteMatchSetLyr24) {
    match decide(&ctx.state.res.flow, fields) {
        Verdict::Tir { tirn, flow_tag } => {
            let Some(rqn) = ctx.state.res.tirs.get(tirn).map(|t| t.rqn) else {
                // A TIR an entry names cannot be destroyed; this is the table's own miss.
                count_drop(ctx, |d| &mut d.steering_no_match);
                return;
            };
            crate::raw_rq::deliver(ctx, rqn, frame, flow_tag, fields);
        }
        Verdict::NoRoot => count_drop(ctx, |d| &mut d.steering_no_root),
        Verdict::NoMatch => count_drop(ctx, |d| &mut d.steering_no_match),
        Verdict::DropRule => count_drop(ctx, |d| &mut d.steering_drop_rule),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arp_to(dmac: [u8; 6]) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[..6].copy_from_slice(&dmac);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
        f[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        f
    }

    fn udp4(dst: [u8; 4], dport: u16, vlan: Option<u16>) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        if let Some(tci) = vlan {
            f[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
            f.extend_from_slice(&tci.to_be_bytes());
            f.extend_from_slice(&0x0800u16.to_be_bytes());
        } else {
            f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        }
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[1] = 0x0B; // DSCP 2, ECN 3
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&dst);
        f.extend_from_slice(&ip);
        f.extend_from_slice(&0xC000u16.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&[0, 8, 0, 0]);
        f
    }

    #[test]
    fn fields_of_arp_udp_and_tagged_frames() {
        let f = packet_fields(&arp_to([0xFF; 6])).unwrap();
        assert_eq!(
            (f.ethertype(), f.dmac(), f.ip_version()),
            (0x0806, [0xFF; 6], 0)
        );
        let f = packet_fields(&udp4([10, 0, 0, 2], 4791, None)).unwrap();
        assert_eq!(
            (f.ip_version(), f.ip_protocol(), f.udp_dport()),
            (4, 17, 4791)
        );
        assert_eq!((f.dst_ipv4(), f.ip_dscp(), f.ip_ecn()), (0x0A00_0002, 2, 3));
        assert_eq!(
            (f.udp_sport(), f.ttl_hoplimit(), f.ipv4_ihl()),
            (0xC000, 64, 5)
        );
        let f = packet_fields(&udp4([10, 0, 0, 2], 53, Some(0x6005))).unwrap();
        assert!(f.cvlan_tag());
        assert_eq!(
            (f.first_prio(), f.first_vid(), f.ethertype()),
            (3, 5, 0x0800)
        );
        assert_eq!(f.udp_dport(), 53);
        assert!(packet_fields(&[0; 13]).is_none());
        // A truncated IP header leaves the L3 fields zero, never panics.
        let f = packet_fields(&udp4([1, 2, 3, 4], 1, None)[..20]).unwrap();
        assert_eq!((f.ethertype(), f.ip_version()), (0x0800, 0));
    }

    /// The byte-level check agrees with the one over the laid-out fields, frame for frame.
    #[test]
    fn is_roce_v2_agrees_with_the_fields() {
        let agree = |f: &[u8]| {
            let slow = packet_fields(f).is_some_and(|x| fields_are_roce_v2(&x));
            assert_eq!(is_roce_v2(f), slow, "{f:02x?}");
            slow
        };
        assert!(agree(&udp4([10, 0, 0, 2], 4791, None)));
        assert!(agree(&udp4([10, 0, 0, 2], 4791, Some(7))));
        assert!(!agree(&udp4([10, 0, 0, 2], 53, None)));
        assert!(!agree(&arp_to([0xFF; 6])));
        let mut frag = udp4([10, 0, 0, 2], 4791, None);
        frag[20] = 0x20; // more fragments
        assert!(!agree(&frag));
        let mut v6 = vec![0u8; 14 + 40 + 8];
        v6[12..14].copy_from_slice(&0x86DDu16.to_be_bytes());
        v6[14] = 0x60;
        v6[20] = 17;
        v6[14 + 40 + 2..14 + 40 + 4].copy_from_slice(&4791u16.to_be_bytes());
        assert!(agree(&v6));
        let base = udp4([10, 0, 0, 2], 4791, Some(7));
        for cut in 0..base.len() {
            agree(&base[..cut]);
        }
    }

    proptest::proptest! {
        /// Any bytes on top of a RoCE v2 or a tagged frame: the two checks agree.
        #[test]
        fn is_roce_v2_agrees_on_any_frame(
            tagged: bool,
            edits in proptest::collection::vec((0usize..60, proptest::prelude::any::<u8>()), 0..4),
            len in 0usize..80,
        ) {
            let mut f = udp4([10, 0, 0, 2], 4791, tagged.then_some(5));
            f.resize(len.max(f.len()), 0);
            for (at, b) in edits {
                if let Some(x) = f.get_mut(at) {
                    *x = b;
                }
            }
            f.truncate(len.max(14));
            let slow = packet_fields(&f).is_some_and(|x| fields_are_roce_v2(&x));
            proptest::prop_assert_eq!(is_roce_v2(&f), slow);
        }
    }

    #[test]
    fn masked_match_compares_only_the_criteria() {
        let fields = packet_fields(&udp4([10, 0, 0, 2], 53, None)).unwrap();
        let mut crit = FteMatchParam::default();
        crit.outer_headers_mut().set_ethertype(0xFFFF);
        crit.outer_headers_mut().set_ip_protocol(0xFF);
        let mut val = FteMatchParam::default();
        val.outer_headers_mut().set_ethertype(0x0800);
        val.outer_headers_mut().set_ip_protocol(17);
        let on = match_criteria::OUTER_HEADERS;
        assert!(matches(&fields, on, &crit, &val));
        val.outer_headers_mut().set_ip_protocol(1);
        assert!(!matches(&fields, on, &crit, &val));
        // Without the outer set enabled a group matches everything.
        assert!(matches(&fields, 0, &crit, &val));
    }
}
