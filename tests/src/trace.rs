//! A reader for the Linux mlx5_core `dump_command` hexdumps (dynamic debug), as in the real
//! ConnectX-4 trace `data/mlx5-trace/trace-mlx5_core.txt.gz`.
//!
//! The format, as found in that file:
//!
//! ```text
//! [  +0.000006] mlx5_core 0000:02:00.0: ...:dump_command:587:(pid 87): dump command QUERY_PAGES(0x107) INPUT
//! [  +0.000002] 000: 07000000 00000010 00000000 00000000
//! [  +0.000001] 010: 01070000 00000001 00000000 00000000
//! [  +0.000001] 020: 00000000 00000000 00000000 00000000
//! [  +0.000001] 030: 00000000 00000000 00000010 04fa0001
//! [  +0.000005] mlx5_core 0000:02:00.0: ...:dump_command:608:(pid 87): command block:
//! [  +0.000002] 040: ...                      (0x240 bytes per block, 36 lines)
//! ```
//!
//! - `NAME` is the kernel's name for the opcode, or `unknown command opcode` for opcodes that
//!   kernel did not name (QUERY_ISSI, SET_ISSI); the opcode in parentheses is always there.
//! - `INPUT` dumps show the entry as the driver wrote it (owner 1) and the input mailboxes;
//!   `OUTPUT` dumps show the entry as the device returned it and the output mailboxes.
//! - Offsets run on across blocks: the entry is 000..030, block k starts at 0x40 + k * 0x240,
//!   each after a `command block:` line.
//! - The kernel prints block k only while `0x40 + k * 0x240 < len` (the message length), so
//!   the dump of a long chain stops early (MANAGE_PAGES with 12,868 pages shows 179 of its
//!   202 blocks) and a short one can show none (a 0x40-byte input needs one block and shows
//!   none). [`kernel_dumped_blocks`] is that rule.
//! - Unrelated kernel lines (other drivers, doorbell writes, completions) are interleaved and
//!   are skipped; so are hexdump lines outside a command dump.

use rnic_hw_regs::cmdq::{self, CmdMailbox, CmdqEntry, Direction, MAILBOX_SIZE};
use std::fmt;
use std::io::Read;
use std::path::Path;
use zerocopy::FromZeros;

/// One `dump command` record: the entry and the mailbox blocks printed after it.
#[derive(Clone, Debug)]
pub struct Dump {
    /// 1-based line number of the `dump command` line.
    pub line: usize,
    /// The kernel's name for the command (`"QUERY_PAGES"`, `"unknown command opcode"`, ...).
    pub name: String,
    /// The opcode printed in parentheses.
    pub opcode: u16,
    /// `INPUT` or `OUTPUT`.
    pub direction: Direction,
    /// The 64-byte command queue entry (offsets 000..030).
    pub entry: CmdqEntry,
    /// The mailbox blocks printed, in chain order.
    pub blocks: Vec<CmdMailbox>,
}

impl Dump {
    /// The payload length the entry gives for this dump's direction.
    pub fn payload_len(&self) -> usize {
        let len = match self.direction {
            Direction::Input => self.entry.input_length(),
            Direction::Output => self.entry.output_length(),
        };
        usize::try_from(len).unwrap_or(usize::MAX)
    }

    /// The 16 inline bytes for this dump's direction.
    pub fn inline(&self) -> [u8; 16] {
        match self.direction {
            Direction::Input => self.entry.input_inline().0,
            Direction::Output => self.entry.output_inline().0,
        }
    }

    /// How many payload bytes the dump holds: the whole payload when every block it needs was
    /// printed, else the inline bytes plus the printed blocks' data.
    pub fn available_len(&self) -> usize {
        self.payload_len()
            .min(16 + self.blocks.len() * cmdq::MAILBOX_DATA_LEN)
    }

    /// Whether the dump holds the whole payload.
    pub fn is_complete(&self) -> bool {
        self.blocks.len() >= cmdq::blocks_for(self.payload_len())
    }

    /// The payload bytes the dump holds ([`Self::available_len`] of them), gathered with the
    /// mailbox-chain helper (which checks block numbers and tokens).
    pub fn gather(&self) -> Result<Vec<u8>, cmdq::ChainError> {
        let mut out = vec![0u8; self.available_len()];
        cmdq::gather(&self.inline(), &self.blocks, self.entry.token(), &mut out)?;
        Ok(out)
    }
}

/// A command: its input dump and, when the trace has it, its output dump.
#[derive(Clone, Debug)]
pub struct Command {
    /// What the driver wrote.
    pub input: Dump,
    /// What the device returned.
    pub output: Option<Dump>,
}

