//! rping's ping loop on a connected RC QP, both roles (`rping_test_client` and
//! `rping_test_server` in librdmacm's `examples/rping.c`), so either side can be the real
//! rping once the QP is connected.
//!
//! One ping: the client fills its start buffer ([`super::pattern`]) and SENDs its address
//! ([`RdmaInfo`]); the server RDMA READs it into its own buffer and SENDs a go-ahead; the
//! client SENDs the address of its sink buffer; the server RDMA WRITEs what it read into it
//! and SENDs a second go-ahead; the client, with `-V`, compares sink and start. Every work
//! request is signalled, and one receive is kept posted and re-posted after each arrival.
//!
//! The session does not connect or disconnect: whoever connected the QP (the CM) ends the
//! server's loop by moving the QP to the error state on a disconnect, which flushes the
//! posted receive ([`Session::server`] then returns the pings it served and what it was
//! waiting for, which rping names in its last message).
//!
//! With [`Session::set_debug`] each step prints rping's `-d` line on stdout.

use super::info::RdmaInfo;
use super::pattern;
use crate::error::ToolError;
use crate::rdma;
use rnic_verbs::{
    AccessFlags, CompletionQueue, MemoryRegion, ProtectionDomain, QueuePair, RecvWr, RemoteAddr,
    SendWr, WcOpcode, WcStatus, WorkCompletion,
};
use std::io::Write;
use std::time::Duration;

/// rping's send queue depth (`RPING_SQ_DEPTH`).
pub const SQ_DEPTH: u32 = 16;
/// rping's receive queue depth.
pub const RQ_DEPTH: u32 = 2;
/// The CQ's size: send and receive completions share it (`RPING_SQ_DEPTH * 2`).
pub const CQ_DEPTH: u32 = SQ_DEPTH * 2;

const WR_RECV: u64 = 1;
const WR_SEND: u64 = 2;
const WR_RDMA: u64 = 3;

/// How a loop ended ([`Session::client`], [`Session::server`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    /// Pings done (client) or served (server).
    pub pings: u32,
    /// `None`: the client did its count. Otherwise the receive was flushed (the peer
    /// disconnected) while the loop waited for this, by rping's name of the state it
    /// expected (`RDMA_READ_ADV`: the server's next ping; `RDMA_WRITE_ADV`,
    /// `RDMA_WRITE_COMPLETE`: the client's go-aheads).
    pub disconnected_in: Option<&'static str>,
}

/// The server's two RDMA operations.
#[derive(Clone, Copy, Debug)]
enum Op {
    Read,
    Write,
}

/// What a wait on the CQ ended with.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// The peer's [`RdmaInfo`] arrived (the receive is already posted again).
    Recv(RdmaInfo),
    /// The RDMA READ or WRITE completed.
    RdmaDone,
    /// The receive was flushed: the QP is in the error state (the peer disconnected).
    Flushed,
}

/// The buffers of one rping connection and the QP and CQ they are used on.
#[derive(Debug)]
pub struct Session<'q> {
    qp: &'q QueuePair,
    cq: &'q CompletionQueue,
    recv: MemoryRegion,
    send: MemoryRegion,
    rdma: MemoryRegion,
    /// The client's start buffer (the server has none).
    start: Option<MemoryRegion>,
    size: u32,
    timeout: Duration,
    /// Copies of the buffers' contents (allocated once, not per ping).
    scratch: Vec<u8>,
    sink: Vec<u8>,
    /// rping's `-d`.
    debug: bool,
}

