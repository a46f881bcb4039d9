//! Memory windows end to end, two emulated devices through the verbs API: a peer reaches a
//! region only through a bound window, with the window's rights and bounds; rebinding,
//! LOCAL_INV and SEND_WITH_INV revoke it (the requester sees a remote access error and no
//! byte at the target changes); cross-PD use and binds beyond the region or its rights fail.

use rnic_verbs::doc_fixture::Pair;
use rnic_verbs::*;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);
/// The target's bytes before any access.
const FILL: u8 = 0x5A;

/// One completion from `cq`.
fn one(cq: &CompletionQueue) -> WorkCompletion {
    let mut wc = [WorkCompletion::default(); 1];
    assert_eq!(cq.poll_blocking(&mut wc, T).unwrap(), 1, "no completion");
    wc[0]
}

/// A 4 KiB target region on `b` that windows may be bound to, filled with [`FILL`].
fn target(p: &Pair, access: AccessFlags) -> MemoryRegion {
    let mr = p.pb.reg_mr(4096, access | AccessFlags::MW_BIND).unwrap();
    mr.fill(0, 4096, FILL).unwrap();
    mr
}

/// A fresh pair, a filled target region on `b` (local write, MW_BIND) and a window of
/// `mw_type` in the same PD.
fn setup(mw_type: MwType) -> (Pair, MemoryRegion, MemoryWindow) {
    let p = Pair::connected().unwrap();
    let mr = target(&p, AccessFlags::LOCAL_WRITE);
    let mw = p.pb.alloc_mw(mw_type).unwrap();
    (p, mr, mw)
}

/// Binds type-1 `mw` on `qb` and checks the bind completed.
fn bind1(
    p: &Pair,
    mw: &MemoryWindow,
    mr: &MemoryRegion,
    off: u64,
    len: u64,
    a: AccessFlags,
) -> u32 {
    let rkey = p.qb.bind_mw(10, mw, mr, off, len, a).unwrap();
    let wc = one(&p.cb);
    assert_eq!(
        (wc.status(), wc.opcode()),
        (WcStatus::Success, WcOpcode::BindMw)
    );
    rkey
}

/// Binds type-2 `mw` on `qb` as key `rkey` and returns the completion's status.
fn bind2(
    p: &Pair,
    mw: &MemoryWindow,
    rkey: u32,
    mr: &MemoryRegion,
    off: u64,
    len: u64,
    a: AccessFlags,
) -> WcStatus {
    p.qb.post_send(&[SendWr::bind_mw(11, mw, rkey, mr, off, len, a).signaled()])
        .unwrap();
    let wc = one(&p.cb);
    if wc.is_success() {
        assert_eq!(wc.opcode(), WcOpcode::BindMw);
        mw.set_rkey(rkey);
    }
    wc.status()
}

/// WRITEs `data` from `a` to `addr` under `rkey`; the requester's completion status.
fn write(p: &Pair, addr: u64, rkey: u32, data: &[u8]) -> WcStatus {
    p.qa.post_send(&[SendWr::write(1, &[], RemoteAddr { addr, rkey })
        .inline(data)
        .signaled()])
        .unwrap();
    one(&p.ca).status()
}

/// READs `len` bytes at `addr` under `rkey` into a fresh local region; status and bytes.
fn read(p: &Pair, addr: u64, rkey: u32, len: u32) -> (WcStatus, Vec<u8>) {
    let local = p.pa.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    p.qa.post_send(&[
        SendWr::read(2, &[local.sge(0, len).unwrap()], RemoteAddr { addr, rkey }).signaled(),
    ])
    .unwrap();
    let st = one(&p.ca).status();
    (st, local.to_vec(0, len as usize).unwrap())
}

/// Every byte of the target is still [`FILL`].
fn untouched(mr: &MemoryRegion) -> bool {
    mr.to_vec(0, 4096).unwrap().iter().all(|&b| b == FILL)
}

