//! The command queue: the 64-byte command queue entry ([`CmdqEntry`]), the 0x240-byte mailbox
//! block ([`CmdMailbox`]), their signatures, and the mailbox-chain helper that moves a command
//! payload of any length between a plain byte slice and "16 inline bytes + a chain of
//! 512-byte blocks" ([`pack`], [`gather`], and their one-block steps [`fill_block`] and
//! [`gather_block`]).
//!
//! The helper never allocates and never touches a block's `next_pointer`: block bus addresses
//! belong to whoever owns the blocks (the driver's DMA buffers, or the emulator's copies of
//! what it read from them). The driver packs inputs and gathers outputs; the emulator gathers
//! inputs and packs outputs.
//!
//! ```
//! use rnic_hw_regs::cmdq::{blocks_for, gather, pack, CmdMailbox};
//! use zerocopy::FromZeros;
//!
//! let payload: [u8; 600] = core::array::from_fn(|i| i as u8);
//! let mut inline = [0u8; 16];
//! let mut blocks = [CmdMailbox::new_zeroed(); 2];
//! assert_eq!(blocks_for(payload.len()), 2);
//! assert_eq!(pack(&payload, &mut inline, &mut blocks, 0x42), Ok(2));
//!
//! let mut back = [0u8; 600];
//! gather(&inline, &blocks, 0x42, &mut back).unwrap();
//! assert_eq!(back, payload);
//! ```

use crate::status::DeliveryStatus;
use core::fmt;

/// Entry type for the PCIe command transport; any other value gets delivery status 0x10.
pub const CMD_TYPE_PCIE: u8 = 7;
/// Size of a command queue entry.
pub const CMDQ_ENTRY_SIZE: usize = 64;
/// Command bytes carried inside the entry (input at 0x10, output at 0x20).
pub const INLINE_LEN: usize = 16;
/// Payload bytes per mailbox block.
pub const MAILBOX_DATA_LEN: usize = 512;
/// Size of a mailbox block.
pub const MAILBOX_SIZE: usize = 0x240;
/// Alignment the kernel gives mailbox blocks (their bus address must be at least this
/// aligned; the low bits of the pointers are reserved).
pub const MAILBOX_ALIGN: usize = 1024;

