//! The real driver (`rnic_driver::Hca`) on the emulated device (`rnic_emulator::Device`):
//! bring-up works, teardown returns every firmware page and every DMA mapping, and the
//! driver's first commands equal the Linux kernel's in the real ConnectX-4 trace.
//!
//! What the driver sent is captured by its own command observer (every entry and payload
//! as written to the bus), not by a mock device.

use rnic_driver::cmdq::{CommandRecorder, RecordedCommand};
use rnic_driver::hca::general_caps_to_set;
use rnic_driver::health::FatalReason;
use rnic_driver::trace::{DumpDirection, format_dump};
use rnic_driver::{DriverError, Hca, HcaConfig};
use rnic_emulator::{Device, Profile, RunMode};
use rnic_hw_regs::Bus;
use rnic_hw_regs::caps::CmdHcaCap;
use rnic_hw_regs::cmd::CmdOpcode;
use rnic_hw_regs::cmdq::Direction;
use rnic_hw_regs::init_seg::HealthSyndrome;
use rnic_tests::trace;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;
use zerocopy::{FromBytes, IntoBytes};

const TRACE: &str = "data/mlx5-trace/trace-mlx5_core.txt.gz";

fn open(
    profile: Profile,
    mode: RunMode,
) -> (Device, Arc<CommandRecorder>, Result<Hca, DriverError>) {
    let dev = Device::new(profile, mode);
    let bus: Arc<dyn Bus> = Arc::new(dev.bus());
    let rec = Arc::new(CommandRecorder::default());
    let cfg = HcaConfig {
        ipv4: Some(Ipv4Addr::new(192, 0, 2, 1)),
        observer: Some(rec.clone()),
        ..HcaConfig::default()
    };
    let hca = Hca::open(bus, cfg);
    (dev, rec, hca)
}

#[test]
fn bring_up_and_teardown_return_every_page() {
    for mode in [RunMode::Deterministic, RunMode::Threaded] {
        let profile = Profile::default();
        let (dev, rec, hca) = open(profile.clone(), mode);
        let hca = hca.unwrap_or_else(|e| panic!("bring-up on the emulator ({mode:?}): {e}"));
        assert!(hca.pages_held() > 0, "firmware asked for pages");
        assert_eq!(dev.pages_held(), hca.pages_held(), "both sides agree");
        assert_eq!(hca.mac(), profile.mac);
        let gids = hca.gids();
        assert_eq!(gids.len(), 2);
        assert_eq!(&gids[0].gid[..2], &[0xfe, 0x80]);
        assert_eq!(&gids[1].gid[10..], &[0xff, 0xff, 192, 0, 2, 1]);
        hca.check_health().unwrap();
        hca.process_events().unwrap();

        let ops: Vec<CmdOpcode> = rec.take().iter().map(|c| c.opcode).collect();
        for op in [
            CmdOpcode::EnableHca,
            CmdOpcode::QueryIssi,
            CmdOpcode::SetIssi,
            CmdOpcode::QueryPages,
            CmdOpcode::ManagePages,
            CmdOpcode::AccessReg,
            CmdOpcode::QueryHcaCap,
            CmdOpcode::SetHcaCap,
            CmdOpcode::InitHca,
            CmdOpcode::ModifyNicVportContext,
            CmdOpcode::QueryNicVportContext,
            CmdOpcode::AllocUar,
            CmdOpcode::CreateEq,
            CmdOpcode::AllocPd,
            CmdOpcode::QuerySpecialContexts,
            CmdOpcode::SetRoceAddress,
        ] {
            assert!(ops.contains(&op), "bring-up sent {op}");
        }

        hca.close().expect("teardown");
        assert_eq!(dev.pages_held(), 0, "every firmware page came back");
        assert_eq!(dev.dma_mappings(), 0, "every DMA region was freed");
        let ops: Vec<CmdOpcode> = rec.take().iter().map(|c| c.opcode).collect();
        let expect = [
            CmdOpcode::DeallocPd,
            CmdOpcode::DestroyEq,
            CmdOpcode::DeallocUar,
            CmdOpcode::TeardownHca,
        ];
        assert_eq!(&ops[..4], &expect, "teardown order");
        assert_eq!(ops.last(), Some(&CmdOpcode::DisableHca));
        assert!(ops.contains(&CmdOpcode::ManagePages));
    }
}

