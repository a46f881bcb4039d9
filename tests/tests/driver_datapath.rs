//! Every data-path verb of the real driver between two QPs of one emulated device (the
//! port's loopback executes them with real RoCE v2 packets), in both run modes: SEND / RECV
//! (+IMM, +INV), WRITE (+IMM), READ, CMP_SWAP, FETCH_ADD, UD, UC; sizes around the path MTU;
//! SGE lists; inline data; unsignaled WQEs retired by a later signaled completion; lists of
//! work requests behind one doorbell; SRQ receives; completion events through a channel.

#[path = "driver_fixture.rs"]
mod fixture;

use fixture::*;
use rnic_driver::ah::AddressHandle;
use rnic_driver::cq::{CompChannel, Cq};
use rnic_driver::mr::Mr;
use rnic_driver::qp::{Mtu, Qp, QpConfig, QpType};
use rnic_driver::srq::Srq;
use rnic_driver::wr::*;
use rnic_emulator::RunMode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

const MTU: usize = 256;
const SIZES: [usize; 6] = [0, 1, MTU - 1, MTU, MTU + 1, 3 * MTU + 17];

fn wr<'a>(wr_id: u64, op: SendOp, payload: Payload<'a>, flags: SendFlags) -> SendWr<'a> {
    SendWr {
        wr_id,
        op,
        payload,
        flags,
        ud: None,
    }
}

/// Posts one receive of `sgl` as `wr_id` on `q`.
fn post_recv1(q: &Qp, wr_id: u64, sgl: &[Sge]) {
    q.post_recv(&[RecvWr { wr_id, sgl }]).unwrap();
}

/// Posts one send work request on `q` (see [`wr`]).
fn post_send1(q: &Qp, wr_id: u64, op: SendOp, payload: Payload<'_>, flags: SendFlags) {
    q.post_send(&[wr(wr_id, op, payload, flags)]).unwrap();
}

fn sgl_of(mr: &Mr, off: usize, len: usize) -> Vec<Sge> {
    if len == 0 {
        Vec::new()
    } else {
        vec![mr.sge(off, len as u32)]
    }
}

fn read(mr: &Mr, off: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    mr.read(off, &mut v);
    v
}

#[test]
fn send_recv_with_imm_and_inv_at_every_size() {
    for mode in MODES {
        let fx = open(mode);
        let (a, b, ca, cb) = fx.pair(QpType::Rc, Mtu::Mtu256);
        let src = Mr::alloc(&fx.pd, 4096, Access::ALL).unwrap();
        let dst = Mr::alloc(&fx.pd, 4096, Access::ALL).unwrap();
        for (n, &len) in SIZES.iter().enumerate() {
            // SEND_WITH_INVALIDATE invalidates the rkey it names: a region of its own.
            let victim = Mr::alloc(&fx.pd, 64, Access::ALL).unwrap();
            for (k, op) in [
                SendOp::Send,
                SendOp::SendImm { imm: 0xA1B2_C3D4 },
                SendOp::SendInv {
                    rkey: victim.rkey(),
                },
            ]
            .into_iter()
            .enumerate()
            {
                let msg = pattern(len, (n * 3 + k) as u8);
                src.write(0, &msg);
                dst.write(0, &[0xEE; 2048]);
                post_recv1(&b, 100 + n as u64, &[dst.sge(0, 2048)]);
                let sgl = sgl_of(&src, 0, len);
                post_send1(&a, n as u64, op, Payload::Sgl(&sgl), SendFlags::SIGNALED);
                let c = poll_one(&ca);
                assert_eq!(c.status, WcStatus::Success, "{mode:?} {op:?} {len}: {c:?}");
                assert_eq!(
                    (c.wr_id, c.opcode, c.qp_num),
                    (n as u64, WcOpcode::Send, a.qpn())
                );
                let r = poll_one(&cb);
                assert_eq!(r.status, WcStatus::Success, "{r:?}");
                assert_eq!(r.wr_id, 100 + n as u64);
                assert_eq!(r.opcode, WcOpcode::Recv);
                assert_eq!(r.byte_len as usize, len);
                assert_eq!(r.qp_num, b.qpn());
                match op {
                    SendOp::SendImm { imm } => {
                        assert!(r.flags.contains(WcFlags::WITH_IMM));
                        assert_eq!(r.imm, imm);
                    }
                    SendOp::SendInv { rkey } => {
                        assert!(r.flags.contains(WcFlags::WITH_INV));
                        assert_eq!(r.invalidated_rkey, rkey);
                    }
                    _ => assert_eq!(r.flags, WcFlags::default()),
                }
                assert_eq!(read(&dst, 0, len), msg, "{mode:?} {op:?} size {len}");
                assert_eq!(read(&dst, len, 1), [0xEE]);
            }
        }
        assert_empty(&ca);
        assert_empty(&cb);
        assert_eq!(fx.dev.counters().rx_dropped, 0);
    }
}

