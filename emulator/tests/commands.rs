//! The command processor, played from the host side with hand-built commands: the bring-up,
//! the life-cycle rules, firmware pages, capabilities, delivery errors and the vport, GID,
//! PD and UAR commands. Queue and memory-key objects are in `commands_objects.rs`.

mod common;

use common::host::{Host, Reply};
use rnic_emulator::Profile;
use rnic_hw_regs::caps::CmdHcaCap;
use rnic_hw_regs::cmd::{self, CmdIn, op_mod};
use rnic_hw_regs::cmdq::CmdMailbox;
use rnic_hw_regs::eqe::{Eqe, EventType};
use rnic_hw_regs::status::{CmdStatus, DeliveryStatus};
use zerocopy::{FromBytes, IntoBytes};

/// QUERY_HCA_CAP of `cap_type`, current (`cur`) or max.
fn query_cap(h: &mut Host, cap_type: u16, cur: bool) -> cmd::QueryHcaCapOut {
    let mut i = cmd::QueryHcaCapIn::new_cmd();
    i.set_op_mod(op_mod::query_hca_cap(cap_type, u16::from(cur)));
    h.ok(&i, &[]).view()
}

/// The general capabilities, current or max.
fn general(h: &mut Host, cur: bool) -> CmdHcaCap {
    *query_cap(h, op_mod::HCA_CAP_GENERAL, cur)
        .capability()
        .cmd_hca_cap()
}

/// SET_HCA_CAP of `cap_type` with `f` applied to the current block.
fn set_cap(h: &mut Host, cap_type: u16, f: impl FnOnce(&mut cmd::SetHcaCapIn)) -> Reply {
    let cur = query_cap(h, cap_type, true);
    let mut i = cmd::SetHcaCapIn::new_cmd();
    i.set_op_mod(op_mod::set_hca_cap(cap_type));
    *i.capability_mut() = *cur.capability();
    f(&mut i);
    h.exec(&i, &[])
}

/// ENABLE_HCA, ISSI and the boot pages: ready for caps and init pages.
fn enabled(profile: Profile) -> Host {
    let mut h = Host::new(profile);
    h.enable_hca();
    let mut s = cmd::SetIssiIn::new_cmd();
    s.set_current_issi(1);
    h.ok(&s, &[]);
    let boot = h.query_pages(op_mod::QUERY_PAGES_BOOT);
    assert!(h.give_pages(boot as usize).is_ok());
    h
}

#[test]
fn bring_up_hands_out_the_connectx4_numbers() {
    let mut h = Host::small();
    let b = h.bring_up();
    assert_eq!((b.uar, b.eqn, b.pd), (0x10, 0x10, 1));
    let c = h.dev.counters();
    assert_eq!(c.command_errors, 0);
    assert_eq!(c.delivery_errors, 0);
    assert_eq!(h.dev.pages_held(), 4 + 32);
    assert_eq!(h.alloc_uar(), 0x11);
    assert_eq!(h.alloc_pd(), 2);
}

#[test]
fn every_command_before_enable_hca_is_bad_system_state() {
    let mut h = Host::small();
    for op in cmd::CmdOpcode::ALL {
        if *op == cmd::CmdOpcode::EnableHca {
            continue;
        }
        let mut input = vec![0u8; 0x200];
        input[..2].copy_from_slice(&op.code().to_be_bytes());
        let r = h.exec_raw(&input, 0x100);
        assert_eq!(r.cmd_status(), CmdStatus::BadSysState, "{op}");
    }
    h.enable_hca();
    // Objects need INIT_HCA.
    let r = h.exec(&cmd::AllocPdIn::new_cmd(), &[]);
    r.expect_status(CmdStatus::BadSysState);
    let r = h.exec(&cmd::EnableHcaIn::new_cmd(), &[]);
    r.expect_status(CmdStatus::BadSysState);
}

