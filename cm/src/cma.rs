//! rdma_cm's conventions on RoCE v2 (the kernel's `cma.c`): the REQ, REP and SIDR REQ it
//! sends for a connection between two IP endpoints. The path comes from the addresses
//! (GIDs are the IP addresses, IPv4 ones mapped into IPv6; the flow label hashes the
//! ports), the timeouts and retries are rdma_cm's constants, and the private data starts
//! with rdma_cm's IP header ([`IpHeader`]) before the consumer's.

use crate::endpoint::{AcceptParams, ConnectParams, SidrParams};
use crate::error::CmError;
use crate::event::MadAddr;
use crate::time::ack_timeout;
use crate::wire::ip::{IP_HEADER_LEN, IpHeader, PortSpace, service_id};
use crate::wire::{Path, Rep, Req, SidrRep, SidrReq, SidrStatus, WireError};
use core::time::Duration;
use std::net::{IpAddr, SocketAddr};

/// `CMA_CM_RESPONSE_TIMEOUT`: both CM response timeouts of rdma_cm's REQ (4.29 s).
pub const CM_RESPONSE_TIMEOUT: u8 = 20;
/// `CMA_MAX_CM_RETRIES`.
pub const MAX_CM_RETRIES: u8 = 15;
/// `CMA_IBOE_PACKET_LIFETIME`: the packet life time of a RoCE path (1.07 s).
pub const IBOE_PACKET_LIFETIME: u8 = 18;
/// The service timeout of the (delayed) MRA rdma_cm's passive side answers a duplicate
/// REQ with (`CMA_CM_MRA_SETTING`, 68.7 s).
pub const MRA_SERVICE_TIMEOUT: u8 = 24;
/// `RDMA_UDP_QKEY`: the Q_Key of RDMA_PS_UDP services.
pub const UDP_QKEY: u32 = 0x0123_4567;
/// The partition key of RoCE paths (the default partition, full member).
pub const ROCE_PKEY: u16 = 0xFFFF;
/// IB's permissive LID, which REQs on routed (RoCE) paths carry.
pub const PERMISSIVE_LID: u16 = 0xFFFF;
/// Private data after the IP header in a REQ.
pub const REQ_USER_DATA_LEN: usize = Req::PRIVATE_DATA_LEN - IP_HEADER_LEN;
/// Private data after the IP header in a SIDR REQ.
pub const SIDR_REQ_USER_DATA_LEN: usize = SidrReq::PRIVATE_DATA_LEN - IP_HEADER_LEN;

/// The RoCE v2 GID of `ip`: an IPv6 address as it is, an IPv4 one mapped (`::ffff:a.b.c.d`).
///
/// ```
/// let g = rnic_cm::cma::gid_of([10, 11, 0, 3].into());
/// assert_eq!(g[10..], [0xff, 0xff, 10, 11, 0, 3]);
/// ```
pub fn gid_of(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// The flow label rdma_cm gives a RoCE v2 path without one of its own: the ports hashed
/// (`source * 31 + destination`, 20 bits), so the UDP source port spreads connections.
///
/// ```
/// // The kernel's REQ in tests/data/pcaps/rdmacm_send.pcap: port 56810 to 18515.
/// assert_eq!(rnic_cm::cma::flow_label(0xddea, 0x4853), 0xb27a9);
/// ```
pub const fn flow_label(src_port: u16, dst_port: u16) -> u32 {
    (src_port as u32 * 31 + dst_port as u32) & 0xF_FFFF
}

/// A resolved RoCE v2 route (what `rdma_resolve_route` gives): the two IP endpoints and
/// the path's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceRoute {
    /// The active side's address and port.
    pub src: SocketAddr,
    /// The passive side's address and port (the port names the service).
    pub dst: SocketAddr,
    /// IP traffic class (TOS); rdma_cm's default is 0.
    pub traffic_class: u8,
    /// Service level (the priority the TOS maps to; 0 without one).
    pub sl: u8,
    /// Hop limit (the route's; 64 on Linux).
    pub hop_limit: u8,
    /// Path MTU, the IB enum (3 = 1024 for a 1500-byte Ethernet MTU).
    pub path_mtu: u8,
    /// Packet life time, encoded ([`IBOE_PACKET_LIFETIME`] unless an ACK timeout was set).
    pub packet_life_time: u8,
    /// The P_Key index of [`ROCE_PKEY`] on the port (0).
    pub pkey_index: u16,
}

