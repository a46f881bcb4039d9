//! `rnic rc-pingpong` and `rnic ud-pingpong`: rdma-core's `ibv_rc_pingpong` /
//! `ibv_ud_pingpong` (`libibverbs/examples/{rc,ud}_pingpong.c`) with their flags, defaults,
//! TCP exchange ([`exchange`]), ping-pong loop and output lines, so either side can be the
//! real tool.
//!
//! One difference by default: without `-g`, rdma-core sends an all-zero GID, which cannot be
//! routed on RoCE; rnic sends its IPv4 RoCE v2 GID instead (what `-g 1` gives on rxe), so two
//! `rnic` processes need no `-g`. A peer that sends a zero GID is refused with a message saying
//! to run it with `-g`.
//!
//! `-c` writes rdma-core's pattern (a 0 byte at the start of every 4096-byte page of a buffer
//! otherwise filled with 0x7b) on the client, and checks at the end that the whole buffer still
//! holds exactly that, on both sides (rdma-core checks the page-start bytes on the server).

pub mod exchange;
pub mod rc;
pub mod ud;

use crate::args::{DeviceArgs, EmuArgs};
use crate::error::ToolError;
use crate::oob;
use crate::rdma::{self, Context, WorkCompletion, random_psn};
use clap::Args;
use exchange::PpDest;
use rnic_verbs as v;
use std::time::{Duration, Instant};

/// The flags of ibv_rc_pingpong / ibv_ud_pingpong.
#[derive(Debug, Clone, Args)]
pub struct PingpongArgs {
    /// Server host name (client side); without it, wait for a client.
    pub host: Option<String>,
    /// TCP port.
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    pub port: u16,
    /// `-d`, `-i`.
    #[command(flatten)]
    pub dev: DeviceArgs,
    /// Message size (default 4096 for RC, 1024 for UD).
    #[arg(short = 's', long = "size")]
    pub size: Option<u32>,
    /// Path MTU (RC): 256, 512, 1024, 2048 or 4096.
    #[arg(short = 'm', long = "mtu", default_value_t = 1024)]
    pub mtu: u32,
    /// Receives posted at a time.
    #[arg(short = 'r', long = "rx-depth", default_value_t = 500)]
    pub rx_depth: u32,
    /// Number of exchanges.
    #[arg(short = 'n', long = "iters", default_value_t = 1000)]
    pub iters: u32,
    /// Service level.
    #[arg(short = 'l', long = "sl", default_value_t = 0)]
    pub sl: u8,
    /// Sleep on completion events instead of polling.
    #[arg(short = 'e', long = "events")]
    pub events: bool,
    /// Local GID index (default: the IPv4 RoCE v2 GID).
    #[arg(short = 'g', long = "gid-idx")]
    pub gid_idx: Option<u32>,
    /// Check the received buffer contents.
    #[arg(short = 'c', long = "chk")]
    pub chk: bool,
    /// `--pcap`, `--emu-faults`.
    #[command(flatten)]
    pub emu: EmuArgs,
    /// Seconds to wait for the peer (connection, exchange) and for progress of the run.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
}

/// RC or UD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// ibv_rc_pingpong.
    Rc,
    /// ibv_ud_pingpong.
    Ud,
}

/// `PINGPONG_RECV_WRID`.
pub const RECV_WRID: u64 = 1;
/// `PINGPONG_SEND_WRID`.
pub const SEND_WRID: u64 = 2;
/// The page size of rdma-core's `-c` pattern.
pub const PAGE: usize = 4096;
/// UD receive buffers start with the 40-byte GRH area.
pub use crate::rdma::GRH;
/// UD Q_Key of ibv_ud_pingpong.
pub const QKEY: u32 = 0x1111_1111;

impl Kind {
    /// Bytes in front of the message in the buffer: the GRH area on UD.
    fn grh(self) -> usize {
        if self == Kind::Ud { GRH } else { 0 }
    }
}

/// The resources of one side.
pub struct Pp {
    /// Device.
    pub ctx: Context,
    /// PD.
    pub pd: v::ProtectionDomain,
    /// The message buffer (UD: 40 bytes of GRH area first).
    pub mr: v::MemoryRegion,
    /// CQ for sends and receives.
    pub cq: v::CompletionQueue,
    /// Completion channel with `-e`.
    pub chan: Option<v::CompletionChannel>,
    /// The QP.
    pub qp: v::QueuePair,
    /// UD: the address handle of the peer.
    pub ah: Option<v::AddressHandle>,
    /// Message size.
    pub size: usize,
    /// Receive depth.
    pub rx_depth: u32,
    /// GID index used.
    pub gid_index: u32,
    /// RC or UD.
    pub kind: Kind,
}

