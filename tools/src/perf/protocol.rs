//! perftest's out-of-band exchange over TCP (perftest 4.5, `src/perftest_communication.c`),
//! so that Debian's `ib_write_bw` and friends can be the other side.
//!
//! Every exchange has a fixed size: the client writes its part and then reads the server's; the
//! server reads first and then writes (`ctx_xchg_data`, `ctx_hand_shake`). The sequence is:
//!
//! 1. versions: 16 bytes each, a NUL-padded string (`"6.06"` in perftest 4.5+0.17); a peer older
//!    than 5.70 is refused, as perftest refuses it;
//! 2. system data (peer >= 5.32): `cycle_buffer` then `cache_line_size`, 4-byte big-endian ints,
//!    each side keeps the larger;
//! 3. MTU (peer >= 5.1): the `ibv_mtu` enum printed as decimal text, 2 bytes (`"3\0"`) for peers
//!    >= 5.31; each side keeps the smaller valid one;
//! 4. per QP, the address message `%04x:%04x:%06x:%06x:%08x:%016llx:` LID, OUT_READS, QPN, PSN,
//!    RKEY, VADDR, then (RoCE, with a GID) 16 `%02x:` GID bytes and `%08x:` SRQN, NUL-terminated:
//!    108 bytes (59 without a GID, which only InfiniBand uses);
//! 5. the same message again as barriers ("hand shakes") at the points each test has them;
//! 6. bandwidth reports: size (8 bytes), iterations (8 bytes, peer >= 5.33), BW peak, BW average
//!    and message rate (IEEE doubles), each big-endian, each its own exchange;
//! 7. closing: a last hand shake, then both sides write `"done\0"` and close.
//!
//! rnic adds one thing the real tool ignores: the 11 bytes after the version string's NUL carry
//! the test, connection type, size and iterations, so two `rnic` processes detect parameters
//! that differ (perftest itself only reads the version with `atof`).
//!
//! With `-R` the same exchanges, in the same order and sizes, are SENDs on perftest's comm
//! QP ([`super::cm`]); only the QP message differs: binary `struct pingpong_dest`
//! ([`PerfDest::encode_binary`]), and no "done" at the close.

use super::cm::CommQp;
use super::negotiate;
use crate::error::ToolError;
use crate::oob;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// The version string rnic sends by default: the newest perftest protocol it speaks (with
/// the parameter negotiation of 6.28). Peers back to 5.70 accept it: they read the number
/// with `atof` and refuse only what is older than 5.70.
pub const VERSION: &str = "6.29";
/// The version string perftest 4.5+0.17 (Debian 12) sends: `--perftest-version 6.06` speaks
/// its protocol only.
pub const OLD_VERSION: &str = "6.06";
/// Size of the version exchange.
pub const VERSION_LEN: usize = 16;
/// Size of the per-QP message with a GID.
pub const KEY_MSG_SIZE_GID: usize = 108;
/// Size of the per-QP message without a GID.
pub const KEY_MSG_SIZE: usize = 59;
/// The oldest peer perftest accepts.
pub const MIN_PEER_VERSION: f64 = 5.70;
/// `-R`: `sizeof(struct pingpong_dest)` before perftest 6.29 (the binary QP message).
pub const PINGPONG_DEST_LEN: usize = 56;
/// `-R`: `sizeof(struct pingpong_dest)` from perftest 6.29 (`tail_markers_vaddr` added).
pub const PINGPONG_DEST_LEN_629: usize = 64;
/// The first perftest whose `struct pingpong_dest` has `tail_markers_vaddr` (tag 26.04.17).
pub const TAIL_MARKERS_VERSION: f64 = 6.29;
/// `-R`: the largest message on the comm QP (perftest 6.29's receive buffer holds the
/// 320-byte negotiation block; every older message is smaller).
pub const MAX_CM_MSG: usize = 512;

