//! Capture of a port's wire traffic to a pcap file (Ethernet link type), readable by
//! Wireshark / tshark as RRoCE.
//!
//! Every frame the port transmits (to its link or its loopback) and every frame it receives
//! from its link is written once, stamped with the device clock (virtual time in
//! deterministic mode, so captures of the same seeded run are identical byte for byte).
//! With a UDP link the received frames are the ones the link rebuilt (see
//! [`crate::link::udp`]).

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, TsResolution};

/// An open capture.
pub(crate) struct Capture {
    w: PcapWriter<BufWriter<File>>,
    /// Frames written.
    pub(crate) frames: u64,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("frames", &self.frames)
            .finish_non_exhaustive()
    }
}

impl Capture {
    /// Creates (truncates) `path` and writes the pcap header.
    pub(crate) fn create(path: &Path) -> io::Result<Capture> {
        let file = BufWriter::new(File::create(path)?);
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            snaplen: 65535,
            ..PcapHeader::default()
        };
        let w = PcapWriter::with_header(file, header).map_err(io::Error::other)?;
        Ok(Capture { w, frames: 0 })
    }

    /// Writes one frame stamped `now_ns`. Errors stop nothing: the frame is just missing.
    pub(crate) fn write(&mut self, now_ns: u64, frame: &[u8]) {
        let p = PcapPacket::new(Duration::from_nanos(now_ns), frame.len() as u32, frame);
        if self.w.write_packet(&p).is_ok() {
            self.frames += 1;
        }
    }

    /// Flushes and closes the file.
    pub(crate) fn finish(self) -> io::Result<()> {
        let mut inner = self.w.into_writer();
        std::io::Write::flush(&mut inner)
    }
}
