//! One side's verbs resources for a perf test: the buffer (a local and a target area per QP),
//! the CQs with their channels, the QPs, and their connection towards the peer's
//! (`ctx_connect`). With `-R` the connection manager creates the QPs on the PD and CQs
//! ([`Res::without_qps`], [`super::cm`]) and connects them.

use super::protocol::PerfDest;
use super::{Conn, PerfConfig};
use crate::error::ToolError;
use crate::rdma::{self, Context, GRH};
use rnic_verbs as v;
use std::sync::Arc;

/// One side's verbs resources. Buffer layout per QP `i`: `[local(i), local(i) + slot)` is the
/// source of WRITE/SEND, the destination of READ and atomic results and of receives;
/// `[target(i), target(i) + slot)` is what the peer writes, reads or runs atomics on (its
/// address goes out in the QP message).
pub struct Res {
    /// Device.
    pub ctx: Context,
    /// PD.
    pub pd: v::ProtectionDomain,
    /// The buffer.
    pub mr: v::MemoryRegion,
    /// Send CQ.
    pub send_cq: v::CompletionQueue,
    /// Receive CQ.
    pub recv_cq: v::CompletionQueue,
    /// The send CQ's completion channel with `-e`.
    pub chan: Option<v::CompletionChannel>,
    /// The receive CQ's completion channel with `-e`: its own, so the two threads of
    /// `send-bw -b` never take each other's events.
    pub recv_chan: Option<v::CompletionChannel>,
    /// QPs (shared with the connection manager's ids with `-R`).
    pub qps: Vec<Arc<v::QueuePair>>,
    /// UD: address handles towards the peer's QPs.
    pub ahs: Vec<v::AddressHandle>,
    /// Bytes per half-slot.
    pub slot: usize,
    /// GID index.
    pub gid_index: u32,
}

impl Res {
    /// The completion channel of `cq` (one of this test's CQs), with `-e`.
    pub fn chan_of(&self, cq: &v::CompletionQueue) -> Option<&v::CompletionChannel> {
        if std::ptr::eq(cq, &self.recv_cq) {
            self.recv_chan.as_ref()
        } else {
            self.chan.as_ref()
        }
    }

    /// Offset of QP `i`'s local area.
    pub fn local(&self, i: usize) -> usize {
        i * 2 * self.slot
    }

    /// Offset of QP `i`'s target area.
    pub fn target(&self, i: usize) -> usize {
        i * 2 * self.slot + self.slot
    }

    /// QP `i`'s receive buffer for messages of `size`: its local area, with room for the GRH
    /// in front on UD.
    pub fn recv_sge(&self, cfg: &PerfConfig, i: usize, size: u64) -> Result<v::Sge, ToolError> {
        let extra = if cfg.conn == Conn::Ud { GRH } else { 0 };
        self.mr
            .sge(self.local(i), (size as usize + extra) as u32)
            .map_err(rdma::verr)
    }

    /// Creates the PD, the buffer (a local and a target slot per QP, for messages up to
    /// `max_size`), the CQs (and channels with `-e`) and the QPs, in RESET.
    pub fn create(
        ctx: Context,
        cfg: &PerfConfig,
        max_size: u64,
        gid_index: u32,
    ) -> Result<Res, ToolError> {
        let mut r = Res::without_qps(ctx, cfg, max_size, gid_index)?;
        let qt = match cfg.conn {
            Conn::Rc => v::QpType::Rc,
            Conn::Uc => v::QpType::Uc,
            Conn::Ud => v::QpType::Ud,
        };
        for _ in 0..cfg.qps {
            let qp =
                r.pd.create_qp(qt, &r.send_cq, &r.recv_cq)
                    .cap(Res::qp_cap(cfg))
                    .build()
                    .map_err(rdma::verr)?;
            r.qps.push(Arc::new(qp));
        }
        Ok(r)
    }

    /// The capacities of a test QP: the TX depth (at least the post list), the RX depth, one
    /// SGE each way, the inline size.
    pub fn qp_cap(cfg: &PerfConfig) -> v::QpCap {
        v::QpCap {
            max_send_wr: cfg.tx_depth.max(cfg.post_list),
            max_recv_wr: cfg.rx_depth.max(1),
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: cfg.inline_size,
        }
    }