#[test]
fn init_hca_waits_for_its_pages_and_runs_once() {
    let mut h = enabled(Profile::default());
    let init = h.query_pages(op_mod::QUERY_PAGES_INIT);
    assert_eq!(init, 32);
    assert_eq!(h.query_pages(op_mod::QUERY_PAGES_BOOT), 0);
    assert!(h.give_pages(31).is_ok());
    let r = h.exec(&cmd::InitHcaIn::new_cmd(), &[]);
    r.expect_status(CmdStatus::NoResources);
    assert_eq!(h.query_pages(op_mod::QUERY_PAGES_INIT), 1);
    assert!(h.give_pages(1).is_ok());
    // The 16-byte INIT_HCA the 2016 kernel sent is accepted.
    let r = h.exec_raw(&cmd::InitHcaIn::new_cmd().as_bytes()[..16], 0x10);
    assert!(r.is_ok());
    let r = h.exec(&cmd::InitHcaIn::new_cmd(), &[]);
    r.expect_status(CmdStatus::BadSysState);
    // Nothing to take back while initialized.
    let (r, n) = h.take_pages(10);
    assert!(r.is_ok());
    assert_eq!(n, 0);
}

#[test]
fn teardown_then_take_returns_every_page_and_disable_needs_them_back() {
    let mut h = Host::small();
    h.bring_up();
    let r = h.exec(&cmd::DisableHcaIn::new_cmd(), &[]);
    r.expect_status(CmdStatus::BadSysState);
    h.ok(&cmd::TeardownHcaIn::new_cmd(), &[]);
    // Objects are gone with the teardown.
    let r = h.exec(&cmd::AllocPdIn::new_cmd(), &[]);
    r.expect_status(CmdStatus::BadSysState);
    let r = h.exec(&cmd::DisableHcaIn::new_cmd(), &[]);
    r.expect_status(CmdStatus::BadSysState);
    let (r, n) = h.take_pages(10);
    assert!(r.is_ok());
    assert_eq!(n, 10);
    let (_, n) = h.take_pages(100);
    assert_eq!(n, 26);
    assert_eq!(h.dev.pages_held(), 0);
    assert!(h.fw_pages.is_empty());
    h.ok(&cmd::DisableHcaIn::new_cmd(), &[]);
    // And the device starts over.
    h.bring_up();
}

#[test]
fn bad_page_lists_are_refused() {
    let mut h = enabled(Profile::default());
    let mut i = cmd::ManagePagesIn::new_cmd();
    i.set_op_mod(op_mod::MANAGE_PAGES_GIVE);
    i.set_input_num_entries(2);
    // Shorter than the list.
    h.exec(&i, &0x1000u64.to_be_bytes())
        .expect_status(CmdStatus::BadInputLength);
    // Misaligned.
    let page = h.alloc(4096);
    let list = [(page + 8).to_be_bytes(), (page).to_be_bytes()].concat();
    h.exec(&i, &list).expect_status(CmdStatus::BadParam);
    // Twice the same page.
    let list = [page.to_be_bytes(), page.to_be_bytes()].concat();
    h.exec(&i, &list).expect_status(CmdStatus::BadParam);
    // A page the host never mapped: an IOMMU fault, counted.
    let faults = h.dev.counters().iommu_faults;
    let list = [page.to_be_bytes(), 0x7_0000_0000u64.to_be_bytes()].concat();
    h.exec(&i, &list).expect_status(CmdStatus::BadParam);
    assert!(h.dev.counters().iommu_faults > faults);
    assert_eq!(h.dev.pages_held(), 4, "a refused list gives nothing");
    // Unknown mode, other function.
    let mut q = cmd::QueryPagesIn::new_cmd();
    q.set_op_mod(7);
    h.exec(&q, &[]).expect_status(CmdStatus::BadOp);
    let mut q = cmd::QueryPagesIn::new_cmd();
    q.set_op_mod(1);
    q.set_function_id(3);
    h.exec(&q, &[]).expect_status(CmdStatus::BadParam);
    // Take with no room for the pages asked for.
    let mut t = cmd::ManagePagesIn::new_cmd();
    t.set_op_mod(op_mod::MANAGE_PAGES_TAKE);
    t.set_input_num_entries(4);
    h.exec(&t, &[]).expect_status(CmdStatus::BadOutputLength);
}