#[test]
fn write_and_read_through_a_bound_type1_window() {
    let (p, mr, mw) = setup(MwType::One);
    let rw = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let rkey = bind1(&p, &mw, &mr, 1024, 256, rw);
    assert_eq!(rkey, mw.rkey());
    assert_eq!(rkey >> 8, mw.rkey() >> 8);
    assert_eq!(
        write(&p, mr.addr() + 1024 + 16, rkey, b"through"),
        WcStatus::Success
    );
    assert_eq!(mr.to_vec(1024 + 16, 7).unwrap(), b"through");
    let (st, got) = read(&p, mr.addr() + 1024 + 16, rkey, 7);
    assert_eq!((st, got.as_slice()), (WcStatus::Success, &b"through"[..]));
    // The region's own rkey grants nothing: the region has no remote rights.
    assert_eq!(
        write(&p, mr.addr(), mr.rkey(), b"x"),
        WcStatus::RemAccessErr
    );
    assert_eq!(mr.to_vec(0, 1).unwrap(), [FILL]);
}

/// FETCH_ADD of 2 from `a` at `addr` under `rkey`; the requester's status and the value it
/// fetched.
fn fetch_add(p: &Pair, addr: u64, rkey: u32) -> (WcStatus, u64) {
    let old = p.pa.reg_mr(8, AccessFlags::LOCAL_WRITE).unwrap();
    let sge = old.sge(0, 8).unwrap();
    p.qa.post_send(&[SendWr::fetch_add(4, &sge, RemoteAddr { addr, rkey }, 2).signaled()])
        .unwrap();
    (one(&p.ca).status(), old.read_u64(0).unwrap())
}

#[test]
fn atomics_through_a_window_need_its_atomic_right() {
    let (p, mr, mw) = setup(MwType::One);
    mr.write_u64(512, 40).unwrap();
    let rkey = bind1(&p, &mw, &mr, 512, 8, AccessFlags::REMOTE_ATOMIC);
    assert_eq!(
        fetch_add(&p, mr.addr() + 512, rkey),
        (WcStatus::Success, 40)
    );
    assert_eq!(mr.read_u64(512).unwrap(), 42);
    // A window without the atomic right refuses the same atomic.
    let (p, mr, _mw, rkey) = window_pair(512, 8, AccessFlags::REMOTE_WRITE);
    assert_eq!(
        fetch_add(&p, mr.addr() + 512, rkey).0,
        WcStatus::RemAccessErr
    );
    assert!(untouched(&mr));
}

#[test]
fn a_rebound_window_refuses_its_old_key() {
    let (p, mr, mw) = setup(MwType::One);
    let old = bind1(&p, &mw, &mr, 0, 512, AccessFlags::REMOTE_WRITE);
    let new = bind1(&p, &mw, &mr, 0, 512, AccessFlags::REMOTE_WRITE);
    assert_ne!(old, new);
    assert_eq!(write(&p, mr.addr(), old, b"stale"), WcStatus::RemAccessErr);
    assert!(untouched(&mr));
}

#[test]
fn a_rebound_window_moves_its_range() {
    let (p, mr, mw) = setup(MwType::One);
    bind1(&p, &mw, &mr, 0, 512, AccessFlags::REMOTE_WRITE);
    let new = bind1(&p, &mw, &mr, 2048, 512, AccessFlags::REMOTE_WRITE);
    // The new key, the old range: outside the window now.
    assert_eq!(
        write(&p, mr.addr() + 16, new, b"moved"),
        WcStatus::RemAccessErr
    );
    assert!(untouched(&mr));
}

#[test]
fn local_inv_revokes_a_type2_window() {
    let (p, mr, mw) = setup(MwType::Two);
    let rkey = mw.next_rkey();
    assert_eq!(
        bind2(&p, &mw, rkey, &mr, 0, 4096, AccessFlags::REMOTE_WRITE),
        WcStatus::Success
    );
    assert_eq!(write(&p, mr.addr() + 8, rkey, b"ok"), WcStatus::Success);
    assert_eq!(mr.to_vec(8, 2).unwrap(), b"ok");
    mr.fill(0, 4096, FILL).unwrap();
    p.qb.post_send(&[SendWr::local_inv(12, rkey).signaled()])
        .unwrap();
    let wc = one(&p.cb);
    assert_eq!(
        (wc.status(), wc.opcode()),
        (WcStatus::Success, WcOpcode::LocalInv)
    );
    assert_eq!(
        write(&p, mr.addr() + 8, rkey, b"no"),
        WcStatus::RemAccessErr
    );
    assert!(untouched(&mr));
}

