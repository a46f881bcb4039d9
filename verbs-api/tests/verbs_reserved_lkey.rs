//! The reserved lkey through the safe API: QPs it creates are user QPs (no `rlky`), so an SGE
//! naming the reserved lkey (bus addresses, any PD) completes with a local protection error
//! instead of reaching another PD's memory, on the send gather and on the receive scatter.

mod common;

use common::*;
use rnic_hw_regs::cmd::QueryMkeyIn;
use rnic_verbs::*;

const SECRET: &[u8; 16] = b"another PD's key";

/// The bus address (IOVA) of byte 0 of `mr`, as the device translates it: what an attacker
/// guesses (DMA addresses are handed out in order). Read with QUERY_MKEY, so that the attack
/// below aims at the victim for sure.
fn iova_of(ctx: &Context, mr: &MemoryRegion) -> u64 {
    let mut q = QueryMkeyIn::new_cmd();
    q.set_mkey_index(mr.lkey() >> 8);
    let out = ctx
        .driver()
        .cmdq()
        .exec(&q, &[], &mut [])
        .expect("QUERY_MKEY");
    let mtt0 = &out.bsf0_klm0_pas_mtt0_1()[..8];
    let page = u64::from_be_bytes(mtt0.try_into().unwrap()) & !0xFFF;
    page + (mr.addr() & 0xFFF)
}

/// A victim region in its own PD on `ctx`'s device, holding [`SECRET`], and its bus address.
fn victim(ctx: &Context) -> (ProtectionDomain, MemoryRegion, u64) {
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    mr.write(0, SECRET).unwrap();
    let iova = iova_of(ctx, &mr);
    (pd, mr, iova)
}

/// An RC QP of its own PD on `ctx`'s device, connected to a fresh one on emu1.
fn attacker_on(ctx: &Context) -> (Side, Side) {
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(64, None).unwrap();
    let qp = pd.create_qp(QpType::Rc, &cq, &cq).build().unwrap();
    let a = Side {
        ctx: ctx.clone(),
        pd,
        cq,
        qp,
    };
    let b = side("emu1", QpType::Rc);
    connect_pair(&a.qp, &b.qp, &ConnectOptions::default()).unwrap();
    (a, b)
}

fn resd_lkey(ctx: &Context) -> u32 {
    ctx.driver().special_contexts().resd_lkey
}

#[test]
fn a_send_gathering_with_the_reserved_lkey_is_a_local_protection_error() {
    let ctx = Context::open("emu0").unwrap();
    let (_vpd, vmr, iova) = victim(&ctx);
    let (a, b) = attacker_on(&ctx);
    let sink = b.pd.reg_mr(64, rw()).unwrap();
    sink.fill(0, 64, 0xEE).unwrap();
    b.qp.post_recv(&[RecvWr::new(9, &[sink.sge(0, 64).unwrap()])])
        .unwrap();
    let steal = [Sge {
        addr: iova,
        len: SECRET.len() as u32,
        lkey: resd_lkey(&ctx),
    }];
    a.qp.post_send(&[SendWr::send(1, &steal).signaled()])
        .unwrap();
    let w = poll_one(&a.cq);
    assert_eq!((w.wr_id(), w.status()), (1, WcStatus::LocProtErr), "{w:?}");
    // Nothing left the device: the peer's receive is still posted, its buffer untouched.
    assert_empty(&b.cq);
    assert_eq!(sink.to_vec(0, 64).unwrap(), [0xEE; 64]);
    assert_eq!(vmr.to_vec(0, 16).unwrap(), SECRET);
}

#[test]
fn a_recv_scattering_with_the_reserved_lkey_is_a_local_protection_error() {
    let ctx = Context::open("emu0").unwrap();
    let (_vpd, vmr, iova) = victim(&ctx);
    let (a, b) = attacker_on(&ctx);
    let overwrite = [Sge {
        addr: iova,
        len: SECRET.len() as u32,
        lkey: resd_lkey(&ctx),
    }];
    a.qp.post_recv(&[RecvWr::new(2, &overwrite)]).unwrap();
    // The peer (an accomplice) sends 16 bytes meant to land in the victim.
    b.qp.post_send(&[SendWr::send(3, &[]).inline(&[0xAA; 16]).signaled()])
        .unwrap();
    let w = poll_one(&a.cq);
    assert_eq!((w.wr_id(), w.status()), (2, WcStatus::LocProtErr), "{w:?}");
    // The responder NAKs the SEND: the peer sees a remote operational error.
    let w = poll_one(&b.cq);
    assert_eq!((w.wr_id(), w.status()), (3, WcStatus::RemOpErr), "{w:?}");
    assert_eq!(
        vmr.to_vec(0, 16).unwrap(),
        SECRET,
        "no byte of the victim changed"
    );
}
