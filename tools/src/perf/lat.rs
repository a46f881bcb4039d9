//! Latency measurement, as perftest's `run_iter_lat_write`, `run_iter_lat_send` and
//! `run_iter_lat`: one message at a time, the time of each post kept; a sample is the time
//! between two posts, halved for the ping-pong tests (WRITE, SEND) whose round trip is two
//! messages, whole for READ and atomics.
//!
//! WRITE latency: each side writes `size` bytes whose last byte is its message count into the
//! peer's buffer and waits until its own buffer's last byte shows the peer's next count (the
//! server sends first). SEND latency: the client sends first; each side answers a receive
//! with a send.

use super::bw::{one_sided_wr, wait_poll};
use super::protocol::PerfDest;
use super::report::{LatResult, lat_duration_line};
use super::res::Res;
use super::{PerfConfig, Verb};
use crate::error::ToolError;
use crate::rdma::{self, WorkCompletion};
use rnic_verbs as v;
use std::time::{Duration, Instant};

/// A finished size: its table line, its JSON and the value to plot (typical latency).
pub type LatLine = (String, serde_json::Value, f64);

fn finish(cfg: &PerfConfig, size: u64, posted: &[f64], rtt_factor: f64) -> LatLine {
    if cfg.duration.is_some() {
        let n = posted.len() as u64;
        let secs = match (posted.first(), posted.last()) {
            (Some(a), Some(b)) if b > a => b - a,
            _ => 1e-9,
        };
        let avg = secs * 1e6 / n.max(1) as f64 / rtt_factor;
        let tps = n as f64 / secs;
        let json = serde_json::json!({ "MsgSize": size, "n_iterations": n, "t_avg": avg, "tps_average": tps });
        return (lat_duration_line(size, n, avg, tps), json, avg);
    }
    let samples: Vec<f64> = posted
        .windows(2)
        .map(|w| (w[1] - w[0]) * 1e6 / rtt_factor)
        .collect();
    let r = LatResult::compute(size, cfg.iters, &samples);
    (r.line(), r.json(), r.t_typical)
}

struct Clock {
    end_at: Option<Instant>,
}

impl Clock {
    fn new(cfg: &PerfConfig) -> Clock {
        Clock {
            end_at: cfg
                .duration
                .map(|d| Instant::now() + Duration::from_secs(d)),
        }
    }

    fn more(&self, count: u64, iters: u64) -> bool {
        match self.end_at {
            Some(e) => Instant::now() < e,
            None => count < iters,
        }
    }

    /// Whether to wait for the peer's next message: with `-D` as long as we still send
    /// (`sending`), else until `received` reaches `iters`.
    fn want_rx(&self, sending: bool, received: u64, iters: u64) -> bool {
        if self.end_at.is_some() {
            sending
        } else {
            received < iters
        }
    }
}

/// Waits for one completion at a time on a CQ (see [`wait_poll`]), with one progress clock
/// for all the CQs of a run.
struct Completions {
    wc: [WorkCompletion; 1],
    last_progress: Instant,
    timeout: Duration,
}

impl Completions {
    fn new(timeout: Duration) -> Completions {
        Completions {
            wc: [WorkCompletion::default(); 1],
            last_progress: Instant::now(),
            timeout,
        }
    }

    /// How many completions `cq` gave, all successful; the first in error is the error.
    fn successes(
        &mut self,
        res: &Res,
        cq: &v::CompletionQueue,
        what: &str,
    ) -> Result<u64, ToolError> {
        let n = wait_poll(
            res,
            cq,
            &mut self.wc,
            &mut self.last_progress,
            self.timeout,
            what,
        )?;
        match self.wc[..n].iter().find(|w| !w.is_success()) {
            Some(w) => Err(rdma::wc_error(w, what)),
            None => Ok(n as u64),
        }
    }
}

/// The bytes to send inline when `size` fits `-I` (a copy of the send buffer), else `None`.
fn inline_payload(res: &Res, cfg: &PerfConfig, size: u64) -> Result<Option<Vec<u8>>, ToolError> {
    if size > u64::from(cfg.inline_size) {
        return Ok(None);
    }
    let bytes = res
        .mr
        .to_vec(res.local(0), size as usize)
        .map_err(rdma::verr)?;
    Ok(Some(bytes))
}

/// Room for the post times of `iters` messages (capped: `-n` may be huge).
fn post_times(iters: u64) -> Vec<f64> {
    Vec::with_capacity(iters.min(1 << 20) as usize)
}