#[test]
fn a_type2_window_binds_again_only_after_invalidation() {
    let (p, mr, mw) = setup(MwType::Two);
    let k1 = mw.next_rkey();
    assert_eq!(
        bind2(&p, &mw, k1, &mr, 0, 64, AccessFlags::REMOTE_READ),
        WcStatus::Success
    );
    // Bound, not free: a second bind is an MW bind error.
    let k2 = mw.next_rkey();
    assert_eq!(
        bind2(&p, &mw, k2, &mr, 0, 64, AccessFlags::REMOTE_READ),
        WcStatus::MwBindErr
    );
}

#[test]
fn send_with_inv_revokes_a_type2_window() {
    let (p, mr, mw) = setup(MwType::Two);
    let rkey = mw.next_rkey();
    assert_eq!(
        bind2(&p, &mw, rkey, &mr, 0, 4096, AccessFlags::REMOTE_WRITE),
        WcStatus::Success
    );
    p.qb.post_recv(&[RecvWr::new(20, &[])]).unwrap();
    p.qa.post_send(&[SendWr::send_with_inv(3, &[], rkey).signaled()])
        .unwrap();
    assert_eq!(one(&p.ca).status(), WcStatus::Success);
    let wc = one(&p.cb);
    assert_eq!(wc.status(), WcStatus::Success);
    assert_eq!(wc.invalidated_rkey(), Some(rkey));
    assert_eq!(write(&p, mr.addr(), rkey, b"late"), WcStatus::RemAccessErr);
    assert!(untouched(&mr));
}

#[test]
fn send_with_inv_of_a_type1_window_is_refused() {
    let (p, mr, mw) = setup(MwType::One);
    let rkey = bind1(&p, &mw, &mr, 0, 64, AccessFlags::REMOTE_WRITE);
    p.qb.post_recv(&[RecvWr::new(20, &[])]).unwrap();
    p.qa.post_send(&[SendWr::send_with_inv(3, &[], rkey).signaled()])
        .unwrap();
    assert_eq!(one(&p.ca).status(), WcStatus::RemInvReqErr);
}

/// A fresh pair whose `b` side bound a type-1 window over `len` bytes at `off` of a filled
/// target region with `access`; the window's rkey.
fn window_pair(off: u64, len: u64, access: AccessFlags) -> (Pair, MemoryRegion, MemoryWindow, u32) {
    let (p, mr, mw) = setup(MwType::One);
    let rkey = bind1(&p, &mw, &mr, off, len, access);
    (p, mr, mw, rkey)
}

#[test]
fn out_of_bounds_and_wrong_rights_accesses_fail() {
    // Inside the region, across the window's end; then before its start.
    for (at, data) in [(256 + 250, &b"overrun"[..]), (255, &b"under"[..])] {
        let (p, mr, _mw, rkey) = window_pair(256, 256, AccessFlags::REMOTE_WRITE);
        assert_eq!(
            write(&p, mr.addr() + at, rkey, data),
            WcStatus::RemAccessErr
        );
        assert!(untouched(&mr));
    }
    // A write-only window cannot be read.
    let (p, mr, _mw, rkey) = window_pair(0, 256, AccessFlags::REMOTE_WRITE);
    assert_eq!(read(&p, mr.addr(), rkey, 8).0, WcStatus::RemAccessErr);
    // A read-only window cannot be written.
    let (p, mr, _mw, rkey) = window_pair(0, 256, AccessFlags::REMOTE_READ);
    assert_eq!(write(&p, mr.addr(), rkey, b"ro"), WcStatus::RemAccessErr);
    assert!(untouched(&mr));
}