impl<'q> Session<'q> {
    /// Registers rping's buffers on `pd` (the receive and send messages, the RDMA buffer of
    /// `size` bytes and, for the client, the start buffer) and posts the first receive.
    /// `qp` (RC, created on `cq` for both queues) may still be in INIT; every wait for the
    /// peer is bounded by `timeout`.
    pub fn new(
        pd: &ProtectionDomain,
        qp: &'q QueuePair,
        cq: &'q CompletionQueue,
        size: u32,
        client: bool,
        timeout: Duration,
    ) -> Result<Session<'q>, ToolError> {
        let remote =
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE;
        let len = size as usize;
        let s = Session {
            qp,
            cq,
            recv: pd
                .reg_mr(RdmaInfo::LEN, AccessFlags::LOCAL_WRITE)
                .map_err(rdma::verr)?,
            send: pd
                .reg_mr(RdmaInfo::LEN, AccessFlags::empty())
                .map_err(rdma::verr)?,
            rdma: pd.reg_mr(len, remote).map_err(rdma::verr)?,
            start: match client {
                true => Some(pd.reg_mr(len, remote).map_err(rdma::verr)?),
                false => None,
            },
            size,
            timeout,
            scratch: vec![0; len],
            sink: vec![0; len],
            debug: false,
        };
        s.post_recv()?;
        Ok(s)
    }

    /// rping's `-d`: prints what each step does on stdout (rping's `DEBUG_LOG` lines).
    pub fn set_debug(&mut self, on: bool) {
        self.debug = on;
    }

    fn debug(&self, line: std::fmt::Arguments<'_>) {
        if self.debug {
            println!("{line}");
        }
    }

    fn post_recv(&self) -> Result<(), ToolError> {
        let sgl = [self.recv.sge_all().map_err(rdma::verr)?];
        self.qp
            .post_recv(&[RecvWr::new(WR_RECV, &sgl)])
            .map_err(rdma::verr)
    }

    /// SENDs `info` (the go-ahead when `None`: rping's server sends its zeroed message).
    fn post_info(&self, info: Option<RdmaInfo>) -> Result<(), ToolError> {
        if let Some(i) = &info {
            self.debug(format_args!(
                "RDMA addr {:x} rkey {:x} len {}",
                i.buf, i.rkey, i.size
            ));
        }
        let bytes = info.map_or([0; RdmaInfo::LEN], |i| i.to_bytes());
        self.send.write(0, &bytes).map_err(rdma::verr)?;
        let sgl = [self.send.sge_all().map_err(rdma::verr)?];
        self.qp
            .post_send(&[SendWr::send(WR_SEND, &sgl).signaled()])
            .map_err(rdma::verr)
    }

    fn info_of(&self, mr: &MemoryRegion) -> RdmaInfo {
        RdmaInfo {
            buf: mr.addr(),
            rkey: mr.rkey(),
            size: self.size,
        }
    }

    /// Polls until a receive arrives or the RDMA operation completes (SEND completions are
    /// only counted off, as rping's handler does).
    fn wait(&self, what: &str) -> Result<Step, ToolError> {
        let mut wc = [WorkCompletion::default(); 1];
        loop {
            if self
                .cq
                .poll_blocking(&mut wc, self.timeout)
                .map_err(rdma::verr)?
                == 0
            {
                return Err(ToolError::Timeout(
                    self.timeout,
                    format!("waiting for {what}"),
                ));
            }
            let wc = &wc[0];
            if wc.status() == WcStatus::WrFlushErr {
                // The QP went to the error state; the receive's flush is the one that tells.
                if wc.wr_id() == WR_RECV {
                    return Ok(Step::Flushed);
                }
                continue;
            }
            if !wc.is_success() {
                return Err(rdma::wc_error(wc, what));
            }
            match wc.opcode() {
                WcOpcode::Recv => {
                    self.debug(format_args!("recv completion"));
                    let mut b = [0u8; RdmaInfo::LEN];
                    let n = wc.byte_len() as usize;
                    self.recv.read(0, &mut b).map_err(rdma::verr)?;
                    let info = (n == RdmaInfo::LEN)
                        .then(|| RdmaInfo::parse(&b))
                        .flatten()
                        .ok_or_else(|| {
                            ToolError::Protocol(format!("Received bogus data, size {n}"))
                        })?;
                    self.post_recv()?;
                    return Ok(Step::Recv(info));
                }
                WcOpcode::RdmaRead => {
                    self.debug(format_args!("rdma read completion"));
                    return Ok(Step::RdmaDone);
                }
                WcOpcode::RdmaWrite => {
                    self.debug(format_args!("rdma write completion"));
                    return Ok(Step::RdmaDone);
                }
                _ => self.debug(format_args!("send completion")), // a SEND of ours
            }
        }
    }

    fn expect_recv(&self, what: &str) -> Result<Option<RdmaInfo>, ToolError> {
        match self.wait(what)? {
            Step::Recv(i) => Ok(Some(i)),
            Step::Flushed => Ok(None),
            Step::RdmaDone => Err(ToolError::Protocol(format!(
                "an RDMA completion while waiting for {what}"
            ))),
        }
    }

    fn expect_rdma(&self, what: &str) -> Result<(), ToolError> {
        match self.wait(what)? {
            Step::RdmaDone => Ok(()),
            Step::Flushed => Err(ToolError::Protocol(format!(
                "the connection went down while waiting for {what}"
            ))),
            Step::Recv(_) => Err(ToolError::Protocol(format!(
                "a message from the peer while waiting for {what}"
            ))),
        }
    }

    /// rping's client: `count` pings (`None`: until an error or the server's disconnect),
    /// each line `ping data: ...` on `out` with `verbose`, each sink compared with its start
    /// buffer with `validate` (`data mismatch!` otherwise).
    pub fn client(
        &mut self,
        count: Option<u32>,
        validate: bool,
        verbose: bool,
        out: &mut dyn Write,
    ) -> Result<Ended, ToolError> {
        let start_mr = self
            .start
            .as_ref()
            .ok_or_else(|| ToolError::Usage("an rping server session cannot ping".into()))?;
        let mut first = pattern::FIRST;
        let mut ping = 0u32;
        while count.is_none_or(|c| ping < c) {
            pattern::fill(&mut self.scratch, ping, first);
            first = pattern::next_start(first);
            start_mr.write(0, &self.scratch).map_err(rdma::verr)?;

            let gone = |state| Ended {
                pings: ping,
                disconnected_in: Some(state),
            };
            self.post_info(Some(self.info_of(start_mr)))?;
            if self
                .expect_recv("the server's go-ahead after its READ")?
                .is_none()
            {
                return Ok(gone("RDMA_WRITE_ADV"));
            }
            self.post_info(Some(self.info_of(&self.rdma)))?;
            if self
                .expect_recv("the server's go-ahead after its WRITE")?
                .is_none()
            {
                return Ok(gone("RDMA_WRITE_COMPLETE"));
            }
            self.rdma.read(0, &mut self.sink).map_err(rdma::verr)?;
            if validate && self.sink != self.scratch {
                return Err(ToolError::DataCheck("data mismatch!".into()));
            }
            if verbose {
                let text = String::from_utf8_lossy(pattern::c_str(&self.sink));
                writeln!(out, "ping data: {text}").map_err(|e| ToolError::io("stdout", e))?;
            }
            ping += 1;
        }
        Ok(Ended {
            pings: ping,
            disconnected_in: None,
        })
    }

    /// rping's server: serves pings until the QP is moved to the error state (the peer
    /// disconnected), printing `server ping data: ...` on `out` with `verbose`.
    pub fn server(&mut self, verbose: bool, out: &mut dyn Write) -> Result<Ended, ToolError> {
        let mut served = 0u32;
        let gone = |pings, state| Ended {
            pings,
            disconnected_in: Some(state),
        };
        loop {
            let Some(src) = self.expect_recv("the client's start buffer")? else {
                return Ok(gone(served, "RDMA_READ_ADV"));
            };
            self.debug(format_args!(
                "Received rkey {:x} addr {:x} len {} from peer",
                src.rkey, src.buf, src.size
            ));
            self.debug(format_args!("server received sink adv"));
            let len = self.check_fits(src)?;
            self.rdma_op(Op::Read, len, src)?;
            self.debug(format_args!("server received read complete"));
            self.rdma.read(0, &mut self.scratch).map_err(rdma::verr)?;
            let text = pattern::c_str(&self.scratch[..len as usize]);
            if verbose {
                let t = String::from_utf8_lossy(text);
                writeln!(out, "server ping data: {t}").map_err(|e| ToolError::io("stdout", e))?;
            }
            // rping WRITEs strlen + 1 bytes back: the text and its NUL.
            let echo = (text.len() + 1).min(self.size as usize) as u32;
            self.post_info(None)?;
            self.debug(format_args!("server posted go ahead"));

            let Some(sink) = self.expect_recv("the client's sink buffer")? else {
                return Ok(gone(served, "RDMA_WRITE_ADV"));
            };
            self.debug(format_args!(
                "Received rkey {:x} addr {:x} len {} from peer",
                sink.rkey, sink.buf, sink.size
            ));
            self.debug(format_args!("server received sink adv"));
            self.check_fits(sink)?;
            self.debug(format_args!(
                "rdma write from lkey {:x} laddr {:x} len {}",
                self.rdma.lkey(),
                self.rdma.addr(),
                echo
            ));
            self.rdma_op(Op::Write, echo, sink)?;
            self.debug(format_args!("server rdma write complete "));
            self.post_info(None)?;
            self.debug(format_args!("server posted go ahead"));
            served += 1;
        }
    }

    /// RDMA READs `len` bytes of the peer's buffer into ours, or WRITEs our first `len`
    /// bytes into it, and waits for the completion.
    fn rdma_op(&self, op: Op, len: u32, peer: RdmaInfo) -> Result<(), ToolError> {
        let sgl = [self.rdma.sge(0, len).map_err(rdma::verr)?];
        let remote = RemoteAddr {
            addr: peer.buf,
            rkey: peer.rkey,
        };
        let (wr, what) = match op {
            Op::Read => (SendWr::read(WR_RDMA, &sgl, remote), "the RDMA READ"),
            Op::Write => (SendWr::write(WR_RDMA, &sgl, remote), "the RDMA WRITE"),
        };
        self.qp.post_send(&[wr.signaled()]).map_err(rdma::verr)?;
        if matches!(op, Op::Read) {
            self.debug(format_args!("server posted rdma read req "));
        }
        self.expect_rdma(what)
    }

    /// The length of the peer's buffer, refused when it is larger than ours (rping would
    /// post the READ and fail with a local length error).
    fn check_fits(&self, info: RdmaInfo) -> Result<u32, ToolError> {
        if info.size > self.size {
            return Err(ToolError::Protocol(format!(
                "the client's {}-byte buffer is larger than this side's {} bytes (-S)",
                info.size, self.size
            )));
        }
        Ok(info.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rnic_verbs::{ConnectOptions, Context, QpType, connect_pair};

    const T: Duration = Duration::from_secs(20);

    struct Side {
        pd: ProtectionDomain,
        cq: CompletionQueue,
        qp: QueuePair,
    }

    fn side(ctx: &Context) -> Side {
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx.create_cq(CQ_DEPTH, None).unwrap();
        let qp = pd
            .create_qp(QpType::Rc, &cq, &cq)
            .max_send_wr(SQ_DEPTH)
            .max_recv_wr(RQ_DEPTH)
            .build()
            .unwrap();
        Side { pd, cq, qp }
    }

    fn pair() -> (Context, Context) {
        (
            Context::open("emu0").unwrap(),
            Context::open("emu1").unwrap(),
        )
    }

    #[test]
    fn client_and_server_ping_validate_and_print_as_rping() {
        let (a, b) = pair();
        let (c, s) = (side(&a), side(&b));
        connect_pair(&c.qp, &s.qp, &ConnectOptions::default()).unwrap();
        let mut server = Session::new(&s.pd, &s.qp, &s.cq, 64, false, T).unwrap();
        let mut client = Session::new(&c.pd, &c.qp, &c.cq, 64, true, T).unwrap();
        let (mut cout, mut sout) = (Vec::new(), Vec::new());
        std::thread::scope(|sc| {
            let srv = sc.spawn(|| server.server(true, &mut sout));
            let done = client.client(Some(3), true, true, &mut cout).unwrap();
            assert_eq!((done.pings, done.disconnected_in), (3, None));
            // What the CM does on a disconnect: the server's QP to the error state.
            s.qp.to_error().unwrap();
            let served = srv.join().unwrap().unwrap();
            assert_eq!(
                (served.pings, served.disconnected_in),
                (3, Some("RDMA_READ_ADV"))
            );
        });
        let cout = String::from_utf8(cout).unwrap();
        let lines: Vec<&str> = cout.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[0],
            "ping data: rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"
        );
        assert!(lines[1].starts_with("ping data: rdma-ping-1: BCD"));
        let sout = String::from_utf8(sout).unwrap();
        assert_eq!(
            sout.lines()
                .map(|l| l.replacen("server ", "", 1))
                .collect::<Vec<_>>(),
            lines
        );
    }

    #[test]
    fn a_bogus_message_and_an_oversized_buffer_are_protocol_errors() {
        let (a, b) = pair();
        let (c, s) = (side(&a), side(&b));
        connect_pair(&c.qp, &s.qp, &ConnectOptions::default()).unwrap();
        let mut server = Session::new(&s.pd, &s.qp, &s.cq, 64, false, T).unwrap();
        let raw = c.pd.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();

        // 15 bytes: rping's "Received bogus data".
        let sgl = [raw.sge(0, 15).unwrap()];
        c.qp.post_send(&[SendWr::send(9, &sgl)]).unwrap();
        let e = server.server(false, &mut Vec::new()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "peer protocol error: Received bogus data, size 15"
        );

        // A buffer larger than the server's -S (a new session: a bogus message ends one
        // without posting its receive again, as in rping).
        let mut server = Session::new(&s.pd, &s.qp, &s.cq, 64, false, T).unwrap();
        let big = RdmaInfo {
            buf: raw.addr(),
            rkey: raw.rkey(),
            size: 65,
        };
        raw.write(0, &big.to_bytes()).unwrap();
        let sgl = [raw.sge(0, 16).unwrap()];
        c.qp.post_send(&[SendWr::send(10, &sgl)]).unwrap();
        let e = server.server(false, &mut Vec::new()).unwrap_err();
        assert!(
            e.to_string()
                .contains("65-byte buffer is larger than this side's 64"),
            "{e}"
        );
    }

    #[test]
    fn a_server_that_writes_other_bytes_fails_the_clients_validation() {
        let (a, b) = pair();
        let (c, s) = (side(&a), side(&b));
        connect_pair(&c.qp, &s.qp, &ConnectOptions::default()).unwrap();
        let mut client = Session::new(&c.pd, &c.qp, &c.cq, 32, true, T).unwrap();
        // A hand-driven server that keeps the protocol but WRITEs zeros into the sink.
        let recv = s.pd.reg_mr(32, AccessFlags::LOCAL_WRITE).unwrap();
        let zeros = s.pd.reg_mr(32, AccessFlags::LOCAL_WRITE).unwrap();
        let go = s.pd.reg_mr(16, AccessFlags::LOCAL_WRITE).unwrap();
        let rsgl = [recv.sge(0, 16).unwrap(), recv.sge(16, 16).unwrap()];
        s.qp.post_recv(&[RecvWr::new(1, &rsgl[..1]), RecvWr::new(2, &rsgl[1..])])
            .unwrap();
        let e = std::thread::scope(|sc| {
            let srv = sc.spawn(|| {
                let mut wc = [WorkCompletion::default(); 1];
                let gsgl = [go.sge_all().unwrap()];
                for (id, send) in [(1, 3), (2, 4)] {
                    loop {
                        assert_eq!(s.cq.poll_blocking(&mut wc, T).unwrap(), 1);
                        assert!(wc[0].is_success(), "{:?}", wc[0].status());
                        if wc[0].opcode() == WcOpcode::Recv {
                            assert_eq!(wc[0].wr_id(), id);
                            break;
                        }
                    }
                    if id == 2 {
                        let sink = RdmaInfo::parse(&recv.to_vec(16, 16).unwrap()).unwrap();
                        let remote = RemoteAddr {
                            addr: sink.buf,
                            rkey: sink.rkey,
                        };
                        let zsgl = [zeros.sge_all().unwrap()];
                        s.qp.post_send(&[SendWr::write(5, &zsgl, remote)]).unwrap();
                    }
                    s.qp.post_send(&[SendWr::send(send, &gsgl)]).unwrap();
                }
            });
            let e = client
                .client(Some(1), true, false, &mut Vec::new())
                .unwrap_err();
            srv.join().unwrap();
            e
        });
        assert!(
            matches!(&e, ToolError::DataCheck(m) if m == "data mismatch!"),
            "{e}"
        );
    }
}
