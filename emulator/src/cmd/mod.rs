//! The command processor: the command queue entries and mailbox chains the host writes, checked
//! as a ConnectX checks them, dispatched to one handler file per command family.
//!
//! Delivery problems (entry type, lengths, pointers, tokens, block numbers) complete the entry
//! with a PRM delivery status and run nothing. A command that is delivered runs its handler,
//! which either fills the output or fails with a PRM command status and a syndrome.
//!
//! Faults: an IOMMU fault while reading or writing a mailbox completes the command with
//! delivery status 0x6 (firmware internal error), and is counted in the IOMMU's fault counter.
//! An entry that cannot be read at all cannot be completed; the doorbell is counted as bad.

use rnic_hw_regs::PrmLayout;
use rnic_hw_regs::cmd::CmdOpcode;
use rnic_hw_regs::cmdq::{
    self, CMD_TYPE_PCIE, CMDQ_ENTRY_SIZE, CmdMailbox, CmdqEntry, Direction, INLINE_LEN,
    MAILBOX_ALIGN, MAILBOX_SIZE,
};
use rnic_hw_regs::status::{CmdStatus, DeliveryStatus};
use zerocopy::{FromBytes, IntoBytes};

use crate::bar::Bar;
use crate::device::Ctx;

/// The largest command input or output the device accepts (a MANAGE_PAGES of the ConnectX-4's
/// 12,868 init pages is about 100 KiB).
const MAX_CMD_LEN: usize = 4 << 20;

/// A command that failed: the PRM status and firmware's syndrome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CmdFail {
    pub status: CmdStatus,
    pub syndrome: u32,
}

impl CmdFail {
    pub(crate) const fn new(status: CmdStatus, syndrome: u32) -> Self {
        CmdFail { status, syndrome }
    }
}

/// What a handler returns.
pub(crate) type CmdResult = Result<(), CmdFail>;

/// One delivered command, as a handler sees it.
pub(crate) struct Cmd<'a> {
    pub opcode: CmdOpcode,
    pub op_mod: u16,
    /// The whole input (inline bytes and mailbox data), `input_length` bytes.
    pub input: &'a [u8],
    /// The whole output buffer, `output_length` bytes, zeroed.
    pub output: &'a mut [u8],
}

impl Cmd<'_> {
    /// The fixed part of the input as layout `T`. A shorter input reads as if zero-extended:
    /// the real ConnectX-4 accepted the kernel's 16-byte INIT_HCA (layout 0x20 bytes).
    pub(crate) fn input<T: PrmLayout + Default>(&self) -> T {
        let mut t = T::default();
        let n = self.input.len().min(T::SIZE);
        t.as_mut_bytes()[..n].copy_from_slice(&self.input[..n]);
        t
    }

    /// The input bytes from `offset` on (flexible arrays such as PAS), empty past the end.
    pub(crate) fn input_tail(&self, offset: usize) -> &[u8] {
        self.input.get(offset..).unwrap_or(&[])
    }

    /// The output as layout `T`; an output buffer shorter than `T` is BAD_OUTPUT_LENGTH.
    pub(crate) fn output<T: PrmLayout>(&mut self) -> Result<&mut T, CmdFail> {
        T::mut_from_prefix(self.output)
            .map(|(t, _)| t)
            .map_err(|_| CmdFail::new(CmdStatus::BadOutputLength, syndrome::OUTPUT_TOO_SHORT))
    }
}

/// Syndromes the command processor itself reports. Handlers define their own, one per check,
/// so a failure can be traced to the rule that caused it.
pub(crate) mod syndrome {
    /// The opcode is not one this device implements.
    pub(crate) const UNKNOWN_OPCODE: u32 = 0x0100_0001;
    /// The output buffer is shorter than the command's output.
    pub(crate) const OUTPUT_TOO_SHORT: u32 = 0x0100_0002;
    /// The input is shorter than the command's header.
    pub(crate) const INPUT_TOO_SHORT: u32 = 0x0100_0003;
}

/// A command doorbell: run every slot whose bit is set, in slot order.
pub(crate) fn doorbell(ctx: &mut Ctx<'_>, bar: &Bar, mask: u32) {
    let (log_size, log_stride) = bar.cmdq_geometry();
    let slots = 1u32 << log_size;
    if slots < 32 && mask >> slots != 0 {
        ctx.st.counters.bad_doorbells += 1;
    }
    if bar.is_initializing() {
        ctx.st.counters.bad_doorbells += 1;
        return;
    }
    let base = bar.cmdq_addr();
    for slot in 0..slots {
        if mask & (1 << slot) != 0 {
            execute(ctx, base + (u64::from(slot) << log_stride));
        }
    }
}

/// Runs the command in the entry at `iova` and completes it.
fn execute(ctx: &mut Ctx<'_>, iova: u64) {
    let mut entry = CmdqEntry::default();
    if ctx.dma.read(iova, entry.as_mut_bytes()).is_err() {
        ctx.st.counters.bad_doorbells += 1;
        return;
    }
    if !entry.ownership() {
        // The host rang for an entry it does not hand over: nothing to do.
        ctx.st.counters.bad_doorbells += 1;
        return;
    }
    ctx.st.counters.commands += 1;
    let delivery = match deliver_and_run(ctx, &mut entry) {
        Ok(()) => DeliveryStatus::Ok,
        Err(d) => {
            ctx.st.counters.delivery_errors += 1;
            d
        }
    };
    entry.set_delivery_status(delivery);
    entry.set_ownership(false);
    let _ = ctx.dma.write_owned(iova, entry.as_bytes());
    debug_assert_eq!(entry.as_bytes().len(), CMDQ_ENTRY_SIZE);
}