    /// [`Res::create`] without the QPs (`-R`: the connection manager makes them).
    pub fn without_qps(
        ctx: Context,
        cfg: &PerfConfig,
        max_size: u64,
        gid_index: u32,
    ) -> Result<Res, ToolError> {
        let slot = (max_size as usize + GRH).next_multiple_of(64).max(4096);
        let total = slot
            .checked_mul(2 * cfg.qps as usize)
            .filter(|t| *t <= 512 << 20)
            .ok_or_else(|| {
                ToolError::Usage(format!(
                    "{} QPs of {max_size}-byte messages need more than 512 MiB of buffers",
                    cfg.qps
                ))
            })?;
        let pd = ctx.alloc_pd().map_err(rdma::verr)?;
        let access = v::AccessFlags::LOCAL_WRITE
            | v::AccessFlags::REMOTE_WRITE
            | v::AccessFlags::REMOTE_READ
            | v::AccessFlags::REMOTE_ATOMIC;
        let mr = pd.reg_mr(total, access).map_err(rdma::verr)?;
        // perftest fills its buffers with non-zero data; a constant is enough here.
        mr.fill(0, total, 0x5a).map_err(rdma::verr)?;
        let channel = || -> Result<_, ToolError> {
            if cfg.events {
                Ok(Some(ctx.create_comp_channel().map_err(rdma::verr)?))
            } else {
                Ok(None)
            }
        };
        let (chan, recv_chan) = (channel()?, channel()?);
        let depth = (cfg.tx_depth.max(cfg.rx_depth) * cfg.qps).max(16);
        let send_cq = ctx.create_cq(depth, chan.as_ref()).map_err(rdma::verr)?;
        let recv_cq = ctx
            .create_cq(depth, recv_chan.as_ref())
            .map_err(rdma::verr)?;
        Ok(Res {
            ctx,
            pd,
            mr,
            send_cq,
            recv_cq,
            chan,
            recv_chan,
            qps: Vec::new(),
            ahs: Vec::new(),
            slot,
            gid_index,
        })
    }

    /// The address messages of our QPs (a random PSN each).
    pub fn my_dests(&self, cfg: &PerfConfig) -> Result<Vec<PerfDest>, ToolError> {
        let gid = rdma::gid(&self.ctx, self.gid_index)?;
        Ok(self
            .qps
            .iter()
            .enumerate()
            .map(|(i, qp)| PerfDest {
                lid: 0,
                out_reads: cfg.out_reads,
                qpn: qp.qp_num(),
                psn: rdma::random_psn(),
                rkey: self.mr.rkey(),
                vaddr: self.mr.addr() + self.target(i) as u64,
                gid,
                srqn: 0,
            })
            .collect())
    }

    /// `ctx_connect`: every QP to RTS towards the peer's (UD: address handles).
    pub fn connect(
        &mut self,
        cfg: &PerfConfig,
        mine: &[PerfDest],
        rem: &[PerfDest],
        mtu: u8,
    ) -> Result<(), ToolError> {
        for (i, qp) in self.qps.iter().enumerate() {
            let (m, r) = (&mine[i], &rem[i]);
            let mut ah = v::AhAttr::new(v::Gid(r.gid), self.gid_index as u8);
            ah.hop_limit = 64;
            let access = match cfg.conn {
                Conn::Rc => {
                    v::AccessFlags::LOCAL_WRITE
                        | v::AccessFlags::REMOTE_WRITE
                        | v::AccessFlags::REMOTE_READ
                        | v::AccessFlags::REMOTE_ATOMIC
                }
                Conn::Uc => v::AccessFlags::LOCAL_WRITE | v::AccessFlags::REMOTE_WRITE,
                Conn::Ud => v::AccessFlags::empty(),
            };
            qp.to_init(&v::InitAttr {
                access,
                qkey: (cfg.conn == Conn::Ud).then_some(v::DEFAULT_QKEY),
                ..v::InitAttr::default()
            })
            .map_err(rdma::verr)?;
            let rd = r.out_reads.clamp(1, 16) as u8;
            if cfg.conn == Conn::Ud {
                qp.to_rtr(&v::RtrAttr::default()).map_err(rdma::verr)?;
            } else {
                qp.to_rtr(&v::RtrAttr {
                    path_mtu: Some(rdma::mtu_from_enum(mtu)),
                    dest_qp_num: Some(r.qpn),
                    rq_psn: r.psn,
                    ah_attr: Some(ah),
                    max_dest_rd_atomic: cfg.out_reads.clamp(1, 16) as u8,
                    min_rnr_timer: 12,
                })
                .map_err(rdma::verr)?;
            }
            qp.to_rts(&v::RtsAttr {
                sq_psn: m.psn,
                timeout: cfg.qp_timeout,
                retry_cnt: 7,
                rnr_retry: 7,
                max_rd_atomic: rd,
            })
            .map_err(rdma::verr)?;
            if cfg.conn == Conn::Ud {
                self.ahs.push(self.pd.create_ah(&ah).map_err(rdma::verr)?);
            }
        }
        Ok(())
    }
}