impl RoceRoute {
    /// The route from `src` to `dst` with rdma_cm's defaults.
    pub fn new(src: SocketAddr, dst: SocketAddr) -> RoceRoute {
        RoceRoute {
            src,
            dst,
            traffic_class: 0,
            sl: 0,
            hop_limit: 64,
            path_mtu: 3,
            packet_life_time: IBOE_PACKET_LIFETIME,
            pkey_index: 0,
        }
    }

    /// The active side's GID.
    pub fn src_gid(&self) -> [u8; 16] {
        gid_of(self.src.ip())
    }

    /// The passive side's GID.
    pub fn dst_gid(&self) -> [u8; 16] {
        gid_of(self.dst.ip())
    }

    /// The service ID of the destination port in `ps`.
    pub fn service_id(&self, ps: PortSpace) -> u64 {
        service_id(ps, self.dst.port())
    }

    /// The REQ's primary path, from the active side, to a CA whose ACK delay is
    /// `ca_ack_delay` (`cm_format_req`).
    pub fn path(&self, ca_ack_delay: u8) -> Path {
        let routed = self.hop_limit > 1;
        Path {
            local_lid: if routed { PERMISSIVE_LID } else { 0 },
            remote_lid: if routed { PERMISSIVE_LID } else { 0 },
            local_gid: self.src_gid(),
            remote_gid: self.dst_gid(),
            flow_label: flow_label(self.src.port(), self.dst.port()),
            // IB_RATE_PORT_CURRENT.
            packet_rate: 0,
            traffic_class: self.traffic_class,
            hop_limit: self.hop_limit,
            sl: self.sl,
            subnet_local: u8::from(!routed),
            local_ack_timeout: ack_timeout(ca_ack_delay, self.packet_life_time),
        }
    }

    fn ip_header(&self) -> IpHeader {
        IpHeader {
            cma_version: 0,
            src_port: self.src.port(),
            src: self.src.ip(),
            dst: self.dst.ip(),
        }
    }
}

/// `struct rdma_conn_param`: what the consumer gives `rdma_connect` / `rdma_accept`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnParam {
    /// The consumer's private data (after rdma_cm's IP header in a REQ).
    pub private_data: Vec<u8>,
    /// RDMA READs / atomics the local QP serves at once.
    pub responder_resources: u8,
    /// RDMA READs / atomics the local QP issues at once.
    pub initiator_depth: u8,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// Transport retries (at most 7).
    pub retry_count: u8,
    /// RNR retries (at most 7; 7 is infinite).
    pub rnr_retry_count: u8,
    /// The QP has an SRQ.
    pub srq: bool,
    /// The local QP.
    pub qp_num: u32,
}

fn with_header<const N: usize>(
    route: &RoceRoute,
    user: &[u8],
    what: &'static str,
) -> Result<[u8; N], CmError> {
    let max = N - IP_HEADER_LEN;
    if user.len() > max {
        return Err(CmError::TooLong {
            what,
            len: user.len(),
            max,
        });
    }
    let mut pd = [0u8; N];
    route
        .ip_header()
        .emit(&mut pd)
        .map_err(|_| CmError::InvalidParam("source and destination of one IP version"))?;
    pd[IP_HEADER_LEN..IP_HEADER_LEN + user.len()].copy_from_slice(user);
    Ok(pd)
}

/// The first PSNs of an RC QP the CM connects, as Linux's CM assigns them: the Starting
/// PSN a side puts in its REQ or REP is the first PSN its own QP expects to *receive*
/// (`rq_psn`), and the peer *sends* from it (`sq_psn`). (`cm.c`: `ib_send_cm_req` keeps the
/// REQ's as the active side's `rq_psn` and `cm_req_handler` takes it as the passive side's
/// `sq_psn`; `ib_send_cm_rep` keeps the REP's as the passive side's `rq_psn` and
/// `cm_rep_handler` takes it as the active side's `sq_psn`; `cma.c`'s `rdma_init_qp_attr`
/// sets the RTR `rq_psn` to the id's `seq_num`, the PSN its REQ or REP carried.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpPsns {
    /// The first PSN the QP expects (RTR's `rq_psn`): the one this side sent.
    pub rq_psn: u32,
    /// The first PSN the QP sends (RTS's `sq_psn`): the one the peer sent.
    pub sq_psn: u32,
}