#[test]
fn write_read_and_atomics_at_every_size() {
    for mode in MODES {
        let fx = open(mode);
        let (a, _b, ca, cb) = fx.pair(QpType::Rc, Mtu::Mtu256);
        let local = Mr::alloc(&fx.pd, 4096, Access::ALL).unwrap();
        let remote = Mr::alloc(&fx.pd, 4096, Access::ALL).unwrap();
        for (n, &len) in SIZES.iter().enumerate() {
            // WRITE.
            let msg = pattern(len, n as u8);
            local.write(0, &msg);
            remote.write(0, &[0; 1024]);
            let sgl = sgl_of(&local, 0, len);
            let op = SendOp::Write {
                raddr: remote.addr() + 8,
                rkey: remote.rkey(),
            };
            post_send1(&a, 1, op, Payload::Sgl(&sgl), SendFlags::SIGNALED);
            let c = poll_one(&ca);
            assert_eq!(
                (c.status, c.opcode),
                (WcStatus::Success, WcOpcode::RdmaWrite),
                "{c:?}"
            );
            assert_eq!(read(&remote, 8, len), msg, "{mode:?} WRITE {len}");
            assert_eq!(read(&remote, 8 + len, 1), [0]);
            // READ back into another place.
            local.write(2048, &[0xEE; 1024]);
            let sgl = sgl_of(&local, 2048, len);
            let op = SendOp::Read {
                raddr: remote.addr() + 8,
                rkey: remote.rkey(),
            };
            post_send1(&a, 2, op, Payload::Sgl(&sgl), SendFlags::SIGNALED);
            let c = poll_one(&ca);
            assert_eq!(
                (c.status, c.opcode, c.wr_id),
                (WcStatus::Success, WcOpcode::RdmaRead, 2)
            );
            assert_eq!(c.byte_len as usize, len);
            assert_eq!(read(&local, 2048, len), msg, "{mode:?} READ {len}");
            assert_eq!(read(&local, 2048 + len, 1), [0xEE]);
        }
        // WRITE_IMM consumes a receive and reports the immediate.
        post_recv1(&_b, 77, &[]);
        local.write(0, b"imm-write");
        let op = SendOp::WriteImm {
            raddr: remote.addr(),
            rkey: remote.rkey(),
            imm: 0x0102_0304,
        };
        post_send1(
            &a,
            3,
            op,
            Payload::Sgl(&[local.sge(0, 9)]),
            SendFlags::SIGNALED,
        );
        assert_eq!(poll_one(&ca).opcode, WcOpcode::RdmaWrite);
        let r = poll_one(&cb);
        assert_eq!(
            (r.wr_id, r.opcode, r.imm, r.byte_len),
            (77, WcOpcode::RecvRdmaWithImm, 0x0102_0304, 9)
        );
        assert!(r.flags.contains(WcFlags::WITH_IMM));
        assert_eq!(read(&remote, 0, 9), b"imm-write");

        // Atomics on an 8-byte aligned target, in host byte order.
        remote.write(64, &100u64.to_ne_bytes());
        let res = [local.sge(512, 8)];
        let fa = SendOp::FetchAdd {
            raddr: remote.addr() + 64,
            rkey: remote.rkey(),
            add: 5,
        };
        post_send1(&a, 4, fa, Payload::Sgl(&res), SendFlags::SIGNALED);
        let c = poll_one(&ca);
        assert_eq!(
            (c.status, c.opcode, c.byte_len),
            (WcStatus::Success, WcOpcode::FetchAdd, 8)
        );
        assert_eq!(read(&local, 512, 8), 100u64.to_ne_bytes());
        assert_eq!(read(&remote, 64, 8), 105u64.to_ne_bytes());
        for (compare, swap, expect_orig, expect_after) in
            [(105u64, 7u64, 105u64, 7u64), (1, 9, 7, 7)]
        {
            let cs = SendOp::CmpSwap {
                raddr: remote.addr() + 64,
                rkey: remote.rkey(),
                compare,
                swap,
            };
            post_send1(&a, 5, cs, Payload::Sgl(&res), SendFlags::SIGNALED);
            let c = poll_one(&ca);
            assert_eq!(
                (c.status, c.opcode),
                (WcStatus::Success, WcOpcode::CompSwap)
            );
            assert_eq!(read(&local, 512, 8), expect_orig.to_ne_bytes());
            assert_eq!(read(&remote, 64, 8), expect_after.to_ne_bytes());
        }
        assert_empty(&ca);
    }
}

