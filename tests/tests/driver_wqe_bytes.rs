//! The bytes the driver writes for the device, read back from host memory and decoded with
//! the PRM layouts of `rnic-hw-regs` (not with the emulator): control, remote address,
//! atomic, data, inline and datagram segments, the doorbell record and the 64-bit doorbell.
//! The device does not run (auto-step off), so nothing consumes the WQEs.

#[path = "driver_fixture.rs"]
mod fixture;

use fixture::*;
use rnic_driver::ah::{AddressHandle, rdma_flow_label_to_udp_sport};
use rnic_driver::mr::Mr;
use rnic_driver::qp::{AddressVector, Qp, QpConfig, QpType};
use rnic_driver::wr::*;
use rnic_emulator::RunMode;
use rnic_hw_regs::wqe::{AtomicSeg, CtrlSeg, DataSeg, RaddrSeg, SendOpcode, WqeAv};
use std::sync::atomic::Ordering;
use zerocopy::FromBytes;

fn ring_bytes(qp: &Qp) -> (Vec<u8>, [u8; 8]) {
    let (sq, len, dbrec) = qp.sq_ring();
    let mut v = vec![0u8; len];
    let mut d = [0u8; 8];
    // SAFETY: the ring and the record are live while `qp` exists; volatile byte reads.
    unsafe {
        for (i, b) in v.iter_mut().enumerate() {
            *b = sq.as_ptr().add(i).read_volatile();
        }
        for (i, b) in d.iter_mut().enumerate() {
            *b = dbrec.as_ptr().add(i).read_volatile();
        }
    }
    (v, d)
}

fn seg<T: FromBytes>(b: &[u8], at: usize) -> T {
    T::read_from_prefix(&b[at..]).unwrap().0
}

#[test]
fn send_wqes_are_prm_segments() {
    let fx = open(RunMode::Deterministic);
    let cq = fx.cq(64);
    let qp = Qp::create(&fx.pd, &QpConfig::new(QpType::Rc, cq.clone(), cq.clone())).unwrap();
    let mr = Mr::alloc(&fx.pd, 4096, Access::ALL).unwrap();
    fx.dev.set_auto_step(false);
    fx.bus.record.store(true, Ordering::SeqCst);
    let sgl = [mr.sge(16, 100), mr.sge(0, 0), mr.sge(512, 28)];
    let res = [mr.sge(1024, 8)];
    qp.post_send(&[
        SendWr {
            wr_id: 1,
            op: SendOp::SendImm { imm: 0xDEAD_BEEF },
            payload: Payload::Inline(b"hello, inline world!"),
            flags: SendFlags::NONE,
            ud: None,
        },
        SendWr {
            wr_id: 2,
            op: SendOp::WriteImm {
                raddr: 0x1122_3344_5566_7788,
                rkey: 0xABCD_EF01,
                imm: 7,
            },
            payload: Payload::Sgl(&sgl),
            flags: SendFlags::SIGNALED | SendFlags::FENCE | SendFlags::SOLICITED,
            ud: None,
        },
        SendWr {
            wr_id: 3,
            op: SendOp::CmpSwap {
                raddr: 0x8000,
                rkey: 0x42,
                compare: 1,
                swap: 2,
            },
            payload: Payload::Sgl(&res),
            flags: SendFlags::SIGNALED,
            ud: None,
        },
    ])
    .unwrap();
    let (b, dbrec) = ring_bytes(&qp);
    // WQE 0 at WQEBB 0: ctrl + inline (4 + 20 bytes: 2 units) = 3 DS.
    let c: CtrlSeg = seg(&b, 0);
    assert_eq!(c.send_opcode(), Ok(SendOpcode::SendImm));
    assert_eq!((c.wqe_index(), c.qpn(), c.ds()), (0, qp.qpn(), 3));
    assert_eq!((c.fm_ce_se(), c.imm()), (0, 0xDEAD_BEEF));
    assert_eq!(
        u32::from_be_bytes(b[16..20].try_into().unwrap()),
        0x8000_0000 | 20
    );
    assert_eq!(&b[20..40], b"hello, inline world!");
    // WQE 1 at WQEBB 1: ctrl + raddr + 2 data segments (the empty SGE is skipped) = 4 DS.
    let c: CtrlSeg = seg(&b, 64);
    assert_eq!(c.send_opcode(), Ok(SendOpcode::RdmaWriteImm));
    assert_eq!((c.wqe_index(), c.ds(), c.imm()), (1, 4, 7));
    assert_eq!(
        c.fm_ce_se(),
        0x80 | 0x08 | 0x02,
        "fence, CQ_UPDATE, solicited"
    );
    let r: RaddrSeg = seg(&b, 64 + 16);
    assert_eq!((r.raddr(), r.rkey()), (0x1122_3344_5566_7788, 0xABCD_EF01));
    let d: DataSeg = seg(&b, 64 + 32);
    assert_eq!(
        (d.byte_count(), d.lkey(), d.addr()),
        (100, mr.lkey(), mr.addr() + 16)
    );
    let d: DataSeg = seg(&b, 64 + 48);
    assert_eq!((d.byte_count(), d.addr()), (28, mr.addr() + 512));
    // WQE 2 at WQEBB 2: ctrl + raddr + atomic + data(8) = 4 DS.
    let c: CtrlSeg = seg(&b, 128);
    assert_eq!(c.send_opcode(), Ok(SendOpcode::AtomicCs));
    assert_eq!((c.wqe_index(), c.ds(), c.fm_ce_se()), (2, 4, 0x08));
    let a: AtomicSeg = seg(&b, 128 + 32);
    assert_eq!((a.swap_add(), a.compare()), (2, 1));
    let d: DataSeg = seg(&b, 128 + 48);
    assert_eq!((d.byte_count(), d.addr()), (8, mr.addr() + 1024));
    // Doorbell record: receive counter 0, send counter 3 (WQEBBs); one doorbell with the
    // last WQE's first 8 bytes.
    assert_eq!(dbrec, [0, 0, 0, 0, 0, 0, 0, 3]);
    let w = fx.bus.writes64.lock().unwrap().clone();
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].0 % 4096, 0x800);
    assert_eq!(w[0].1, c.doorbell_qword());
    fx.dev.step();
    fx.dev.set_auto_step(true);
}