/// One QP's address as perftest exchanges it (`struct pingpong_dest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PerfDest {
    /// LID (0 on RoCE).
    pub lid: u16,
    /// Outstanding RDMA reads / atomics the sender accepts as responder.
    pub out_reads: u32,
    /// QP number.
    pub qpn: u32,
    /// First PSN.
    pub psn: u32,
    /// rkey of the buffer the peer may write/read.
    pub rkey: u32,
    /// Address of that buffer.
    pub vaddr: u64,
    /// GID in wire order.
    pub gid: [u8; 16],
    /// SRQ number (0 without XRC/DC).
    pub srqn: u32,
}

impl PerfDest {
    /// The 108-byte message (with GID), NUL-terminated.
    pub fn encode_gid(&self) -> [u8; KEY_MSG_SIZE_GID] {
        let mut s = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid, self.out_reads, self.qpn, self.psn, self.rkey, self.vaddr
        );
        for b in self.gid {
            s.push_str(&format!("{b:02x}:"));
        }
        s.push_str(&format!("{:08x}:", self.srqn));
        let mut out = [0u8; KEY_MSG_SIZE_GID];
        oob::put_text(&mut out, &s);
        out
    }

    /// The 59-byte message (no GID), NUL-terminated.
    pub fn encode_plain(&self) -> [u8; KEY_MSG_SIZE] {
        let s = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:{:08x}",
            self.lid, self.out_reads, self.qpn, self.psn, self.rkey, self.vaddr, self.srqn
        );
        let mut out = [0u8; KEY_MSG_SIZE];
        oob::put_text(&mut out, &s);
        out
    }

    /// `-R`'s binary message (`rdma_write_keys`): `struct pingpong_dest` on x86-64 with
    /// every integer big-endian: LID, OUT_READS, QPN, PSN, RKEY (4 bytes each), 4 bytes of
    /// padding, VADDR (8), [`tail_markers_vaddr` (8, 0 here) with `tail`,] the GID (16),
    /// SRQN and GID index (4 each): 56 bytes, 64 with `tail` (perftest 6.29).
    ///
    /// ```
    /// use rnic_tools::perf::protocol::PerfDest;
    /// let d = PerfDest { qpn: 0x11, rkey: 0xabc, vaddr: 0x7f00_0000_1000, gid: [7; 16], ..PerfDest::default() };
    /// let b = d.encode_binary(false);
    /// assert_eq!((b.len(), &b[8..12], &b[32..48]), (56, &[0, 0, 0, 0x11][..], &[7; 16][..]));
    /// assert_eq!(PerfDest::decode_binary(&b).unwrap(), d);
    /// assert_eq!(PerfDest::decode_binary(&d.encode_binary(true)).unwrap(), d);
    /// assert!(PerfDest::decode_binary(&b[..55]).is_err());
    /// ```
    pub fn encode_binary(&self, tail: bool) -> Vec<u8> {
        let mut b = Vec::with_capacity(PINGPONG_DEST_LEN_629);
        for v in [
            u32::from(self.lid),
            self.out_reads,
            self.qpn,
            self.psn,
            self.rkey,
            0,
        ] {
            b.extend_from_slice(&v.to_be_bytes());
        }
        b.extend_from_slice(&self.vaddr.to_be_bytes());
        if tail {
            b.extend_from_slice(&0u64.to_be_bytes());
        }
        b.extend_from_slice(&self.gid);
        b.extend_from_slice(&self.srqn.to_be_bytes());
        // gid_index: the receiver does not read it.
        b.extend_from_slice(&0u32.to_be_bytes());
        b
    }

    /// Parses `-R`'s binary message, either size ([`PerfDest::encode_binary`]); the fields
    /// perftest's `rdma_read_keys` reads (not the SRQN and GID index).
    pub fn decode_binary(msg: &[u8]) -> Result<PerfDest, ToolError> {
        let gid_at = match msg.len() {
            PINGPONG_DEST_LEN => 32,
            PINGPONG_DEST_LEN_629 => 40,
            n => {
                return Err(ToolError::Protocol(format!(
                    "a {n}-byte QP message (struct pingpong_dest is {PINGPONG_DEST_LEN} or \
                     {PINGPONG_DEST_LEN_629} bytes)"
                )));
            }
        };
        let u32_at = |i: usize| u32::from_be_bytes([msg[i], msg[i + 1], msg[i + 2], msg[i + 3]]);
        let mut vaddr = [0u8; 8];
        vaddr.copy_from_slice(&msg[24..32]);
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&msg[gid_at..gid_at + 16]);
        Ok(PerfDest {
            lid: u32_at(0) as u16,
            out_reads: u32_at(4),
            qpn: u32_at(8),
            psn: u32_at(12),
            rkey: u32_at(16),
            vaddr: u64::from_be_bytes(vaddr),
            gid,
            srqn: 0,
        })
    }

    /// Parses either message (the GID is present when there are 23 or more fields).
    pub fn decode(msg: &[u8]) -> Result<PerfDest, ToolError> {
        let text =
            oob::text(msg).ok_or_else(|| ToolError::Protocol("QP message is not text".into()))?;
        let bad = || ToolError::Protocol(format!("couldn't parse QP message <{text}>"));
        let f: Vec<&str> = text.split(':').collect();
        let hex = |i: usize| -> Result<u64, ToolError> {
            f.get(i)
                .and_then(|x| u64::from_str_radix(x.trim(), 16).ok())
                .ok_or_else(bad)
        };
        let mut d = PerfDest {
            lid: hex(0)? as u16,
            out_reads: hex(1)? as u32,
            qpn: hex(2)? as u32,
            psn: hex(3)? as u32,
            rkey: hex(4)? as u32,
            vaddr: hex(5)?,
            ..PerfDest::default()
        };
        if f.len() >= 23 {
            for i in 0..16 {
                d.gid[i] = hex(6 + i)? as u8;
            }
            d.srqn = hex(22)? as u32;
        } else {
            d.srqn = hex(6)? as u32;
        }
        Ok(d)
    }
}