/// The PSNs of a QP whose side sent Starting PSN `sent` in its REQ (active) or REP
/// (passive) and received `received` in the peer's REP or REQ ([`QpPsns`]).
///
/// ```
/// // tests/data/pcaps/rdmacm_send.pcap: the active side's REQ said 0x80b384, the passive
/// // side's REP 0x269d0c; the active side then sent from 0x269d0c, the passive from 0x80b384.
/// use rnic_cm::cma::{qp_psns, QpPsns};
/// assert_eq!(qp_psns(0x80b384, 0x269d0c), QpPsns { rq_psn: 0x80b384, sq_psn: 0x269d0c });
/// assert_eq!(qp_psns(0x269d0c, 0x80b384), QpPsns { rq_psn: 0x269d0c, sq_psn: 0x80b384 });
/// ```
pub const fn qp_psns(sent: u32, received: u32) -> QpPsns {
    QpPsns {
        rq_psn: sent & 0xFF_FFFF,
        sq_psn: received & 0xFF_FFFF,
    }
}

/// The REQ rdma_cm sends for an RC connection over `route` in port space `ps`
/// (`cma_connect_ib`): `starting_psn` is the first PSN the local QP expects to receive
/// (the peer sends from it, see [`qp_psns`]), `ca_ack_delay` the local CA's ACK delay.
///
/// ```
/// use rnic_cm::cma::{connect_params, ConnParam, RoceRoute};
/// use rnic_cm::wire::ip::{IpHeader, PortSpace};
/// let route = RoceRoute::new("10.11.0.3:56810".parse().unwrap(), "10.11.0.2:18515".parse().unwrap());
/// let p = connect_params(&route, PortSpace::Tcp, &ConnParam { qp_num: 0x21, ..Default::default() }, 1, 15).unwrap();
/// assert_eq!(p.req.service_id, 0x0106_4853);
/// assert_eq!(p.req.primary.local_ack_timeout, 19);
/// assert_eq!(IpHeader::parse(&p.req.private_data).unwrap().src_port, 56810);
/// ```
pub fn connect_params(
    route: &RoceRoute,
    ps: PortSpace,
    conn: &ConnParam,
    starting_psn: u32,
    ca_ack_delay: u8,
) -> Result<ConnectParams, CmError> {
    let private_data =
        with_header::<{ Req::PRIVATE_DATA_LEN }>(route, &conn.private_data, "REQ private data")?;
    let req = Req {
        service_id: route.service_id(ps),
        local_qpn: conn.qp_num & 0xFF_FFFF,
        responder_resources: conn.responder_resources,
        initiator_depth: conn.initiator_depth,
        remote_cm_response_timeout: CM_RESPONSE_TIMEOUT,
        transport_service_type: 0,
        end_to_end_flow_control: u8::from(conn.flow_control),
        starting_psn: starting_psn & 0xFF_FFFF,
        local_cm_response_timeout: CM_RESPONSE_TIMEOUT,
        retry_count: conn.retry_count.min(7),
        partition_key: ROCE_PKEY,
        path_mtu: route.path_mtu,
        rnr_retry_count: conn.rnr_retry_count.min(7),
        max_cm_retries: MAX_CM_RETRIES,
        srq: u8::from(conn.srq),
        primary: route.path(ca_ack_delay),
        private_data,
        ..Req::default()
    };
    Ok(ConnectParams {
        to: MadAddr::cm(route.dst_gid(), route.pkey_index),
        packet_life_time: route.packet_life_time,
        req,
    })
}

/// The REP rdma_cm's passive side accepts with (`cma_accept_ib`): the consumer's private
/// data as it is (no header), no alternate path; `starting_psn` is the first PSN the local
/// QP expects to receive (see [`qp_psns`]).
pub fn accept_params(conn: &ConnParam, starting_psn: u32) -> Result<AcceptParams, CmError> {
    let mut rep = Rep {
        local_qpn: conn.qp_num & 0xFF_FFFF,
        starting_psn: starting_psn & 0xFF_FFFF,
        responder_resources: conn.responder_resources,
        initiator_depth: conn.initiator_depth,
        failover_accepted: 0,
        end_to_end_flow_control: u8::from(conn.flow_control),
        rnr_retry_count: conn.rnr_retry_count.min(7),
        srq: u8::from(conn.srq),
        ..Rep::default()
    };
    put_private_data(
        &mut rep.private_data,
        &conn.private_data,
        "REP private data",
    )?;
    Ok(rep)
}