#[test]
fn run_time_page_requests_go_through_the_eq() {
    let mut h = Host::small();
    h.init_hca();
    let uar = h.alloc_uar();
    let (eqn, eq_iova) = h.create_eq(4, uar, 0, &[EventType::PageRequest.raw()]);
    assert_eq!(eqn, 0x10);
    assert_eq!(h.query_pages(op_mod::QUERY_PAGES_REGULAR), 0);
    assert!(h.dev.request_pages(3));
    let eqe = Eqe::read_from_bytes(&h.read_mem(eq_iova, 64)).unwrap();
    assert_eq!(eqe.event_type(), EventType::PageRequest.raw());
    assert_eq!((eqe.func_id(), eqe.num_pages_signed()), (0, 3));
    assert!(!eqe.owner(), "first pass: owner 0");
    assert_eq!(h.query_pages(op_mod::QUERY_PAGES_REGULAR), 3);
    assert!(h.give_pages(3).is_ok());
    assert_eq!(h.query_pages(op_mod::QUERY_PAGES_REGULAR), 0);
    // Firmware gives two back.
    assert!(h.dev.request_pages(-2));
    let eqe = Eqe::read_from_bytes(&h.read_mem(eq_iova + 64, 64)).unwrap();
    assert_eq!(eqe.num_pages_signed(), -2);
    assert_eq!(h.query_pages(op_mod::QUERY_PAGES_REGULAR), -2);
    let (_, n) = h.take_pages(5);
    assert_eq!(n, 2);
    // A request the host cannot satisfy.
    assert!(h.dev.request_pages(4));
    let mut i = cmd::ManagePagesIn::new_cmd();
    i.set_op_mod(op_mod::MANAGE_PAGES_CANT_GIVE);
    h.ok(&i, &[]);
    assert_eq!(h.query_pages(op_mod::QUERY_PAGES_REGULAR), 0);
}

#[test]
fn command_completions_post_an_eqe_when_subscribed() {
    let mut h = Host::small();
    h.init_hca();
    let uar = h.alloc_uar();
    let (_, eq_iova) = h.create_eq(3, uar, 1, &[EventType::Cmd.raw()]);
    // CREATE_EQ itself completes into the new EQ.
    let eqe = Eqe::read_from_bytes(&h.read_mem(eq_iova, 64)).unwrap();
    assert_eq!(eqe.event_type(), EventType::Cmd.raw());
    assert_eq!(eqe.cmd_vector(), 1, "slot 0");
    h.ok(&cmd::NopIn::new_cmd(), &[]);
    let eqe = Eqe::read_from_bytes(&h.read_mem(eq_iova + 64, 64)).unwrap();
    assert_eq!(eqe.event_type(), EventType::Cmd.raw());
}