/// What rnic carries after the version's NUL: enough to detect differing parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestSig {
    /// Test code: verb (0 send, 1 write, 2 read, 3 atomic) * 2 + 1 for latency, plus
    /// [`SIG_IMM`] with immediate.
    pub test: u8,
    /// Connection type (0 RC, 1 UC, 2 UD).
    pub conn: u8,
    /// Message size, `u32::MAX` for `-a`.
    pub size: u32,
    /// Iterations, 0 for a duration run.
    pub iters: u32,
}

const SIG_MAGIC: u8 = b'R';
/// Added to [`TestSig::test`] for `--write_with_imm` / `--send_with_imm`.
pub const SIG_IMM: u8 = 8;

/// Builds our 16 version bytes: `version` (4 characters, `X.YY`), NUL, then the signature.
pub fn version_bytes(version: &str, sig: &TestSig) -> [u8; VERSION_LEN] {
    let mut v = [0u8; VERSION_LEN];
    let n = version.len().min(4);
    v[..n].copy_from_slice(&version.as_bytes()[..n]);
    v[5] = SIG_MAGIC;
    v[6] = sig.test;
    v[7] = sig.conn;
    v[8..12].copy_from_slice(&sig.size.to_be_bytes());
    v[12..16].copy_from_slice(&sig.iters.to_be_bytes());
    v
}

/// The peer's version (as `atof` reads it) and, if the peer is rnic, its signature.
pub fn parse_version(v: &[u8; VERSION_LEN]) -> (f64, Option<TestSig>) {
    let end = v.iter().position(|&b| b == 0).unwrap_or(VERSION_LEN);
    let text = String::from_utf8_lossy(&v[..end]);
    let num: String = text
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let ver = num.parse::<f64>().unwrap_or(0.0);
    let sig = (end == 4 && v[5] == SIG_MAGIC).then(|| TestSig {
        test: v[6],
        conn: v[7],
        size: u32::from_be_bytes([v[8], v[9], v[10], v[11]]),
        iters: u32::from_be_bytes([v[12], v[13], v[14], v[15]]),
    });
    (ver, sig)
}

