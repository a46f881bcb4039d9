//! The real ConnectX-4 command trace (`data/mlx5-trace/trace-mlx5_core.txt.gz`, Linux
//! mlx5_core with dynamic debug, firmware 14.12.1220) decoded with rnic's layouts.
//!
//! Generic checks on every command: entry type 7, lengths, tokens, block numbers, the opcode in
//! the inline input, delivery status 0 and command status 0; every payload gathered with the
//! mailbox-chain helper and packed back into entry + blocks, reproducing the dumped bytes
//! exactly. Then per-command field checks with the command, context and capability layouts.
//!
//! Skips (with a printed reason) when the shared golden data is absent.

use rnic_hw_regs::cmdq::{self, CMD_TYPE_PCIE, CmdMailbox, CmdqEntry, Direction};
use rnic_hw_regs::status::{CmdStatus, DeliveryStatus};
use rnic_tests::trace::{self, Command, Dump};
use zerocopy::{FromZeros, IntoBytes};

const TRACE: &str = "data/mlx5-trace/trace-mlx5_core.txt.gz";

fn load() -> Option<Vec<Command>> {
    let path = rnic_tests::shared_file(TRACE)?;
    Some(trace::load(&path).expect("the trace parses"))
}

/// Packs `d`'s gathered payload back into a fresh entry + blocks with the chain helper and
/// checks the bytes equal the dump's. Host-owned fields the helper does not own (pointers,
/// the other direction's inline bytes and length, signature and status) are copied from
/// the original.
fn check_repack(d: &Dump, payload: &[u8]) {
    let ctx = format!(
        "{}(0x{:x}) {:?} at line {}",
        d.name, d.opcode, d.direction, d.line
    );
    let orig = &d.entry;
    let mut e = CmdqEntry::new_zeroed();
    e.set_cmd_type(orig.cmd_type());
    e.set_input_length(orig.input_length());
    e.set_output_length(orig.output_length());
    e.set_input_mailbox_pointer(orig.input_mailbox_pointer());
    e.set_output_mailbox_pointer(orig.output_mailbox_pointer());
    e.set_token(orig.token());
    e.set_status(orig.status());
    e.set_ownership(orig.ownership());
    let mut blocks = vec![CmdMailbox::new_zeroed(); d.blocks.len()];
    for (b, o) in blocks.iter_mut().zip(&d.blocks) {
        b.set_next_pointer(o.next_pointer());
        b.set_ctrl_signature(o.ctrl_signature());
        b.set_signature(o.signature());
    }
    let used = match d.direction {
        Direction::Input => {
            *e.output_inline_mut() = *orig.output_inline();
            cmdq::pack(
                payload,
                &mut e.input_inline_mut().0,
                &mut blocks,
                orig.token(),
            )
        }
        Direction::Output => {
            *e.input_inline_mut() = *orig.input_inline();
            cmdq::pack(
                payload,
                &mut e.output_inline_mut().0,
                &mut blocks,
                orig.token(),
            )
        }
    }
    .unwrap_or_else(|err| panic!("{ctx}: pack: {err}"));
    assert_eq!(used, d.blocks.len(), "{ctx}: blocks used");
    if d.direction == Direction::Input {
        // The kernel signs input entries (owner already 1); our signature must agree.
        e.sign();
        assert_eq!(
            e.signature(),
            orig.signature(),
            "{ctx}: input entry signature"
        );
        assert!(orig.signature_ok(), "{ctx}: input entry signature check");
    } else {
        e.set_signature(orig.signature());
    }
    assert_eq!(e.as_bytes(), orig.as_bytes(), "{ctx}: re-encoded entry");
    for (i, (b, o)) in blocks.iter().zip(&d.blocks).enumerate() {
        assert_eq!(b.as_bytes(), o.as_bytes(), "{ctx}: re-encoded block {i}");
    }
}