#[test]
fn capabilities_model_the_connectx4() {
    let mut h = enabled(Profile::connectx4());
    let (max, cur) = (general(&mut h, false), general(&mut h, true));
    assert_eq!((max.log_max_qp(), cur.log_max_qp()), (23, 14));
    assert_eq!((max.cmdif_checksum(), cur.cmdif_checksum()), (3, 0));
    assert_eq!(max.log_max_qp_sz(), 15);
    assert_eq!((max.log_max_cq_sz(), max.log_max_cq()), (22, 24));
    assert_eq!((max.max_wqe_sz_sq(), max.max_wqe_sz_rq()), (1024, 512));
    assert_eq!(max.device_frequency_mhz(), 275);
    assert_eq!(max.log_max_pd(), 24);
    assert!(max.roce() && max.atomic() && max.rc() && max.uc() && max.ud());
    let roce = *query_cap(&mut h, op_mod::HCA_CAP_ROCE, true)
        .capability()
        .roce_cap();
    assert_eq!(roce.r_roce_dest_udp_port(), 4791);
    assert_eq!(roce.roce_address_table_size(), 256);
    let atomic = *query_cap(&mut h, op_mod::HCA_CAP_ATOMIC, false)
        .capability()
        .atomic_caps();
    assert!(!atomic.supported_atomic_req_8B_endianness_mode_1());

    // SET_HCA_CAP: within the max, then beyond it.
    assert!(
        set_cap(&mut h, 0, |i| i
            .capability_mut()
            .cmd_hca_cap_mut()
            .set_log_max_qp(17))
        .is_ok()
    );
    assert_eq!(general(&mut h, true).log_max_qp(), 17);
    set_cap(&mut h, 0, |i| {
        i.capability_mut().cmd_hca_cap_mut().set_log_max_qp(24)
    })
    .expect_status(CmdStatus::BadParam);
    set_cap(&mut h, 0, |i| {
        i.capability_mut().cmd_hca_cap_mut().set_log_uar_page_sz(9)
    })
    .expect_status(CmdStatus::BadParam);
    set_cap(&mut h, 0, |i| {
        i.capability_mut().cmd_hca_cap_mut().set_uar_4k(true)
    })
    .expect_status(CmdStatus::BadParam);
    set_cap(&mut h, 3, |i| {
        i.capability_mut()
            .atomic_caps_mut()
            .set_atomic_req_8B_endianness_mode(1)
    })
    .expect_status(CmdStatus::BadParam);
    set_cap(&mut h, 4, |i| {
        i.capability_mut()
            .roce_cap_mut()
            .set_sw_r_roce_src_udp_port(true)
    })
    .expect_status(CmdStatus::BadParam);
    // Read-only fields are ignored, as firmware ignores them.
    assert!(
        set_cap(&mut h, 0, |i| i
            .capability_mut()
            .cmd_hca_cap_mut()
            .set_log_max_cq(1))
        .is_ok()
    );
    assert_eq!(general(&mut h, true).log_max_cq(), 24);
    // Unknown cap type, set with the mode bit.
    let mut q = cmd::QueryHcaCapIn::new_cmd();
    q.set_op_mod(op_mod::query_hca_cap(5, 1));
    h.exec(&q, &[]).expect_status(CmdStatus::BadOp);
    let mut s = cmd::SetHcaCapIn::new_cmd();
    s.set_op_mod(1);
    h.exec(&s, &[]).expect_status(CmdStatus::BadOp);
    // After INIT_HCA the caps are fixed.
    let init = h.query_pages(op_mod::QUERY_PAGES_INIT);
    assert_eq!(init, 12_868);
    assert!(h.give_pages(init as usize).is_ok());
    h.ok(&cmd::InitHcaIn::new_cmd(), &[]);
    set_cap(&mut h, 0, |_| {}).expect_status(CmdStatus::BadSysState);
}

#[test]
fn atomic_endianness_mode_is_honoured_where_supported() {
    let mut h = enabled(Profile::default());
    assert!(
        set_cap(&mut h, 3, |i| {
            i.capability_mut()
                .atomic_caps_mut()
                .set_atomic_req_8B_endianness_mode(1)
        })
        .is_ok()
    );
    let a = *query_cap(&mut h, op_mod::HCA_CAP_ATOMIC, true)
        .capability()
        .atomic_caps();
    assert_eq!(a.atomic_req_8B_endianness_mode(), 1);
    // ODP cannot be enabled; checksums can be turned on.
    set_cap(&mut h, 2, |i| {
        i.capability_mut().odp_cap_mut().set_sig(true)
    })
    .expect_status(CmdStatus::BadParam);
    assert!(
        set_cap(&mut h, 0, |i| i
            .capability_mut()
            .cmd_hca_cap_mut()
            .set_cmdif_checksum(3))
        .is_ok()
    );
}