/// Names the first differing parameter of two signatures.
pub fn sig_mismatch(ours: &TestSig, theirs: &TestSig) -> Option<String> {
    const TESTS: [&str; 8] = [
        "send-bw",
        "send-lat",
        "write-bw",
        "write-lat",
        "read-bw",
        "read-lat",
        "atomic-bw",
        "atomic-lat",
    ];
    const CONN: [&str; 3] = ["RC", "UC", "UD"];
    let name = |t: u8, n: &[&str]| n.get(usize::from(t)).copied().unwrap_or("?").to_string();
    let test = |t: u8| {
        let base = name(t % SIG_IMM, &TESTS);
        if t >= SIG_IMM {
            base + " with immediate"
        } else {
            base
        }
    };
    let size = |s: u32| {
        if s == u32::MAX {
            "-a".to_string()
        } else {
            s.to_string()
        }
    };
    if ours.test != theirs.test {
        return Some(format!(
            "test: we run {}, the peer runs {}",
            test(ours.test),
            test(theirs.test)
        ));
    }
    if ours.conn != theirs.conn {
        return Some(format!(
            "connection type: ours {}, the peer's {}",
            name(ours.conn, &CONN),
            name(theirs.conn, &CONN)
        ));
    }
    if ours.size != theirs.size {
        return Some(format!(
            "message size (-s/-a): ours {}, the peer's {}",
            size(ours.size),
            size(theirs.size)
        ));
    }
    if ours.iters != theirs.iters {
        return Some(format!(
            "iterations (-n/-D): ours {}, the peer's {}",
            ours.iters, theirs.iters
        ));
    }
    None
}

/// Bandwidth report as exchanged (`struct bw_report_data`, the fields on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BwReport {
    /// Message size.
    pub size: u64,
    /// Iterations.
    pub iters: u64,
    /// Peak bandwidth in the report's unit.
    pub bw_peak: f64,
    /// Average bandwidth.
    pub bw_avg: f64,
    /// Message rate in Mpps.
    pub msg_rate: f64,
}

/// What the exchanges travel on.
enum Channel {
    /// perftest's TCP socket.
    Tcp(TcpStream),
    /// `-R`: perftest's comm QP (shared with whoever keeps the connection up to the end).
    Cm(Arc<CommQp>),
}

/// The connection with the peer (TCP, or with `-R` the comm QP) and its role.
pub struct Comm {
    channel: Channel,
    client: bool,
    /// Peer's version as a number (`atof`), once exchanged.
    pub peer_version: f64,
    /// Ours, as sent.
    own_version: f64,
    /// The read timeout of ordinary exchanges.
    pub timeout: Duration,
}

impl Comm {
    /// Wraps a connected stream; `client` is true on the side that connected.
    pub fn new(stream: TcpStream, client: bool, timeout: Duration) -> Comm {
        let _ = stream.set_nodelay(true);
        Comm {
            channel: Channel::Tcp(stream),
            client,
            peer_version: 0.0,
            own_version: 0.0,
            timeout,
        }
    }

    /// `-R`: the exchanges as SENDs on perftest's comm QP.
    pub fn over_cm(qp: Arc<CommQp>, client: bool, timeout: Duration) -> Comm {
        Comm {
            channel: Channel::Cm(qp),
            client,
            peer_version: 0.0,
            own_version: 0.0,
            timeout,
        }
    }

    /// The comm QP with `-R`.
    pub fn comm_qp(&self) -> Option<&Arc<CommQp>> {
        match &self.channel {
            Channel::Cm(q) => Some(q),
            Channel::Tcp(_) => None,
        }
    }

