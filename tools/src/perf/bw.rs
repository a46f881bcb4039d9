//! Bandwidth measurement, as perftest's `run_iter_bw` / `run_iter_bw_server`: keep up to the TX
//! depth of messages in flight on every QP, post `-l` work requests per doorbell, signal one in
//! `-Q`, and time every post and completion.

use super::protocol::PerfDest;
use super::report::BwResult;
use super::res::Res;
use super::{PerfConfig, Verb};
use crate::error::ToolError;
use crate::rdma::{self, WorkCompletion};
use rnic_verbs as v;
use std::time::{Duration, Instant};

/// How many scatter entries a receive has: none for a WRITE with immediate, whose data goes
/// to the RDMA address (perftest posts those receives with length 0), else one.
pub fn recv_sges(cfg: &PerfConfig) -> usize {
    usize::from(!(cfg.imm && cfg.verb == Verb::Write))
}

/// Checks a receive completion of a with-immediate test: perftest fails the run (" Completion
/// with wc_flags mismatch") when the immediate flag is missing.
pub fn check_imm(cfg: &PerfConfig, w: &WorkCompletion) -> Result<(), ToolError> {
    if cfg.imm && w.imm_data().is_none() {
        return Err(ToolError::Completion(format!(
            "receive completion without an immediate (wr_id {}, {:?}) in a {} test",
            w.wr_id(),
            w.opcode(),
            cfg.title()
        )));
    }
    Ok(())
}

/// The sending side's work request for a SEND-style or one-sided test: SEND (with immediate
/// 0 as perftest's, on UD to the peer's QPN), WRITE with immediate 0, or [`one_sided_wr`].
pub fn message_wr<'a>(
    res: &'a Res,
    cfg: &PerfConfig,
    i: usize,
    id: u64,
    sgl: &'a [v::Sge; 1],
    remote: v::RemoteAddr,
    rem_qpn: u32,
) -> v::SendWr<'a> {
    match (cfg.verb, cfg.imm) {
        (Verb::Send, imm) => {
            let w = if imm {
                v::SendWr::send_with_imm(id, sgl, 0)
            } else {
                v::SendWr::send(id, sgl)
            };
            match res.ahs.get(i) {
                Some(ah) => w.ud(ah, rem_qpn, v::DEFAULT_QKEY),
                None => w,
            }
        }
        (Verb::Write, true) => v::SendWr::write_with_imm(id, sgl, remote, 0),
        _ => one_sided_wr(cfg, id, sgl, remote),
    }
}

/// Posts the receive queue of every QP full (`ctx_set_recv_wqes`) for messages of `size`.
pub fn post_recvs(res: &Res, cfg: &PerfConfig, size: u64) -> Result<(), ToolError> {
    for (i, qp) in res.qps.iter().enumerate() {
        let sgl = [res.recv_sge(cfg, i, size)?];
        let wr = [v::RecvWr::new(i as u64, &sgl[..recv_sges(cfg)])];
        for _ in 0..cfg.rx_depth {
            qp.post_recv(&wr).map_err(rdma::verr)?;
        }
    }
    Ok(())
}

/// Waits for completions on `cq`: busy polling, or with `-e` arming the CQ and sleeping on the
/// channel. Returns how many were polled; errors after `timeout` without any.
pub fn wait_poll(
    res: &Res,
    cq: &v::CompletionQueue,
    wc: &mut [WorkCompletion],
    last_progress: &mut Instant,
    timeout: Duration,
    what: &str,
) -> Result<usize, ToolError> {
    let mut spins = 0u32;
    loop {
        let n = cq.poll(wc).map_err(rdma::verr)?;
        if n > 0 {
            *last_progress = Instant::now();
            return Ok(n);
        }
        if last_progress.elapsed() > timeout {
            return Err(ToolError::Timeout(
                timeout,
                format!("without a completion ({what}): the peer is not answering"),
            ));
        }
        if let Some(ch) = res.chan_of(cq) {
            cq.req_notify(false).map_err(rdma::verr)?;
            let n = cq.poll(wc).map_err(rdma::verr)?;
            if n > 0 {
                *last_progress = Instant::now();
                return Ok(n);
            }
            let _ = ch
                .get_cq_event(Some(Duration::from_millis(100)))
                .map_err(rdma::verr)?;
        } else {
            rdma::idle(&mut spins);
        }
    }
}