#[test]
fn issi_and_adapter() {
    let mut h = Host::small();
    h.enable_hca();
    let o: cmd::QueryIssiOut = h.ok(&cmd::QueryIssiIn::new_cmd(), &[]).view();
    assert_eq!((o.current_issi(), o.supported_issi_dw0()), (0, 2));
    let mut s = cmd::SetIssiIn::new_cmd();
    s.set_current_issi(2);
    h.exec(&s, &[]).expect_status(CmdStatus::BadParam);
    s.set_current_issi(1);
    h.ok(&s, &[]);
    let o: cmd::QueryIssiOut = h.ok(&cmd::QueryIssiIn::new_cmd(), &[]).view();
    assert_eq!(o.current_issi(), 1);
    let a: cmd::QueryAdapterOut = h.ok(&cmd::QueryAdapterIn::new_cmd(), &[]).view();
    let p = a.query_adapter_struct();
    assert_eq!((p.ieee_vendor_id(), p.vsd_vendor_id()), (0x2C9, 0x15B3));
    let mut nop = cmd::NopIn::new_cmd();
    nop.set_op_mod(1);
    h.exec(&nop, &[]).expect_status(CmdStatus::BadOp);
}

#[test]
fn host_endianness_register() {
    let mut h = Host::small();
    h.enable_hca();
    let mut w = cmd::AccessRegisterIn::new_cmd();
    w.set_register_id(cmd::REG_HOST_ENDIANNESS);
    let mut data = [0u8; 16];
    data[0] = 0x80;
    h.ok(&w, &data);
    let mut r = cmd::AccessRegisterIn::new_cmd();
    r.set_register_id(cmd::REG_HOST_ENDIANNESS);
    r.set_op_mod(op_mod::ACCESS_REG_READ);
    let out = h.exec_out(&r, &[0; 16], 0x20);
    assert!(out.is_ok());
    assert_eq!(out.out[0x10], 0x80);
    // Unknown register; a write without its data.
    let mut u = cmd::AccessRegisterIn::new_cmd();
    u.set_register_id(0x5003);
    h.exec(&u, &[0; 16]).expect_status(CmdStatus::BadParam);
    h.exec(&w, &[]).expect_status(CmdStatus::BadInputLength);
}

/// Corrupts one thing of a correct 3-block command and checks the delivery status.
#[test]
fn delivery_errors_have_their_prm_status() {
    let mut h = Host::small();
    h.enable_hca();
    let mut big = cmd::SetHcaCapIn::new_cmd();
    big.set_op_mod(0);
    let input = big.as_bytes().to_vec();
    type Tweak = fn(&mut rnic_hw_regs::cmdq::CmdqEntry, &mut [CmdMailbox], &mut [CmdMailbox]);
    let cases: [(Tweak, DeliveryStatus); 6] = [
        (|e, _, _| e.set_cmd_type(3), DeliveryStatus::BadCommandType),
        (|_, i, _| i[1].set_token(0xEE), DeliveryStatus::TokenError),
        (
            |_, i, _| i[2].set_block_number(7),
            DeliveryStatus::BadBlockNumber,
        ),
        (
            |e, _, _| {
                let p = e.input_mailbox_pointer();
                e.set_input_mailbox_pointer(p + 0x40)
            },
            DeliveryStatus::InputPointerMisaligned,
        ),
        (
            |e, _, _| e.set_input_mailbox_pointer(0),
            DeliveryStatus::InputLengthError,
        ),
        (
            |e, _, _| e.set_output_length(1 << 30),
            DeliveryStatus::OutputLengthError,
        ),
    ];
    for (tweak, want) in cases {
        let r = h.exec_with(&input, 0x10, tweak);
        assert_eq!(r.delivery_status(), want);
    }
    // An output chain with a misaligned pointer.
    let q = cmd::QueryHcaCapIn::new_cmd();
    let r = h.exec_with(q.as_bytes(), 0x1010, |e, _, _| {
        let p = e.output_mailbox_pointer();
        e.set_output_mailbox_pointer(p + 8)
    });
    assert_eq!(r.delivery_status(), DeliveryStatus::OutputPointerMisaligned);
    // Unknown opcode, and a short output.
    let r = h.exec_raw(&[0x09, 0x99, 0, 0, 0, 0, 0, 0], 0x10);
    assert_eq!(r.cmd_status(), CmdStatus::BadOp);
    let r = h.exec_raw(cmd::QueryIssiIn::new_cmd().as_bytes(), 0x10);
    r.expect_status(CmdStatus::BadOutputLength);
    assert!(h.dev.counters().delivery_errors >= 7);
    // The device still works.
    h.ok(&cmd::NopIn::new_cmd(), &[]);
}

