//! The flags the ping-pong and perf tools share, flattened into each tool's flags
//! (`#[command(flatten)]`): the device and its port (`-d`, `-i`: the same in rdma-core and
//! perftest) and the emulator's options (`--pcap`, `--emu-faults`).
//!
//! The TCP port (`-p`) and the GID index stay each tool's own: their help differs, and the GID
//! index is rdma-core's `-g/--gid-idx` but perftest's `-x/--gid-index`.

use crate::error::ToolError;
use crate::rdma::{self, EmuOpts};
use clap::Args;
use std::path::PathBuf;

/// `-d` and `-i`: which device and which of its ports.
///
/// ```
/// use clap::Parser;
/// #[derive(Parser)]
/// struct Tool {
///     #[command(flatten)]
///     dev: rnic_tools::args::DeviceArgs,
/// }
/// let t = Tool::try_parse_from(["t", "-d", "emu0"]).unwrap();
/// assert_eq!((t.dev.device.as_deref(), t.dev.ib_port), (Some("emu0"), 1));
/// assert_eq!(t.dev.name(false), "emu0");
/// assert!(t.dev.check_port().is_ok());
/// let t = Tool::try_parse_from(["t", "-i", "2"]).unwrap();
/// assert!(t.dev.check_port().is_err());
/// ```
#[derive(Debug, Clone, Args)]
pub struct DeviceArgs {
    /// Device (`emu:<IPv4>`, `emu-tap:<ifname>,<IPv4>/<prefix>`, `emu0`, `emu1`, `mlx5_<N>`, a PCI address); default: an emulated device.
    #[arg(short = 'd', long = "ib-dev")]
    pub device: Option<String>,
    /// Port of the device.
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    pub ib_port: u8,
}

impl DeviceArgs {
    /// Fails unless `-i` names the device's one port.
    pub fn check_port(&self) -> Result<(), ToolError> {
        if self.ib_port != 1 {
            return Err(ToolError::Usage(format!(
                "invalid port {} (the device has port 1)",
                self.ib_port
            )));
        }
        Ok(())
    }

    /// The device to open: `-d`, or the default for a client or a server (which it says on
    /// stderr).
    pub fn name(&self, client: bool) -> String {
        match &self.device {
            Some(d) => d.clone(),
            None => {
                let (d, note) = rdma::default_device(client);
                eprintln!("{note}");
                d
            }
        }
    }
}

/// `--pcap` and `--emu-faults`: what an emulated device records and injects.
///
/// ```
/// use clap::Parser;
/// #[derive(Parser)]
/// struct Tool {
///     #[command(flatten)]
///     emu: rnic_tools::args::EmuArgs,
/// }
/// let t = Tool::try_parse_from(["t", "--emu-faults", "loss=0.05,seed=7"]).unwrap();
/// assert_eq!(t.emu.opts().unwrap().faults.as_deref(), Some("loss=0.05,seed=7"));
/// let t = Tool::try_parse_from(["t", "--emu-faults", "nonsense"]).unwrap();
/// assert!(t.emu.opts().is_err());
/// ```
#[derive(Debug, Clone, Args)]
pub struct EmuArgs {
    /// Emulated devices: write the wire traffic to this pcap file.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Emulated devices: fault injection, e.g. loss=0.05,dup=0.01,reorder=0.01,corrupt=0.001,seed=7.
    #[arg(long = "emu-faults", value_name = "SPEC")]
    pub emu_faults: Option<String>,
}

impl EmuArgs {
    /// The checked emulator options.
    pub fn opts(&self) -> Result<EmuOpts, ToolError> {
        EmuOpts::new(self.pcap.clone(), self.emu_faults.clone())
    }
}