/// The driver's input payload of the `n`th command with `op` (and `op_mod`, if given).
fn driver_input(cmds: &[RecordedCommand], op: CmdOpcode, op_mod: Option<u16>) -> &RecordedCommand {
    cmds.iter()
        .find(|c| {
            c.opcode == op
                && op_mod.is_none_or(|m| u16::from_be_bytes([c.input[6], c.input[7]]) == m)
        })
        .unwrap_or_else(|| panic!("the driver sent no {op} (op_mod {op_mod:?})"))
}

#[test]
fn first_commands_equal_the_kernels() {
    let Some(path) = rnic_tests::shared_file(TRACE) else {
        return;
    };
    let kernel = trace::load(&path).expect("the trace parses");
    let kernel_input = |op: u16, op_mod: Option<u16>| {
        kernel
            .iter()
            .map(|c| &c.input)
            .find(|d| d.opcode == op && op_mod.is_none_or(|m| d.entry.input_inline().op_mod() == m))
            .unwrap_or_else(|| panic!("the trace has no {op:#x}"))
    };

    let (dev, rec, hca) = open(Profile::connectx4(), RunMode::Deterministic);
    let hca = hca.unwrap_or_else(|e| panic!("bring-up on the connectx4 profile: {e}"));
    let cmds = rec.take();

    // Payloads, byte for byte.
    for (op, op_mod) in [
        (CmdOpcode::EnableHca, None),
        (CmdOpcode::QueryIssi, None),
        (CmdOpcode::SetIssi, None),
        (CmdOpcode::QueryPages, Some(1)),
        (CmdOpcode::QueryPages, Some(2)),
        (CmdOpcode::InitHca, None),
    ] {
        let k = kernel_input(op.code(), op_mod);
        assert!(k.is_complete());
        let kbytes = k.gather().expect("kernel payload");
        let d = driver_input(&cmds, op, op_mod);
        assert_eq!(
            d.input, kbytes,
            "{op} op_mod {op_mod:?}: driver vs kernel input"
        );
        assert_eq!(
            d.entry_in[0x38..0x3C],
            k.entry.0[0x38..0x3C],
            "{op}: output length"
        );
    }

    // The first commands have the kernel's tokens, so their whole entries match too, and the
    // driver's trace dump parses back to the kernel's dump.
    for (i, op) in [
        CmdOpcode::EnableHca,
        CmdOpcode::QueryIssi,
        CmdOpcode::SetIssi,
        CmdOpcode::QueryPages,
    ]
    .into_iter()
    .enumerate()
    {
        let d = &cmds[i];
        assert_eq!(d.opcode, op);
        let k = &kernel[i].input;
        let mut mine = d.entry_in;
        if op == CmdOpcode::QueryIssi {
            // The output mailbox address is the host's own; compare the rest.
            mine[0x30..0x38].copy_from_slice(&k.entry.0[0x30..0x38]);
            mine[0x3D] = k.entry.0[0x3D];
        }
        assert_eq!(mine, k.entry.0, "{op}: whole entry");
        let text = format_dump(
            op.code(),
            DumpDirection::Input,
            &d.entry_in,
            &[],
            d.input.len(),
        );
        let prefixed: String = text
            .lines()
            .map(|l| format!("[  +0.000001] {l}\n"))
            .collect();
        let parsed = trace::parse(&prefixed).expect("the driver's dump parses");
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].name, k.name, "{op}: the kernel's name");
        assert_eq!(parsed[0].direction, Direction::Input);
        assert_eq!(parsed[0].entry.0, d.entry_in);
    }

    // SET_HCA_CAP (general) is the device's current block with the kernel's changes (the
    // emulator's block is its own, so compare with what it reported, not with the trace).
    let cap_out = |m: u16| {
        let c = driver_input(&cmds, CmdOpcode::QueryHcaCap, Some(m));
        let out = c.output.as_ref().expect("QUERY_HCA_CAP output");
        CmdHcaCap::read_from_bytes(&out[0x10..0x110]).expect("cap block")
    };
    let (max, cur) = (cap_out(0), cap_out(1));
    let set = driver_input(&cmds, CmdOpcode::SetHcaCap, Some(0));
    let expect = general_caps_to_set(&max, &cur, HcaConfig::default().log_max_qp);
    assert_eq!(set.input.len(), 0x1010);
    assert!(
        set.input[0x10..0x110] == *expect.as_bytes(),
        "SET_HCA_CAP general block"
    );
    assert!(set.input[0x110..].iter().all(|b| *b == 0));

    hca.close().expect("teardown");
    assert_eq!(dev.pages_held(), 0);
}