#[test]
fn cross_pd_windows_and_regions_are_refused() {
    // A window of another PD than the QP that binds it.
    let p = Pair::connected().unwrap();
    let mr = target(&p, AccessFlags::LOCAL_WRITE);
    let other = p.b.alloc_pd().unwrap();
    let mw = other.alloc_mw(MwType::Two).unwrap();
    let rkey = mw.next_rkey();
    assert_eq!(
        bind2(&p, &mw, rkey, &mr, 0, 64, AccessFlags::REMOTE_WRITE),
        WcStatus::MwBindErr
    );

    // A window bound to a region of another PD.
    let p = Pair::connected().unwrap();
    let other = p.b.alloc_pd().unwrap();
    let far = other
        .reg_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND)
        .unwrap();
    let mw = p.pb.alloc_mw(MwType::Two).unwrap();
    let rkey = mw.next_rkey();
    assert_eq!(
        bind2(&p, &mw, rkey, &far, 0, 64, AccessFlags::REMOTE_WRITE),
        WcStatus::MwBindErr
    );

    // A region of another PD than the responder QP, reached by its own rkey.
    let p = Pair::connected().unwrap();
    let other = p.b.alloc_pd().unwrap();
    let far = other
        .reg_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)
        .unwrap();
    far.fill(0, 4096, FILL).unwrap();
    assert_eq!(
        write(&p, far.addr(), far.rkey(), b"pd"),
        WcStatus::RemAccessErr
    );
    assert!(untouched(&far));
}

#[test]
fn binds_beyond_the_region_or_its_rights_fail() {
    // Beyond the region's end.
    let (p, mr, mw) = setup(MwType::One);
    p.qb.bind_mw(1, &mw, &mr, 4000, 200, AccessFlags::REMOTE_READ)
        .unwrap();
    assert_eq!(one(&p.cb).status(), WcStatus::MwBindErr);

    // Remote write over a region without local write (IBTA 10.6.7.2).
    let p = Pair::connected().unwrap();
    let mr = target(&p, AccessFlags::REMOTE_READ);
    let mw = p.pb.alloc_mw(MwType::Two).unwrap();
    let rkey = mw.next_rkey();
    assert_eq!(
        bind2(&p, &mw, rkey, &mr, 0, 64, AccessFlags::REMOTE_WRITE),
        WcStatus::MwBindErr
    );
    // (The failed bind put `qb` in ERR, as any failed send WQE does: its window is not
    // reachable through this pair any more.)
    assert_eq!(p.qb.query().unwrap().qp_state, QpState::Err);

    // A region registered without MW_BIND: refused when posting.
    let p = Pair::connected().unwrap();
    let mr = p.pb.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let mw = p.pb.alloc_mw(MwType::One).unwrap();
    let e =
        p.qb.bind_mw(1, &mw, &mr, 0, 64, AccessFlags::REMOTE_READ)
            .unwrap_err();
    assert!(matches!(
        e,
        Error::Post {
            kind: PostErrorKind::MrNoMwBind,
            ..
        }
    ));
    // ibv_bind_mw is for type 1; a type-2 window is refused.
    let mr = target(&p, AccessFlags::LOCAL_WRITE);
    let mw2 = p.pb.alloc_mw(MwType::Two).unwrap();
    assert!(
        p.qb.bind_mw(1, &mw2, &mr, 0, 64, AccessFlags::REMOTE_READ)
            .is_err()
    );
    // Local rights are not a window's to grant.
    let e =
        p.qb.bind_mw(1, &mw, &mr, 0, 64, AccessFlags::LOCAL_WRITE)
            .unwrap_err();
    assert!(matches!(
        e,
        Error::Post {
            kind: PostErrorKind::BadMwBind,
            ..
        }
    ));
}

#[test]
fn device_reports_memory_windows() {
    let ctx = Context::open("emu0").unwrap();
    let attr = ctx.query_device();
    assert!(attr.max_mw > 0);
    assert_eq!(attr.max_mw, attr.max_mr);
    let mw = ctx.alloc_pd().unwrap().alloc_mw(MwType::One).unwrap();
    mw.dealloc().unwrap();
}