#[test]
fn nic_vport_context_and_state() {
    let mut h = Host::small();
    h.init_hca();
    let o: cmd::QueryNicVportContextOut = h.ok(&cmd::QueryNicVportContextIn::new_cmd(), &[]).view();
    let c = o.nic_vport_context();
    assert!(!c.roce_en());
    let mac = Profile::default().mac;
    assert_eq!(
        c.permanent_address().mac_addr_47_32(),
        u16::from_be_bytes([mac[0], mac[1]])
    );
    assert_eq!(
        c.permanent_address().mac_addr_31_0(),
        u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]])
    );
    h.enable_roce();
    let o: cmd::QueryNicVportContextOut = h.ok(&cmd::QueryNicVportContextIn::new_cmd(), &[]).view();
    assert!(o.nic_vport_context().roce_en());
    // roce_en without its field_select bit changes nothing.
    let mut m = cmd::ModifyNicVportContextIn::new_cmd();
    m.nic_vport_context_mut().set_roce_en(false);
    h.ok(&m, &[]);
    let mut m = cmd::ModifyNicVportContextIn::new_cmd();
    m.field_select_mut().set_mtu(true);
    m.nic_vport_context_mut().set_mtu(20_000);
    h.exec(&m, &[]).expect_status(CmdStatus::BadParam);
    let mut m = cmd::ModifyNicVportContextIn::new_cmd();
    m.field_select_mut().set_permanent_address(true);
    h.exec(&m, &[]).expect_status(CmdStatus::BadParam);
    let mut q = cmd::QueryNicVportContextIn::new_cmd();
    q.set_other_vport(true);
    q.set_vport_number(3);
    h.exec(&q, &[]).expect_status(CmdStatus::BadParam);
    let o: cmd::QueryNicVportContextOut = h.ok(&cmd::QueryNicVportContextIn::new_cmd(), &[]).view();
    assert!(o.nic_vport_context().roce_en());
    let s: cmd::QueryVportStateOut = h.ok(&cmd::QueryVportStateIn::new_cmd(), &[]).view();
    assert_eq!(s.state(), 1);
    let mut m = cmd::ModifyVportStateIn::new_cmd();
    m.set_admin_state(0);
    h.ok(&m, &[]);
    let s: cmd::QueryVportStateOut = h.ok(&cmd::QueryVportStateIn::new_cmd(), &[]).view();
    assert_eq!((s.admin_state(), s.state()), (0, 0));
    m.set_admin_state(5);
    h.exec(&m, &[]).expect_status(CmdStatus::BadParam);
}

#[test]
fn gid_table() {
    let mut h = Host::small();
    h.init_hca();
    let mut s = cmd::SetRoceAddressIn::new_cmd();
    s.set_roce_address_index(3);
    let a = s.roce_address_mut();
    a.set_source_l3_address([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1]);
    a.set_roce_version(2);
    a.set_source_mac_31_0(0x4e49_4300);
    h.ok(&s, &[]);
    let mut q = cmd::QueryRoceAddressIn::new_cmd();
    q.set_roce_address_index(3);
    let o: cmd::QueryRoceAddressOut = h.ok(&q, &[]).view();
    assert_eq!(o.roce_address(), s.roce_address());
    q.set_roce_address_index(4);
    let o: cmd::QueryRoceAddressOut = h.ok(&q, &[]).view();
    assert_eq!(o.roce_address().source_l3_address(), [0; 16]);
    s.set_roce_address_index(256);
    h.exec(&s, &[]).expect_status(CmdStatus::BadIndex);
    q.set_roce_address_index(256);
    h.exec(&q, &[]).expect_status(CmdStatus::BadIndex);
    s.set_roce_address_index(0);
    s.roce_address_mut().set_roce_version(9);
    h.exec(&s, &[]).expect_status(CmdStatus::BadParam);
}