prm_layout! {
    /// The first 16 bytes of every command input (`mbox_in` header), as carried inline in the
    /// entry at 0x10.
    pub struct CmdInputHead("", 16) {
        /// Command opcode.
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context id (0 for a kernel-like driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
    }
}

prm_layout! {
    /// The first 16 bytes of every command output (`mbox_out` header), as carried inline in
    /// the entry at 0x20.
    pub struct CmdOutputHead("", 16) {
        /// Command status (see [`crate::status::CmdStatus`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Syndrome: firmware's detail code when `status` is not OK.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

prm_layout! {
    /// Command queue entry (64 bytes; entry i at `cmdq_base + (i << log_cmdq_stride)`).
    pub struct CmdqEntry("", 64) {
        /// Entry type: must be [`CMD_TYPE_PCIE`].
        cmd_type / set_cmd_type: u8 = dw(0x00, 31, 24);
        /// Input length in bytes, including the 16 inline bytes.
        input_length / set_input_length: u32 = dw(0x04, 31, 0);
        /// Bus address of the first input mailbox block (0 if the input fits inline).
        input_mailbox_pointer / set_input_mailbox_pointer: u64 = qw(0x08);
        /// The first 16 bytes of the command input.
        input_inline / input_inline_mut: CmdInputHead = nested(0x10);
        /// The first 16 bytes of the command output.
        output_inline / output_inline_mut: CmdOutputHead = nested(0x20);
        /// Bus address of the first output mailbox block (0 if the output fits inline).
        output_mailbox_pointer / set_output_mailbox_pointer: u64 = qw(0x30);
        /// Output length in bytes, including the 16 inline bytes.
        output_length / set_output_length: u32 = dw(0x38, 31, 0);
        /// Token: copied into every mailbox block of the command.
        token / set_token: u8 = dw(0x3C, 31, 24);
        /// Entry signature (see [`CmdqEntry::compute_signature`]).
        signature / set_signature: u8 = dw(0x3C, 23, 16);
        /// Delivery status, raw (see [`CmdqEntry::delivery_status`]).
        status / set_status: u8 = dw(0x3C, 7, 1);
        /// Ownership: `true` while the device owns the entry.
        ownership / set_ownership: bool = dw(0x3C, 0, 0);
    }
}

impl CmdqEntry {
    /// The typed delivery status; an unknown code is an error, never a panic.
    ///
    /// ```
    /// use rnic_hw_regs::{cmdq::CmdqEntry, status::DeliveryStatus};
    ///
    /// let mut e = CmdqEntry::default();
    /// e.set_status(0x02); // status_own bits 7:1
    /// assert_eq!(e.delivery_status(), Ok(DeliveryStatus::TokenError));
    /// e.set_status(0x7F);
    /// assert!(e.delivery_status().is_err());
    /// ```
    pub fn delivery_status(&self) -> Result<DeliveryStatus, crate::status::UnknownCode> {
        DeliveryStatus::try_from(self.status())
    }

    /// Sets the delivery status (device side).
    ///
    /// ```
    /// use rnic_hw_regs::{cmdq::CmdqEntry, status::DeliveryStatus};
    ///
    /// let mut e = CmdqEntry::default();
    /// e.set_ownership(true);
    /// e.set_delivery_status(DeliveryStatus::BadBlockNumber);
    /// assert_eq!(e.status(), 0x03);
    /// assert!(e.ownership()); // the ownership bit is untouched
    /// ```
    pub fn set_delivery_status(&mut self, st: DeliveryStatus) {
        self.set_status(st.raw());
    }

    /// The signature that makes the XOR of all 64 bytes 0xFF: NOT of the XOR of every byte
    /// but the signature byte itself.
    ///
    /// ```
    /// use rnic_hw_regs::cmdq::CmdqEntry;
    ///
    /// let mut e = CmdqEntry::default();
    /// e.set_token(0x0F);
    /// assert_eq!(e.compute_signature(), !0x0F);
    /// e.set_signature(0xAA); // the signature byte itself does not count
    /// assert_eq!(e.compute_signature(), !0x0F);
    /// ```
    pub fn compute_signature(&self) -> u8 {
        !xor8(&self.0) ^ self.signature()
    }

    /// Writes [`Self::compute_signature`] (call after every other field, ownership included).
    ///
    /// ```
    /// use rnic_hw_regs::cmdq::CmdqEntry;
    ///
    /// let mut e = CmdqEntry::default();
    /// e.set_input_length(0x10);
    /// e.set_token(0x42);
    /// e.sign();
    /// assert!(e.signature_ok());
    /// assert_eq!(e.0.iter().fold(0, |a, b| a ^ b), 0xFF);
    /// ```
    pub fn sign(&mut self) {
        let s = self.compute_signature();
        self.set_signature(s);
    }

    /// Whether the signature matches the entry's bytes.
    ///
    /// ```
    /// use rnic_hw_regs::cmdq::CmdqEntry;
    ///
    /// let mut e = CmdqEntry::default();
    /// e.set_token(7);
    /// e.sign();
    /// assert!(e.signature_ok());
    /// e.set_output_length(8); // changed after signing
    /// assert!(!e.signature_ok());
    /// ```
    pub fn signature_ok(&self) -> bool {
        xor8(&self.0) == 0xFF
    }
}

/// The 512 data bytes of a mailbox block.
///
/// ```
/// use rnic_hw_regs::cmdq::{CmdMailbox, MailboxData, MAILBOX_DATA_LEN};
/// use rnic_hw_regs::PrmLayout;
///
/// let mut block = CmdMailbox::default();
/// block.data_mut().0[..3].copy_from_slice(&[1, 2, 3]);
/// assert_eq!(&block.0[..3], &[1, 2, 3]); // the data is the block's first 512 bytes
/// assert_eq!(MailboxData::SIZE, MAILBOX_DATA_LEN);
/// assert_eq!(format!("{:?}", block.data()), "MailboxData(3 bytes up to the last non-zero)");
/// ```
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::KnownLayout,
    zerocopy::Immutable,
    zerocopy::Unaligned,
)]
#[repr(transparent)]
pub struct MailboxData(pub [u8; MAILBOX_DATA_LEN]);

impl crate::layout::PrmLayout for MailboxData {
    const IFC_NAME: &'static str = "";
    const SIZE: usize = MAILBOX_DATA_LEN;
    const FIELDS: &'static [crate::layout::FieldDesc] = &[];
}

impl fmt::Debug for MailboxData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let used = self.0.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
        write!(f, "MailboxData({used} bytes up to the last non-zero)")
    }
}