/// The one-sided work request of the test's verb from the buffer `sgl` to `remote`: WRITE,
/// READ, or perftest's atomics (CMP_SWAP 0 -> 1, FETCH_ADD 1). SENDs are the caller's to
/// build (given SEND, this is a WRITE).
pub fn one_sided_wr<'a>(
    cfg: &PerfConfig,
    id: u64,
    sgl: &'a [v::Sge; 1],
    remote: v::RemoteAddr,
) -> v::SendWr<'a> {
    match cfg.verb {
        Verb::Read => v::SendWr::read(id, sgl, remote),
        Verb::Atomic if cfg.atomic_cmp_swap => v::SendWr::compare_swap(id, &sgl[0], remote, 0, 1),
        Verb::Atomic => v::SendWr::fetch_add(id, &sgl[0], remote, 1),
        Verb::Write | Verb::Send => v::SendWr::write(id, sgl, remote),
    }
}

/// The client side (and both sides with `-b`): WRITE, READ, atomics or SEND to the peer.
pub fn run_client(
    res: &Res,
    cfg: &PerfConfig,
    size: u64,
    rem: &[PerfDest],
    timeout: Duration,
) -> Result<BwResult, ToolError> {
    let nq = res.qps.len();
    let iters = cfg.iters;
    let end_at = cfg
        .duration
        .map(|d| Instant::now() + Duration::from_secs(d));
    let cq_mod = u64::from(cfg.cq_mod.max(1));
    let post_list = u64::from(cfg.post_list.max(1));
    let tx = u64::from(cfg.tx_depth.max(1));
    let len = if cfg.verb == Verb::Atomic {
        8
    } else {
        size as u32
    };
    let sgls: Vec<[v::Sge; 1]> = (0..nq)
        .map(|i| res.mr.sge(res.local(i), len).map(|s| [s]))
        .collect::<Result<_, _>>()
        .map_err(rdma::verr)?;
    let inline =
        (cfg.verb == Verb::Write || cfg.verb == Verb::Send) && size <= u64::from(cfg.inline_size);
    let payloads: Vec<Vec<u8>> = if inline {
        (0..nq)
            .map(|i| res.mr.to_vec(res.local(i), size as usize))
            .collect::<Result<_, _>>()
            .map_err(rdma::verr)?
    } else {
        Vec::new()
    };
    let remotes: Vec<v::RemoteAddr> = rem
        .iter()
        .map(|d| v::RemoteAddr {
            addr: d.vaddr,
            rkey: d.rkey,
        })
        .collect();
    let cap = if end_at.is_some() {
        1 << 20
    } else {
        (iters * nq as u64).min(1 << 22) as usize
    };
    let mut posted: Vec<f64> = Vec::with_capacity(cap);
    let mut completed: Vec<f64> = Vec::with_capacity(cap);
    // Per QP: messages posted, messages known complete, and the global index of each of its
    // messages (for the completion times).
    let mut scnt = vec![0u64; nq];
    let mut ccnt = vec![0u64; nq];
    // (Sized up front: growing them would reallocate inside the measured loop.)
    let mut gidx: Vec<Vec<usize>> = (0..nq)
        .map(|_| Vec::with_capacity(cap / nq.max(1)))
        .collect();
    let t0 = Instant::now();
    let mut last_progress = Instant::now();
    let mut wc = [WorkCompletion::default(); 16];
    let mut wrs: Vec<v::SendWr<'_>> = Vec::with_capacity(post_list as usize);
    let mut stop = false;
    loop {
        if end_at.is_some_and(|e| Instant::now() >= e) {
            stop = true;
        }
        // Done when every message (with -D: every signalled one) is known complete.
        let done = (0..nq).all(|i| {
            if end_at.is_none() {
                ccnt[i] >= iters
            } else {
                stop && ccnt[i] >= scnt[i] - scnt[i] % cq_mod
            }
        });
        if done {
            break;
        }
        for i in 0..nq {
            if stop {
                break;
            }
            while (end_at.is_some() || scnt[i] < iters) && scnt[i] + post_list - ccnt[i] <= tx {
                wrs.clear();
                let now = t0.elapsed().as_secs_f64();
                for _ in 0..post_list {
                    if end_at.is_none() && scnt[i] >= iters {
                        break;
                    }
                    let s = scnt[i];
                    let signaled = (s + 1) % cq_mod == 0 || (end_at.is_none() && s + 1 == iters);
                    let id = ((i as u64) << 40) | s;
                    let mut wr = message_wr(res, cfg, i, id, &sgls[i], remotes[i], rem[i].qpn);
                    if inline {
                        wr = wr.inline(&payloads[i]);
                    }
                    if signaled {
                        wr = wr.signaled();
                    }
                    wrs.push(wr);
                    gidx[i].push(posted.len());
                    posted.push(now);
                    completed.push(f64::NAN);
                    scnt[i] += 1;
                }
                if wrs.is_empty() {
                    break;
                }
                res.qps[i].post_send(&wrs).map_err(rdma::verr)?;
            }
        }
        let n = wait_poll(
            res,
            &res.send_cq,
            &mut wc,
            &mut last_progress,
            timeout,
            "sending",
        )?;
        let now = t0.elapsed().as_secs_f64();
        retire(&wc[..n], &mut ccnt, &gidx, &mut completed, now)?;
    }
    let mut r = client_result(cfg, size, &posted, &completed);
    if end_at.is_none() {
        r.iters = iters * nq as u64;
    }
    Ok(r)
}

