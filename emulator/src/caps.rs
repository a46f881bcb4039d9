//! Capability blocks (QUERY_HCA_CAP / SET_HCA_CAP), modelled on the trace's ConnectX-4.

use crate::profile::Profile;

/// The capability blocks, maximum and current.
#[derive(Debug, Default)]
pub(crate) struct Caps {}

impl Caps {
    pub(crate) fn new(_profile: &Profile) -> Self {
        Caps {}
    }
}
