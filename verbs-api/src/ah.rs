//! [`AddressHandle`] (`struct ibv_ah`) and [`AhAttr`] (`struct ibv_ah_attr` for RoCE v2).

use crate::error::{Error, Result};
use crate::{Context, Gid, ProtectionDomain};
use rnic_driver::ah::AddressHandle as DriverAh;
use rnic_driver::qp::AddressVector;
use std::net::Ipv4Addr;

/// The largest service level of a connected QP's path (RoCE: the 3-bit Ethernet priority):
/// the driver's.
///
/// ```
/// assert_eq!(rnic_verbs::MAX_SL, 7);
/// ```
pub use rnic_driver::qp::MAX_SL;

/// Where packets go: a RoCE v2 address (`struct ibv_ah_attr` with its GRH; RoCE needs the
/// GRH, so it is always there).
///
/// ```
/// use rnic_verbs::{AhAttr, Gid};
/// use std::net::Ipv4Addr;
///
/// let ah = AhAttr::new(Gid::from_ipv4(Ipv4Addr::new(192, 0, 2, 2)), 1);
/// assert_eq!(ah.hop_limit, 1); // rc_pingpong's
/// assert_eq!(ah.dmac, None); // resolved by the context
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AhAttr {
    /// Destination GID (`grh.dgid`).
    pub dgid: Gid,
    /// Local GID index (`grh.sgid_index`): the source address.
    pub sgid_index: u8,
    /// Hop limit (IPv4 TTL; `grh.hop_limit`). 0 means 64.
    pub hop_limit: u8,
    /// Traffic class (DSCP << 2 | ECN; `grh.traffic_class`).
    pub traffic_class: u8,
    /// Flow label (20 bits; `grh.flow_label`); it also selects the UDP source port.
    pub flow_label: u32,
    /// Service level (Ethernet priority; `sl`): 0 ..= [`MAX_SL`] for a connected QP's path.
    pub sl: u8,
    /// Destination MAC; `None`: [`crate::Context::resolve_mac`] of `dgid`.
    pub dmac: Option<[u8; 6]>,
    /// UDP source port; `None`: from the flow label and QP numbers, as rxe does.
    pub udp_sport: Option<u16>,
}

impl AhAttr {
    /// An address of `dgid` from local GID `sgid_index`, hop limit 1 (as the pingpong tools
    /// set it), everything else 0 / derived.
    ///
    /// ```
    /// use rnic_verbs::{AhAttr, Gid};
    ///
    /// let a = AhAttr { traffic_class: 0x68, ..AhAttr::new(Gid::from_ipv4([10, 0, 0, 2].into()), 1) };
    /// assert_eq!((a.sgid_index, a.hop_limit, a.traffic_class), (1, 1, 0x68));
    /// assert_eq!(a.udp_sport, None); // derived per QP, as rxe does
    /// ```
    pub fn new(dgid: Gid, sgid_index: u8) -> AhAttr {
        AhAttr {
            dgid,
            sgid_index,
            hop_limit: 1,
            traffic_class: 0,
            flow_label: 0,
            sl: 0,
            dmac: None,
            udp_sport: None,
        }
    }

    /// `ibv_init_ah_from_wc`: the address back to the sender of a datagram received on
    /// `ctx`'s port, from the 40-byte GRH area in front of the payload (RoCE v2: an IPv4
    /// header in its last 20 bytes, or an IPv6 header filling it): the sender's GID as the
    /// destination, the local GID it was sent to as the source (one of the port's, else an
    /// error), hop limit 0 (the driver's 64).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// # let (ua, ub) = (pa.create_qp(QpType::Ud, &ca, &ca).build()?, pb.create_qp(QpType::Ud, &cb, &cb).build()?);
    /// # connect_pair(&ua, &ub, &ConnectOptions::default())?;
    /// let buf = pb.reg_mr(64, AccessFlags::LOCAL_WRITE)?;
    /// ub.post_recv(&[RecvWr::new(1, &[buf.sge(0, 64)?])])?;
    /// let ah = pa.create_ah(&AhAttr::new(b.query_gid(1, 1)?, 1))?;
    /// ua.post_send(&[SendWr::send(1, &[]).inline(b"hi").ud(&ah, ub.qp_num(), DEFAULT_QKEY)])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(cb.poll_blocking(&mut wc, t)?, 1);
    /// let back = AhAttr::from_grh(&b, &buf.to_vec(0, 40)?)?; // towards the sender
    /// assert_eq!(back.dgid, a.query_gid(1, 1)?);
    /// assert!(AhAttr::from_grh(&a, &buf.to_vec(0, 40)?).is_err()); // not sent to `a`
    /// # Ok(()) }
    /// ```
    pub fn from_grh(ctx: &Context, grh: &[u8]) -> Result<AhAttr> {
        let (sgid, dgid) = grh_addresses(grh);
        reply_to(ctx, sgid, dgid, "ibv_init_ah_from_wc")
    }

