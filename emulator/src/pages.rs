//! Firmware pages: what the device asks for (QUERY_PAGES) and holds (MANAGE_PAGES).

use crate::profile::Profile;

/// The firmware pages the device holds and still wants.
#[derive(Debug, Default)]
pub(crate) struct Pages {
    /// IOVAs of the 4 KiB pages the host gave.
    pub held: Vec<u64>,
}

impl Pages {
    pub(crate) fn new(_profile: &Profile) -> Self {
        Pages::default()
    }
}