impl Pp {
    /// What both tools create the same way: the PD, the buffer (`size`, plus the GRH area
    /// for UD) filled with 0x7b, the CQ of `rx_depth + 1` entries (and its channel with
    /// `-e`), and the QP (one send WR, `rx_depth` receive WRs, one SGE each, no inline data),
    /// still in RESET.
    fn create(
        ctx: Context,
        kind: Kind,
        size: usize,
        rx_depth: u32,
        events: bool,
        gid_index: u32,
    ) -> Result<Pp, ToolError> {
        let buf_len = kind.grh() + size;
        let qp_type = match kind {
            Kind::Rc => v::QpType::Rc,
            Kind::Ud => v::QpType::Ud,
        };
        let pd = ctx.alloc_pd().map_err(rdma::verr)?;
        let mr = pd
            .reg_mr(buf_len, v::AccessFlags::LOCAL_WRITE)
            .map_err(rdma::verr)?;
        mr.fill(0, buf_len, 0x7b).map_err(rdma::verr)?;
        let chan = if events {
            Some(ctx.create_comp_channel().map_err(rdma::verr)?)
        } else {
            None
        };
        let cq = ctx
            .create_cq(rx_depth + 1, chan.as_ref())
            .map_err(rdma::verr)?;
        let qp = pd
            .create_qp(qp_type, &cq, &cq)
            .max_send_wr(1)
            .max_recv_wr(rx_depth)
            .max_send_sge(1)
            .max_recv_sge(1)
            .max_inline_data(0)
            .build()
            .map_err(rdma::verr)?;
        Ok(Pp {
            ctx,
            pd,
            mr,
            cq,
            chan,
            qp,
            ah: None,
            size,
            rx_depth,
            gid_index,
            kind,
        })
    }

    /// The path towards `rem` as both tools address it: its GID from our GID index, hop
    /// limit 1, service level `sl`.
    fn peer_ah(&self, rem: &exchange::PpDest, sl: u8) -> v::AhAttr {
        let mut ah = v::AhAttr::new(v::Gid(rem.gid), self.gid_index as u8);
        ah.hop_limit = 1;
        ah.sl = sl;
        ah
    }
}

/// The expected byte at `i` of a `-c` buffer.
pub fn pattern_byte(i: usize) -> u8 {
    if i % PAGE == 0 { 0 } else { 0x7b }
}

/// Checks a buffer against the `-c` pattern; lists the pages whose first byte is wrong as
/// rdma-core does ("invalid data in page N"), and fails on any wrong byte.
pub fn check_pattern(buf: &[u8]) -> Result<(), ToolError> {
    let mut first_bad = None;
    for (i, &b) in buf.iter().enumerate() {
        if b != pattern_byte(i) {
            if i % PAGE == 0 {
                println!("invalid data in page {}", i / PAGE);
            }
            first_bad.get_or_insert((i, b));
        }
    }
    match first_bad {
        None => Ok(()),
        Some((i, b)) => Err(ToolError::DataCheck(format!(
            "byte {i} is {b:#04x}, expected {:#04x}",
            pattern_byte(i)
        ))),
    }
}

/// The two result lines.
pub fn result_lines(size: u64, iters: u64, usec: f64) -> String {
    let bytes = size * iters * 2;
    let usec = usec.max(1.0);
    format!(
        "{bytes} bytes in {:.2} seconds = {:.2} Mbit/sec\n{iters} iters in {:.2} seconds = {:.2} usec/iter\n",
        usec / 1e6,
        bytes as f64 * 8.0 / usec,
        usec / 1e6,
        usec / iters as f64
    )
}

/// The local/remote address line (`ud` prints rdma-core's `": GID"` on the local line).
pub fn address_line(side: &str, d: &PpDest, ud_local: bool) -> String {
    let sep = if ud_local { ":" } else { "," };
    let pad = if side == "local" { "  " } else { " " };
    format!(
        "  {side} address:{pad}LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}{sep} GID {}",
        d.lid,
        d.qpn,
        d.psn,
        crate::devinfo::gid_ntop(&d.gid)
    )
}

impl Pp {
    fn post_recvs(&self, n: u32) -> Result<u32, ToolError> {
        let len = (self.kind.grh() + self.size) as u32;
        let sgl = [self.mr.sge(0, len).map_err(rdma::verr)?];
        let wr = [v::RecvWr::new(RECV_WRID, &sgl)];
        for i in 0..n {
            if self.qp.post_recv(&wr).is_err() {
                return Ok(i);
            }
        }
        Ok(n)
    }