/// Checks delivery, gathers the input, runs the handler and scatters the output.
fn deliver_and_run(ctx: &mut Ctx<'_>, entry: &mut CmdqEntry) -> Result<(), DeliveryStatus> {
    if entry.cmd_type() != CMD_TYPE_PCIE {
        return Err(DeliveryStatus::BadCommandType);
    }
    let in_len = entry.input_length() as usize;
    let out_len = entry.output_length() as usize;
    if !(8..=MAX_CMD_LEN).contains(&in_len) {
        return Err(DeliveryStatus::InputLengthError);
    }
    if !(8..=MAX_CMD_LEN).contains(&out_len) {
        return Err(DeliveryStatus::OutputLengthError);
    }
    let token = entry.token();
    let mut input = vec![0u8; in_len];
    let inline: [u8; INLINE_LEN] = entry.input_inline().0;
    gather_chain(
        ctx,
        &inline,
        entry.input_mailbox_pointer(),
        token,
        &mut input,
    )?;

    let mut output = vec![0u8; out_len];
    let head = rnic_hw_regs::cmd::CmdHdrIn::read_from_prefix(&input)
        .map(|(h, _)| h)
        .ok();
    let (opcode_raw, op_mod) = head.map_or((0, 0), |h| (h.opcode(), h.op_mod()));
    let result = match CmdOpcode::try_from(opcode_raw) {
        Ok(opcode) => {
            let mut cmd = Cmd {
                opcode,
                op_mod,
                input: &input,
                output: &mut output,
            };
            dispatch(ctx, &mut cmd)
        }
        Err(_) => Err(CmdFail::new(CmdStatus::BadOp, syndrome::UNKNOWN_OPCODE)),
    };
    if let Err(fail) = result {
        ctx.st.counters.command_errors += 1;
        output.fill(0);
        output[0] = fail.status.raw();
        output[4..8].copy_from_slice(&fail.syndrome.to_be_bytes());
    }
    let mut out_inline = [0u8; INLINE_LEN];
    cmdq::fill_inline(&output, &mut out_inline);
    entry.output_inline_mut().0 = out_inline;
    scatter_chain(ctx, &output, entry.output_mailbox_pointer(), token)
}

/// Reads the input chain starting at `ptr` into `out` (whose length is the input length).
fn gather_chain(
    ctx: &mut Ctx<'_>,
    inline: &[u8; INLINE_LEN],
    mut ptr: u64,
    token: u8,
    out: &mut [u8],
) -> Result<(), DeliveryStatus> {
    let n = out.len().min(INLINE_LEN);
    out[..n].copy_from_slice(&inline[..n]);
    let mut block = CmdMailbox::default();
    for index in 0..cmdq::blocks_for(out.len()) {
        if ptr == 0 {
            return Err(DeliveryStatus::InputLengthError);
        }
        if ptr % MAILBOX_ALIGN as u64 != 0 {
            return Err(DeliveryStatus::InputPointerMisaligned);
        }
        ctx.dma
            .read(ptr, &mut block.as_mut_bytes()[..MAILBOX_SIZE])
            .map_err(|_| DeliveryStatus::FwInternalError)?;
        cmdq::gather_block(&block, index, token, out)
            .map_err(|e| e.delivery_status(Direction::Input))?;
        ptr = block.next_pointer();
    }
    Ok(())
}

/// Writes `output` past its inline part into the host's output chain starting at `ptr`.
fn scatter_chain(
    ctx: &mut Ctx<'_>,
    output: &[u8],
    mut ptr: u64,
    token: u8,
) -> Result<(), DeliveryStatus> {
    let mut block = CmdMailbox::default();
    for index in 0..cmdq::blocks_for(output.len()) {
        if ptr == 0 {
            return Err(DeliveryStatus::OutputLengthError);
        }
        if ptr % MAILBOX_ALIGN as u64 != 0 {
            return Err(DeliveryStatus::OutputPointerMisaligned);
        }
        // The host owns `next_pointer`; read it before overwriting the block.
        ctx.dma
            .read(ptr, block.as_mut_bytes())
            .map_err(|_| DeliveryStatus::FwInternalError)?;
        let next = block.next_pointer();
        cmdq::fill_block(output, index, token, &mut block)
            .map_err(|e| e.delivery_status(Direction::Output))?;
        ctx.dma
            .write(ptr, block.as_bytes())
            .map_err(|_| DeliveryStatus::FwInternalError)?;
        ptr = next;
    }
    Ok(())
}

/// Runs a delivered command.
fn dispatch(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    if cmd.input.len() < 8 {
        return Err(CmdFail::new(
            CmdStatus::BadInputLength,
            syndrome::INPUT_TOO_SHORT,
        ));
    }
    let _ = ctx;
    Err(CmdFail::new(CmdStatus::BadOp, syndrome::UNKNOWN_OPCODE))
}
