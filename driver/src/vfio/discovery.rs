//! Discovery of PCI functions in sysfs (`/sys/bus/pci/devices`): vendor and device ids, the
//! bound driver and the IOMMU group, and which ones are ConnectX functions bound to vfio-pci.
//!
//! Everything takes the sysfs root as a parameter, so tests run against a fake tree.

use std::fs;
use std::path::{Path, PathBuf};

/// PCI vendor id of Mellanox / NVIDIA networking.
pub const MELLANOX_VENDOR_ID: u16 = 0x15B3;

/// The default sysfs directory of PCI devices.
pub const SYSFS_PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// The ConnectX and BlueField device ids this driver knows (mlx5-prm.md section 7), with a
/// model name.
pub const CONNECTX_DEVICE_IDS: &[(u16, &str)] = &[
    (0x1013, "ConnectX-4"),
    (0x1014, "ConnectX-4 VF"),
    (0x1015, "ConnectX-4 Lx"),
    (0x1016, "ConnectX-4 Lx VF"),
    (0x1017, "ConnectX-5"),
    (0x1018, "ConnectX-5 VF"),
    (0x1019, "ConnectX-5 Ex"),
    (0x101A, "ConnectX-5 Ex VF"),
    (0x101B, "ConnectX-6"),
    (0x101C, "ConnectX-6 VF"),
    (0x101D, "ConnectX-6 Dx"),
    (0x101E, "ConnectX family VF"),
    (0x101F, "ConnectX-6 Lx"),
    (0x1021, "ConnectX-7"),
    (0x1023, "ConnectX-8"),
    (0xA2D2, "BlueField"),
    (0xA2D3, "BlueField VF"),
    (0xA2D6, "BlueField-2"),
    (0xA2DC, "BlueField-3"),
    (0xA2DF, "BlueField-4"),
];

/// The model name of a Mellanox device id, if it is a ConnectX / BlueField mlx5 function.
///
/// ```
/// use rnic_driver::vfio::discovery::connectx_model;
///
/// assert_eq!(connectx_model(0x15b3, 0x1017), Some("ConnectX-5"));
/// assert_eq!(connectx_model(0x8086, 0x1017), None);
/// ```
pub fn connectx_model(vendor: u16, device: u16) -> Option<&'static str> {
    if vendor != MELLANOX_VENDOR_ID {
        return None;
    }
    CONNECTX_DEVICE_IDS
        .iter()
        .find(|(id, _)| *id == device)
        .map(|(_, name)| *name)
}

/// One PCI function as sysfs describes it.
///
/// ```
/// use rnic_driver::vfio::discovery::read_function;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let tmp = tempfile::tempdir()?;
/// # let (root, dir) = (tmp.path(), rnic_driver::doc_fixture::fake_sysfs_function(tmp.path())?);
///
/// // A fake sysfs tree: vendor, device, and the `driver` and `iommu_group` links.
/// let f = read_function(root, "0000:3b:00.0").ok_or("not found")?;
/// assert_eq!((f.vendor, f.device, f.iommu_group), (0x15b3, 0x1017, Some(12)));
/// assert_eq!(f.driver.as_deref(), Some("vfio-pci"));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciFunction {
    /// Address, `DDDD:BB:DD.F`.
    pub address: String,
    /// Vendor id.
    pub vendor: u16,
    /// Device id.
    pub device: u16,
    /// Name of the bound driver (`vfio-pci`, `mlx5_core`, ...), if any.
    pub driver: Option<String>,
    /// IOMMU group number, if the function is in one.
    pub iommu_group: Option<u32>,
}