/// `write-lat` on QP 0.
pub fn run_write(
    res: &Res,
    cfg: &PerfConfig,
    size: u64,
    rem: &[PerfDest],
    client: bool,
    timeout: Duration,
) -> Result<LatLine, ToolError> {
    let qp = &res.qps[0];
    let clock = Clock::new(cfg);
    let iters = cfg.iters;
    let post_off = res.local(0) + size as usize - 1;
    let poll_off = res.target(0) + size as usize - 1;
    let sgl = [res.mr.sge(res.local(0), size as u32).map_err(rdma::verr)?];
    let remote = v::RemoteAddr {
        addr: rem[0].vaddr,
        rkey: rem[0].rkey,
    };
    let mut payload = inline_payload(res, cfg, size)?;
    let t0 = Instant::now();
    let mut posted = post_times(iters);
    let (mut scnt, mut rcnt, mut ccnt) = (0u64, 0u64, 0u64);
    let mut done = Completions::new(timeout);
    let mut byte = [0u8; 1];
    loop {
        let more_s = clock.more(scnt, iters);
        if !more_s && ccnt >= scnt && (clock.end_at.is_some() || rcnt >= iters) {
            break;
        }
        if clock.want_rx(more_s, rcnt, iters) && (client || scnt >= 1) {
            rcnt += 1;
            let want = rcnt as u8;
            let since = Instant::now();
            let mut spins = 0u32;
            loop {
                res.mr.read(poll_off, &mut byte).map_err(rdma::verr)?;
                if byte[0] == want {
                    break;
                }
                if spins % 1024 == 1023 {
                    if since.elapsed() > timeout {
                        return Err(ToolError::Timeout(
                            timeout,
                            format!(
                                "waiting for the peer's WRITE {rcnt}: the peer is not answering"
                            ),
                        ));
                    }
                    if !clock.more(0, 1) {
                        break;
                    }
                }
                rdma::idle(&mut spins);
            }
        }
        if clock.more(scnt, iters) {
            posted.push(t0.elapsed().as_secs_f64());
            scnt += 1;
            let b = [scnt as u8];
            let mut wr = v::SendWr::write(scnt, &sgl, remote).signaled();
            if let Some(payload) = payload.as_mut() {
                if let Some(last) = payload.last_mut() {
                    *last = scnt as u8;
                }
                wr = wr.inline(payload);
            } else {
                res.mr.write(post_off, &b).map_err(rdma::verr)?;
            }
            qp.post_send(&[wr]).map_err(rdma::verr)?;
        }
        if ccnt < scnt {
            ccnt += done.successes(res, &res.send_cq, "WRITE")?;
        }
    }
    Ok(finish(cfg, size, &posted, 2.0))
}

/// `send-lat` on QP 0 (receives were posted before the hand shake), and `write-lat
/// --write_with_imm` (`run_iter_lat_write_imm`): the same ping-pong of completions, but with
/// WRITEs with immediate, which the server starts, as in write-lat.
pub fn run_send(
    res: &Res,
    cfg: &PerfConfig,
    size: u64,
    rem: &[PerfDest],
    client: bool,
    timeout: Duration,
) -> Result<LatLine, ToolError> {
    let qp = &res.qps[0];
    let clock = Clock::new(cfg);
    let iters = cfg.iters;
    let sgl = [res.mr.sge(res.local(0), size as u32).map_err(rdma::verr)?];
    let rsgl = [res.recv_sge(cfg, 0, size)?];
    let rsgl = &rsgl[..super::bw::recv_sges(cfg)];
    let remote = v::RemoteAddr {
        addr: rem[0].vaddr,
        rkey: rem[0].rkey,
    };
    // Who waits first: the server for a SEND, the client for a WRITE with immediate.
    let waits_first = client == (cfg.verb == Verb::Write);
    let payload = inline_payload(res, cfg, size)?;
    let t0 = Instant::now();
    let mut posted = post_times(iters);
    let (mut scnt, mut rcnt) = (0u64, 0u64);
    let mut posted_rx = u64::from(cfg.rx_depth);
    let mut done = Completions::new(timeout);
    loop {
        let more_s = clock.more(scnt, iters);
        if !more_s && (clock.end_at.is_some() || rcnt >= iters) {
            break;
        }
        if clock.want_rx(more_s, rcnt, iters) && (waits_first || scnt >= 1) {
            for _ in 0..done.successes(res, &res.recv_cq, "receive")? {
                super::bw::check_imm(cfg, &done.wc[0])?;
                rcnt += 1;
                if clock.end_at.is_some() || posted_rx < iters {
                    qp.post_recv(&[v::RecvWr::new(0, rsgl)])
                        .map_err(rdma::verr)?;
                    posted_rx += 1;
                }
            }
        }
        if clock.more(scnt, iters) {
            posted.push(t0.elapsed().as_secs_f64());
            scnt += 1;
            let mut wr =
                super::bw::message_wr(res, cfg, 0, scnt, &sgl, remote, rem[0].qpn).signaled();
            if let Some(payload) = &payload {
                wr = wr.inline(payload);
            }
            qp.post_send(&[wr]).map_err(rdma::verr)?;
            done.successes(res, &res.send_cq, cfg.title())?;
        }
    }
    Ok(finish(cfg, size, &posted, 2.0))
}

/// `read-lat` / `atomic-lat` (client only): one READ or atomic at a time.
pub fn run_read_atomic(
    res: &Res,
    cfg: &PerfConfig,
    size: u64,
    rem: &[PerfDest],
    timeout: Duration,
) -> Result<LatLine, ToolError> {
    let qp = &res.qps[0];
    let clock = Clock::new(cfg);
    let len = if cfg.verb == Verb::Atomic {
        8
    } else {
        size as u32
    };
    let sgl = [res.mr.sge(res.local(0), len).map_err(rdma::verr)?];
    let remote = v::RemoteAddr {
        addr: rem[0].vaddr,
        rkey: rem[0].rkey,
    };
    let t0 = Instant::now();
    let mut posted = post_times(cfg.iters);
    let mut done = Completions::new(timeout);
    let mut n = 0u64;
    while clock.more(n, cfg.iters) {
        posted.push(t0.elapsed().as_secs_f64());
        n += 1;
        let wr = one_sided_wr(cfg, n, &sgl, remote).signaled();
        qp.post_send(&[wr]).map_err(rdma::verr)?;
        done.successes(res, &res.send_cq, "READ/atomic")?;
    }
    // The last operation's completion closes the last sample.
    posted.push(t0.elapsed().as_secs_f64());
    Ok(finish(cfg, size, &posted, 1.0))
}