prm_layout! {
    /// Command mailbox block (0x240 bytes): 512 data bytes and a trailer that chains blocks.
    pub struct CmdMailbox("", 0x240) {
        /// The 512 payload bytes.
        data / data_mut: MailboxData = nested(0x000);
        /// Bus address of the next block (0 in the last block).
        next_pointer / set_next_pointer: u64 = qw(0x230);
        /// Position of the block in its chain: 0, 1, 2, ...
        block_number / set_block_number: u32 = dw(0x238, 31, 0);
        /// Token: equals the entry's token.
        token / set_token: u8 = dw(0x23C, 23, 16);
        /// Control signature over bytes 0x200..=0x23D.
        ctrl_signature / set_ctrl_signature: u8 = dw(0x23C, 15, 8);
        /// Signature over bytes 0x000..=0x23E.
        signature / set_signature: u8 = dw(0x23C, 7, 0);
    }
}

impl CmdMailbox {
    /// NOT of the XOR of bytes 0x200..=0x23D.
    ///
    /// ```
    /// use rnic_hw_regs::cmdq::CmdMailbox;
    ///
    /// let mut b = CmdMailbox::default();
    /// b.set_block_number(1);
    /// b.set_token(0x10);
    /// assert_eq!(b.compute_ctrl_signature(), !(1 ^ 0x10));
    /// b.data_mut().0[0] = 0xFF; // data bytes are outside the control signature
    /// assert_eq!(b.compute_ctrl_signature(), !(1 ^ 0x10));
    /// ```
    pub fn compute_ctrl_signature(&self) -> u8 {
        !xor8(&self.0[0x200..0x23E])
    }

    /// NOT of the XOR of bytes 0x000..=0x23E (so compute it after the control signature).
    ///
    /// ```
    /// use rnic_hw_regs::cmdq::CmdMailbox;
    ///
    /// let mut b = CmdMailbox::default();
    /// b.data_mut().0[0] = 0x0F;
    /// b.set_ctrl_signature(0xF0);
    /// assert_eq!(b.compute_signature(), !(0x0F ^ 0xF0));
    /// ```
    pub fn compute_signature(&self) -> u8 {
        !xor8(&self.0[..0x23F])
    }

    /// Writes both signatures (control first).
    ///
    /// ```
    /// use rnic_hw_regs::cmdq::CmdMailbox;
    ///
    /// let mut b = CmdMailbox::default();
    /// b.data_mut().0[..4].copy_from_slice(b"mlx5");
    /// b.set_token(0x42);
    /// b.sign();
    /// assert!(b.signatures_ok());
    /// assert_eq!(b.ctrl_signature(), b.compute_ctrl_signature());
    /// ```
    pub fn sign(&mut self) {
        let c = self.compute_ctrl_signature();
        self.set_ctrl_signature(c);
        let s = self.compute_signature();
        self.set_signature(s);
    }

    /// Whether both signatures match the block's bytes.
    ///
    /// ```
    /// use rnic_hw_regs::cmdq::CmdMailbox;
    ///
    /// let mut b = CmdMailbox::default();
    /// b.sign();
    /// assert!(b.signatures_ok());
    /// b.data_mut().0[100] ^= 1; // a flipped payload bit breaks the block signature
    /// assert!(!b.signatures_ok());
    /// ```
    pub fn signatures_ok(&self) -> bool {
        self.ctrl_signature() == self.compute_ctrl_signature()
            && self.signature() == self.compute_signature()
    }
}

fn xor8(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0, |a, b| a ^ b)
}

/// How many mailbox blocks a payload of `len` bytes needs: `ceil((len - 16) / 512)`, 0 when
/// it fits inline.
///
/// ```
/// use rnic_hw_regs::cmdq::blocks_for;
///
/// assert_eq!(blocks_for(16), 0); // fits inline
/// assert_eq!(blocks_for(17), 1);
/// assert_eq!(blocks_for(16 + 512), 1);
/// assert_eq!(blocks_for(16 + 513), 2);
/// ```
pub const fn blocks_for(len: usize) -> usize {
    len.saturating_sub(INLINE_LEN).div_ceil(MAILBOX_DATA_LEN)
}

