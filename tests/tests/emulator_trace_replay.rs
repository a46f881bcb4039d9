//! The real ConnectX-4 bring-up (`data/mlx5-trace/trace-mlx5_core.txt.gz`) replayed against
//! the emulated device with [`Profile::connectx4`]: every command as the kernel sent it (same
//! inputs; only the bus addresses are the host's own, since the device must be able to reach
//! them), checked against what the real device answered.
//!
//! - Every command: delivery status, command status and output length as the real device.
//! - Deterministic outputs byte for byte: ENABLE_HCA, QUERY_ISSI (mask 0x2), SET_ISSI,
//!   QUERY_PAGES (6 boot, 12,868 init pages), MANAGE_PAGES, ACCESS_REG, SET_HCA_CAP,
//!   INIT_HCA, ALLOC_UAR (0x10..0x13), CREATE_EQ (0x10..0x1E).
//! - QUERY_HCA_CAP general, atomic and RoCE blocks: every field `rnic_hw_regs::caps` names
//!   equals the real device's, except the ones listed in [`CAP_DIFFERENCES`] (deliberate
//!   model choices, documented in the emulator's `caps.rs`). Ethernet-offload (1) and
//!   flow-table (7) blocks are not modelled: status and length only.
//! - QUERY_ADAPTER: vendor IDs and PSID.
//!
//! Skips (with a printed reason) when the shared golden data is absent.

#[allow(dead_code, unreachable_pub)]
#[path = "../../emulator/tests/common/host.rs"]
mod host;

use host::Host;
use rnic_emulator::Profile;
use rnic_hw_regs::caps::{AtomicCaps, CmdHcaCap, RoceCap};
use rnic_hw_regs::cmd::{self, CmdIn, CmdOpcode};
use rnic_hw_regs::layout::bits;
use rnic_hw_regs::{FieldKind, PrmLayout};
use rnic_tests::trace;
use zerocopy::{FromBytes, IntoBytes};

const TRACE: &str = "data/mlx5-trace/trace-mlx5_core.txt.gz";

/// Capability fields where the model differs from the real ConnectX-4 on purpose:
/// `(cap_type, field)`.
const CAP_DIFFERENCES: &[(u16, &str)] = &[
    // Regions up to 2 GiB (one CREATE_MKEY of 4 KiB MTT entries); no larger pages or UMR.
    (0, "log_max_mrw_sz"),
    // MODIFY_CQ resize is not modelled.
    (0, "cq_resize"),
];

/// Compares every named field of capability layout `T` in the two blocks; returns the names
/// of the fields that differ.
fn differing_fields<T: PrmLayout>(ours: &[u8], real: &[u8]) -> Vec<&'static str> {
    let mut out = Vec::new();
    for f in T::FIELDS {
        let same = match f.kind {
            FieldKind::Bits => {
                bits::get(ours, f.bit_offset, f.bit_width)
                    == bits::get(real, f.bit_offset, f.bit_width)
            }
            FieldKind::Bytes | FieldKind::Nested(_) => {
                let r = f.bit_offset / 8..(f.bit_offset + f.bit_width) / 8;
                ours[r.clone()] == real[r]
            }
        };
        if !same {
            out.push(f.name);
        }
    }
    out
}