impl PciFunction {
    /// The ConnectX model, when it is one.
    ///
    /// ```
    /// use rnic_driver::vfio::discovery::PciFunction;
    /// let f = PciFunction { address: "0000:3b:00.0".into(), vendor: 0x15b3, device: 0x101d, driver: None, iommu_group: None };
    /// assert_eq!(f.connectx_model(), Some("ConnectX-6 Dx"));
    /// ```
    pub fn connectx_model(&self) -> Option<&'static str> {
        connectx_model(self.vendor, self.device)
    }

    /// Whether vfio-pci drives the function.
    ///
    /// ```
    /// use rnic_driver::vfio::discovery::PciFunction;
    /// let f = PciFunction { address: "0000:3b:00.0".into(), vendor: 0x15b3, device: 0x1017, driver: Some("mlx5_core".into()), iommu_group: Some(3) };
    /// assert!(!f.bound_to_vfio());
    /// ```
    pub fn bound_to_vfio(&self) -> bool {
        self.driver.as_deref() == Some("vfio-pci")
    }
}

/// Whether `s` is a full PCI address `DDDD:BB:DD.F` (hex digits).
///
/// ```
/// use rnic_driver::vfio::discovery::is_pci_address;
///
/// assert!(is_pci_address("0000:3b:00.1"));
/// assert!(!is_pci_address("3b:00.1"));
/// assert!(!is_pci_address("0000:3b:00.8"));
/// ```
pub fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 12 || b[4] != b':' || b[7] != b':' || b[10] != b'.' {
        return false;
    }
    let hex = |r: &[u8]| r.iter().all(u8::is_ascii_hexdigit);
    hex(&b[0..4]) && hex(&b[5..7]) && hex(&b[8..10]) && (b'0'..=b'7').contains(&b[11])
}

fn read_hex_id(path: &Path) -> Option<u16> {
    let s = fs::read_to_string(path).ok()?;
    let s = s.trim();
    u16::from_str_radix(s.strip_prefix("0x").unwrap_or(s), 16).ok()
}