/// Which half of a command a chain carries; selects the length delivery status.
///
/// ```
/// use rnic_hw_regs::cmdq::{ChainError, Direction};
/// use rnic_hw_regs::status::DeliveryStatus;
///
/// let e = ChainError::TooFewBlocks { needed: 2, available: 1 };
/// assert_eq!(e.delivery_status(Direction::Input), DeliveryStatus::InputLengthError);
/// assert_eq!(e.delivery_status(Direction::Output), DeliveryStatus::OutputLengthError);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// The command input (entry 0x10 + input mailboxes).
    Input,
    /// The command output (entry 0x20 + output mailboxes).
    Output,
}

/// Why a chain could not be packed or gathered. Each maps to the PRM delivery status a device
/// reports for it ([`ChainError::delivery_status`]).
///
/// ```
/// use rnic_hw_regs::cmdq::{gather, ChainError, CmdMailbox};
///
/// let blocks = [CmdMailbox::default(); 1]; // block 0 with token 0
/// let mut out = [0u8; 100];
/// assert_eq!(
///     gather(&[0; 16], &blocks, 0x42, &mut out),
///     Err(ChainError::BadToken { index: 0, expected: 0x42, found: 0 })
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainError {
    /// The chain has fewer blocks than the length needs (or the caller gave too few).
    TooFewBlocks {
        /// Blocks the length needs.
        needed: usize,
        /// Blocks available.
        available: usize,
    },
    /// A block's `block_number` is not its position in the chain.
    BadBlockNumber {
        /// Position in the chain.
        index: usize,
        /// The block number found.
        found: u32,
    },
    /// A block's token differs from the entry's.
    BadToken {
        /// Position in the chain.
        index: usize,
        /// The entry's token.
        expected: u8,
        /// The block's token.
        found: u8,
    },
    /// A block index beyond what the payload length needs.
    IndexOutOfRange {
        /// The index asked for.
        index: usize,
        /// Blocks the length needs.
        needed: usize,
    },
}

impl ChainError {
    /// The delivery status a device reports for this error in the given direction.
    ///
    /// ```
    /// use rnic_hw_regs::cmdq::{ChainError, Direction};
    /// use rnic_hw_regs::status::DeliveryStatus;
    ///
    /// let e = ChainError::BadBlockNumber { index: 1, found: 7 };
    /// assert_eq!(e.delivery_status(Direction::Input), DeliveryStatus::BadBlockNumber);
    /// let e = ChainError::IndexOutOfRange { index: 3, needed: 1 };
    /// assert_eq!(e.delivery_status(Direction::Output), DeliveryStatus::OutputLengthError);
    /// ```
    pub const fn delivery_status(&self, dir: Direction) -> DeliveryStatus {
        match self {
            Self::BadBlockNumber { .. } => DeliveryStatus::BadBlockNumber,
            Self::BadToken { .. } => DeliveryStatus::TokenError,
            Self::TooFewBlocks { .. } | Self::IndexOutOfRange { .. } => match dir {
                Direction::Input => DeliveryStatus::InputLengthError,
                Direction::Output => DeliveryStatus::OutputLengthError,
            },
        }
    }
}

impl fmt::Display for ChainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooFewBlocks { needed, available } => {
                write!(
                    f,
                    "mailbox chain has {available} blocks, the length needs {needed}"
                )
            }
            Self::BadBlockNumber { index, found } => {
                write!(f, "mailbox block {index} carries block number {found}")
            }
            Self::BadToken {
                index,
                expected,
                found,
            } => write!(
                f,
                "mailbox block {index} carries token {found:#04x}, the entry {expected:#04x}"
            ),
            Self::IndexOutOfRange { index, needed } => {
                write!(
                    f,
                    "mailbox block {index} is beyond the {needed} blocks the length needs"
                )
            }
        }
    }
}

impl core::error::Error for ChainError {}