#[test]
fn connectx4_bring_up_replays_with_the_real_device_answers() {
    let Some(path) = rnic_tests::shared_file(TRACE) else {
        println!("skipping: the shared ConnectX-4 trace is absent (set RNIC_SHARED_DIR)");
        return;
    };
    let cmds = trace::load(&path).expect("the trace parses");
    let mut h = Host::new(Profile::connectx4());
    let (mut exact, mut cap_fields) = (0, 0);
    for c in &cmds {
        let din = &c.input;
        let dout = c.output.as_ref().expect("every command completes");
        let ctx = format!("{}(0x{:x}) at line {}", din.name, din.opcode, din.line);
        let op = CmdOpcode::try_from(din.opcode).expect("known opcode");
        let mut input = din.gather().expect("input gathers");
        // The kernel's dump stops before a short chain's only block (ACCESS_REG's 0x20
        // bytes): compare what it shows.
        let real_out = dout.gather().expect("output gathers");
        let out_len = dout.payload_len();

        let r = match op {
            CmdOpcode::ManagePages => {
                // The kernel's header, the host's own pages.
                let hdr = cmd::ManagePagesIn::read_from_prefix(&input)
                    .expect("header")
                    .0;
                let mut mine = cmd::ManagePagesIn::new_cmd();
                mine.set_op_mod(hdr.op_mod());
                mine.set_input_num_entries(hdr.input_num_entries());
                assert_eq!(mine.as_bytes(), hdr.as_bytes(), "{ctx}: header");
                let r = h.give_pages(hdr.input_num_entries() as usize);
                assert_eq!(
                    din.payload_len(),
                    cmd::ManagePagesIn::PAS_OFFSET + 8 * hdr.input_num_entries() as usize
                );
                r
            }
            CmdOpcode::CreateEq => {
                // One PAS entry: a buffer of the EQ's size, aligned to it, as the kernel's.
                assert!(din.is_complete());
                let i = cmd::CreateEqIn::read_from_prefix(&input).expect("eq").0;
                let size = 64usize << i.eq_context_entry().log_eq_size();
                let base = h.alloc(2 * size);
                let aligned = base.next_multiple_of(size as u64);
                let at = cmd::CreateEqIn::PAS_OFFSET;
                input[at..at + 8].copy_from_slice(&aligned.to_be_bytes());
                h.exec_raw(&input, out_len)
            }
            _ => {
                // ACCESS_REG's register data is not in the dump: zeros, the little-endian
                // host's HOST_ENDIANNESS, as the kernel on x86 sends.
                input.resize(din.payload_len(), 0);
                h.exec_raw(&input, out_len)
            }
        };
        assert_eq!(
            r.delivery,
            dout.entry.delivery_status().map_or(0xFF, |d| d.raw())
        );
        assert_eq!(
            r.status, real_out[0],
            "{ctx}: status (syndrome {:#x})",
            r.syndrome
        );
        assert_eq!(r.out.len(), out_len, "{ctx}: output length");
        let shown = real_out.len();

        match op {
            CmdOpcode::QueryHcaCap => {
                let op_mod = cmd::QueryHcaCapIn::read_from_prefix(&input)
                    .expect("q")
                    .0
                    .op_mod();
                let cap_type = op_mod >> 1;
                let (ours, real) = (&r.out[0x10..], &real_out[0x10..]);
                let diff = match cap_type {
                    0 => differing_fields::<CmdHcaCap>(ours, real),
                    3 => differing_fields::<AtomicCaps>(ours, real),
                    4 => differing_fields::<RoceCap>(ours, real),
                    _ => continue,
                };
                let expected: Vec<&str> = CAP_DIFFERENCES
                    .iter()
                    .filter(|(t, _)| *t == cap_type)
                    .map(|(_, f)| *f)
                    .filter(|f| diff.contains(f))
                    .collect();
                assert_eq!(
                    diff, expected,
                    "{ctx}: op_mod {op_mod:#x} fields that differ"
                );
                cap_fields += match cap_type {
                    0 => CmdHcaCap::FIELDS.len(),
                    3 => AtomicCaps::FIELDS.len(),
                    _ => RoceCap::FIELDS.len(),
                } - diff.len();
            }
            CmdOpcode::QueryAdapter => {
                let o = cmd::QueryAdapterOut::read_from_prefix(&r.out).expect("o").0;
                let real = cmd::QueryAdapterOut::read_from_prefix(&real_out)
                    .expect("r")
                    .0;
                let (a, b) = (o.query_adapter_struct(), real.query_adapter_struct());
                assert_eq!(a.ieee_vendor_id(), b.ieee_vendor_id());
                assert_eq!(a.vsd_vendor_id(), b.vsd_vendor_id());
                assert_eq!(a.vsd_contd_psid(), b.vsd_contd_psid());
            }
            _ => {
                assert_eq!(r.out[..shown], real_out[..], "{ctx}: output bytes");
                exact += 1;
            }
        }
    }
    assert_eq!(h.dev.pages_held(), 6 + 12_868);
    let _ = <cmd::NopIn as CmdIn>::OPCODE;
    println!(
        "ConnectX-4 trace replayed: {} commands, {exact} outputs byte for byte, \
         {cap_fields} capability fields equal",
        cmds.len()
    );
}