    /// True on the client side.
    pub fn is_client(&self) -> bool {
        self.client
    }

    fn read_exact(
        &mut self,
        buf: &mut [u8],
        timeout: Duration,
        what: &str,
    ) -> Result<(), ToolError> {
        let stream = match &mut self.channel {
            Channel::Tcp(s) => s,
            Channel::Cm(q) => {
                let m = q.recv(timeout, what)?;
                if m.len() != buf.len() {
                    return Err(ToolError::Protocol(format!(
                        "a {}-byte message where {what} ({} bytes) was due",
                        m.len(),
                        buf.len()
                    )));
                }
                buf.copy_from_slice(&m);
                return Ok(());
            }
        };
        stream
            .set_read_timeout(Some(timeout))
            .map_err(|e| ToolError::io(what, e))?;
        stream.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                ToolError::Timeout(timeout, format!("waiting for the peer ({what})"))
            }
            _ => ToolError::io(&format!("reading {what} from the peer"), e),
        })
    }

    fn write_all(&mut self, buf: &[u8], what: &str) -> Result<(), ToolError> {
        let stream = match &mut self.channel {
            Channel::Tcp(s) => s,
            Channel::Cm(q) => return q.send(buf, self.timeout, what),
        };
        stream
            .set_write_timeout(Some(self.timeout))
            .map_err(|e| ToolError::io(what, e))?;
        stream
            .write_all(buf)
            .map_err(|e| ToolError::io(&format!("sending {what} to the peer"), e))
    }

    /// One fixed-size exchange: client writes then reads, server reads then writes.
    pub fn xchg(
        &mut self,
        mine: &[u8],
        what: &str,
        timeout: Duration,
    ) -> Result<Vec<u8>, ToolError> {
        let mut theirs = vec![0u8; mine.len()];
        if self.client {
            self.write_all(mine, what)?;
            self.read_exact(&mut theirs, timeout, what)?;
        } else {
            self.read_exact(&mut theirs, timeout, what)?;
            self.write_all(mine, what)?;
        }
        Ok(theirs)
    }

    /// Step 1: versions (ours is `version`). Returns the peer's rnic signature if it has one.
    pub fn exchange_versions(
        &mut self,
        version: &str,
        sig: &TestSig,
    ) -> Result<Option<TestSig>, ToolError> {
        let t = self.timeout;
        self.own_version = version.parse().unwrap_or(0.0);
        let v = self.xchg(&version_bytes(version, sig), "version", t)?;
        let mut arr = [0u8; VERSION_LEN];
        arr.copy_from_slice(&v);
        let (ver, peer_sig) = parse_version(&arr);
        self.peer_version = ver;
        if ver < MIN_PEER_VERSION {
            return Err(ToolError::Mismatch(format!(
                "peer perftest version {ver} is older than {MIN_PEER_VERSION}, which perftest 4.5 refuses"
            )));
        }
        if let Some(p) = &peer_sig
            && let Some(why) = sig_mismatch(sig, p)
        {
            return Err(ToolError::Mismatch(why));
        }
        Ok(peer_sig)
    }

    /// Step 2: cycle buffer and cache line size; returns the larger of each.
    pub fn check_sys_data(
        &mut self,
        cycle_buffer: i32,
        cache_line: i32,
    ) -> Result<(i32, i32), ToolError> {
        if self.peer_version < 5.32 {
            return Ok((cycle_buffer, cache_line));
        }
        let t = self.timeout;
        let c = self.xchg(&cycle_buffer.to_be_bytes(), "cycle buffer size", t)?;
        let l = self.xchg(&cache_line.to_be_bytes(), "cache line size", t)?;
        let rc = i32::from_be_bytes([c[0], c[1], c[2], c[3]]);
        let rl = i32::from_be_bytes([l[0], l[1], l[2], l[3]]);
        Ok((cycle_buffer.max(rc), cache_line.max(rl)))
    }

    /// Step 3: the MTU enum; returns the one to use (the smaller valid one).
    pub fn exchange_mtu(&mut self, mtu_enum: u8) -> Result<u8, ToolError> {
        if self.peer_version < 5.1 {
            return Ok(mtu_enum);
        }
        let len = if self.peer_version >= 5.31 { 2 } else { 4 };
        let mut mine = vec![0u8; len];
        oob::put_text(&mut mine, &mtu_enum.to_string());
        let t = self.timeout;
        let r = self.xchg(&mine, "MTU", t)?;
        let rem: u8 = oob::text(&r)
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        Ok(if (1..=5).contains(&rem) && rem < mtu_enum {
            rem
        } else {
            mtu_enum
        })
    }

    /// Step 3b (both sides 6.28 or newer): the parameter negotiation. Sends `ours` and
    /// returns the peer's block, parsed; `None` when either side is older and nothing is
    /// exchanged (each side decides from the other's version, so both skip it alike).
    pub fn negotiate(
        &mut self,
        ours: &[u8; negotiate::LEN],
    ) -> Result<Option<negotiate::Remote>, ToolError> {
        let v = negotiate::NEGOTIATION_VERSION;
        if self.peer_version < v || self.own_version < v {
            return Ok(None);
        }
        let t = self.timeout;
        let r = self.xchg(ours, "parameter negotiation", t)?;
        negotiate::decode(&r).map(Some)
    }

    /// A per-QP message exchange (`ctx_hand_shake`), also used as a barrier. With `-R` the
    /// binary message: 64 bytes when both sides are perftest 6.29 or newer, 56 otherwise
    /// (perftest 6.29 itself sends 64 to anyone, which older peers cannot take); either is
    /// taken from the peer.
    pub fn hand_shake(
        &mut self,
        mine: &PerfDest,
        timeout: Duration,
    ) -> Result<PerfDest, ToolError> {
        let q = match &self.channel {
            Channel::Tcp(_) => {
                let r = self.xchg(&mine.encode_gid(), "QP address", timeout)?;
                return PerfDest::decode(&r);
            }
            Channel::Cm(q) => q.clone(),
        };
        let tail =
            self.own_version >= TAIL_MARKERS_VERSION && self.peer_version >= TAIL_MARKERS_VERSION;
        let msg = mine.encode_binary(tail);
        let what = "QP address";
        let r = if self.client {
            q.send(&msg, self.timeout, what)?;
            q.recv(timeout, what)?
        } else {
            let r = q.recv(timeout, what)?;
            q.send(&msg, self.timeout, what)?;
            r
        };
        PerfDest::decode_binary(&r)
    }

    /// Step 6: the bandwidth reports; returns the peer's.
    pub fn xchg_bw_report(&mut self, r: &BwReport) -> Result<BwReport, ToolError> {
        let t = self.timeout;
        let size = self.xchg(&r.size.to_be_bytes(), "report", t)?;
        let iters = if self.peer_version >= 5.33 {
            let v = self.xchg(&r.iters.to_be_bytes(), "report", t)?;
            u64::from_be_bytes(v.try_into().unwrap_or([0; 8]))
        } else {
            let v = self.xchg(&(r.iters as u32).to_be_bytes(), "report", t)?;
            u64::from(u32::from_be_bytes(v.try_into().unwrap_or([0; 4])))
        };
        let mut f = |x: f64| -> Result<f64, ToolError> {
            let v = self.xchg(&x.to_bits().to_be_bytes(), "report", t)?;
            Ok(f64::from_bits(u64::from_be_bytes(
                v.try_into().unwrap_or([0; 8]),
            )))
        };
        let bw_peak = f(r.bw_peak)?;
        let bw_avg = f(r.bw_avg)?;
        let msg_rate = f(r.msg_rate)?;
        Ok(BwReport {
            size: u64::from_be_bytes(size.try_into().unwrap_or([0; 8])),
            iters,
            bw_peak,
            bw_avg,
            msg_rate,
        })
    }

    /// Step 7: the closing hand shake and "done".
    pub fn close(self, mine: &PerfDest) -> Result<(), ToolError> {
        let t = self.timeout;
        self.close_within(mine, t)
    }

    /// [`Comm::close`] waiting up to `timeout` for the peer's last hand shake (a server that
    /// closes while its client still runs).
    pub fn close_within(mut self, mine: &PerfDest, timeout: Duration) -> Result<(), ToolError> {
        self.hand_shake(mine, timeout)?;
        // The peer writes "done" and closes without reading ours: errors here are harmless.
        // Over rdma_cm (`ctx_close_connection`) the hand shake is all.
        if let Channel::Tcp(s) = &mut self.channel {
            let _ = s.write_all(b"done\0");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn dest() -> PerfDest {
        PerfDest {
            lid: 0,
            out_reads: 16,
            qpn: 0x11,
            psn: 0x3a5b2c,
            rkey: 0x1234,
            vaddr: 0x5600_0000_1000,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 11, 0, 1],
            srqn: 0,
        }
    }

    #[test]
    fn qp_message_golden() {
        let m = dest().encode_gid();
        let want = "0000:0010:000011:3a5b2c:00001234:0000560000001000:\
                    00:00:00:00:00:00:00:00:00:00:ff:ff:0a:0b:00:01:00000000:";
        assert_eq!(want.len(), KEY_MSG_SIZE_GID - 1);
        assert_eq!(&m[..107], want.as_bytes());
        assert_eq!(m[107], 0);
        assert_eq!(PerfDest::decode(&m).unwrap(), dest());

        let p = dest().encode_plain();
        assert_eq!(
            &p[..58],
            b"0000:0010:000011:3a5b2c:00001234:0000560000001000:00000000"
        );
        assert_eq!(p[58], 0);
        let mut nogid = dest();
        nogid.gid = [0; 16];
        assert_eq!(PerfDest::decode(&p).unwrap(), nogid);
        assert!(PerfDest::decode(b"zz:1\0").is_err());
    }

    #[test]
    fn version_golden() {
        let sig = TestSig {
            test: 2,
            conn: 0,
            size: 65536,
            iters: 5000,
        };
        let v = version_bytes(OLD_VERSION, &sig);
        assert_eq!(&v[..5], b"6.06\0");
        assert_eq!(parse_version(&v), (6.06, Some(sig)));
        let v = version_bytes(VERSION, &sig);
        assert_eq!(&v[..5], b"6.29\0");
        assert_eq!(parse_version(&v), (6.29, Some(sig)));
        // What perftest itself sends: strncpy of "6.06" into 16 zeroed bytes.
        let mut real = [0u8; 16];
        real[..4].copy_from_slice(b"6.06");
        assert_eq!(parse_version(&real), (6.06, None));
        let mut other = sig;
        other.size = u32::MAX;
        assert_eq!(
            sig_mismatch(&sig, &other).unwrap(),
            "message size (-s/-a): ours 65536, the peer's -a"
        );
        other = sig;
        other.test = 4;
        assert!(sig_mismatch(&sig, &other).unwrap().contains("read-bw"));
        let imm = TestSig {
            test: sig.test + SIG_IMM,
            ..sig
        };
        assert!(
            sig_mismatch(&sig, &imm)
                .unwrap()
                .ends_with("the peer runs write-bw with immediate")
        );
        assert!(sig_mismatch(&sig, &sig).is_none());
    }

    #[test]
    fn exchange_over_tcp() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let sig = TestSig {
            test: 2,
            conn: 0,
            size: 8,
            iters: 10,
        };
        let t = Duration::from_secs(5);
        let server = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut c = Comm::new(s, false, t);
            c.exchange_versions(OLD_VERSION, &sig).unwrap();
            assert_eq!(c.check_sys_data(4096, 64).unwrap(), (8192, 64));
            assert_eq!(c.exchange_mtu(5).unwrap(), 3);
            // perftest 4.5's protocol on this side: nothing to negotiate.
            assert_eq!(c.negotiate(&[1; negotiate::LEN]).unwrap(), None);
            let r = c.hand_shake(&dest(), t).unwrap();
            let rep = c.xchg_bw_report(&BwReport::default()).unwrap();
            c.close(&dest()).unwrap();
            (r, rep)
        });
        let mut c = Comm::new(TcpStream::connect(addr).unwrap(), true, t);
        c.exchange_versions(VERSION, &sig).unwrap();
        assert_eq!(c.check_sys_data(8192, 32).unwrap(), (8192, 64));
        assert_eq!(c.exchange_mtu(3).unwrap(), 3);
        assert_eq!(c.negotiate(&[2; negotiate::LEN]).unwrap(), None); // the peer is 6.06
        let mut mine = dest();
        mine.qpn = 0x22;
        assert_eq!(c.hand_shake(&mine, t).unwrap(), dest());
        let rep = BwReport {
            size: 8,
            iters: 10,
            bw_peak: 1.5,
            bw_avg: 1.25,
            msg_rate: 0.125,
        };
        assert_eq!(c.xchg_bw_report(&rep).unwrap(), BwReport::default());
        c.close(&mine).unwrap();
        let (r, srep) = server.join().unwrap();
        assert_eq!(r.qpn, 0x22);
        assert_eq!(srep, rep);
    }

    #[test]
    fn mismatch_is_detected() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = Duration::from_secs(5);
        let server = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut c = Comm::new(s, false, t);
            let sig = TestSig {
                test: 2,
                conn: 0,
                size: 8,
                iters: 10,
            };
            c.exchange_versions(VERSION, &sig).map(|_| ())
        });
        let mut c = Comm::new(TcpStream::connect(addr).unwrap(), true, t);
        let sig = TestSig {
            test: 2,
            conn: 0,
            size: 16,
            iters: 10,
        };
        let e = c.exchange_versions(VERSION, &sig).unwrap_err();
        assert!(matches!(e, ToolError::Mismatch(_)), "{e}");
        assert!(server.join().unwrap().is_err());
    }

    /// Both sides 6.28 or newer: the 320-byte blocks cross, each side reads the other's.
    #[test]
    fn negotiation_over_tcp() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = Duration::from_secs(5);
        let sig = TestSig {
            test: 2,
            conn: 0,
            size: 8,
            iters: 10,
        };
        let ctx = rnic_verbs::Context::open("emu0").unwrap();
        let attr = ctx.query_device();
        let ours = negotiate::Params {
            verb: 2,
            tst: 1,
            size: 8,
            ..negotiate::Params::default()
        };
        let theirs = negotiate::Params { size: 16, ..ours };
        let (a, b) = (
            negotiate::encode(&ours, &attr),
            negotiate::encode(&theirs, &attr),
        );
        let server = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut c = Comm::new(s, false, t);
            c.exchange_versions(VERSION, &sig).unwrap();
            c.negotiate(&b).unwrap().unwrap()
        });
        let mut c = Comm::new(TcpStream::connect(addr).unwrap(), true, t);
        c.exchange_versions(VERSION, &sig).unwrap();
        let got = c.negotiate(&a).unwrap().unwrap();
        assert_eq!(got.params, theirs);
        assert_eq!(got.max_qp_rd_atom, attr.max_qp_rd_atom);
        assert_eq!(server.join().unwrap().params, ours);
        assert_eq!(
            negotiate::mismatch(&ours, &got.params).unwrap(),
            " size mismatch: local=8, remote=16"
        );
    }
}