#[test]
fn sge_lists_and_inline_data() {
    for mode in MODES {
        let fx = open(mode);
        let (a, b, ca, cb) = fx.pair(QpType::Rc, Mtu::Mtu256);
        let src = Mr::alloc(&fx.pd, 4096, Access::ALL).unwrap();
        let dst = Mr::alloc(&fx.pd, 8192, Access::ALL).unwrap();
        let msg = pattern(600, 3);
        src.write(0, &msg[..100]);
        src.write(1000, &msg[100..350]);
        src.write(3000, &msg[350..]);
        dst.write(0, &[0; 8192]);
        // Receive scattered over four SGEs, one of them zero-length (skipped).
        post_recv1(
            &b,
            1,
            &[
                dst.sge(0, 10),
                dst.sge(100, 0),
                dst.sge(4096, 290),
                dst.sge(6000, 400),
            ],
        );
        let gather = [src.sge(0, 100), src.sge(1000, 250), src.sge(3000, 250)];
        post_send1(
            &a,
            1,
            SendOp::Send,
            Payload::Sgl(&gather),
            SendFlags::SIGNALED,
        );
        poll_one(&ca);
        assert_eq!(poll_one(&cb).byte_len, 600);
        assert_eq!(read(&dst, 0, 10), &msg[..10]);
        assert_eq!(read(&dst, 4096, 290), &msg[10..300]);
        assert_eq!(read(&dst, 6000, 300), &msg[300..]);
        // Inline SEND and WRITE at sizes spanning the inline segment's first unit.
        for len in [1usize, 12, 13, 28, 60, 64] {
            let data = pattern(len, len as u8);
            post_recv1(&b, 2, &[dst.sge(0, 256)]);
            a.post_send(&[
                wr(3, SendOp::Send, Payload::Inline(&data), SendFlags::NONE),
                wr(
                    4,
                    SendOp::Write {
                        raddr: dst.addr() + 1024,
                        rkey: dst.rkey(),
                    },
                    Payload::Inline(&data),
                    SendFlags::SIGNALED,
                ),
            ])
            .unwrap();
            let c = poll_one(&ca);
            assert_eq!(
                (c.wr_id, c.status),
                (4, WcStatus::Success),
                "unsignaled SEND retired"
            );
            assert_eq!(poll_one(&cb).byte_len as usize, len);
            assert_eq!(read(&dst, 0, len), data);
            assert_eq!(read(&dst, 1024, len), data);
        }
        let too_long = vec![0u8; 65];
        let e = a
            .post_send(&[wr(
                9,
                SendOp::Send,
                Payload::Inline(&too_long),
                SendFlags::NONE,
            )])
            .unwrap_err();
        assert_eq!(e.index, 0);
        assert!(matches!(
            e.kind,
            PostErrorKind::InlineTooLong { given: 65, max: 64 }
        ));
        let e = a
            .post_send(&[wr(
                9,
                SendOp::Read {
                    raddr: dst.addr(),
                    rkey: dst.rkey(),
                },
                Payload::Inline(b"x"),
                SendFlags::NONE,
            )])
            .unwrap_err();
        assert_eq!(e.kind, PostErrorKind::InlineNotAllowed);
        assert_empty(&ca);
    }
}

