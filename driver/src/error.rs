//! The driver's error type: every failure names the command or the register it came from.

use crate::health::FatalReason;
use rnic_hw_regs::BusError;
use rnic_hw_regs::cmd::CmdOpcode;
use rnic_hw_regs::status::{CmdStatus, DeliveryStatus};
use std::time::Duration;

/// Everything that can go wrong between the driver and a device.
///
/// Command failures name the command (its PRM name through [`CmdOpcode`]'s `Display`), the
/// `op_mod`, and what the device said:
///
/// ```
/// use rnic_driver::DriverError;
/// use rnic_hw_regs::cmd::CmdOpcode;
/// use rnic_hw_regs::status::CmdStatus;
///
/// let e = DriverError::Command {
///     opcode: CmdOpcode::CreateEq,
///     op_mod: 0,
///     status: CmdStatus::BadParam,
///     syndrome: 0x1234,
/// };
/// assert_eq!(
///     e.to_string(),
///     "CREATE_EQ(0x301) op_mod 0x0 failed: status BAD_PARAM(0x3), syndrome 0x00001234"
/// );
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// The device executed the command and reported a non-OK command status.
    #[error(
        "{opcode}({code:#x}) op_mod {op_mod:#x} failed: status {status}, syndrome {syndrome:#010x}",
        code = opcode.code()
    )]
    Command {
        /// The command.
        opcode: CmdOpcode,
        /// Its opcode modifier.
        op_mod: u16,
        /// The command status (output byte 0).
        status: CmdStatus,
        /// Firmware's syndrome (output DW@0x04).
        syndrome: u32,
    },
    /// The device reported a command status that the PRM does not define.
    #[error(
        "{opcode}({code:#x}) op_mod {op_mod:#x} failed: unknown status {status:#04x}, syndrome {syndrome:#010x}",
        code = opcode.code()
    )]
    UnknownCommandStatus {
        /// The command.
        opcode: CmdOpcode,
        /// Its opcode modifier.
        op_mod: u16,
        /// The raw status byte.
        status: u8,
        /// Firmware's syndrome.
        syndrome: u32,
    },
    /// The command was not executed: the entry came back with a delivery error.
    #[error("{opcode}({code:#x}) not delivered: {status}", code = opcode.code())]
    Delivery {
        /// The command.
        opcode: CmdOpcode,
        /// The delivery status (entry `status_own` bits 7:1).
        status: DeliveryStatus,
    },
    /// The entry came back with a delivery status the PRM does not define.
    #[error("{opcode}({code:#x}) not delivered: unknown delivery status {status:#04x}", code = opcode.code())]
    UnknownDeliveryStatus {
        /// The command.
        opcode: CmdOpcode,
        /// The raw delivery status.
        status: u8,
    },
    /// The device did not hand the command queue entry back in time. The slot and its
    /// mailboxes stay reserved (the device may still write them).
    #[error("{opcode}({code:#x}) timed out after {timeout:?} in command slot {slot}", code = opcode.code())]
    Timeout {
        /// The command.
        opcode: CmdOpcode,
        /// The command queue slot it used.
        slot: u8,
        /// How long the driver waited.
        timeout: Duration,
    },
    /// Firmware kept the `initializing` bit set for too long.
    #[error("firmware still initializing after {waited:?} ({phase})")]
    InitTimeout {
        /// Which wait: before or after writing the command queue address.
        phase: &'static str,
        /// How long the driver waited.
        waited: Duration,
    },
    /// The command output is inconsistent (a mailbox with a wrong token or block number, a
    /// field out of range): the device is not trusted.
    #[error("{opcode}({code:#x}): bad output from the device: {what}", code = opcode.code())]
    BadOutput {
        /// The command.
        opcode: CmdOpcode,
        /// What is wrong.
        what: String,
    },
    /// The device is in a fatal state (health syndrome, dead PCI link, stuck firmware).
    #[error("device fatal: {reason}")]
    DeviceFatal {
        /// Why the device is considered dead.
        reason: FatalReason,
    },
    /// The device speaks a command interface revision this driver does not.
    #[error("command interface revision {found}, this driver speaks {expected}")]
    CmdifRevision {
        /// Revision read from the init segment.
        found: u16,
        /// The revision the driver supports (5).
        expected: u16,
    },
    /// A request beyond a limit the device reports (refused before anything is allocated
    /// or sent to the device).
    #[error("{what} of {requested} exceeds the device's limit of {max}")]
    LimitExceeded {
        /// What was asked for (e.g. "memory region bytes").
        what: &'static str,
        /// The amount asked for.
        requested: u64,
        /// The device's limit.
        max: u64,
    },
    /// The device reported a command queue geometry the PRM does not allow.
    #[error("bad command queue geometry: log_cmdq_size {log_size}, log_cmdq_stride {log_stride}")]
    CmdqGeometry {
        /// log2 of the number of slots.
        log_size: u8,
        /// log2 of the entry stride.
        log_stride: u8,
    },
    /// The device lacks something the driver needs (ISSI 1, RoCE, ...).
    #[error("device does not support {0}")]
    Unsupported(String),
    /// A caller-supplied value is out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An opcode the driver has no name for (raw commands must use a PRM opcode).
    #[error("unknown command opcode {0:#x}")]
    UnknownOpcode(u16),
    /// A bus operation (DMA allocation, mapping) failed.
    #[error("bus: {0}")]
    Bus(#[from] BusError),
    /// Teardown could not run to the end because the device stopped answering: its firmware
    /// pages and the command queue were leaked (never freed while the device may write them).
    #[error(
        "teardown incomplete: the device is not answering; {leaked_pages} firmware pages leaked"
    )]
    TeardownIncomplete {
        /// Firmware pages the device kept.
        leaked_pages: usize,
    },
    /// A QP attribute is missing or out of range for a transition.
    #[error("{transition} on QP {qpn:#x}: attribute {attr}: {why}")]
    QpAttr {
        /// The QP.
        qpn: u32,
        /// The transition (`RST2INIT`, `INIT2RTR`, ...).
        transition: &'static str,
        /// The attribute's name (as in `ibv_qp_attr`).
        attr: &'static str,
        /// What is wrong with it.
        why: String,
    },
    /// The HCA was closed already.
    #[error("the HCA is closed")]
    Closed,
}

