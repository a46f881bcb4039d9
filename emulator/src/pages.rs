//! Firmware pages: what the device asks for (QUERY_PAGES) and holds (MANAGE_PAGES).
//!
//! The device wants a number of 4 KiB pages that depends on the HCA's phase (DESIGN
//! principle 9: the counts come from the [`Profile`]):
//!
//! - after ENABLE_HCA: the boot pages, then the init pages (QUERY_PAGES op_mod 1 and 2 ask
//!   for what is missing of `boot` and `boot + init`); INIT_HCA is refused until both are held;
//! - after INIT_HCA: `boot + init + regular` plus whatever run-time page requests
//!   ([`crate::Device::request_pages`], a page-request EQE) added or removed; QUERY_PAGES
//!   op_mod 3 answers the signed difference to what is held;
//! - after TEARDOWN_HCA: nothing, so MANAGE_PAGES take returns every page.
//!
//! Pages are held by IOVA; a page the host gives must be reachable through the IOMMU.

use std::collections::BTreeSet;

use crate::hca::HcaState;
use crate::profile::Profile;

/// The firmware pages the device holds and still wants.
#[derive(Debug, Default)]
pub(crate) struct Pages {
    /// IOVAs of the 4 KiB pages the host gave.
    pub held: BTreeSet<u64>,
    /// Pages needed at boot (profile).
    pub boot: i64,
    /// Pages needed for INIT_HCA (profile).
    pub init: i64,
    /// Pages needed after INIT_HCA (profile).
    pub regular: i64,
    /// Net run-time requests (page-request EQEs): positive asks for more, negative gives back.
    pub runtime: i64,
    /// The most pages the device can hold.
    pub max: usize,
}

impl Pages {
    pub(crate) fn new(profile: &Profile) -> Self {
        Pages {
            held: BTreeSet::new(),
            boot: i64::from(profile.boot_pages.max(0)),
            init: i64::from(profile.init_pages.max(0)),
            regular: i64::from(profile.regular_pages.max(0)),
            runtime: 0,
            max: profile.max_fw_pages as usize,
        }
    }

    /// Pages held, as a signed count.
    pub(crate) fn held_count(&self) -> i64 {
        self.held.len() as i64
    }

    /// How many pages firmware needs to keep in the HCA phase `hca`.
    pub(crate) fn target(&self, hca: &HcaState) -> i64 {
        if hca.initialized {
            (self.boot + self.init + self.regular + self.runtime).max(0)
        } else if hca.enabled && !hca.torn_down {
            self.boot + self.init
        } else {
            0
        }
    }

    /// QUERY_PAGES boot (1): boot pages still missing.
    pub(crate) fn boot_missing(&self) -> i64 {
        (self.boot - self.held_count()).max(0)
    }

    /// QUERY_PAGES init (2): init pages still missing (after the boot pages).
    pub(crate) fn init_missing(&self) -> i64 {
        (self.boot + self.init - self.held_count()).max(0)
    }

    /// QUERY_PAGES regular (3): the signed difference between what firmware wants after
    /// INIT_HCA and what it holds (negative: it has pages to give back).
    pub(crate) fn regular_delta(&self, hca: &HcaState) -> i64 {
        if hca.initialized {
            self.target(hca) - self.held_count()
        } else {
            self.regular
        }
    }

    /// Pages the host may take back now.
    pub(crate) fn returnable(&self, hca: &HcaState) -> usize {
        usize::try_from(self.held_count() - self.target(hca)).unwrap_or(0)
    }

    /// MANAGE_PAGES can't give: firmware stops wanting the pages it asked for at run time.
    pub(crate) fn cant_give(&mut self, hca: &HcaState) {
        let missing = self.target(hca) - self.held_count();
        if missing > 0 && hca.initialized {
            self.runtime -= missing.min(self.runtime.max(0));
        }
    }

    /// Takes up to `n` returnable pages out of the held set (lowest IOVAs first).
    pub(crate) fn take(&mut self, n: usize, hca: &HcaState) -> Vec<u64> {
        let k = n.min(self.returnable(hca));
        let out: Vec<u64> = self.held.iter().take(k).copied().collect();
        for p in &out {
            self.held.remove(p);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_drive_the_counts() {
        let p = Profile::connectx4();
        let mut pages = Pages::new(&p);
        let mut hca = HcaState {
            enabled: true,
            ..HcaState::default()
        };
        assert_eq!(pages.boot_missing(), 6);
        pages.held.extend((0..6).map(|i| i * 4096));
        assert_eq!(pages.boot_missing(), 0);
        assert_eq!(pages.init_missing(), 12_868);
        assert_eq!(pages.returnable(&hca), 0);
        hca.initialized = true;
        pages.runtime = -2;
        assert_eq!(pages.regular_delta(&hca), 12_866);
        hca.initialized = false;
        hca.torn_down = true;
        assert_eq!(pages.take(100, &hca).len(), 6);
        assert!(pages.held.is_empty());
    }
}