/// The number of blocks the kernel's `dump_command` prints for a message of `len` bytes:
/// block k is printed while `0x40 + k * 0x240 < len`.
pub fn kernel_dumped_blocks(len: usize) -> usize {
    len.saturating_sub(0x40).div_ceil(MAILBOX_SIZE)
}

/// A malformed trace line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "trace line {}: {}", self.line, self.what)
    }
}

impl std::error::Error for ParseError {}

/// A dump being read: its header and the bytes seen so far.
struct Partial {
    line: usize,
    name: String,
    opcode: u16,
    direction: Direction,
    bytes: Vec<u8>,
    block_markers: usize,
}

impl Partial {
    fn finish(self) -> Result<Dump, ParseError> {
        let err = |what: String| ParseError {
            line: self.line,
            what,
        };
        if self.bytes.len() < 64 {
            return Err(err(format!("entry has {} bytes, not 64", self.bytes.len())));
        }
        let rest = self.bytes.len() - 64;
        if rest % MAILBOX_SIZE != 0 {
            return Err(err(format!(
                "{rest} block bytes is not a whole number of blocks"
            )));
        }
        let nblocks = rest / MAILBOX_SIZE;
        if nblocks != self.block_markers {
            return Err(err(format!(
                "{nblocks} blocks but {} `command block:` lines",
                self.block_markers
            )));
        }
        let mut entry = CmdqEntry::new_zeroed();
        entry.0.copy_from_slice(&self.bytes[..64]);
        let blocks = self.bytes[64..]
            .chunks_exact(MAILBOX_SIZE)
            .map(|c| {
                let mut b = CmdMailbox::new_zeroed();
                b.0.copy_from_slice(c);
                b
            })
            .collect();
        Ok(Dump {
            line: self.line,
            name: self.name,
            opcode: self.opcode,
            direction: self.direction,
            entry,
            blocks,
        })
    }
}

/// Parses `... dump command NAME(0xOPC) INPUT|OUTPUT`.
fn parse_header(text: &str) -> Option<(String, u16, Direction)> {
    let rest = &text[text.find("dump command ")? + "dump command ".len()..];
    let rest = rest.trim_end();
    let (head, direction) = if let Some(h) = rest.strip_suffix(" INPUT") {
        (h, Direction::Input)
    } else if let Some(h) = rest.strip_suffix(" OUTPUT") {
        (h, Direction::Output)
    } else {
        return None;
    };
    let open = head.rfind('(')?;
    let hex = head[open + 1..].strip_suffix(')')?.strip_prefix("0x")?;
    let opcode = u16::from_str_radix(hex, 16).ok()?;
    Some((head[..open].to_string(), opcode, direction))
}

/// Parses `[ timestamp ] OFF: w0 w1 w2 w3` into the offset and 16 bytes.
fn parse_hex_line(text: &str) -> Option<(usize, [u8; 16])> {
    let rest = text.strip_prefix('[')?;
    let rest = rest[rest.find(']')? + 1..].trim();
    let (off, words) = rest.split_once(": ")?;
    if off.len() < 3 || !off.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let off = usize::from_str_radix(off, 16).ok()?;
    let mut out = [0u8; 16];
    let mut n = 0;
    for w in words.split_ascii_whitespace() {
        if n == 4 || w.len() != 8 {
            return None;
        }
        let v = u32::from_str_radix(w, 16).ok()?;
        out[n * 4..n * 4 + 4].copy_from_slice(&v.to_be_bytes());
        n += 1;
    }
    (n == 4).then_some((off, out))
}

/// Parses every `dump command` record of a kernel log.
pub fn parse(text: &str) -> Result<Vec<Dump>, ParseError> {
    let mut dumps = Vec::new();
    let mut cur: Option<Partial> = None;
    for (i, l) in text.lines().enumerate() {
        let line = i + 1;
        if l.contains("dump command ") {
            let (name, opcode, direction) = parse_header(l).ok_or_else(|| ParseError {
                line,
                what: format!("unreadable dump header: {l}"),
            })?;
            if let Some(p) = cur.take() {
                dumps.push(p.finish()?);
            }
            cur = Some(Partial {
                line,
                name,
                opcode,
                direction,
                bytes: Vec::new(),
                block_markers: 0,
            });
        } else if l.contains("dump_command") && l.trim_end().ends_with("command block:") {
            let p = cur.as_mut().ok_or_else(|| ParseError {
                line,
                what: "`command block:` outside a dump".into(),
            })?;
            if p.bytes.len() != 64 + p.block_markers * MAILBOX_SIZE {
                return Err(ParseError {
                    line,
                    what: format!("`command block:` at dump offset {:#x}", p.bytes.len()),
                });
            }
            p.block_markers += 1;
        } else if let Some((off, bytes)) = parse_hex_line(l) {
            let Some(p) = cur.as_mut() else { continue };
            if off != p.bytes.len() {
                return Err(ParseError {
                    line,
                    what: format!("offset {off:#x}, expected {:#x}", p.bytes.len()),
                });
            }
            p.bytes.extend_from_slice(&bytes);
        } else if l.contains("mlx5_core") && cur.as_ref().is_some_and(|p| p.bytes.len() < 64) {
            return Err(ParseError {
                line,
                what: "dump cut short before its 64-byte entry".into(),
            });
        }
    }
    if let Some(p) = cur.take() {
        dumps.push(p.finish()?);
    }
    Ok(dumps)
}