#[test]
fn ud_wqes_carry_the_address_vector() {
    let fx = open(RunMode::Deterministic);
    let cq = fx.cq(64);
    let qp = Qp::create(&fx.pd, &QpConfig::new(QpType::Ud, cq.clone(), cq.clone())).unwrap();
    let av = AddressVector {
        traffic_class: 0x20,
        flow_label: 0xABCDE,
        hop_limit: 9,
        sl: 2,
        ..fx.self_av()
    };
    let ah = AddressHandle::new(&fx.pd, &av).unwrap();
    fx.dev.set_auto_step(false);
    qp.post_send(&[SendWr {
        wr_id: 1,
        op: SendOp::Send,
        payload: Payload::Inline(b"x"),
        flags: SendFlags::SIGNALED,
        ud: Some(UdDest {
            ah: &ah,
            remote_qpn: 0x12_3456,
            remote_qkey: 0x8765_4321,
        }),
    }])
    .unwrap();
    let (b, _) = ring_bytes(&qp);
    let c: CtrlSeg = seg(&b, 0);
    assert_eq!((c.send_opcode(), c.ds()), (Ok(SendOpcode::Send), 5));
    let w: WqeAv = seg(&b, 16);
    assert_eq!((w.qkey(), w.dqp_dct()), (0x8765_4321, 0x12_3456));
    assert_eq!(w.rmac(), fx.hca.mac());
    assert_eq!(w.rgid(), av.dgid);
    assert!(w.grh());
    assert_eq!(
        (w.sgid_index(), w.hop_limit(), w.tclass(), w.sl()),
        (1, 9, 0x20, 2)
    );
    assert_eq!(w.flow_label(), 0xABCDE);
    assert_eq!(
        w.rlid(),
        rdma_flow_label_to_udp_sport(0xABCDE),
        "RoCE: UDP source port"
    );
    assert_eq!(
        u32::from_be_bytes(b[64..68].try_into().unwrap()),
        0x8000_0001
    );
    assert_eq!(b[68], b'x');
    fx.dev.step();
    fx.dev.set_auto_step(true);
}