/// Checks every command-independent property of one dump; returns the gathered payload.
fn check_dump(d: &Dump) -> Vec<u8> {
    let ctx = format!(
        "{}(0x{:x}) {:?} at line {}",
        d.name, d.opcode, d.direction, d.line
    );
    let e = &d.entry;
    assert_eq!(e.cmd_type(), CMD_TYPE_PCIE, "{ctx}: entry type");
    assert_eq!(e.input_inline().opcode(), d.opcode, "{ctx}: inline opcode");
    assert_eq!(e.input_inline().uid(), 0, "{ctx}: uid");
    assert!(e.input_length() >= 0x10, "{ctx}: input length");
    assert!(e.output_length() >= 0x10, "{ctx}: output length");
    match d.direction {
        Direction::Input => {
            assert!(
                e.ownership(),
                "{ctx}: input entries are handed to the device (owner 1)"
            );
            assert_eq!(e.status(), 0, "{ctx}: input status bits");
        }
        Direction::Output => {
            assert!(
                !e.ownership(),
                "{ctx}: output entries are back with software"
            );
            assert_eq!(
                e.delivery_status(),
                Ok(DeliveryStatus::Ok),
                "{ctx}: delivery"
            );
            assert_eq!(
                CmdStatus::try_from(e.output_inline().status()),
                Ok(CmdStatus::Ok),
                "{ctx}: command status"
            );
            assert_eq!(e.output_inline().syndrome(), 0, "{ctx}: syndrome");
        }
    }

    // Blocks: what the kernel prints of the chain, with the chain's own invariants.
    let len = d.payload_len();
    let needed = cmdq::blocks_for(len);
    assert_eq!(
        d.blocks.len(),
        trace::kernel_dumped_blocks(len).min(needed),
        "{ctx}: blocks"
    );
    let pointer = match d.direction {
        Direction::Input => e.input_mailbox_pointer(),
        Direction::Output => e.output_mailbox_pointer(),
    };
    assert_eq!(
        needed > 0,
        pointer != 0,
        "{ctx}: mailbox pointer iff blocks are needed"
    );
    // The kernel's blocks come from a DMA pool aligned to 1 KiB.
    let align = cmdq::MAILBOX_ALIGN as u64;
    assert_eq!(pointer % align, 0, "{ctx}: mailbox pointer alignment");
    for b in &d.blocks {
        assert_eq!(b.next_pointer() % align, 0, "{ctx}: next pointer alignment");
    }
    let mut linked = 0;
    for (i, b) in d.blocks.iter().enumerate() {
        assert_eq!(b.block_number() as usize, i, "{ctx}: block number {i}");
        assert_eq!(b.token(), e.token(), "{ctx}: token of block {i}");
        // Every block but the last one the length needs links to a next block. (The last
        // may link on too: the kernel's cached messages can hold more blocks than needed.)
        if i + 1 < needed {
            assert_ne!(b.next_pointer(), 0, "{ctx}: block {i} next pointer");
            linked += 1;
        }
        // Checksums are off on this device (cmdif_checksum current = 0): block signatures 0.
        assert_eq!(
            (b.ctrl_signature(), b.signature()),
            (0, 0),
            "{ctx}: block {i} sigs"
        );
    }
    assert_eq!(linked, d.blocks.len().min(needed.saturating_sub(1)));
    let payload = d
        .gather()
        .unwrap_or_else(|err| panic!("{ctx}: gather: {err}"));
    assert_eq!(payload.len(), d.available_len());
    check_repack(d, &payload);
    payload
}

#[test]
fn every_entry_and_mailbox_decodes_and_re_encodes() {
    let Some(cmds) = load() else { return };
    assert_eq!(cmds.len(), 42, "commands in the trace");
    let (mut blocks, mut bytes, mut partial) = (0, 0, 0);
    let (mut kept_sig, mut re_signed) = (0, 0);
    let mut tokens = Vec::new();
    for c in &cmds {
        let out = c
            .output
            .as_ref()
            .expect("every command in the trace completes");
        for d in [&c.input, out] {
            let payload = check_dump(d);
            blocks += d.blocks.len();
            bytes += payload.len();
            partial += usize::from(!d.is_complete());
        }
        // The device returns the entry with the driver's fields intact.
        let (i, o) = (&c.input.entry, &out.entry);
        assert_eq!(
            i.input_inline(),
            o.input_inline(),
            "line {}: input inline",
            c.input.line
        );
        assert_eq!(i.input_length(), o.input_length());
        assert_eq!(i.output_length(), o.output_length());
        assert_eq!(i.input_mailbox_pointer(), o.input_mailbox_pointer());
        assert_eq!(i.output_mailbox_pointer(), o.output_mailbox_pointer());
        // Firmware mostly leaves the signature as the driver wrote it; for QUERY_PAGES it
        // re-signs the entry it returns (computed while it still owned it: owner bit 1).
        if o.signature() == i.signature() {
            kept_sig += 1;
        } else {
            let mut owned = *o;
            owned.set_ownership(true);
            assert!(owned.signature_ok(), "line {}: output signature", out.line);
            re_signed += 1;
        }
        tokens.push(i.token());
    }
    // The kernel numbers tokens 1, 2, 3, ... in this trace.
    assert!(
        tokens.iter().zip(1u8..).all(|(t, n)| *t == n),
        "tokens: {tokens:?}"
    );
    println!(
        "mlx5 trace: {} commands, {} dumps, {blocks} mailbox blocks checked, {bytes} payload \
         bytes gathered and re-encoded ({partial} dumps print only part of their chain); output signatures: {kept_sig} kept, \
         {re_signed} re-signed by firmware",
        cmds.len(),
        cmds.len() * 2,
    );
    assert_eq!(re_signed, 2, "QUERY_PAGES x2 come back re-signed");
}