    pub(crate) fn to_av(self, pd: &ProtectionDomain, verb: &'static str) -> Result<AddressVector> {
        let ctx = pd.context();
        // Checked before the MAC is resolved (the driver checks it again as it builds the
        // address, through the same `Hca::gid`).
        if ctx.hca().gid(self.sgid_index).is_none() {
            return Err(Error::invalid(
                verb,
                format!(
                    "ah_attr.grh.sgid_index {} is not a populated GID index",
                    self.sgid_index
                ),
            ));
        }
        let dmac = match self.dmac {
            Some(m) => m,
            None => ctx.resolve_mac(&self.dgid)?,
        };
        Ok(AddressVector {
            sgid_index: self.sgid_index,
            dgid: self.dgid.0,
            dmac,
            hop_limit: self.hop_limit,
            traffic_class: self.traffic_class,
            flow_label: self.flow_label,
            sl: self.sl,
            udp_sport: self.udp_sport,
        })
    }
}

/// A UD address handle (`ibv_create_ah`): where a UD send goes
/// ([`crate::SendWr::ud`]). Keeps its PD alive.
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
/// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
/// # let (ua, ub) = (pa.create_qp(QpType::Ud, &ca, &ca).build()?, pb.create_qp(QpType::Ud, &cb, &cb).build()?);
/// # connect_pair(&ua, &ub, &ConnectOptions::default())?;
/// // emu1's IPv4 GID, from emu0's GID 1: where UD sends go.
/// let ah = pa.create_ah(&AhAttr::new(b.query_gid(1, 1)?, 1))?;
/// assert_eq!(ah.dmac(), b.mac()); // resolved without ARP
/// let grh = pb.reg_mr(40, AccessFlags::LOCAL_WRITE)?; // a UD receive starts with the GRH area
/// ub.post_recv(&[RecvWr::new(1, &[grh.sge(0, 40)?])])?;
/// ua.post_send(&[SendWr::send(1, &[]).ud(&ah, ub.qp_num(), DEFAULT_QKEY)])?;
/// let mut wc = [WorkCompletion::default(); 1];
/// assert_eq!(cb.poll_blocking(&mut wc, t)?, 1);
/// assert!(wc[0].is_success());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct AddressHandle {
    // Dropped before the PD.
    ah: DriverAh,
    attr: AhAttr,
    pd: ProtectionDomain,
}

impl AddressHandle {
    pub(crate) fn create(pd: &ProtectionDomain, attr: &AhAttr) -> Result<AddressHandle> {
        let av = attr.to_av(pd, "ibv_create_ah")?;
        let ah = DriverAh::new(pd.driver(), &av).map_err(Error::driver("ibv_create_ah"))?;
        Ok(AddressHandle {
            ah,
            attr: *attr,
            pd: pd.clone(),
        })
    }

    /// The attributes it was created with.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let attr = AhAttr { sl: 3, ..AhAttr::new(Gid::from_ipv4([192, 0, 2, 2].into()), 1) };
    /// let ah = ctx.alloc_pd()?.create_ah(&attr)?;
    /// assert_eq!(*ah.attr(), attr);
    /// # Ok(()) }
    /// ```
    pub fn attr(&self) -> &AhAttr {
        &self.attr
    }

