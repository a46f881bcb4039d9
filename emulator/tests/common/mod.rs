//! Test helpers: reading the rxe captures in `tests/data/pcaps/` (see its README.md), and
//! [`host`], a host-side command client for the emulated device.
//!
//! Each test binary uses part of this module, so unused items are not warnings here.
#![allow(dead_code)]

pub(crate) mod host;

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::PathBuf;

use pcap_file::DataLink;
use pcap_file::pcap::PcapReader;

/// The folder that holds the captures.
pub(crate) fn pcap_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/pcaps"))
}

/// Every frame of capture `name` (gunzipped if it ends in `.gz`), as captured. Fails if a frame
/// was cut by the snap length or the link type is not Ethernet.
pub(crate) fn read_frames(name: &str) -> Vec<Vec<u8>> {
    read_frames_at(&pcap_dir().join(name))
}

/// Every frame of the capture at `path` (gunzipped if it ends in `.gz`).
pub(crate) fn read_frames_at(path: &std::path::Path) -> Vec<Vec<u8>> {
    let name = path.display().to_string();
    let file = File::open(path).unwrap_or_else(|e| panic!("open {name}: {e}"));
    let reader: Box<dyn Read> = if name.ends_with(".gz") {
        Box::new(flate2::read::GzDecoder::new(BufReader::new(file)))
    } else {
        Box::new(BufReader::new(file))
    };
    let mut pcap = PcapReader::new(reader).expect("pcap header");
    assert_eq!(pcap.header().datalink, DataLink::ETHERNET, "{name}");
    let mut frames = Vec::new();
    while let Some(packet) = pcap.next_packet() {
        let packet = packet.expect("pcap record");
        assert_eq!(
            packet.orig_len as usize,
            packet.data.len(),
            "{name}: frame cut"
        );
        frames.push(packet.data.into_owned());
    }
    frames
}