    fn post_send(&self, remote_qpn: u32) -> Result<(), ToolError> {
        let sgl = [self
            .mr
            .sge(self.kind.grh(), self.size as u32)
            .map_err(rdma::verr)?];
        let mut wr = v::SendWr::send(SEND_WRID, &sgl).signaled();
        if let Some(ah) = &self.ah {
            wr = wr.ud(ah, remote_qpn, QKEY);
        }
        self.qp.post_send(&[wr]).map_err(rdma::verr)
    }

    /// The ping-pong loop of rdma-core's tools; returns the elapsed time in usec.
    fn run_loop(
        &self,
        client: bool,
        iters: u32,
        remote_qpn: u32,
        timeout: Duration,
    ) -> Result<f64, ToolError> {
        let mut routs = self.rx_depth;
        let mut pending = RECV_WRID;
        if client {
            self.post_send(remote_qpn)?;
            pending |= SEND_WRID;
        }
        let start = Instant::now();
        let (mut rcnt, mut scnt) = (0u32, 0u32);
        let mut last_progress = Instant::now();
        let mut wc = [WorkCompletion::default(); 2];
        let mut spins = 0u32;
        while rcnt < iters || scnt < iters {
            if let Some(ch) = &self.chan {
                if ch
                    .get_cq_event(Some(timeout))
                    .map_err(rdma::verr)?
                    .is_none()
                {
                    return Err(ToolError::Timeout(
                        timeout,
                        "waiting for a completion event (is the peer running?)".into(),
                    ));
                }
                self.cq.req_notify(false).map_err(rdma::verr)?;
            }
            let ne = self.cq.poll(&mut wc).map_err(rdma::verr)?;
            if ne == 0 {
                if last_progress.elapsed() > timeout {
                    return Err(ToolError::Timeout(
                        timeout,
                        format!(
                            "without a completion ({rcnt} received, {scnt} sent of {iters}): the peer is not answering"
                        ),
                    ));
                }
                rdma::idle(&mut spins);
                continue;
            }
            last_progress = Instant::now();
            for w in &wc[..ne] {
                if !w.is_success() {
                    return Err(rdma::wc_error(w, "ping-pong"));
                }
                match w.wr_id() {
                    SEND_WRID => scnt += 1,
                    RECV_WRID => {
                        routs -= 1;
                        if routs <= 1 {
                            routs += self.post_recvs(self.rx_depth - routs)?;
                            if routs < self.rx_depth {
                                return Err(ToolError::Verbs(format!(
                                    "couldn't post receive ({routs})"
                                )));
                            }
                        }
                        rcnt += 1;
                    }
                    other => {
                        return Err(ToolError::Completion(format!(
                            "completion for unknown wr_id {other}"
                        )));
                    }
                }
                pending &= !w.wr_id();
                if scnt < iters && pending == 0 {
                    self.post_send(remote_qpn)?;
                    pending = RECV_WRID | SEND_WRID;
                }
            }
        }
        Ok(start.elapsed().as_secs_f64() * 1e6)
    }
}

/// Checks the numeric flags (size, iterations, receive depth, timeout, MTU, port); returns the
/// message size (the tool's default unless `-s`) and the MTU enum of `-m`.
fn check_flags(kind: Kind, a: &PingpongArgs) -> Result<(u32, u8), ToolError> {
    let size = a.size.unwrap_or(if kind == Kind::Rc { 4096 } else { 1024 });
    if size == 0 {
        return Err(ToolError::Usage("message size must be at least 1".into()));
    }
    if a.iters == 0 {
        return Err(ToolError::Usage("iterations must be at least 1".into()));
    }
    if !(2..=32768).contains(&a.rx_depth) {
        return Err(ToolError::Usage(format!(
            "rx-depth must be 2 .. 32768 (got {})",
            a.rx_depth
        )));
    }
    if a.timeout == 0 || a.timeout > 86_400 {
        return Err(ToolError::Usage(format!(
            "--timeout must be 1 .. 86400 seconds (got {})",
            a.timeout
        )));
    }
    if size > 1 << 30 {
        return Err(ToolError::Usage(format!(
            "message size {size} is larger than 1 GiB"
        )));
    }
    let mtu = rdma::mtu_enum(a.mtu).ok_or_else(|| {
        ToolError::Usage(format!(
            "invalid MTU {} (256, 512, 1024, 2048 or 4096)",
            a.mtu
        ))
    })?;
    if a.sl > v::MAX_SL {
        return Err(ToolError::Usage(format!(
            "invalid service level {} (0 .. {}: the RoCE priority)",
            a.sl,
            v::MAX_SL
        )));
    }
    a.dev.check_port()?;
    Ok((size, mtu))
}