#[test]
fn unsignaled_wqes_retire_with_the_next_signaled_and_lists_ring_one_doorbell() {
    for mode in MODES {
        let fx = open(mode);
        let (a, b, ca, cb) = fx.pair(QpType::Rc, Mtu::Mtu1024);
        let mr = Mr::alloc(&fx.pd, 4096, Access::ALL).unwrap();
        let cap = a.caps().max_send_wr as usize;
        fx.bus.record.store(true, Ordering::SeqCst);
        // Several rounds: more WQEs than the SQ holds in total, so retirement must work.
        let mut last_offset = None;
        for round in 0..(3 * cap / 8) {
            let sgl = [mr.sge(0, 32)];
            let list: Vec<SendWr<'_>> = (0..8)
                .map(|i| {
                    wr(
                        (round * 8 + i) as u64,
                        SendOp::Write {
                            raddr: mr.addr() + 2048,
                            rkey: mr.rkey(),
                        },
                        Payload::Sgl(&sgl),
                        if i == 7 {
                            SendFlags::SIGNALED
                        } else {
                            SendFlags::NONE
                        },
                    )
                })
                .collect();
            a.post_send(&list).unwrap();
            let c = poll_one(&ca);
            assert_eq!(
                c.wr_id,
                (round * 8 + 7) as u64,
                "only the signaled one completes"
            );
            assert_eq!(c.status, WcStatus::Success);
            let w = fx
                .bus
                .writes64
                .lock()
                .unwrap()
                .drain(..)
                .collect::<Vec<_>>();
            assert_eq!(w.len(), 1, "one doorbell per list: {w:x?}");
            let (off, val) = w[0];
            let page_off = off % 4096;
            assert!(page_off == 0x800 || page_off == 0x900);
            if let Some(prev) = last_offset {
                assert_ne!(prev, page_off, "doorbells alternate 0x800 / 0x900");
            }
            last_offset = Some(page_off);
            // The doorbell carries the last WQE's first 8 bytes: its index, opcode, QPN, DS.
            assert_eq!(val & 0xFF, 3, "DS of a WRITE with one SGE");
            assert_eq!((val >> 8) & 0xFF_FFFF, u64::from(a.qpn()));
            assert_eq!((val >> 32) & 0xFF, 0x08, "RDMA_WRITE");
        }
        fx.bus.record.store(false, Ordering::SeqCst);
        // A full queue is reported, and the QP goes on after a completion.
        let sgl = [mr.sge(0, 8)];
        let many: Vec<SendWr<'_>> = (0..4 * cap + 5)
            .map(|i| {
                wr(
                    i as u64,
                    SendOp::Write {
                        raddr: mr.addr(),
                        rkey: mr.rkey(),
                    },
                    Payload::Sgl(&sgl),
                    SendFlags::SIGNALED,
                )
            })
            .collect();
        let e = a.post_send(&many).unwrap_err();
        assert_eq!(e.kind, PostErrorKind::QueueFull);
        assert!(
            e.index >= cap && e.index <= 4 * cap,
            "{e:?} with capacity {cap}"
        );
        let got = poll_n(&ca, e.index);
        assert!(
            got.iter()
                .enumerate()
                .all(|(i, c)| c.wr_id == i as u64 && c.status == WcStatus::Success)
        );
        // Receive lists: one doorbell record update for the lot.
        let recvs: Vec<RecvWr<'_>> = (0..4)
            .map(|i| RecvWr {
                wr_id: 50 + i,
                sgl: &[],
            })
            .collect();
        b.post_recv(&recvs).unwrap();
        a.post_send(&[wr(1, SendOp::Send, Payload::Inline(b""), SendFlags::NONE); 4])
            .unwrap();
        let r = poll_n(&cb, 4);
        assert_eq!(
            r.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
            [50, 51, 52, 53]
        );
        // Unsignaled sends completed without a CQE; a NOP-free signaled one retires them.
        post_send1(
            &a,
            99,
            SendOp::Write {
                raddr: mr.addr(),
                rkey: mr.rkey(),
            },
            Payload::Sgl(&sgl),
            SendFlags::SIGNALED,
        );
        assert_eq!(poll_one(&ca).wr_id, 99);
        assert_empty(&ca);
    }
}