/// A device that raises a health syndrome, kills its PCI link or hangs: the driver reports
/// `DeviceFatal` with the reason named (or a timeout), never panics, and still tears down.
#[test]
fn hostile_device_is_reported_not_panicked_on() {
    // Health syndrome.
    let (dev, _rec, hca) = open(Profile::default(), RunMode::Deterministic);
    let hca = hca.expect("bring-up");
    dev.raise_health_syndrome(HealthSyndrome::HighTemp);
    match hca.check_health() {
        Err(DriverError::DeviceFatal {
            reason: FatalReason::HealthSyndrome { syndrome, .. },
        }) => assert_eq!(syndrome, Some(HealthSyndrome::HighTemp)),
        other => panic!("expected a health syndrome, got {other:?}"),
    }
    let e = hca.check_health().unwrap_err();
    assert!(e.to_string().contains("HIGH_TEMP_ERR"), "{e}");
    drop(hca); // teardown on drop, logged

    // Dead PCI link.
    let (dev, _rec, hca) = open(Profile::default(), RunMode::Deterministic);
    let hca = hca.expect("bring-up");
    dev.kill_pci_link();
    assert!(matches!(
        hca.check_health(),
        Err(DriverError::DeviceFatal {
            reason: FatalReason::PciLinkDead
        })
    ));
    assert!(matches!(
        hca.close(),
        Err(DriverError::TeardownIncomplete { .. })
    ));

    // Hung firmware: the health counter stops and commands time out.
    let dev = Device::new(Profile::default(), RunMode::Deterministic);
    let bus: Arc<dyn Bus> = Arc::new(dev.bus());
    let cfg = HcaConfig {
        cmd_timeout: Duration::from_millis(200),
        health_interval: Duration::from_millis(1),
        ..HcaConfig::default()
    };
    let hca = Hca::open(bus, cfg).expect("bring-up");
    dev.hang_firmware();
    let mut fatal = None;
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(2));
        if let Err(e) = hca.check_health() {
            fatal = Some(e);
            break;
        }
    }
    match fatal {
        Some(DriverError::DeviceFatal {
            reason: FatalReason::HealthCounterStuck { samples, .. },
        }) => assert_eq!(samples, 3),
        other => panic!("expected a stuck health counter, got {other:?}"),
    }
    let e = hca.close().unwrap_err();
    assert!(matches!(e, DriverError::TeardownIncomplete { .. }), "{e}");
}

/// A device that takes forever to come up: bring-up fails with a typed timeout.
#[test]
fn bring_up_on_a_hung_device_times_out() {
    let dev = Device::new(Profile::default(), RunMode::Deterministic);
    dev.hang_firmware();
    let bus: Arc<dyn Bus> = Arc::new(dev.bus());
    let cfg = HcaConfig {
        cmd_timeout: Duration::from_millis(100),
        init_timeout: Duration::from_millis(100),
        ..HcaConfig::default()
    };
    let e = Hca::open(bus, cfg).unwrap_err();
    assert!(
        matches!(
            e,
            DriverError::Timeout {
                opcode: CmdOpcode::EnableHca,
                ..
            } | DriverError::InitTimeout { .. }
        ),
        "{e}"
    );
}

/// Page-request EQEs at run time: the driver gives the pages asked for and takes back the
/// pages offered, and teardown still returns every page.
#[test]
fn run_time_page_requests_are_served() {
    for mode in [RunMode::Deterministic, RunMode::Threaded] {
        let (dev, rec, hca) = open(Profile::default(), mode);
        let hca = hca.expect("bring-up");
        let before = hca.pages_held();
        assert!(dev.request_pages(8), "the driver's EQ takes page requests");
        let served = wait_until(|| {
            let events = hca.process_events().expect("events");
            assert!(events.is_empty(), "no other events: {events:?}");
            hca.pages_held() == before + 8
        });
        assert!(served, "8 pages given ({mode:?})");
        assert_eq!(dev.pages_held(), before + 8);
        let give = rec
            .take()
            .into_iter()
            .rfind(|c| c.opcode == CmdOpcode::ManagePages)
            .expect("MANAGE_PAGES give");
        assert_eq!(give.slot, 31, "page commands use the last slot");

        assert!(dev.request_pages(-3));
        wait_until(|| {
            hca.process_events().expect("events");
            hca.pages_held() == before + 5
        });
        assert_eq!(
            hca.pages_held(),
            before + 5,
            "3 pages taken back ({mode:?})"
        );
        assert_eq!(dev.pages_held(), before + 5);

        hca.close().expect("teardown");
        assert_eq!(dev.pages_held(), 0);
        assert_eq!(dev.dma_mappings(), 0);
    }
}

