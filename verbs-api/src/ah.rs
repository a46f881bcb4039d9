//! [`AddressHandle`] (`struct ibv_ah`) and [`AhAttr`] (`struct ibv_ah_attr` for RoCE v2).

use crate::error::{Error, Result};
use crate::{Gid, ProtectionDomain};
use rnic_driver::ah::AddressHandle as DriverAh;
use rnic_driver::qp::AddressVector;

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