#[test]
fn ud_sends_with_address_handles() {
    for mode in MODES {
        let fx = open(mode);
        let (a, b, ca, cb) = fx.pair(QpType::Ud, Mtu::Mtu1024);
        let ah = AddressHandle::new(&fx.pd, &fx.self_av()).unwrap();
        let src = Mr::alloc(&fx.pd, 4096, Access::ALL).unwrap();
        let dst = Mr::alloc(&fx.pd, 4096, Access::ALL).unwrap();
        for (n, len) in [0usize, 1, 255, 1024].into_iter().enumerate() {
            let msg = pattern(len, n as u8);
            src.write(0, &msg);
            post_recv1(&b, n as u64, &[dst.sge(0, 40 + 1024)]);
            let sgl = sgl_of(&src, 0, len);
            let op = if n % 2 == 0 {
                SendOp::Send
            } else {
                SendOp::SendImm { imm: 0xBEEF }
            };
            a.post_send(&[SendWr {
                wr_id: 10 + n as u64,
                op,
                payload: Payload::Sgl(&sgl),
                flags: SendFlags::SIGNALED,
                ud: Some(UdDest {
                    ah: &ah,
                    remote_qpn: b.qpn(),
                    remote_qkey: QKEY,
                }),
            }])
            .unwrap();
            let c = poll_one(&ca);
            assert_eq!((c.status, c.wr_id), (WcStatus::Success, 10 + n as u64));
            let r = poll_one(&cb);
            assert_eq!(r.status, WcStatus::Success, "{r:?}");
            assert_eq!(r.byte_len as usize, 40 + len, "GRH area + payload");
            assert!(r.flags.contains(WcFlags::GRH));
            assert_eq!(r.src_qp, a.qpn());
            assert_eq!(r.flags.contains(WcFlags::WITH_IMM), n % 2 == 1);
            assert_eq!(read(&dst, 40, len), msg);
            // The GRH area holds the IPv4 header at offset 20: version 4, our address.
            let grh = read(&dst, 0, 40);
            assert_eq!(grh[20] >> 4, 4);
            assert_eq!(&grh[20 + 12..20 + 16], &IP.octets());
        }
        // A UD send without destination, and RDMA on UD, are refused.
        let e = a
            .post_send(&[wr(1, SendOp::Send, Payload::Inline(b"x"), SendFlags::NONE)])
            .unwrap_err();
        assert_eq!(e.kind, PostErrorKind::MissingUdDest);
        let e = a
            .post_send(&[wr(
                1,
                SendOp::Write { raddr: 0, rkey: 0 },
                Payload::Inline(b"x"),
                SendFlags::NONE,
            )])
            .unwrap_err();
        assert_eq!(e.kind, PostErrorKind::OpNotSupported);
        // A wrong Q_Key is dropped by the receiver: only the sender completes.
        post_recv1(&b, 5, &[dst.sge(0, 100)]);
        a.post_send(&[SendWr {
            wr_id: 6,
            op: SendOp::Send,
            payload: Payload::Inline(b"lost"),
            flags: SendFlags::SIGNALED,
            ud: Some(UdDest {
                ah: &ah,
                remote_qpn: b.qpn(),
                remote_qkey: QKEY ^ 1,
            }),
        }])
        .unwrap();
        assert_eq!(poll_one(&ca).wr_id, 6);
        assert_empty(&cb);
    }
}

#[test]
fn uc_send_and_write() {
    for mode in MODES {
        let fx = open(mode);
        let (a, b, ca, cb) = fx.pair(QpType::Uc, Mtu::Mtu256);
        let mr = Mr::alloc(&fx.pd, 8192, Access::ALL).unwrap();
        for (n, &len) in SIZES.iter().enumerate() {
            let msg = pattern(len, n as u8);
            mr.write(0, &msg);
            post_recv1(&b, n as u64, &[mr.sge(4096, 2048)]);
            let sgl = sgl_of(&mr, 0, len);
            // UC has no ACKs: A's WRITE completes when sent, not when placed. The
            // responder handles a QP's packets in order, so B's SEND completion after
            // the WRITE is what says the WRITE's data has landed (the usual idiom).
            a.post_send(&[
                wr(
                    1,
                    SendOp::Write {
                        raddr: mr.addr() + 2048,
                        rkey: mr.rkey(),
                    },
                    Payload::Sgl(&sgl),
                    SendFlags::SIGNALED,
                ),
                wr(2, SendOp::Send, Payload::Sgl(&sgl), SendFlags::SIGNALED),
            ])
            .unwrap();
            assert_eq!(
                poll_n(&ca, 2).iter().map(|c| c.wr_id).collect::<Vec<_>>(),
                [1, 2]
            );
            assert_eq!(poll_one(&cb).byte_len as usize, len);
            assert_eq!(read(&mr, 4096, len), msg);
            assert_eq!(read(&mr, 2048, len), msg);
        }
        let e = a
            .post_send(&[wr(
                1,
                SendOp::Read { raddr: 0, rkey: 0 },
                Payload::Sgl(&[]),
                SendFlags::NONE,
            )])
            .unwrap_err();
        assert_eq!(e.kind, PostErrorKind::OpNotSupported);
    }
}