/// A command layout read from the front of a gathered payload.
fn view<T: zerocopy::FromBytes + zerocopy::KnownLayout + zerocopy::Immutable>(p: &[u8]) -> T {
    match T::read_from_prefix(p) {
        Ok((v, _)) => v,
        Err(_) => panic!("payload of {} bytes is shorter than the layout", p.len()),
    }
}

/// Gathered input and output payloads of one command.
struct Io<'a> {
    cmd: &'a Command,
    input: Vec<u8>,
    output: Vec<u8>,
}

#[test]
fn per_command_fields_match_the_connectx4() {
    use rnic_hw_regs::caps::CmdHcaCap;
    use rnic_hw_regs::cmd::{self, CmdOpcode, op_mod};
    use std::collections::{BTreeMap, HashSet};

    let Some(cmds) = load() else { return };
    let ios: Vec<Io<'_>> = cmds
        .iter()
        .map(|c| Io {
            cmd: c,
            input: c.input.gather().expect("input gathers"),
            output: c
                .output
                .as_ref()
                .expect("output")
                .gather()
                .expect("output gathers"),
        })
        .collect();
    let mut checked: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut tick = |name: &'static str| *checked.entry(name).or_default() += 1;

    // Every opcode is in our table; where the kernel names it, the names agree.
    for io in &ios {
        let op = CmdOpcode::try_from(io.cmd.input.opcode).expect("known opcode");
        let kname = io.cmd.input.name.trim_start_matches("MLX5_CMD_OP_");
        if kname != "unknown command opcode" {
            assert_eq!(op.name(), kname, "line {}", io.cmd.input.line);
        }
    }
    let of = |op: CmdOpcode| -> Vec<&Io<'_>> {
        ios.iter()
            .filter(|io| io.cmd.input.opcode == op.code())
            .collect()
    };

    // ENABLE_HCA: this function.
    for io in of(CmdOpcode::EnableHca) {
        assert_eq!(view::<cmd::EnableHcaIn>(&io.input).function_id(), 0);
        tick("ENABLE_HCA");
    }

    // QUERY_ISSI: 0x70-byte output, ISSI 1 supported only (mask 0x2); SET_ISSI 1.
    let issi = of(CmdOpcode::QueryIssi);
    assert_eq!(issi.len(), 1);
    assert_eq!(issi[0].output.len(), 0x70);
    let out = view::<cmd::QueryIssiOut>(&issi[0].output);
    assert_eq!(out.supported_issi_dw0(), 0x2);
    assert_eq!(out.current_issi(), 0);
    tick("QUERY_ISSI");
    for io in of(CmdOpcode::SetIssi) {
        assert_eq!(view::<cmd::SetIssiIn>(&io.input).current_issi(), 1);
        tick("SET_ISSI");
    }

    // QUERY_PAGES boot then init: 6 and 12,868 pages; MANAGE_PAGES gives exactly those.
    let qp = of(CmdOpcode::QueryPages);
    let mp = of(CmdOpcode::ManagePages);
    assert_eq!((qp.len(), mp.len()), (2, 2));
    let expect = [
        (op_mod::QUERY_PAGES_BOOT, 6),
        (op_mod::QUERY_PAGES_INIT, 12_868),
    ];
    for ((q, m), (mode, pages)) in qp.iter().zip(&mp).zip(expect) {
        let qin = view::<cmd::QueryPagesIn>(&q.input);
        let qout = view::<cmd::QueryPagesOut>(&q.output);
        assert_eq!(qin.op_mod(), mode);
        assert_eq!(qout.function_id(), 0);
        assert_eq!(qout.num_pages_signed(), pages);
        let min = view::<cmd::ManagePagesIn>(&m.input);
        assert_eq!(min.op_mod(), op_mod::MANAGE_PAGES_GIVE);
        assert_eq!(min.function_id(), 0);
        assert_eq!(i64::from(min.input_num_entries()), i64::from(pages));
        let n = min.input_num_entries() as usize;
        assert_eq!(
            m.cmd.input.payload_len(),
            cmd::ManagePagesIn::PAS_OFFSET + 8 * n
        );
        // The page addresses the dump shows: 4 KiB aligned, non-zero, all different.
        let pas = &m.input[cmd::ManagePagesIn::PAS_OFFSET..];
        let addrs: Vec<u64> = pas
            .chunks_exact(8)
            .map(|c| u64::from_be_bytes(c.try_into().expect("8 bytes")))
            .collect();
        assert!(
            addrs.iter().all(|a| *a != 0 && a % 4096 == 0),
            "page addresses"
        );
        assert_eq!(addrs.iter().collect::<HashSet<_>>().len(), addrs.len());
        assert_eq!(
            view::<cmd::ManagePagesOut>(&m.output).output_num_entries(),
            0
        );
        tick("QUERY_PAGES");
        tick("MANAGE_PAGES");
    }

    // ACCESS_REG: a write of HOST_ENDIANNESS (0x7004), 0x20 bytes each way.
    for io in of(CmdOpcode::AccessReg) {
        let i = view::<cmd::AccessRegisterIn>(&io.input);
        assert_eq!(i.register_id(), 0x7004);
        assert_eq!(i.op_mod(), op_mod::ACCESS_REG_WRITE);
        assert_eq!(
            (
                io.cmd.input.payload_len(),
                io.cmd.output.as_ref().map(Dump::payload_len)
            ),
            (0x20, Some(0x20))
        );
        tick("ACCESS_REG");
    }

    // QUERY_HCA_CAP: general max/current before SET_HCA_CAP; after INIT_HCA general current
    // and max, then ethernet offloads (1), atomic (3), RoCE (4) and flow table (7), current
    // then max each.
    let q = of(CmdOpcode::QueryHcaCap);
    let modes: Vec<u16> = q
        .iter()
        .map(|io| view::<cmd::QueryHcaCapIn>(&io.input).op_mod())
        .collect();
    assert_eq!(
        modes,
        [0x0, 0x1, 0x1, 0x0, 0x3, 0x2, 0x7, 0x6, 0x9, 0x8, 0xF, 0xE]
    );
    let cap = |io: &Io<'_>| -> cmd::QueryHcaCapOut { view(&io.output) };
    for io in &q {
        assert_eq!(io.output.len(), 0x1010);
        tick("QUERY_HCA_CAP");
    }
    let gen_max: CmdHcaCap = *cap(q[0]).capability().cmd_hca_cap();
    let gen_cur: CmdHcaCap = *cap(q[1]).capability().cmd_hca_cap();
    let gen_cur_after: CmdHcaCap = *cap(q[2]).capability().cmd_hca_cap();
    assert_eq!(
        cap(q[3]).capability().cmd_hca_cap(),
        &gen_max,
        "max is stable"
    );
    // mlx5-prm.md section 4: [max / current] on a ConnectX-4.
    for g in [&gen_max, &gen_cur, &gen_cur_after] {
        assert_eq!(g.log_max_qp_sz(), 15);
        assert_eq!((g.log_max_cq_sz(), g.log_max_cq()), (22, 24));
        assert_eq!((g.log_max_ra_req_qp(), g.log_max_ra_res_qp()), (4, 4));
        assert_eq!((g.port_type(), g.num_ports()), (1, 1), "Ethernet, one port");
        assert_eq!(g.log_max_msg(), 30);
        assert_eq!(g.cqe_version(), 1);
        assert!(g.roce() && g.atomic());
        assert!(g.ud() && g.uc() && g.rc());
        assert_eq!(g.log_pg_sz(), 12);
        assert!(g.bf());
        assert_eq!(g.log_bf_reg_size(), 9);
        assert_eq!((g.max_wqe_sz_sq(), g.max_wqe_sz_rq()), (1024, 512));
        assert_eq!(g.log_max_pd(), 24);
        assert_eq!(g.device_frequency_mhz(), 275);
        assert!(!g.uar_4k());
    }
    assert_eq!((gen_max.log_max_qp(), gen_cur.log_max_qp()), (23, 14));
    assert_eq!((gen_max.cmdif_checksum(), gen_cur.cmdif_checksum()), (3, 0));

    // SET_HCA_CAP: the kernel raises log_max_qp to 17 (general caps), keeps checksums off,
    // and the current caps after INIT_HCA say 17.
    let set = of(CmdOpcode::SetHcaCap);
    assert_eq!(set.len(), 1);
    let s = view::<cmd::SetHcaCapIn>(&set[0].input);
    assert_eq!(s.op_mod(), op_mod::set_hca_cap(op_mod::HCA_CAP_GENERAL));
    assert_eq!(s.capability().cmd_hca_cap().log_max_qp(), 17);
    assert_eq!(s.capability().cmd_hca_cap().cmdif_checksum(), 0);
    assert_eq!(gen_cur_after.log_max_qp(), 17);
    tick("SET_HCA_CAP");

    // RoCE caps (current and max): UDP 4791, source ports 49152..65535, 256 GIDs, v1/v1.5/v2.
    for io in &q[8..10] {
        let r = *cap(io).capability().roce_cap();
        assert_eq!(r.r_roce_dest_udp_port(), 4791);
        assert_eq!(
            (r.r_roce_min_src_udp_port(), r.r_roce_max_src_udp_port()),
            (49152, 65535)
        );
        assert_eq!(r.roce_address_table_size(), 256);
        assert_eq!(r.roce_version() & 0b101, 0b101, "RoCE v1 and v2");
        assert_eq!(r.l3_type(), 7);
    }

    // INIT_HCA: this (2016) kernel sends the 16-byte form; QUERY_ADAPTER: Mellanox's OUI
    // 00:02:C9 and PCI vendor 0x15B3.
    for io in of(CmdOpcode::InitHca) {
        assert_eq!(
            view::<cmd::InitHcaIn>(&[&io.input[..], &[0; 16]].concat()).op_mod(),
            0
        );
        assert_eq!(io.cmd.input.payload_len(), 0x10);
        tick("INIT_HCA");
    }
    for io in of(CmdOpcode::QueryAdapter) {
        assert_eq!(io.output.len(), 0x110);
        let a = *view::<cmd::QueryAdapterOut>(&io.output).query_adapter_struct();
        assert_eq!((a.ieee_vendor_id(), a.vsd_vendor_id()), (0x0002C9, 0x15B3));
        tick("QUERY_ADAPTER");
    }

    // ALLOC_UAR: indices 0x10, 0x11, ... (UAR 0 overlaps the init segment).
    let uars: Vec<u32> = of(CmdOpcode::AllocUar)
        .iter()
        .map(|io| view::<cmd::AllocUarOut>(&io.output).uar())
        .collect();
    assert_eq!(uars, [0x10, 0x11, 0x12, 0x13]);
    uars.iter().for_each(|_| tick("ALLOC_UAR"));

    // CREATE_EQ: command EQ (event 0x0A) on vector 1, async EQ on vector 2, page-request EQ
    // (0x0B) on vector 0, then 12 completion EQs (no event bits) on vectors 3..=14; all on UAR
    // 0x10 with one PAS entry covering the whole queue (log_page_size = log_eq_size + 6 - 12).
    let eqs = of(CmdOpcode::CreateEq);
    assert_eq!(eqs.len(), 15);
    let async_events = [
        0x01u8, 0x02, 0x03, 0x04, 0x05, 0x07, 0x09, 0x10, 0x11, 0x12, 0x13, 0x14,
    ];
    for (n, io) in eqs.iter().enumerate() {
        let i = view::<cmd::CreateEqIn>(&io.input);
        let eqc = i.eq_context_entry();
        let (size, intr, events): (u8, u16, &[u8]) = match n {
            0 => (8, 1, &[0x0A]),
            1 => (9, 2, &async_events),
            2 => (8, 0, &[0x0B]),
            _ => (11, n as u16, &[]),
        };
        assert_eq!(eqc.log_eq_size(), size, "EQ {n}");
        assert_eq!(eqc.intr(), intr, "EQ {n}");
        assert_eq!(eqc.uar_page(), 0x10, "EQ {n}");
        assert_eq!(
            u32::from(eqc.log_page_size()),
            u32::from(size) + 6 - 12,
            "EQ {n}"
        );
        assert_eq!(
            (eqc.st(), eqc.ec(), eqc.oi(), eqc.page_offset()),
            (0, false, false, 0)
        );
        for t in 0..=255u8 {
            assert_eq!(i.event(t), events.contains(&t), "EQ {n} event {t:#x}");
        }
        assert_eq!(io.cmd.input.payload_len(), cmd::CreateEqIn::PAS_OFFSET + 8);
        let pas = u64::from_be_bytes(
            io.input[cmd::CreateEqIn::PAS_OFFSET..][..8]
                .try_into()
                .expect("8 bytes"),
        );
        assert!(pas != 0 && pas % 4096 == 0);
        assert_eq!(
            view::<cmd::CreateEqOut>(&io.output).eq_number() as usize,
            0x10 + n
        );
        tick("CREATE_EQ");
    }

    let total: usize = checked.values().sum();
    println!("mlx5 trace: per-command field checks on {total} commands: {checked:?}");
}
