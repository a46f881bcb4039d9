//! Random command entries, mailboxes and inputs: the command processor never panics, always
//! hands the entry back, and every outcome is a PRM delivery status or, once delivered, a PRM
//! command status (with a syndrome when it is not OK).

mod common;

use common::host::{Host, Reply};
use proptest::prelude::*;
use rnic_hw_regs::cmd::CmdOpcode;
use rnic_hw_regs::cmdq::CmdqEntry;
use rnic_hw_regs::status::{CmdStatus, DeliveryStatus};

/// Checks the invariants of one reply.
fn check(r: &Reply) {
    assert!(!r.entry.ownership(), "the entry is handed back");
    let d = DeliveryStatus::try_from(r.delivery).expect("a PRM delivery status");
    if d == DeliveryStatus::Ok {
        let s = CmdStatus::try_from(r.status).expect("a PRM command status");
        if s != CmdStatus::Ok {
            assert_ne!(r.syndrome, 0, "a failure has a syndrome");
        }
    }
}

/// Checks the invariants of an entry returned for a raw (possibly undeliverable) entry.
fn check_entry(e: &CmdqEntry) {
    if e.ownership() {
        // Only an entry whose reads fault is left alone; the bus allocates the queue, so
        // the device can always read it.
        panic!("entry not handed back");
    }
    let d = e.delivery_status().expect("a PRM delivery status");
    if d == DeliveryStatus::Ok {
        CmdStatus::try_from(e.output_inline().status()).expect("a PRM command status");
    }
}

/// A brought-up host, with a GID and a CQ's worth of objects for commands to hit.
fn host() -> Host {
    let mut h = Host::small();
    h.bring_up();
    h
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Known opcodes, small op_mods, random bodies and lengths, on a live device.
    #[test]
    fn random_inputs_get_a_prm_status(
        op in 0..CmdOpcode::ALL.len(),
        op_mod in 0u16..16,
        body in proptest::collection::vec(any::<u8>(), 0..0x600),
        small in proptest::collection::vec(0u8..4, 0..0x40),
        out_len in 8usize..0x1100,
        before_init in any::<bool>(),
    ) {
        let mut h = if before_init { let mut h = Host::small(); h.enable_hca(); h } else { host() };
        let mut input = Vec::with_capacity(8 + body.len());
        input.extend_from_slice(&CmdOpcode::ALL[op].code().to_be_bytes());
        input.extend_from_slice(&[0, 0, 0, 0]);
        input.extend_from_slice(&op_mod.to_be_bytes());
        // Small values where numbers and sizes live make more inputs pass the first checks.
        input.extend_from_slice(&small);
        input.extend_from_slice(&body);
        let r = h.exec_raw(&input, out_len);
        check(&r);
        if CmdOpcode::ALL[op] == CmdOpcode::DisableHca && r.is_ok() {
            // The command disabled the function (an all-zero body names this function):
            // it answers again once enabled.
            h.enable_hca();
        }
        // The device still answers.
        let n = h.exec_raw(&[0x08, 0x0D, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 0x10);
        check(&n);
        prop_assert!(n.is_ok());
    }

    /// Fully random opcodes and lengths.
    #[test]
    fn random_opcodes(
        head in proptest::collection::vec(any::<u8>(), 8..0x120),
        out_len in 8usize..0x300,
    ) {
        let mut h = host();
        let r = h.exec_raw(&head, out_len);
        check(&r);
    }

    /// Random entries: types, lengths, pointers, tokens; random bytes in the mailboxes.
    #[test]
    fn random_entries_get_a_delivery_status(raw in proptest::collection::vec(any::<u8>(), 64)) {
        let mut h = host();
        let mut e = [0u8; 64];
        e.copy_from_slice(&raw);
        let back = h.exec_entry_raw(e);
        check_entry(&back);
        // With the right type and a sane length the chain pointers are what is random.
        e[0] = 7;
        e[4..8].copy_from_slice(&0x400u32.to_be_bytes());
        e[0x38..0x3C].copy_from_slice(&0x400u32.to_be_bytes());
        let back = h.exec_entry_raw(e);
        check_entry(&back);
    }

    /// Valid chains whose blocks are corrupted at random.
    #[test]
    fn corrupted_chains(
        block in 0usize..3,
        at in 0usize..0x240,
        byte in any::<u8>(),
    ) {
        let mut h = host();
        let mut input = vec![0u8; 0x500];
        input[..2].copy_from_slice(&CmdOpcode::SetHcaCap.code().to_be_bytes());
        let r = h.exec_with(&input, 0x10, |_, ins, _| {
            if let Some(b) = ins.get_mut(block) {
                zerocopy::IntoBytes::as_mut_bytes(b)[at] = byte;
            }
        });
        check(&r);
    }
}