#[test]
fn srq_receives_for_two_qps() {
    for mode in MODES {
        let fx = open(mode);
        let srq = Arc::new(Srq::create(&fx.pd, 8, 2).unwrap());
        let cs = fx.cq(64);
        let cr = fx.cq(64);
        let mut cfg = QpConfig::new(QpType::Rc, cr.clone(), cr.clone());
        cfg.srq = Some(srq.clone());
        let r1 = Qp::create(&fx.pd, &cfg).unwrap();
        let r2 = Qp::create(&fx.pd, &cfg).unwrap();
        let s1 = Qp::create(&fx.pd, &QpConfig::new(QpType::Rc, cs.clone(), cs.clone())).unwrap();
        let s2 = Qp::create(&fx.pd, &QpConfig::new(QpType::Rc, cs.clone(), cs.clone())).unwrap();
        for (s, r) in [(&s1, &r1), (&s2, &r2)] {
            fx.connect(s, r.qpn(), Mtu::Mtu1024);
            fx.connect(r, s.qpn(), Mtu::Mtu1024);
        }
        assert!(
            r1.post_recv(&[RecvWr { wr_id: 0, sgl: &[] }]).is_err(),
            "QPs on an SRQ have no RQ"
        );
        // Room for 8 receives: a ring of 16, one slot of it the free list's sentinel.
        let n = srq.capacity() as usize;
        assert_eq!(n, 15);
        let mr = Mr::alloc(&fx.pd, n * 512, Access::ALL).unwrap();
        // Three laps of the SRQ ring.
        for lap in 0..3u64 {
            let bufs: Vec<[Sge; 1]> = (0..n).map(|i| [mr.sge(i * 512, 512)]).collect();
            let recvs: Vec<RecvWr<'_>> = bufs
                .iter()
                .enumerate()
                .map(|(i, s)| RecvWr {
                    wr_id: lap * 100 + i as u64,
                    sgl: s,
                })
                .collect();
            srq.post_recv(&recvs).unwrap();
            assert_eq!(
                srq.post_recv(&[RecvWr { wr_id: 0, sgl: &[] }])
                    .unwrap_err()
                    .kind,
                PostErrorKind::QueueFull
            );
            for i in 0..n as u8 {
                let s = if i % 2 == 0 { &s1 } else { &s2 };
                post_send1(
                    s,
                    u64::from(i),
                    SendOp::Send,
                    Payload::Inline(&[i; 20]),
                    SendFlags::SIGNALED,
                );
            }
            poll_n(&cs, n);
            let got = poll_n(&cr, n);
            let mut ids: Vec<u64> = got.iter().map(|c| c.wr_id).collect();
            ids.sort_unstable();
            assert_eq!(
                ids,
                (0..n as u64).map(|i| lap * 100 + i).collect::<Vec<_>>()
            );
            // Messages take SRQ WQEs in arrival order; each buffer holds one whole message,
            // and the completion names the QP that message went to.
            let mut seen = Vec::new();
            for c in &got {
                let i = (c.wr_id % 100) as usize;
                let m = read(&mr, i * 512, 20);
                assert!(m.iter().all(|b| *b == m[0]), "{m:?}");
                assert_eq!(c.qp_num, if m[0] % 2 == 0 { r1.qpn() } else { r2.qpn() });
                seen.push(m[0]);
            }
            seen.sort_unstable();
            assert_eq!(seen, (0..n as u8).collect::<Vec<u8>>());
        }
        let ctx = srq.query().unwrap();
        assert_eq!(ctx.log_srq_size(), 4);
    }
}

/// Receives of an SRQ come back in the order their completions are polled, not the order
/// they were posted: a QP whose CQ is not polled keeps only its own slots.
#[test]
fn srq_slots_return_in_completion_order() {
    for mode in MODES {
        let fx = open(mode);
        let srq = Arc::new(Srq::create(&fx.pd, 3, 1).unwrap());
        assert_eq!(srq.capacity(), 3);
        let cs = fx.cq(16);
        let (cr1, cr2) = (fx.cq(16), fx.cq(16));
        let on_srq = |cq: &Arc<Cq>| {
            let mut cfg = QpConfig::new(QpType::Rc, cq.clone(), cq.clone());
            cfg.srq = Some(srq.clone());
            Qp::create(&fx.pd, &cfg).unwrap()
        };
        let (r1, r2) = (on_srq(&cr1), on_srq(&cr2));
        let s1 = Qp::create(&fx.pd, &QpConfig::new(QpType::Rc, cs.clone(), cs.clone())).unwrap();
        let s2 = Qp::create(&fx.pd, &QpConfig::new(QpType::Rc, cs.clone(), cs.clone())).unwrap();
        for (s, r) in [(&s1, &r1), (&s2, &r2)] {
            fx.connect(s, r.qpn(), Mtu::Mtu1024);
            fx.connect(r, s.qpn(), Mtu::Mtu1024);
        }
        let mr = Mr::alloc(&fx.pd, 8 * 64, Access::ALL).unwrap();
        let bufs: Vec<[Sge; 1]> = (0..8).map(|i| [mr.sge(i * 64, 64)]).collect();
        let post = |id: usize| {
            srq.post_recv(&[RecvWr {
                wr_id: id as u64,
                sgl: &bufs[id],
            }])
        };
        let send = |s: &Qp, byte: u8| {
            post_send1(
                s,
                u64::from(byte),
                SendOp::Send,
                Payload::Inline(&[byte; 8]),
                SendFlags::SIGNALED,
            );
            poll_one(&cs);
        };
        for id in 0..3 {
            post(id).unwrap();
        }
        assert_eq!(post(3).unwrap_err().kind, PostErrorKind::QueueFull);
        // Receive 0 goes to r1 (its CQ left unpolled), receive 1 to r2 (polled).
        send(&s1, 0xA0);
        send(&s2, 0xB0);
        assert_eq!(poll_one(&cr2).wr_id, 1);
        // Receive 1's slot is back although receive 0's, posted before it, is not.
        post(3).unwrap();
        assert_eq!(post(4).unwrap_err().kind, PostErrorKind::QueueFull);
        // The device takes receive 2, then 3 (posted into the reused slot).
        send(&s2, 0xB1);
        send(&s2, 0xB2);
        let got: Vec<u64> = poll_n(&cr2, 2).iter().map(|c| c.wr_id).collect();
        assert_eq!(got, [2, 3]);
        assert_eq!(read(&mr, 3 * 64, 8), [0xB2; 8]);
        // r1's completion, polled at last, frees receive 0's slot too.
        let c = poll_one(&cr1);
        assert_eq!((c.wr_id, c.qp_num), (0, r1.qpn()));
        assert_eq!(read(&mr, 0, 8), [0xA0; 8]);
        for id in 4..7 {
            post(id).unwrap();
        }
        assert_eq!(post(7).unwrap_err().kind, PostErrorKind::QueueFull);
        for (i, s) in [&s1, &s2, &s1].into_iter().enumerate() {
            send(s, 0xC0 + i as u8);
        }
        let mut ids: Vec<u64> = poll_n(&cr1, 2).iter().map(|c| c.wr_id).collect();
        ids.extend(poll_n(&cr2, 1).iter().map(|c| c.wr_id));
        ids.sort_unstable();
        assert_eq!(ids, [4, 5, 6]);
    }
}