/// `send-bw -b` (perftest's `run_iter_bi`): sends to the peer while receiving the peer's
/// sends. The receive CQ is polled (and the receives re-posted) on a second thread, so neither
/// direction waits on the other. Returns this side's send result.
pub fn run_bidir_send(
    res: &Res,
    cfg: &PerfConfig,
    size: u64,
    rem: &[PerfDest],
    timeout: Duration,
) -> Result<BwResult, ToolError> {
    std::thread::scope(|s| {
        let rx = s.spawn(|| run_server_recv(res, cfg, size, timeout));
        let tx = run_client(res, cfg, size, rem, timeout);
        let rx = rx
            .join()
            .unwrap_or_else(|_| Err(ToolError::Verbs("the receive thread panicked".into())));
        let tx = tx?;
        rx?;
        Ok(tx)
    })
}

/// Marks complete, at time `now`, every message up to each completion's (a signaled
/// completion retires the unsignaled messages before it on its QP). The wr_id holds the QP
/// index above bit 40 and the message count below.
fn retire(
    wc: &[WorkCompletion],
    ccnt: &mut [u64],
    gidx: &[Vec<usize>],
    completed: &mut [f64],
    now: f64,
) -> Result<(), ToolError> {
    for w in wc {
        if !w.is_success() {
            return Err(rdma::wc_error(w, "send queue"));
        }
        let q = (w.wr_id() >> 40) as usize;
        let s = w.wr_id() & ((1 << 40) - 1);
        if q >= ccnt.len() {
            return Err(ToolError::Completion(format!(
                "completion for unknown wr_id {:#x}",
                w.wr_id()
            )));
        }
        while ccnt[q] <= s {
            if let Some(&g) = gidx[q].get(ccnt[q] as usize) {
                completed[g] = now;
            }
            ccnt[q] += 1;
        }
    }
    Ok(())
}

/// The client's result from the post and completion time of each message, in post order.
/// Only messages known complete count (with -D, the unsignaled tail does not). With -D and a
/// margin, only messages that completed between the margins count, and the average is over
/// that window (perftest's SAMPLE_STATE): the ramp-up and the drain are left out.
fn client_result(cfg: &PerfConfig, size: u64, posted: &[f64], completed: &[f64]) -> BwResult {
    let window = match cfg.duration {
        Some(d) if cfg.margin > 0 => Some((cfg.margin as f64, (d - cfg.margin) as f64)),
        _ => None,
    };
    let mut pairs: Vec<(f64, f64)> = posted
        .iter()
        .zip(completed)
        .filter(|(_, c)| c.is_finite())
        .filter(|(_, c)| window.is_none_or(|(from, to)| (from..to).contains(*c)))
        .map(|(p, c)| (*p, *c))
        .collect();
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (p, c): (Vec<f64>, Vec<f64>) = pairs.into_iter().unzip();
    let mut r = BwResult::compute(
        size,
        &p,
        &c,
        cfg.cq_mod as usize,
        cfg.post_list as usize,
        cfg.gbits,
    );
    if let Some((from, to)) = window {
        let (n, secs) = (r.iters as f64, to - from);
        r.bw_avg = size as f64 * n / secs / super::report::unit_factor(cfg.gbits);
        r.msg_rate = n / secs / 1e6;
    }
    if cfg.duration.is_some() {
        // perftest measures no peak in duration mode (noPeak) and prints 0.
        r.bw_peak = 0.0;
    }
    r
}