/// The part of `payload` that block `index` carries (empty past the end).
fn block_chunk(payload: &[u8], index: usize) -> &[u8] {
    let start = INLINE_LEN.saturating_add(index.saturating_mul(MAILBOX_DATA_LEN));
    let end = start.saturating_add(MAILBOX_DATA_LEN).min(payload.len());
    payload.get(start..end).unwrap_or(&[])
}

/// Copies `payload`'s first 16 bytes into `inline`, zero-padded.
///
/// ```
/// use rnic_hw_regs::cmdq::fill_inline;
///
/// let mut inline = [0xEE; 16];
/// fill_inline(&[1, 2, 3], &mut inline);
/// assert_eq!(inline[..4], [1, 2, 3, 0]); // zero-padded
/// fill_inline(&[9; 40], &mut inline);
/// assert_eq!(inline, [9; 16]); // only the first 16 bytes
/// ```
pub fn fill_inline(payload: &[u8], inline: &mut [u8; INLINE_LEN]) {
    let n = payload.len().min(INLINE_LEN);
    inline[..n].copy_from_slice(&payload[..n]);
    inline[n..].fill(0);
}

/// Fills block `index` of `payload`'s chain: its 512 data bytes (zero-padded), block number
/// and token. `next_pointer` and the signatures are left alone.
///
/// ```
/// use rnic_hw_regs::cmdq::{fill_block, ChainError, CmdMailbox};
///
/// let payload = [0xAB; 16 + 512 + 10]; // two blocks
/// let mut block = CmdMailbox::default();
/// fill_block(&payload, 1, 0x42, &mut block).unwrap();
/// assert_eq!((block.block_number(), block.token()), (1, 0x42));
/// assert_eq!(block.data().0[9..11], [0xAB, 0]); // the last 10 bytes, then zeros
/// assert_eq!(
///     fill_block(&payload, 2, 0x42, &mut block),
///     Err(ChainError::IndexOutOfRange { index: 2, needed: 2 })
/// );
/// ```
pub fn fill_block(
    payload: &[u8],
    index: usize,
    token: u8,
    block: &mut CmdMailbox,
) -> Result<(), ChainError> {
    let needed = blocks_for(payload.len());
    let number = match u32::try_from(index) {
        Ok(n) if index < needed => n,
        _ => return Err(ChainError::IndexOutOfRange { index, needed }),
    };
    let chunk = block_chunk(payload, index);
    let data = &mut block.data_mut().0;
    data[..chunk.len()].copy_from_slice(chunk);
    data[chunk.len()..].fill(0);
    block.set_block_number(number);
    block.set_token(token);
    Ok(())
}

/// Packs `payload` into `inline` and the first [`blocks_for`]`(payload.len())` of `blocks`
/// (each filled by [`fill_block`]). Returns the number of blocks used; blocks past it are
/// untouched. The caller sets the entry's length and pointers and each block's
/// `next_pointer`.
///
/// ```
/// use rnic_hw_regs::cmdq::{pack, ChainError, CmdMailbox};
///
/// let payload = [7u8; 100];
/// let mut inline = [0u8; 16];
/// let mut blocks = [CmdMailbox::default(); 2];
/// assert_eq!(pack(&payload, &mut inline, &mut blocks, 1), Ok(1));
/// assert_eq!(blocks[0].data().0[83..85], [7, 0]); // 84 bytes in block 0
/// assert_eq!(
///     pack(&[0; 600], &mut inline, &mut blocks[..1], 1),
///     Err(ChainError::TooFewBlocks { needed: 2, available: 1 })
/// );
/// ```
pub fn pack(
    payload: &[u8],
    inline: &mut [u8; INLINE_LEN],
    blocks: &mut [CmdMailbox],
    token: u8,
) -> Result<usize, ChainError> {
    let needed = blocks_for(payload.len());
    if blocks.len() < needed {
        return Err(ChainError::TooFewBlocks {
            needed,
            available: blocks.len(),
        });
    }
    fill_inline(payload, inline);
    for (i, block) in blocks[..needed].iter_mut().enumerate() {
        fill_block(payload, i, token, block)?;
    }
    Ok(needed)
}

