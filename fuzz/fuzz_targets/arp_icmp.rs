//! Frames into the driver's address resolution (`rnic_driver::net`): the input is a sequence
//! of records (`rnic_fuzz::net`): received Ethernet frames (the resolver learns from each,
//! then the responder answers it, as the port agent does), resolutions asked for, time
//! moving on (the resolver retransmits, gives up, ages entries) and announcements.
//!
//! Nothing may panic; every reply parses and answers its question (an ARP reply to the
//! asker from the port's MAC about the asked-for address, a neighbour advertisement of the
//! solicited target, an echo reply with the request's identifier, sequence and data);
//! every frame the resolver sends is an ARP request or ND message from the port about its
//! own addresses; the responder counts every frame once; the neighbour table stays within
//! its capacity, one entry per address, within the in-flight limit, with no entry for the
//! port's own addresses and only unicast MACs that are not the port's.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnic_fuzz::net::NetHarness;

fuzz_target!(|data: &[u8]| {
    NetHarness::new().run(data);
});