/// Captures the driver's command dumps (trace level) per thread.
struct DumpCapture(std::sync::Mutex<Vec<(std::thread::ThreadId, String)>>);

impl log::Log for DumpCapture {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.target() == rnic_driver::trace::TRACE_TARGET
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            let me = std::thread::current().id();
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((me, r.args().to_string()));
        }
    }
    fn flush(&self) {}
}

static DUMPS: DumpCapture = DumpCapture(std::sync::Mutex::new(Vec::new()));

/// At `trace` level a bring-up logs kernel-format dumps: with the kernel's line prefix added
/// they parse with the trace reader, carry exactly what the driver sent, and the first
/// command's dump is line for line the kernel's.
#[test]
fn trace_level_dumps_diff_against_the_kernel_trace() {
    let _ = log::set_logger(&DUMPS);
    log::set_max_level(log::LevelFilter::Trace);
    let (dev, rec, hca) = open(Profile::connectx4(), RunMode::Deterministic);
    let hca = hca.expect("bring-up");
    let me = std::thread::current().id();
    let lines: Vec<String> = DUMPS
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|(t, _)| *t == me)
        .map(|(_, l)| l.clone())
        .collect();
    // The kernel's prefixes: `mlx5_core_dbg` lines name the device and function, the
    // hexdump lines (`pr_debug`) only carry the timestamp.
    let dev_prefix = "[  +0.000001] mlx5_core 0000:00:00.0: 0000:00:00.0";
    let text: String = lines
        .iter()
        .map(|l| {
            if l.starts_with("dump command ") || l == "command block:" {
                format!("{dev_prefix}:dump_command:587:(pid 1): {l}\n")
            } else if l.starts_with("writing ") {
                format!("{dev_prefix}:cmd_work_handler:665:(pid 1): {l}\n")
            } else {
                format!("[  +0.000001] {l}\n")
            }
        })
        .collect();
    let dumps = trace::parse(&text).expect("the driver's dumps parse");
    let cmds = trace::pair(dumps).expect("inputs and outputs pair up");
    let sent = rec.take();
    assert_eq!(cmds.len(), sent.len(), "one dump pair per command");
    for (c, s) in cmds.iter().zip(&sent) {
        assert_eq!(c.input.opcode, s.opcode.code());
        assert_eq!(c.input.entry.0, s.entry_in);
        if c.input.is_complete() {
            assert_eq!(c.input.gather().expect("payload"), s.input);
        }
        let out = c.output.as_ref().expect("output dump");
        assert_eq!(Some(out.entry.0), s.entry_out);
    }

    // ENABLE_HCA: the driver's dump is the kernel's, line for line.
    if let Some(path) = rnic_tests::shared_file(TRACE) {
        let mut raw = String::new();
        std::io::Read::read_to_string(
            &mut flate2::read::GzDecoder::new(std::fs::File::open(path).expect("trace")),
            &mut raw,
        )
        .expect("gunzip");
        let kernel: Vec<&str> = raw
            .lines()
            .skip_while(|l| !l.contains("dump command MLX5_CMD_OP_ENABLE_HCA(0x104) INPUT"))
            .take(5)
            .map(|l| match l.find("dump command ") {
                Some(i) => &l[i..],
                None => l.split_once("] ").map_or(l, |(_, rest)| rest),
            })
            .collect();
        assert_eq!(kernel.len(), 5);
        assert_eq!(&lines[..5], &kernel[..]);
    }
    hca.close().expect("teardown");
    assert_eq!(dev.pages_held(), 0);
}

/// Calls `done` until it says yes (true) or 10 s have passed (false), 1 ms apart.
fn wait_until(mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if done() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