#[test]
fn uar_and_pd_tables() {
    let mut h = Host::small();
    h.init_hca();
    let uars: Vec<u32> = (0..64).map(|_| h.alloc_uar()).collect();
    assert_eq!(uars[0], 0x10);
    h.exec(&cmd::AllocUarIn::new_cmd(), &[])
        .expect_status(CmdStatus::NoResources);
    let mut d = cmd::DeallocUarIn::new_cmd();
    d.set_uar(0x20);
    h.ok(&d, &[]);
    h.exec(&d, &[]).expect_status(CmdStatus::BadResource);
    assert_eq!(h.alloc_uar(), 0x20, "lowest free number first");
    // A UAR an EQ uses is busy.
    h.create_eq(3, 0x11, 0, &[]);
    d.set_uar(0x11);
    h.exec(&d, &[]).expect_status(CmdStatus::ResourceBusy);
    let pd = h.alloc_pd();
    let mut d = cmd::DeallocPdIn::new_cmd();
    d.set_pd(pd);
    h.ok(&d, &[]);
    h.exec(&d, &[]).expect_status(CmdStatus::BadResource);
}

#[test]
fn too_short_inputs_are_bad_input_length() {
    let mut h = Host::small();
    h.enable_hca();
    // Fewer than the 8 header bytes.
    let r = h.exec_raw(&[0x01, 0x0A, 0, 0], 0x70);
    assert_eq!(r.delivery_status(), DeliveryStatus::InputLengthError);
    // SET_ISSI without its ISSI word.
    let r = h.exec_raw(&cmd::SetIssiIn::new_cmd().as_bytes()[..8], 0x10);
    r.expect_status(CmdStatus::BadInputLength);
    let _ = <cmd::SetIssiIn as CmdIn>::OPCODE;
}

#[test]
fn signatures_are_checked_once_cmdif_checksum_is_on() {
    let mut h = enabled(Profile::default());
    // With checksums off (the default), an unsigned command and a chain whose last block
    // links on (as the kernel's cached chains do) are fine.
    let mut big = cmd::SetHcaCapIn::new_cmd();
    *big.capability_mut() = *query_cap(&mut h, 0, true).capability();
    let r = h.exec_with(big.as_bytes(), 0x10, |_, i, _| {
        let last = i.len() - 1;
        i[last].set_next_pointer(0x4000_0000);
    });
    assert!(r.is_ok());
    big.capability_mut().cmd_hca_cap_mut().set_cmdif_checksum(3);
    assert!(h.exec(&big, &[]).is_ok());
    // Now unsigned entries are signature errors.
    let r = h.exec(&cmd::NopIn::new_cmd(), &[]);
    assert_eq!(r.delivery_status(), DeliveryStatus::SignatureError);
    h.sign = true;
    h.ok(&cmd::NopIn::new_cmd(), &[]);
    let c = h.exec(&big, &[]);
    assert!(c.is_ok());
    // A block with a bad signature.
    let r = h.exec_with(big.as_bytes(), 0x10, |_, i, _| {
        let s = i[1].signature();
        i[1].set_signature(s ^ 1);
    });
    assert_eq!(r.delivery_status(), DeliveryStatus::SignatureError);
    // Commands with an output chain (signed by the device) still work.
    let mut q = cmd::QueryHcaCapIn::new_cmd();
    q.set_op_mod(1);
    let r = h.exec_with(q.as_bytes(), 0x1010, |_, _, _| {});
    assert!(r.is_ok());
}