fn link_name(path: &Path) -> Option<String> {
    let target = fs::read_link(path).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

/// Reads one function's sysfs directory `root/address`.
///
/// ```
/// use rnic_driver::vfio::discovery::read_function;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let tmp = tempfile::tempdir()?;
/// # let (root, dir) = (tmp.path(), rnic_driver::doc_fixture::fake_sysfs_function(tmp.path())?);
/// assert_eq!(read_function(root, "0000:3b:00.0").and_then(|f| f.iommu_group), Some(12));
/// assert_eq!(read_function(root, "0000:3b:00.1"), None);
/// # Ok(()) }
/// ```
pub fn read_function(root: &Path, address: &str) -> Option<PciFunction> {
    let dir = root.join(address);
    Some(PciFunction {
        address: address.to_string(),
        vendor: read_hex_id(&dir.join("vendor"))?,
        device: read_hex_id(&dir.join("device"))?,
        driver: link_name(&dir.join("driver")),
        iommu_group: link_name(&dir.join("iommu_group")).and_then(|g| g.parse().ok()),
    })
}

/// Every PCI function under `root` (sorted by address); unreadable entries are skipped.
///
/// ```
/// use rnic_driver::vfio::discovery::scan;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let tmp = tempfile::tempdir()?;
/// # let (root, dir) = (tmp.path(), rnic_driver::doc_fixture::fake_sysfs_function(tmp.path())?);
/// # std::fs::create_dir(root.join("not-a-function"))?;
/// let all = scan(root);
/// assert_eq!(all.len(), 1); // entries that are not PCI addresses are skipped
/// assert_eq!(all[0].address, "0000:3b:00.0");
/// # Ok(()) }
/// ```
pub fn scan(root: &Path) -> Vec<PciFunction> {
    let mut out: Vec<PciFunction> = match fs::read_dir(root) {
        Ok(rd) => rd
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                is_pci_address(&name)
                    .then(|| read_function(root, &name))
                    .flatten()
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    out.sort_by(|a, b| a.address.cmp(&b.address));
    out
}

/// The ConnectX functions under `root` that vfio-pci drives (ready for
/// [`VfioBus::open`](crate::vfio::VfioBus::open)).
///
/// ```
/// use rnic_driver::vfio::discovery::connectx_vfio_functions;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let tmp = tempfile::tempdir()?;
/// # let (root, dir) = (tmp.path(), rnic_driver::doc_fixture::fake_sysfs_function(tmp.path())?);
/// let found = connectx_vfio_functions(root);
/// assert_eq!(found[0].connectx_model(), Some("ConnectX-5"));
/// # Ok(()) }
/// ```
pub fn connectx_vfio_functions(root: &Path) -> Vec<PciFunction> {
    scan(root)
        .into_iter()
        .filter(|f| f.connectx_model().is_some() && f.bound_to_vfio())
        .collect()
}

/// The sysfs directory of `address` under `root`.
///
/// ```
/// use rnic_driver::vfio::discovery::{function_dir, SYSFS_PCI_DEVICES};
/// use std::path::Path;
/// let dir = function_dir(Path::new(SYSFS_PCI_DEVICES), "0000:3b:00.0");
/// assert_eq!(dir, Path::new("/sys/bus/pci/devices/0000:3b:00.0"));
/// ```
pub fn function_dir(root: &Path, address: &str) -> PathBuf {
    root.join(address)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// Builds a fake `/sys/bus/pci/devices` entry.
    pub(crate) fn fake_function(
        root: &Path,
        addr: &str,
        vendor: u16,
        device: u16,
        driver: Option<&str>,
        group: Option<u32>,
    ) {
        let dir = root.join(addr);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("vendor"), format!("0x{vendor:04x}\n")).unwrap();
        fs::write(dir.join("device"), format!("0x{device:04x}\n")).unwrap();
        if let Some(d) = driver {
            let target = root.join("../../drivers").join(d);
            fs::create_dir_all(&target).unwrap();
            symlink(&target, dir.join("driver")).unwrap();
        }
        if let Some(g) = group {
            let target = root.join("../../kernel/iommu_groups").join(g.to_string());
            fs::create_dir_all(&target).unwrap();
            symlink(&target, dir.join("iommu_group")).unwrap();
        }
    }

    #[test]
    fn scan_a_fake_sysfs_tree() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("sys/bus/pci/devices");
        fs::create_dir_all(&root).unwrap();
        fake_function(
            &root,
            "0000:3b:00.0",
            0x15b3,
            0x1017,
            Some("vfio-pci"),
            Some(42),
        );
        fake_function(
            &root,
            "0000:3b:00.1",
            0x15b3,
            0x1017,
            Some("mlx5_core"),
            Some(43),
        );
        fake_function(&root, "0000:00:1f.0", 0x8086, 0xa1c8, None, Some(7));
        fake_function(
            &root,
            "0000:5e:00.0",
            0x15b3,
            0xcf08,
            Some("vfio-pci"),
            None,
        );
        fs::create_dir_all(root.join("not-a-device")).unwrap();
        fs::create_dir_all(root.join("0000:99:00.0")).unwrap(); // no ids: skipped

        let all = scan(&root);
        assert_eq!(all.len(), 4);
        assert_eq!(all[0].address, "0000:00:1f.0");
        assert_eq!(all[0].driver, None);
        let cx = &all[1];
        assert_eq!(
            (cx.vendor, cx.device, cx.iommu_group),
            (0x15b3, 0x1017, Some(42))
        );
        assert_eq!(cx.connectx_model(), Some("ConnectX-5"));
        assert!(cx.bound_to_vfio());
        assert!(!all[2].bound_to_vfio());
        assert_eq!(all[3].connectx_model(), None); // unknown Mellanox id

        let ready = connectx_vfio_functions(&root);
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].address, "0000:3b:00.0");
        assert!(scan(&tmp.path().join("missing")).is_empty());
    }

    #[test]
    fn every_prm_id_is_known() {
        for id in [
            0x1013u16, 0x1014, 0x1015, 0x1016, 0x1017, 0x1018, 0x1019, 0x101A, 0x101B, 0x101C,
            0x101D, 0x101E, 0x101F, 0x1021, 0x1023, 0xA2D2, 0xA2D3, 0xA2D6, 0xA2DC, 0xA2DF,
        ] {
            assert!(connectx_model(MELLANOX_VENDOR_ID, id).is_some(), "{id:#x}");
        }
        assert_eq!(connectx_model(MELLANOX_VENDOR_ID, 0x1020), None);
    }
}
