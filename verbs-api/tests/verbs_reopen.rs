//! Closing and reopening devices (its own process, so no other test holds them open): every
//! object keeps its context open, the last handle closes the device (firmware pages and DMA
//! mappings returned), and a pair member reopened later is linked to its partner again.

mod common;

use common::*;
use rnic_verbs::*;

#[test]
fn reopen_a_pair_member_and_talk_again() {
    let b = side("emu1", QpType::Rc);
    {
        let a = side("emu0", QpType::Rc);
        connect_pair(&a.qp, &b.qp, &ConnectOptions::default()).unwrap();
        let names: Vec<String> = devices().into_iter().map(|d| d.name).collect();
        assert!(names.contains(&"emu0".to_string()));
        // `a` (and with it emu0) goes away here.
    }
    b.qp.reset().unwrap();
    let a = side("emu0", QpType::Rc);
    assert!(a.qp.query().unwrap().qp_state == QpState::Reset);
    connect_pair(&a.qp, &b.qp, &ConnectOptions::default()).unwrap();
    write_inline_and_check(&a, &b, b"again");
}

#[test]
fn udp_devices_are_listed_while_open_and_their_port_is_freed() {
    let name = "emu:127.0.88.1";
    {
        let ctx = Context::open(name).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let _mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
        drop(ctx); // the region keeps the device open
        assert!(devices().iter().any(|d| d.name == name));
        // An IPv4 address option on an emulated device is refused.
        let o = OpenOptions {
            ipv4: Some(std::net::Ipv4Addr::new(10, 0, 0, 1)),
            ..OpenOptions::default()
        };
        assert!(Context::open_with("emu:127.0.88.2", &o).is_err());
    }
    assert!(!devices().iter().any(|d| d.name == name));
    // Closed: the UDP port is free for a new device at once.
    for _ in 0..3 {
        let ctx = Context::open(name).unwrap();
        assert_eq!(ctx.name(), name);
        let q = ctx.create_cq(4, None).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let qp = pd
            .create_qp(QpType::Ud, &q, &q)
            .sq_sig_all(true)
            .build()
            .unwrap();
        assert!(qp.query().unwrap().sq_sig_all);
    }
}