/// The SIDR REQ rdma_cm sends to resolve a UD service over `route` (`cma_resolve_ib_udp`):
/// 4.096 s timeout, 15 retries.
pub fn sidr_params(
    route: &RoceRoute,
    ps: PortSpace,
    private_data: &[u8],
) -> Result<SidrParams, CmError> {
    let private_data =
        with_header::<{ SidrReq::PRIVATE_DATA_LEN }>(route, private_data, "SIDR REQ private data")?;
    Ok(SidrParams {
        to: MadAddr::cm(route.dst_gid(), route.pkey_index),
        req: SidrReq {
            request_id: 0,
            partition_key: ROCE_PKEY,
            service_id: route.service_id(ps),
            private_data,
        },
        // cma.c: 1 << (CMA_CM_RESPONSE_TIMEOUT - 8) ms.
        timeout: Duration::from_millis(1 << (CM_RESPONSE_TIMEOUT - 8)),
        max_cm_retries: MAX_CM_RETRIES,
    })
}

/// The SIDR REP that accepts a UD service request with QP `qp_num` and Q_Key `qkey`
/// ([`UDP_QKEY`] when 0, as `cma_send_sidr_rep`).
pub fn sidr_accept(qp_num: u32, qkey: u32, private_data: &[u8]) -> Result<SidrRep, CmError> {
    let mut rep = SidrRep {
        qpn: qp_num & 0xFF_FFFF,
        qkey: if qkey == 0 { UDP_QKEY } else { qkey },
        ..SidrRep::default()
    };
    put_private_data(&mut rep.private_data, private_data, "SIDR REP private data")?;
    Ok(rep)
}

/// `data` at the start of a message's private-data field `field`, or why it does not fit.
fn put_private_data(field: &mut [u8], data: &[u8], what: &'static str) -> Result<(), CmError> {
    let Some(room) = field.get_mut(..data.len()) else {
        return Err(CmError::TooLong {
            what,
            len: data.len(),
            max: field.len(),
        });
    };
    room.copy_from_slice(data);
    Ok(())
}

/// The SIDR REP that refuses a UD service request (`rdma_reject` of a UD id: status 2,
/// rejected, `cma_send_sidr_rep` with `IB_SIDR_REJECT`), with `private_data`.
///
/// ```
/// let rep = rnic_cm::cma::sidr_reject(b"no").unwrap();
/// assert_eq!((rep.status, rep.qpn, &rep.private_data[..2]), (2, 0, &b"no"[..]));
/// assert!(rnic_cm::cma::sidr_reject(&[0; 137]).is_err());
/// ```
pub fn sidr_reject(private_data: &[u8]) -> Result<SidrRep, CmError> {
    let mut rep = SidrRep {
        status: SidrStatus::Rejected.raw(),
        ..SidrRep::default()
    };
    put_private_data(&mut rep.private_data, private_data, "SIDR REP private data")?;
    Ok(rep)
}

/// Splits a REQ's or SIDR REQ's private data into rdma_cm's IP header and the consumer's
/// part (what the passive side's ConnectRequest event hands up).
///
/// ```
/// use rnic_cm::cma::{split_private_data, RoceRoute, connect_params, ConnParam};
/// use rnic_cm::wire::ip::PortSpace;
/// let route = RoceRoute::new("10.0.0.1:1".parse().unwrap(), "10.0.0.2:2".parse().unwrap());
/// let c = ConnParam { private_data: b"hello".to_vec(), ..Default::default() };
/// let p = connect_params(&route, PortSpace::Tcp, &c, 0, 15).unwrap();
/// let (h, user) = split_private_data(&p.req.private_data).unwrap();
/// assert_eq!((h.src, &user[..5]), (route.src.ip(), &b"hello"[..]));
/// assert!(split_private_data(&[0; 10]).is_err());
/// ```
pub fn split_private_data(private_data: &[u8]) -> Result<(IpHeader, &[u8]), WireError> {
    let h = IpHeader::parse(private_data)?;
    Ok((h, &private_data[IP_HEADER_LEN..]))
}