/// The SEND (and WRITE with immediate) BW server (`run_iter_bw_server`): counts receives,
/// re-posting them; the bandwidth
/// runs from the first receive completion to the last. Like perftest's server (noPeak), it
/// measures no peak: the peak column is 0.
pub fn run_server_recv(
    res: &Res,
    cfg: &PerfConfig,
    size: u64,
    timeout: Duration,
) -> Result<BwResult, ToolError> {
    let nq = res.qps.len();
    let total = cfg.iters * nq as u64;
    let sgls: Vec<[v::Sge; 1]> = (0..nq)
        .map(|i| res.recv_sge(cfg, i, size).map(|s| [s]))
        .collect::<Result<_, _>>()?;
    let n_sge = recv_sges(cfg);
    let mut posted_rx = vec![u64::from(cfg.rx_depth); nq];
    let mut rcnt = vec![0u64; nq];
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    let mut got = 0u64;
    let end_at = cfg.duration;
    let mut last_progress = Instant::now();
    let mut wc = [WorkCompletion::default(); 16];
    while end_at.is_some() || got < total {
        if let (Some(d), Some(f)) = (end_at, first)
            && f.elapsed() >= Duration::from_secs(d)
        {
            break;
        }
        let n = wait_poll(
            res,
            &res.recv_cq,
            &mut wc,
            &mut last_progress,
            timeout,
            "receiving",
        )?;
        let now = Instant::now();
        for w in &wc[..n] {
            if !w.is_success() {
                return Err(rdma::wc_error(w, "receive queue"));
            }
            check_imm(cfg, w)?;
            let q = w.wr_id() as usize;
            if q >= nq {
                return Err(ToolError::Completion(format!(
                    "completion for unknown wr_id {}",
                    w.wr_id()
                )));
            }
            first.get_or_insert(now);
            last = now;
            got += 1;
            rcnt[q] += 1;
            if end_at.is_some() || posted_rx[q] < cfg.iters {
                let wr = [v::RecvWr::new(q as u64, &sgls[q][..n_sge])];
                res.qps[q].post_recv(&wr).map_err(rdma::verr)?;
                posted_rx[q] += 1;
            }
        }
    }
    let secs = first
        .map(|f| last.duration_since(f).as_secs_f64())
        .unwrap_or(0.0)
        .max(1e-9);
    let factor = super::report::unit_factor(cfg.gbits);
    let bw = size as f64 * got as f64 / secs / factor;
    Ok(BwResult {
        size,
        iters: got,
        bw_peak: 0.0,
        bw_avg: bw,
        msg_rate: got as f64 / secs / 1e6,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::{TestKind, config_from};

    fn write_bw(args: &[&str]) -> PerfConfig {
        config_from(Verb::Write, TestKind::Bw, args).unwrap()
    }

    #[test]
    fn duration_runs_measure_between_the_margins() {
        // A 4 s run: a message posted every millisecond, each complete 0.5 ms later.
        let posted: Vec<f64> = (0..4000).map(|i| f64::from(i) / 1000.0).collect();
        let completed: Vec<f64> = posted.iter().map(|p| p + 0.0005).collect();
        // -D 4: margin 1 s, so the 2000 completions in [1 s, 3 s) count, over 2 s.
        let r = client_result(&write_bw(&["-D", "4"]), 1000, &posted, &completed);
        assert_eq!(r.iters, 2000);
        assert_eq!(r.bw_peak, 0.0, "perftest measures no peak with -D");
        assert!((r.msg_rate - 0.001).abs() < 1e-12, "{r:?}");
        assert!((r.bw_avg - 1e6 / 1048576.0).abs() < 1e-9, "{r:?}");
        // --margin 0 would be refused only when too large; -D 3 has margin 0: all count.
        let r = client_result(&write_bw(&["-D", "3"]), 1000, &posted, &completed);
        assert_eq!(r.iters, 4000);
        // Without -D every completed message counts, and the peak is measured.
        let r = client_result(&write_bw(&[]), 1000, &posted, &completed);
        assert_eq!(r.iters, 4000);
        assert!(r.bw_peak >= r.bw_avg, "{r:?}");
    }
}