/// Checks block `index` of a chain (block number and token) and copies its share of the
/// payload into `out` (whose length is the payload length).
///
/// ```
/// use rnic_hw_regs::cmdq::{fill_block, gather_block, ChainError, CmdMailbox};
///
/// let payload: [u8; 100] = core::array::from_fn(|i| i as u8);
/// let mut block = CmdMailbox::default();
/// fill_block(&payload, 0, 5, &mut block).unwrap();
/// let mut out = [0u8; 100];
/// gather_block(&block, 0, 5, &mut out).unwrap();
/// assert_eq!(out[16..], payload[16..]); // the block carries bytes 16..
/// assert!(matches!(gather_block(&block, 0, 6, &mut out), Err(ChainError::BadToken { .. })));
/// ```
pub fn gather_block(
    block: &CmdMailbox,
    index: usize,
    token: u8,
    out: &mut [u8],
) -> Result<(), ChainError> {
    let needed = blocks_for(out.len());
    if index >= needed {
        return Err(ChainError::IndexOutOfRange { index, needed });
    }
    let found = block.block_number();
    if u32::try_from(index) != Ok(found) {
        return Err(ChainError::BadBlockNumber { index, found });
    }
    if block.token() != token {
        return Err(ChainError::BadToken {
            index,
            expected: token,
            found: block.token(),
        });
    }
    // `index < needed` keeps `start` inside `out`.
    let start = INLINE_LEN + index * MAILBOX_DATA_LEN;
    let end = (start + MAILBOX_DATA_LEN).min(out.len());
    out[start..end].copy_from_slice(&block.data().0[..end - start]);
    Ok(())
}