#[test]
fn completion_events_through_a_channel() {
    for mode in MODES {
        let fx = open(mode);
        let chan = Arc::new(CompChannel::create(&fx.hca, 1).unwrap());
        let ca = Arc::new(Cq::create(&fx.hca, 64, Some(&chan)).unwrap());
        let cb = Arc::new(Cq::create(&fx.hca, 64, Some(&chan)).unwrap());
        let a = Qp::create(&fx.pd, &QpConfig::new(QpType::Rc, ca.clone(), ca.clone())).unwrap();
        let b = Qp::create(&fx.pd, &QpConfig::new(QpType::Rc, cb.clone(), cb.clone())).unwrap();
        fx.connect(&a, b.qpn(), Mtu::Mtu1024);
        fx.connect(&b, a.qpn(), Mtu::Mtu1024);
        let mut cqns = [0u32; 4];
        assert_eq!(
            chan.wait(Duration::from_millis(5), &mut cqns).unwrap(),
            0,
            "nothing armed"
        );
        for round in 0..3 {
            ca.req_notify(false);
            cb.req_notify(true);
            post_recv1(&b, round, &[]);
            // Not solicited: only the sender's CQ (armed for any completion) fires.
            post_send1(
                &a,
                round,
                SendOp::Send,
                Payload::Inline(b""),
                SendFlags::SIGNALED,
            );
            let n = chan.wait(Duration::from_secs(5), &mut cqns).unwrap();
            assert_eq!(&cqns[..n], &[ca.cqn()], "{mode:?} round {round}");
            ca.note_event();
            poll_one(&ca);
            poll_one(&cb);
            // A solicited SEND fires the receiver's solicited-only arm.
            post_recv1(&b, 10 + round, &[]);
            post_send1(
                &a,
                round,
                SendOp::Send,
                Payload::Inline(b""),
                SendFlags::SOLICITED,
            );
            let n = chan.wait(Duration::from_secs(5), &mut cqns).unwrap();
            assert_eq!(&cqns[..n], &[cb.cqn()]);
            cb.note_event();
            assert_eq!(poll_one(&cb).wr_id, 10 + round);
        }
        assert!(chan.eqn() != fx.hca.eqn());
        drop((a, b));
    }
}

#[test]
fn objects_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<rnic_driver::Hca>();
    check::<rnic_driver::pd::Pd>();
    check::<Mr>();
    check::<Cq>();
    check::<CompChannel>();
    check::<Qp>();
    check::<Srq>();
    check::<AddressHandle>();
}