    /// The destination MAC it uses.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let pd = ctx.alloc_pd()?;
    /// let gid = Gid::from_ipv4([192, 0, 2, 9].into());
    /// // Explicit MAC wins; otherwise the context resolves one.
    /// let fixed = pd.create_ah(&AhAttr { dmac: Some([2, 0, 0, 0, 0, 1]), ..AhAttr::new(gid, 1) })?;
    /// assert_eq!(fixed.dmac(), [2, 0, 0, 0, 0, 1]);
    /// assert_eq!(pd.create_ah(&AhAttr::new(gid, 1))?.dmac(), ctx.resolve_mac(&gid)?);
    /// # Ok(()) }
    /// ```
    pub fn dmac(&self) -> [u8; 6] {
        self.ah.av().dmac
    }

    /// The PD.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let pd = ctx.alloc_pd()?;
    /// let ah = pd.create_ah(&AhAttr::new(ctx.query_gid(1, 1)?, 1))?;
    /// assert_eq!(ah.pd().pdn(), pd.pdn());
    /// # Ok(()) }
    /// ```
    pub fn pd(&self) -> &ProtectionDomain {
        &self.pd
    }

    pub(crate) fn driver(&self) -> &DriverAh {
        &self.ah
    }
}

/// The address back to `sender` from the port's GID `to` that a message came in on
/// (`ibv_init_ah_from_wc`); `verb` names the caller in the error when `to` is none of
/// `ctx`'s GIDs.
pub(crate) fn reply_to(ctx: &Context, sender: Gid, to: Gid, verb: &'static str) -> Result<AhAttr> {
    let Some(own) = ctx.gid_table().iter().find(|e| e.gid == to) else {
        return Err(Error::invalid(
            verb,
            format!("{to} is none of the port's GIDs"),
        ));
    };
    let index =
        u8::try_from(own.index).map_err(|_| Error::invalid(verb, "GID index beyond 255"))?;
    // Hop limit 0: the driver's 64.
    Ok(AhAttr {
        hop_limit: 0,
        ..AhAttr::new(sender, index)
    })
}

/// The source and destination addresses of a GRH area: an IPv4 header in its last 20 bytes
/// (the first 20 zero), else an IPv6 header (a GRH) filling all 40.
pub(crate) fn grh_addresses(grh: &[u8]) -> (Gid, Gid) {
    let at = |r: std::ops::Range<usize>| grh.get(r).unwrap_or(&[]);
    let v4 = |b: &[u8]| {
        <[u8; 4]>::try_from(b).map_or(Gid([0; 16]), |a| Gid::from_ipv4(Ipv4Addr::from(a)))
    };
    let v6 = |b: &[u8]| Gid(<[u8; 16]>::try_from(b).unwrap_or([0; 16]));
    if at(0..20).iter().all(|&b| b == 0) && at(20..21).first().is_some_and(|b| b >> 4 == 4) {
        (v4(at(32..36)), v4(at(36..40)))
    } else {
        (v6(at(8..24)), v6(at(24..40)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grh_areas_of_both_ip_versions() {
        let mut g = [0u8; 40];
        g[20] = 0x45;
        g[32..36].copy_from_slice(&[10, 0, 0, 1]);
        g[36..40].copy_from_slice(&[10, 0, 0, 2]);
        let (s, d) = grh_addresses(&g);
        assert_eq!(
            (s, d),
            (
                Gid::from_ipv4([10, 0, 0, 1].into()),
                Gid::from_ipv4([10, 0, 0, 2].into())
            )
        );
        let mut g6 = [0u8; 40];
        g6[0] = 0x60;
        g6[8..24].copy_from_slice(&[0xfe; 16]);
        g6[24..40].copy_from_slice(&[0xfd; 16]);
        assert_eq!(grh_addresses(&g6), (Gid([0xfe; 16]), Gid([0xfd; 16])));
        // Short input: no panic, zero addresses.
        assert_eq!(grh_addresses(&[0x60; 3]), (Gid([0; 16]), Gid([0; 16])));
    }
}