/// Gathers a payload of `out.len()` bytes from `inline` and the chain `blocks` (in chain
/// order), validating every block it uses ([`gather_block`]). Blocks beyond what the length
/// needs are ignored, as a device ignores the rest of a chain.
///
/// ```
/// use rnic_hw_regs::cmdq::{gather, pack, CmdMailbox};
///
/// let payload: [u8; 40] = core::array::from_fn(|i| i as u8);
/// let (mut inline, mut blocks) = ([0u8; 16], [CmdMailbox::default(); 3]);
/// pack(&payload, &mut inline, &mut blocks, 9).unwrap();
/// let mut out = [0u8; 40];
/// gather(&inline, &blocks, 9, &mut out).unwrap(); // blocks 1 and 2 are not needed
/// assert_eq!(out, payload);
/// ```
pub fn gather(
    inline: &[u8; INLINE_LEN],
    blocks: &[CmdMailbox],
    token: u8,
    out: &mut [u8],
) -> Result<(), ChainError> {
    let needed = blocks_for(out.len());
    if blocks.len() < needed {
        return Err(ChainError::TooFewBlocks {
            needed,
            available: blocks.len(),
        });
    }
    let n = out.len().min(INLINE_LEN);
    out[..n].copy_from_slice(&inline[..n]);
    for (i, block) in blocks[..needed].iter().enumerate() {
        gather_block(block, i, token, out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use proptest::prelude::*;
    use zerocopy::{FromZeros, IntoBytes};

    #[test]
    fn sizes_and_offsets_match_the_prm() {
        assert_eq!(CmdqEntry::SIZE, 64);
        assert_eq!(CmdMailbox::SIZE, 0x240);
        let mut e = CmdqEntry::new_zeroed();
        e.set_cmd_type(CMD_TYPE_PCIE);
        e.set_input_length(0x1122_3344);
        e.set_input_mailbox_pointer(0x0102_0304_0506_0708);
        e.input_inline_mut().set_opcode(0x10A);
        e.input_inline_mut().set_op_mod(0x3);
        e.output_inline_mut().set_status(0x51);
        e.output_inline_mut().set_syndrome(0xDEAD_BEEF);
        e.set_output_mailbox_pointer(0x1112_1314_1516_1718);
        e.set_output_length(0x70);
        e.set_token(0xAB);
        e.set_signature(0xCD);
        e.set_status(0x3);
        e.set_ownership(true);
        let b = e.as_bytes();
        assert_eq!(b[0x00], 7);
        assert_eq!(&b[0x04..0x08], &[0x11, 0x22, 0x33, 0x44]);
        assert_eq!(&b[0x08..0x10], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&b[0x10..0x12], &[0x01, 0x0A]);
        assert_eq!(&b[0x16..0x18], &[0x00, 0x03]);
        assert_eq!(b[0x20], 0x51);
        assert_eq!(&b[0x24..0x28], &[0xDE, 0xAD, 0xBE, 0xEF]);
        assert_eq!(
            &b[0x30..0x38],
            &[0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]
        );
        assert_eq!(&b[0x38..0x3C], &[0, 0, 0, 0x70]);
        assert_eq!(&b[0x3C..0x40], &[0xAB, 0xCD, 0x00, 0x07]);
        assert_eq!(e.delivery_status(), Ok(DeliveryStatus::BadBlockNumber));
        e.set_status(0x7F);
        assert!(e.delivery_status().is_err());

        let mut m = CmdMailbox::new_zeroed();
        m.data_mut().0[0] = 0x5A;
        m.data_mut().0[511] = 0xA5;
        m.set_next_pointer(0x0000_0007_AB12_1400);
        m.set_block_number(2);
        m.set_token(0x07);
        m.set_ctrl_signature(0x11);
        m.set_signature(0x22);
        let b = m.as_bytes();
        assert_eq!((b[0], b[0x1FF]), (0x5A, 0xA5));
        assert_eq!(&b[0x230..0x238], &[0, 0, 0, 7, 0xAB, 0x12, 0x14, 0x00]);
        assert_eq!(&b[0x238..0x240], &[0, 0, 0, 2, 0, 0x07, 0x11, 0x22]);
    }

    #[test]
    fn entry_signature_of_a_real_kernel_entry() {
        // QUERY_ISSI input from the ConnectX-4 trace: token 2, signature 0xD7, owner 1.
        let words: [u32; 16] = [
            0x0700_0000,
            0x10,
            0,
            0,
            0x010A_0000,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            7,
            0xAB0F_E400,
            0x70,
            0x02D7_0001,
        ];
        let mut e = CmdqEntry::new_zeroed();
        for (i, w) in words.iter().enumerate() {
            e.0[i * 4..i * 4 + 4].copy_from_slice(&w.to_be_bytes());
        }
        assert!(e.signature_ok());
        assert_eq!(e.compute_signature(), 0xD7);
        e.set_signature(0);
        e.sign();
        assert_eq!(e.signature(), 0xD7);
    }

    #[test]
    fn mailbox_signatures() {
        let mut m = CmdMailbox::new_zeroed();
        m.data_mut().0[3] = 0x42;
        m.set_token(9);
        m.set_block_number(1);
        m.sign();
        assert!(m.signatures_ok());
        assert_eq!(m.ctrl_signature(), !(9 ^ 1));
        assert_eq!(m.0.iter().fold(0u8, |a, b| a ^ b), 0xFF);
        m.data_mut().0[4] = 1;
        assert!(!m.signatures_ok());
    }

    #[test]
    fn blocks_for_matches_the_prm_formula() {
        assert_eq!(blocks_for(0), 0);
        assert_eq!(blocks_for(16), 0);
        assert_eq!(blocks_for(17), 1);
        assert_eq!(blocks_for(16 + 512), 1);
        assert_eq!(blocks_for(16 + 513), 2);
        assert_eq!(blocks_for(0x1010), 8);
        assert_eq!(blocks_for(0x19230), 202);
    }

    #[test]
    fn errors_map_to_delivery_statuses() {
        let mut inline = [0u8; 16];
        let payload = [1u8; 16 + 512 * 2];
        let mut blocks = [CmdMailbox::new_zeroed(); 2];
        assert_eq!(
            pack(&payload, &mut inline, &mut blocks[..1], 1),
            Err(ChainError::TooFewBlocks {
                needed: 2,
                available: 1
            })
        );
        pack(&payload, &mut inline, &mut blocks, 1).unwrap();
        let mut out = [0u8; 16 + 512 * 2];

        let mut bad = blocks;
        bad[1].set_block_number(3);
        let e = gather(&inline, &bad, 1, &mut out).unwrap_err();
        assert_eq!(e, ChainError::BadBlockNumber { index: 1, found: 3 });
        assert_eq!(
            e.delivery_status(Direction::Input),
            DeliveryStatus::BadBlockNumber
        );

        let mut bad = blocks;
        bad[0].set_token(2);
        let e = gather(&inline, &bad, 1, &mut out).unwrap_err();
        assert_eq!(
            e,
            ChainError::BadToken {
                index: 0,
                expected: 1,
                found: 2
            }
        );
        assert_eq!(
            e.delivery_status(Direction::Output),
            DeliveryStatus::TokenError
        );

        let e = gather(&inline, &blocks[..1], 1, &mut out).unwrap_err();
        assert_eq!(
            e.delivery_status(Direction::Input),
            DeliveryStatus::InputLengthError
        );
        assert_eq!(
            e.delivery_status(Direction::Output),
            DeliveryStatus::OutputLengthError
        );

        assert_eq!(
            fill_block(&payload, 2, 1, &mut blocks[0]),
            Err(ChainError::IndexOutOfRange {
                index: 2,
                needed: 2
            })
        );
        assert!(gather_block(&blocks[0], 5, 1, &mut out).is_err());
    }

    #[test]
    fn pack_leaves_next_pointers_and_extra_blocks_alone() {
        let mut blocks = [CmdMailbox::new_zeroed(); 3];
        for (i, b) in blocks.iter_mut().enumerate() {
            b.set_next_pointer(0x1000 * (i as u64 + 1));
            b.data_mut().0.fill(0xEE);
        }
        let mut inline = [0xFFu8; 16];
        assert_eq!(pack(&[7u8; 20], &mut inline, &mut blocks, 3), Ok(1));
        assert_eq!(inline, [7u8; 16]);
        assert_eq!(&blocks[0].data().0[..4], &[7, 7, 7, 7]);
        assert!(blocks[0].data().0[4..].iter().all(|b| *b == 0));
        assert_eq!(blocks[0].next_pointer(), 0x1000);
        assert_eq!(blocks[1].data().0[0], 0xEE);
        assert_eq!(blocks[1].token(), 0);
    }

    #[test]
    fn every_length_round_trips() {
        let src: [u8; 5200] = core::array::from_fn(|i| (i * 7 + 3) as u8);
        let mut blocks = [CmdMailbox::new_zeroed(); 11];
        for len in 0..=5000usize {
            let payload = &src[..len];
            let mut inline = [0u8; 16];
            let used = pack(payload, &mut inline, &mut blocks, len as u8).unwrap();
            assert_eq!(used, blocks_for(len));
            for (i, b) in blocks[..used].iter().enumerate() {
                assert_eq!(b.block_number() as usize, i);
            }
            let mut out = [0u8; 5000];
            gather(&inline, &blocks, len as u8, &mut out[..len]).unwrap();
            assert_eq!(&out[..len], payload);
        }
    }

    proptest! {
        #[test]
        fn random_payloads_round_trip(
            payload in proptest::collection::vec(any::<u8>(), 0..6000),
            token in any::<u8>(),
        ) {
            let mut blocks = [CmdMailbox::new_zeroed(); 12];
            let mut inline = [0u8; 16];
            let used = pack(&payload, &mut inline, &mut blocks, token).unwrap();
            prop_assert_eq!(used, blocks_for(payload.len()));
            // Every byte past the payload is zero (padding).
            let mut flat = [0u8; 16 + 12 * 512];
            flat[..16].copy_from_slice(&inline);
            for (i, b) in blocks[..used].iter().enumerate() {
                flat[16 + i * 512..16 + (i + 1) * 512].copy_from_slice(&b.data().0);
            }
            prop_assert_eq!(&flat[..payload.len()], &payload[..]);
            prop_assert!(flat[payload.len()..].iter().all(|b| *b == 0));
            let mut out = [0u8; 6000];
            gather(&inline, &blocks, token, &mut out[..payload.len()]).unwrap();
            prop_assert_eq!(&out[..payload.len()], &payload[..]);
        }

        #[test]
        fn gather_never_panics_on_garbage(
            raw in proptest::collection::vec(any::<u8>(), 0x240 * 3),
            inline in proptest::array::uniform16(any::<u8>()),
            len in 0usize..2000,
            token in any::<u8>(),
        ) {
            let mut blocks = [CmdMailbox::new_zeroed(); 3];
            for (i, b) in blocks.iter_mut().enumerate() {
                b.0.copy_from_slice(&raw[i * 0x240..(i + 1) * 0x240]);
            }
            let mut out = [0u8; 2000];
            let _ = gather(&inline, &blocks, token, &mut out[..len]);
        }
    }
}
