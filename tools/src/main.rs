//! The `rnic` command line: `devices`, `devinfo`, `rc-pingpong`, `ud-pingpong`, the
//! perftest-style benchmarks (`write-bw`, `read-bw`, `send-bw`, `atomic-bw`, `write-lat`,
//! `read-lat`, `send-lat`, `atomic-lat`), `rping` and librdmacm's `cmatose` and `udaddy`,
//! shaped like rdma-core's, perftest's and librdmacm's tools.
//!
//! Every error is one line on stderr (`rnic: ...`) and a non-zero exit: 1 for a failed run, 2
//! for bad arguments; `rping` reports what rping reports in its words and statuses.
//!
//! Logs go to stderr through `env_logger`, filtered by `RUST_LOG` (errors only when it is
//! unset): `RUST_LOG=rnic_driver::cmd=trace rnic devinfo` shows every firmware command in the
//! kernel's `dump_command` format, `RUST_LOG=debug` what each layer does.

use clap::{Parser, Subcommand};
use rnic_tools::ToolError;
use rnic_tools::perf::{PerfArgs, TestKind, Verb};
use rnic_tools::pingpong::PingpongArgs;
use rnic_tools::rping::run::RpingArgs;
use std::process::ExitCode;

/// rnic: RoCE v2 tools for ConnectX (mlx5) NICs and the emulated device.
#[derive(Debug, Parser)]
#[command(name = "rnic", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// List devices (like ibv_devices): the ConnectX functions bound to vfio-pci, emu0 and
    /// emu1, and the emu:IPV4 and emu-tap:IFNAME,IPV4/PREFIX devices open in this
    /// process (an emu-tap device's port is a Linux TAP interface, created if missing as root;
    /// the device answers ARP for its address itself).
    Devices,
    /// Device attributes (like ibv_devinfo).
    Devinfo(DevinfoArgs),
    /// RC ping-pong (like ibv_rc_pingpong; pairs with it).
    RcPingpong(PingpongArgs),
    /// UD ping-pong (like ibv_ud_pingpong; pairs with it).
    UdPingpong(PingpongArgs),
    /// RDMA WRITE bandwidth (like ib_write_bw).
    WriteBw(PerfArgs),
    /// RDMA READ bandwidth (like ib_read_bw).
    ReadBw(PerfArgs),
    /// SEND bandwidth (like ib_send_bw).
    SendBw(PerfArgs),
    /// Atomic bandwidth (like ib_atomic_bw).
    AtomicBw(PerfArgs),
    /// RDMA WRITE latency (like ib_write_lat).
    WriteLat(PerfArgs),
    /// RDMA READ latency (like ib_read_lat).
    ReadLat(PerfArgs),
    /// SEND latency (like ib_send_lat).
    SendLat(PerfArgs),
    /// Atomic latency (like ib_atomic_lat).
    AtomicLat(PerfArgs),
    /// RDMA ping-pong over a connection the CM makes (like librdmacm's rping; pairs with it).
    Rping(RpingArgs),
    /// RC connections through the connection manager (like librdmacm's ucmatose; pairs
    /// with it).
    Cmatose(rnic_tools::cmtest::cmatose::CmatoseArgs),
    /// UD through the connection manager's SIDR (like librdmacm's udaddy; pairs with it).
    Udaddy(rnic_tools::cmtest::udaddy::UdaddyArgs),
}

#[derive(Debug, clap::Args)]
struct DevinfoArgs {
    /// Use this device (default: all).
    #[arg(short = 'd', long = "ib-dev")]
    device: Option<String>,
    /// Only this port.
    #[arg(short = 'i', long = "ib-port")]
    port: Option<u8>,
    /// Print only the device names.
    #[arg(short = 'l', long = "list")]
    list: bool,
    /// Print all attributes (limits, GID table).
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
}

fn devinfo(a: &DevinfoArgs) -> Result<(), ToolError> {
    use rnic_tools::{devinfo, rdma};
    let names: Vec<String> = match &a.device {
        Some(d) => vec![d.clone()],
        None => rdma::list().into_iter().map(|d| d.name).collect(),
    };
    if a.list {
        print!("{}", devinfo::format_list(&names));
        return Ok(());
    }
    if names.is_empty() {
        return Err(ToolError::NoDevices);
    }
    for n in &names {
        let ctx = rdma::open(n, &rdma::EmuOpts::default())?;
        let attrs = rdma::device_attrs(&ctx)?;
        if let Some(p) = a.port
            && !attrs.ports.iter().any(|x| x.port == p)
        {
            return Err(ToolError::Usage(format!(
                "invalid port {p} requested for device {n}"
            )));
        }
        print!("{}", devinfo::format_devinfo(&attrs, a.port, a.verbose));
    }
    Ok(())
}

fn run(cli: Cli) -> Result<(), ToolError> {
    use rnic_tools::{devinfo as di, perf, pingpong, rdma};
    match cli.cmd {
        Cmd::Devices => {
            print!("{}", di::format_devices(&rdma::list()));
            Ok(())
        }
        Cmd::Devinfo(a) => devinfo(&a),
        Cmd::RcPingpong(a) => pingpong::run(pingpong::Kind::Rc, &a),
        Cmd::UdPingpong(a) => pingpong::run(pingpong::Kind::Ud, &a),
        Cmd::WriteBw(a) => perf::run::main(Verb::Write, TestKind::Bw, &a),
        Cmd::ReadBw(a) => perf::run::main(Verb::Read, TestKind::Bw, &a),
        Cmd::SendBw(a) => perf::run::main(Verb::Send, TestKind::Bw, &a),
        Cmd::AtomicBw(a) => perf::run::main(Verb::Atomic, TestKind::Bw, &a),
        Cmd::WriteLat(a) => perf::run::main(Verb::Write, TestKind::Lat, &a),
        Cmd::ReadLat(a) => perf::run::main(Verb::Read, TestKind::Lat, &a),
        Cmd::SendLat(a) => perf::run::main(Verb::Send, TestKind::Lat, &a),
        Cmd::AtomicLat(a) => perf::run::main(Verb::Atomic, TestKind::Lat, &a),
        Cmd::Rping(a) => rnic_tools::rping::run::main(&a),
        Cmd::Cmatose(a) => rnic_tools::cmtest::cmatose::main(&a),
        Cmd::Udaddy(a) => rnic_tools::cmtest::udaddy::main(&a),
    }
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default()).init();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                    ExitCode::from(2)
                } else {
                    ExitCode::SUCCESS
                };
            }
            // One line: clap's first line without its "error: " prefix.
            let text = e.render().to_string();
            let first = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("bad arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("rnic: {first} (see rnic --help)");
            return ExitCode::from(2);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(ToolError::Exit(status)) => ExitCode::from(status),
        Err(e) => {
            eprintln!("rnic: {e}");
            if matches!(
                e,
                ToolError::Usage(_) | ToolError::BadDeviceName(_) | ToolError::BadFaults(_)
            ) {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