impl DriverError {
    /// Whether the device answered the command (it executed it and reported a status), so
    /// the memory the command referred to is no longer in its hands when it failed.
    ///
    /// ```
    /// use rnic_driver::DriverError;
    /// use rnic_hw_regs::cmd::QueryCqIn;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let mut q = QueryCqIn::new_cmd();
    /// q.set_cqn(0xab_cdef); // no such CQ
    /// let err = hca.cmdq().exec(&q, &[], &mut []).unwrap_err();
    /// assert!(err.device_answered()); // executed, and refused
    /// assert!(!DriverError::Closed.device_answered());
    /// # Ok(()) }
    /// ```
    pub fn device_answered(&self) -> bool {
        matches!(
            self,
            Self::Command { .. } | Self::UnknownCommandStatus { .. } | Self::BadOutput { .. }
        )
    }

    /// The command this error is about, if it is about one.
    ///
    /// ```
    /// use rnic_driver::DriverError;
    /// use rnic_hw_regs::{cmd::CmdOpcode, status::CmdStatus};
    ///
    /// let e = DriverError::Command { opcode: CmdOpcode::CreateQp, op_mod: 0, status: CmdStatus::BadParam, syndrome: 0 };
    /// assert_eq!(e.opcode(), Some(CmdOpcode::CreateQp));
    /// assert_eq!(DriverError::Closed.opcode(), None);
    /// ```
    pub fn opcode(&self) -> Option<CmdOpcode> {
        match self {
            Self::Command { opcode, .. }
            | Self::UnknownCommandStatus { opcode, .. }
            | Self::Delivery { opcode, .. }
            | Self::UnknownDeliveryStatus { opcode, .. }
            | Self::Timeout { opcode, .. }
            | Self::BadOutput { opcode, .. } => Some(*opcode),
            _ => None,
        }
    }

    /// The command status, for [`DriverError::Command`].
    ///
    /// ```
    /// use rnic_hw_regs::{cmd::QueryCqIn, status::CmdStatus};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let mut q = QueryCqIn::new_cmd();
    /// q.set_cqn(0xab_cdef); // no such CQ
    /// let err = hca.cmdq().exec(&q, &[], &mut []).unwrap_err();
    /// assert_eq!(err.cmd_status(), Some(CmdStatus::BadResource));
    /// # Ok(()) }
    /// ```
    pub fn cmd_status(&self) -> Option<CmdStatus> {
        match self {
            Self::Command { status, .. } => Some(*status),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rnic_hw_regs::init_seg::HealthSyndrome;

    #[test]
    fn errors_name_the_command() {
        let e = DriverError::Delivery {
            opcode: CmdOpcode::ManagePages,
            status: DeliveryStatus::TokenError,
        };
        assert_eq!(
            e.to_string(),
            "MANAGE_PAGES(0x108) not delivered: TOKEN_ERR(0x2)"
        );
        assert_eq!(e.opcode(), Some(CmdOpcode::ManagePages));
        let e = DriverError::Timeout {
            opcode: CmdOpcode::InitHca,
            slot: 0,
            timeout: Duration::from_secs(60),
        };
        assert_eq!(
            e.to_string(),
            "INIT_HCA(0x102) timed out after 60s in command slot 0"
        );
        let e = DriverError::UnknownCommandStatus {
            opcode: CmdOpcode::AllocPd,
            op_mod: 1,
            status: 0x77,
            syndrome: 5,
        };
        assert!(
            e.to_string()
                .starts_with("ALLOC_PD(0x800) op_mod 0x1 failed: unknown status 0x77")
        );
        let e = DriverError::DeviceFatal {
            reason: FatalReason::HealthSyndrome {
                syndrome: Some(HealthSyndrome::HighTemp),
                raw: 0x10,
                ext_synd: 0,
            },
        };
        assert!(e.to_string().contains("HIGH_TEMP_ERR"), "{e}");
        assert_eq!(e.opcode(), None);
        let e: DriverError = BusError::NoMemory.into();
        assert_eq!(e.to_string(), "bus: no memory for DMA");
    }
}