#[test]
fn posting_and_polling_on_different_threads() {
    let fx = open(RunMode::Threaded);
    let (a, b, ca, _cb) = fx.pair(QpType::Rc, Mtu::Mtu1024);
    let mr = Mr::alloc(&fx.pd, 4096, Access::ALL).unwrap();
    const LISTS: u64 = 2_000;
    const PER: u64 = 16;
    let a = Arc::new(a);
    std::thread::scope(|s| {
        let poster = {
            let a = a.clone();
            let mr = &mr;
            s.spawn(move || {
                let sgl = [mr.sge(0, 32)];
                let mut full = 0u64;
                for l in 0..LISTS {
                    let list: Vec<SendWr<'_>> = (0..PER)
                        .map(|i| {
                            wr(
                                l * PER + i,
                                SendOp::Write {
                                    raddr: mr.addr() + 1024,
                                    rkey: mr.rkey(),
                                },
                                Payload::Sgl(&sgl),
                                if i == PER - 1 {
                                    SendFlags::SIGNALED
                                } else {
                                    SendFlags::NONE
                                },
                            )
                        })
                        .collect();
                    let mut from = 0;
                    while from < list.len() {
                        match a.post_send(&list[from..]) {
                            Ok(()) => break,
                            Err(e) => {
                                assert_eq!(e.kind, PostErrorKind::QueueFull, "{e}");
                                from += e.index;
                                full += 1;
                                std::thread::yield_now();
                            }
                        }
                    }
                }
                full
            })
        };
        // This thread polls while the other posts.
        let mut seen = 0u64;
        let mut wc = [WorkCompletion::default(); 16];
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while seen < LISTS {
            let n = ca.poll(&mut wc).unwrap();
            for c in &wc[..n] {
                assert_eq!(c.status, WcStatus::Success, "{c:?}");
                assert_eq!(
                    c.wr_id,
                    seen * PER + PER - 1,
                    "in order, unsignaled ones retired"
                );
                seen += 1;
            }
            if n == 0 {
                assert!(std::time::Instant::now() < deadline, "{seen} of {LISTS}");
                std::thread::yield_now();
            }
        }
        let full = poster.join().unwrap();
        eprintln!("{seen} signaled completions, the queue was full {full} times");
    });
    drop(b);
}

/// The send queue is sized in 64-byte WQEBBs for the largest WQE the QP was created for;
/// `caps().max_send_wr` is how many such work requests fit, and posting refuses the one
/// beyond it however small the WQEs are (one-WQEBB inline WRITEs here, half the size the
/// default caps allow), so a send CQ sized from the caps cannot overrun.
#[test]
fn send_queue_refuses_work_requests_beyond_its_caps() {
    let fx = open(RunMode::Deterministic);
    let mut cfg = QpConfig::new(QpType::Rc, fx.cq(1), fx.cq(1));
    cfg.caps.max_send_wr = 8;
    let cap = Qp::create(&fx.pd, &cfg).unwrap().caps().max_send_wr as usize;
    let cq = fx.cq(cap as u32);
    cfg.send_cq = cq.clone();
    cfg.recv_cq = cq.clone();
    let a = Qp::create(&fx.pd, &cfg).unwrap();
    let (_, ring, _) = a.sq_ring();
    assert!(ring / 64 > cap, "{} WQEBBs for {cap} WRs", ring / 64);
    fx.connect(&a, a.qpn(), Mtu::Mtu1024);
    let mr = Mr::alloc(&fx.pd, 64, Access::ALL).unwrap();
    let write = |i: u64| {
        wr(
            i,
            SendOp::Write {
                raddr: mr.addr(),
                rkey: mr.rkey(),
            },
            Payload::Inline(b"x"),
            SendFlags::SIGNALED,
        )
    };
    // The device does nothing until stepped: every posted WR stays outstanding.
    fx.dev.set_auto_step(false);
    for lap in 0..3u64 {
        let list: Vec<SendWr<'_>> = (0..=cap as u64).map(|i| write(lap * 100 + i)).collect();
        let e = a.post_send(&list).unwrap_err();
        assert_eq!((e.index, e.kind), (cap, PostErrorKind::QueueFull));
        let e = a.post_send(&[write(99)]).unwrap_err();
        assert_eq!((e.index, e.kind), (0, PostErrorKind::QueueFull));
        let mut got = Vec::new();
        let mut wc = [WorkCompletion::default(); 4];
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while got.len() < cap {
            fx.dev.step();
            let n = cq.poll(&mut wc).expect("the CQ never overruns");
            got.extend_from_slice(&wc[..n]);
            assert!(std::time::Instant::now() < deadline, "{got:?}");
        }
        assert!(
            got.iter()
                .enumerate()
                .all(|(i, c)| c.wr_id == lap * 100 + i as u64 && c.status == WcStatus::Success),
            "{got:?}"
        );
        fx.dev.step();
        assert_eq!(cq.poll(&mut wc), Ok(0));
    }
    fx.dev.set_auto_step(true); // for the teardown commands
}
