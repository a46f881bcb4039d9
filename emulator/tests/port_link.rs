//! The port's `Link`: frames for addresses that are not the device's own leave through it,
//! frames it delivers are received. Two devices joined by a minimal in-test link run RC
//! SEND, WRITE, READ and an atomic; the transport issue brings the real links.

mod common;
#[path = "rig/mod.rs"]
mod rig;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use rig::{Access, Rig, SIGNALED, atomic, data, gid_of, op, raddr, segs};
use rnic_emulator::port::Link;
use rnic_emulator::wire::{IpRepr, Opcode, PacketRepr};
use rnic_hw_regs::cqe::CqeOpcode;
use rnic_hw_regs::ctx::QpSt;

type Queue = Arc<Mutex<VecDeque<Vec<u8>>>>;

/// One end of a lossless in-memory wire.
#[derive(Debug)]
struct End {
    tx: Queue,
    rx: Queue,
    sent: Arc<Mutex<u64>>,
    log: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Link for End {
    fn transmit(&mut self, frame: &[u8]) {
        *self.sent.lock().unwrap() += 1;
        self.log.lock().unwrap().push(frame.to_vec());
        self.tx.lock().unwrap().push_back(frame.to_vec());
    }

    fn receive(&mut self, buf: &mut Vec<u8>) -> bool {
        match self.rx.lock().unwrap().pop_front() {
            Some(f) => {
                buf.clear();
                buf.extend_from_slice(&f);
                true
            }
            None => false,
        }
    }
}

/// Steps both devices until neither has anything to do.
fn settle(a: &Rig, b: &Rig) {
    for _ in 0..10_000 {
        if a.h.dev.step() + b.h.dev.step() == 0 {
            return;
        }
    }
    panic!("the devices never settled");
}

#[test]
fn two_devices_over_a_link() {
    const IP_A: [u8; 4] = [10, 0, 0, 1];
    const IP_B: [u8; 4] = [10, 0, 0, 2];
    const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0xA];
    const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0xB];
    let mut ra = Rig::with_addr(IP_A, MAC_A);
    let mut rb = Rig::with_addr(IP_B, MAC_B);
    let ab: Queue = Arc::default();
    let ba: Queue = Arc::default();
    let sent_a = Arc::new(Mutex::new(0));
    let sent_b = Arc::new(Mutex::new(0));
    let log_a = Arc::new(Mutex::new(Vec::new()));
    ra.h.dev.set_link(Box::new(End {
        tx: ab.clone(),
        rx: ba.clone(),
        sent: sent_a.clone(),
        log: log_a.clone(),
    }));
    rb.h.dev.set_link(Box::new(End {
        tx: ba,
        rx: ab,
        sent: sent_b.clone(),
        log: Arc::default(),
    }));

    let mut ca = ra.cq(6);
    let mut cb = rb.cq(6);
    let mut a = ra.qp(QpSt::Rc, &ca, &ca, 6, 6);
    let mut b = rb.qp(QpSt::Rc, &cb, &cb, 6, 6);
    ra.init_qp(&a, true, true, true);
    rb.init_qp(&b, true, true, true);
    ra.rtr_rts_to(&a, b.qpn, 1, 0x100, 0, gid_of(IP_B), MAC_B);
    rb.rtr_rts_to(&b, a.qpn, 1, 0x100, 0, gid_of(IP_A), MAC_A);
    let src = ra.mr(4096, Access::ALL);
    let dst = rb.mr(4096, Access::ALL);

    // SEND of 3 packets.
    let msg: Vec<u8> = (0..700u32).map(|i| (i * 7) as u8).collect();
    ra.fill(&src, 0, &msg);
    let rc = rb.post_recv(&mut b, &[(dst.addr, 1024, dst.key)]);
    let w = ra.post(&mut a, op::SEND, SIGNALED, 0, &data(src.addr, 700, src.key));
    settle(&ra, &rb);
    let c = ra.one(&mut ca);
    assert_eq!((c.cqe_opcode(), c.wqe_counter()), (Ok(CqeOpcode::Req), w));
    let c = rb.one(&mut cb);
    assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::RespSend));
    assert_eq!((c.wqe_counter(), c.byte_cnt()), (rc, 700));
    assert_eq!(rb.read(&dst, 0, 700), msg);
    assert_eq!(
        *sent_a.lock().unwrap(),
        3,
        "three request packets on the wire"
    );
    assert_eq!(*sent_b.lock().unwrap(), 1, "one ACK");
    // The frames are byte-exact RoCE v2: addresses from the QP's path and the GID table,
    // UDP 4791 from the path's source port, SEND FIRST / MIDDLE / LAST with consecutive
    // PSNs from next_send_psn, AckReq on the last, a valid ICRC.
    let frames = log_a.lock().unwrap().clone();
    let expect = [
        (Opcode::RcSendFirst, 256),
        (Opcode::RcSendMiddle, 256),
        (Opcode::RcSendLast, 188),
    ];
    for (k, f) in frames.iter().enumerate() {
        let (p, payload) = PacketRepr::parse(f).expect("a valid frame with its ICRC");
        assert_eq!(p.eth.dst.0, MAC_B);
        assert_eq!(p.eth.src.0, MAC_A);
        let IpRepr::V4(ip) = p.ip else { panic!("IPv4") };
        assert_eq!((ip.src.octets(), ip.dst.octets(), ip.ttl), (IP_A, IP_B, 64));
        assert!(ip.dont_frag);
        assert_eq!(p.udp.dst_port, 4791);
        assert_eq!(p.udp.src_port, 0xC000 | (a.qpn as u16 & 0x3FFF));
        assert_eq!((p.bth.opcode, payload.len()), expect[k]);
        assert_eq!(p.bth.dest_qp, b.qpn);
        assert_eq!(p.bth.psn, 0x100 + k as u32);
        assert_eq!(p.bth.pkey, 0xFFFF);
        assert_eq!(p.bth.ack_req, k == 2);
        assert_eq!(payload, &msg[256 * k..256 * k + payload.len()]);
    }

    // WRITE, READ back, FETCH_ADD.
    let w = ra.post(
        &mut a,
        op::WRITE,
        SIGNALED,
        0,
        &segs(&[
            raddr(dst.addr + 1024, dst.key),
            data(src.addr, 300, src.key),
        ]),
    );
    settle(&ra, &rb);
    assert_eq!(ra.one(&mut ca).wqe_counter(), w);
    assert_eq!(rb.read(&dst, 1024, 300), &msg[..300]);
    ra.fill(&src, 1024, &[0; 300]);
    let w = ra.post(
        &mut a,
        op::READ,
        SIGNALED,
        0,
        &segs(&[
            raddr(dst.addr + 1024, dst.key),
            data(src.addr + 1024, 300, src.key),
        ]),
    );
    settle(&ra, &rb);
    let c = ra.one(&mut ca);
    assert_eq!((c.wqe_counter(), c.byte_cnt()), (w, 300));
    assert_eq!(ra.read(&src, 1024, 300), &msg[..300]);
    rb.fill(&dst, 2048, &40u64.to_be_bytes());
    ra.post(
        &mut a,
        op::FA,
        SIGNALED,
        0,
        &segs(&[
            raddr(dst.addr + 2048, dst.key),
            atomic(2, 0),
            data(src.addr + 2048, 8, src.key),
        ]),
    );
    settle(&ra, &rb);
    assert_eq!(ra.one(&mut ca).cqe_opcode(), Ok(CqeOpcode::Req));
    assert_eq!(ra.read(&src, 2048, 8), 40u64.to_be_bytes());
    assert_eq!(rb.read(&dst, 2048, 8), 42u64.to_be_bytes());
    assert_eq!(ra.counters().rx_dropped + rb.counters().rx_dropped, 0);
}