/// Runs `rc-pingpong` or `ud-pingpong`.
pub fn run(kind: Kind, a: &PingpongArgs) -> Result<(), ToolError> {
    let timeout = Duration::from_secs(a.timeout.clamp(1, 86_400));
    let client = a.host.is_some();
    let (size, mtu) = check_flags(kind, a)?;
    let emu = a.emu.opts()?;
    // The server takes its TCP port before anything else, so a busy port fails at once.
    let listener = if client {
        None
    } else {
        Some(oob::listen(a.port)?)
    };
    let dev = a.dev.name(client);
    let ctx = rdma::open(&dev, &emu)?;
    let gid_index = rdma::pick_gid_index(&ctx, a.gid_idx)?;
    if kind == Kind::Ud {
        ud::check_size(&ctx, size as usize)?;
    }
    let pp = Pp::create(ctx, kind, size as usize, a.rx_depth, a.events, gid_index)?;
    match kind {
        Kind::Rc => rc::init(&pp)?,
        Kind::Ud => ud::init(&pp)?,
    }
    let routs = pp.post_recvs(pp.rx_depth)?;
    if routs < pp.rx_depth {
        return Err(ToolError::Verbs(format!("couldn't post receive ({routs})")));
    }
    if pp.chan.is_some() {
        pp.cq.req_notify(false).map_err(rdma::verr)?;
    }
    let mine = PpDest {
        lid: 0,
        qpn: pp.qp.qp_num(),
        psn: random_psn(),
        gid: rdma::gid(&pp.ctx, gid_index)?,
    };
    println!("{}", address_line("local", &mine, kind == Kind::Ud));
    let connect = |rem: &PpDest| -> Result<(), ToolError> {
        if rem.gid[8..].iter().all(|&b| b == 0) {
            return Err(ToolError::Protocol(
                "the peer sent no GID: RoCE needs one (run the peer with -g, e.g. -g 1 on rxe)"
                    .into(),
            ));
        }
        match kind {
            Kind::Rc => rc::connect(&pp, &mine, rem, mtu, a.sl),
            Kind::Ud => Ok(()),
        }
    };
    let rem = if let Some(host) = &a.host {
        let mut s = oob::connect(host, a.port, timeout)?;
        let rem = exchange::client_exchange(&mut s, &mine, timeout)?;
        println!("{}", address_line("remote", &rem, false));
        connect(&rem)?;
        rem
    } else {
        let l = listener
            .as_ref()
            .ok_or_else(|| ToolError::Io("no listener".into()))?;
        let mut s = oob::accept(l, timeout)?;
        let rem = exchange::server_exchange(&mut s, &mine, timeout, connect)?;
        println!("{}", address_line("remote", &rem, false));
        rem
    };
    let mut pp = pp;
    if kind == Kind::Ud {
        ud::connect(&mut pp, &mine, &rem, a.sl)?;
    }
    let off = kind.grh();
    if client && a.chk {
        let pat: Vec<u8> = (0..pp.size).map(pattern_byte).collect();
        pp.mr.write(off, &pat).map_err(rdma::verr)?;
    }
    let usec = pp.run_loop(client, a.iters, rem.qpn, timeout)?;
    emu.linger();
    print!(
        "{}",
        result_lines(u64::from(size), u64::from(a.iters), usec)
    );
    if a.chk {
        let got = pp.mr.to_vec(off, pp.size).map_err(rdma::verr)?;
        check_pattern(&got)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_lines_golden() {
        let d = PpDest {
            lid: 0,
            qpn: 0x11,
            psn: 0x2bd8c6,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 11, 0, 2],
        };
        assert_eq!(
            address_line("local", &d, false),
            "  local address:  LID 0x0000, QPN 0x000011, PSN 0x2bd8c6, GID ::ffff:10.11.0.2"
        );
        assert_eq!(
            address_line("local", &d, true),
            "  local address:  LID 0x0000, QPN 0x000011, PSN 0x2bd8c6: GID ::ffff:10.11.0.2"
        );
        assert!(address_line("remote", &d, false).starts_with("  remote address: LID 0x0000,"));
        assert_eq!(
            result_lines(4096, 1000, 10_000.0),
            "8192000 bytes in 0.01 seconds = 6553.60 Mbit/sec\n1000 iters in 0.01 seconds = 10.00 usec/iter\n"
        );
    }

    #[test]
    fn pattern() {
        let buf: Vec<u8> = (0..10000).map(pattern_byte).collect();
        assert_eq!((buf[0], buf[1], buf[4096], buf[8191]), (0, 0x7b, 0, 0x7b));
        check_pattern(&buf).unwrap();
        let mut bad = buf.clone();
        bad[5] = 1;
        assert!(check_pattern(&bad).is_err());
        assert!(random_psn() <= 0xff_ffff);
    }
}