/// Pairs each input dump with the next output dump that has its token and opcode. Output
/// dumps without an input are an error.
pub fn pair(dumps: Vec<Dump>) -> Result<Vec<Command>, ParseError> {
    let mut cmds: Vec<Command> = Vec::new();
    for d in dumps {
        match d.direction {
            Direction::Input => cmds.push(Command {
                input: d,
                output: None,
            }),
            Direction::Output => {
                let slot = cmds.iter_mut().rev().find(|c| {
                    c.output.is_none()
                        && c.input.entry.token() == d.entry.token()
                        && c.input.opcode == d.opcode
                });
                match slot {
                    Some(c) => c.output = Some(d),
                    None => {
                        return Err(ParseError {
                            line: d.line,
                            what: "output dump without a matching input".into(),
                        });
                    }
                }
            }
        }
    }
    Ok(cmds)
}

/// Reads a gzip-compressed or plain kernel log and parses it into commands.
pub fn load(path: &Path) -> Result<Vec<Command>, Box<dyn std::error::Error>> {
    let raw = std::fs::read(path)?;
    let text = if raw.starts_with(&[0x1F, 0x8B]) {
        let mut s = String::new();
        flate2::read::GzDecoder::new(&raw[..]).read_to_string(&mut s)?;
        s
    } else {
        String::from_utf8(raw)?
    };
    Ok(pair(parse(&text)?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
[  +0.000006] mlx5_core 0000:02:00.0: 0000:02:00.0:dump_command:587:(pid 87): dump command unknown command opcode(0x10a) INPUT
[  +0.000002] 000: 07000000 00000010 00000000 00000000
[  +0.000001] 010: 010a0000 00000000 00000000 00000000
[  +0.000001] 020: 00000000 00000000 00000000 00000000
[  +0.000001] 030: 00000007 ab0fe400 00000070 02d70001

[  +0.000002] mlx5_core 0000:02:00.0: 0000:02:00.0:cmd_work_handler:665:(pid 87): writing 0x1 to command doorbell
[  +0.006464] usbcore: registered new interface driver usbserial
";

    #[test]
    fn header_and_hex_lines() {
        assert_eq!(
            parse_header("x: dump command QUERY_PAGES(0x107) OUTPUT"),
            Some(("QUERY_PAGES".into(), 0x107, Direction::Output))
        );
        assert_eq!(
            parse_header("x: dump command unknown command opcode(0x10a) INPUT"),
            Some(("unknown command opcode".into(), 0x10A, Direction::Input))
        );
        let (off, b) =
            parse_hex_line("[  +0.000002] 270: 00000000 00000000 00000000 00020000").unwrap();
        assert_eq!(off, 0x270);
        assert_eq!(b[13], 2);
        assert_eq!(parse_hex_line("[  +0.1] EDAC MC: Ver: 3.0.0"), None);
    }

    #[test]
    fn parses_a_dump_and_skips_noise() {
        let d = parse(SAMPLE).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].opcode, 0x10A);
        assert_eq!(d[0].entry.output_length(), 0x70);
        assert_eq!(d[0].entry.token(), 2);
        assert!(d[0].blocks.is_empty());
        assert!(d[0].entry.ownership());
    }

    #[test]
    fn kernel_dump_rule() {
        assert_eq!(kernel_dumped_blocks(0x10), 0);
        assert_eq!(kernel_dumped_blocks(0x40), 0);
        assert_eq!(kernel_dumped_blocks(0x70), 1);
        assert_eq!(kernel_dumped_blocks(0x1010), 8);
        assert_eq!(kernel_dumped_blocks(0x19230), 179);
    }

    #[test]
    fn a_gap_in_offsets_is_an_error() {
        let bad = SAMPLE.replace("020: ", "028: ");
        assert!(parse(&bad).is_err());
    }
}
