//! Errors of the VFIO bus, each saying what to do about it.

use std::io;
use std::path::PathBuf;

/// Why a [`VfioBus`](super::VfioBus) could not be opened or could not map memory.
///
/// ```
/// use rnic_driver::vfio::{VfioBus, VfioBusError, VfioOptions};
///
/// let err = VfioBus::open("3b:00.0", VfioOptions::default()).unwrap_err();
/// assert!(matches!(err, VfioBusError::BadAddress(_)));
/// assert!(err.to_string().contains("expected DDDD:BB:DD.F"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VfioBusError {
    /// The PCI address is malformed.
    #[error("{0:?} is not a PCI address (expected DDDD:BB:DD.F, e.g. 0000:3b:00.0)")]
    BadAddress(String),
    /// No such function in sysfs.
    #[error("no PCI function {0} in /sys/bus/pci/devices")]
    NotFound(String),
    /// The function has no IOMMU group: the IOMMU is off or the platform has none.
    #[error(
        "{0} has no IOMMU group: enable the IOMMU (intel_iommu=on or amd_iommu=on on the kernel \
         command line, and VT-d/AMD-Vi in the firmware)"
    )]
    NoIommuGroup(String),
    /// The function is not bound to vfio-pci.
    #[error(
        "{address} is bound to {}, not vfio-pci: echo {address} > /sys/bus/pci/devices/{address}/driver/unbind; \
         echo vfio-pci > /sys/bus/pci/devices/{address}/driver_override; echo {address} > /sys/bus/pci/drivers_probe",
        driver.as_deref().unwrap_or("no driver")
    )]
    NotBoundToVfio {
        /// The PCI address.
        address: String,
        /// The driver it is bound to, if any.
        driver: Option<String>,
    },
    /// Opening `/dev/vfio/...` was refused.
    #[error(
        "permission denied opening {}: run as root or give your user the group's device \
         (chown/udev rule on /dev/vfio/N)",
        path.display()
    )]
    Permission {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// `/dev/vfio/vfio` does not exist: the vfio modules are not loaded.
    #[error("{} missing: load the vfio-pci module (modprobe vfio-pci)", path.display())]
    NoVfio {
        /// The missing file.
        path: PathBuf,
    },
    /// The IOMMU group also holds other devices not bound to vfio-pci.
    #[error("IOMMU group {0} is not viable: bind every device in it to vfio-pci (or none)")]
    GroupNotViable(u32),
    /// Pinning DMA memory hit RLIMIT_MEMLOCK.
    #[error(
        "cannot pin {needed} bytes for DMA: RLIMIT_MEMLOCK is {}; raise it (ulimit -l unlimited, \
         or memlock in /etc/security/limits.conf) or run as root",
        limit_text(*limit)
    )]
    MemlockTooLow {
        /// The current soft limit in bytes (`None`: unlimited).
        limit: Option<u64>,
        /// The bytes the mapping needed.
        needed: usize,
    },
    /// Hugepages were required but none could be mapped.
    #[error(
        "no 2 MiB hugepages available: reserve some (echo 512 > /proc/sys/vm/nr_hugepages) or \
         allow 4 KiB pages ({0})"
    )]
    NoHugepages(#[source] io::Error),
    /// BAR0 cannot be mapped.
    #[error("BAR0 of {address} cannot be mapped: {what}")]
    Bar {
        /// The PCI address.
        address: String,
        /// What went wrong.
        what: String,
    },
    /// No IOVA space left below the DMA mask.
    #[error("no IOVA space left for {0} bytes below the DMA mask")]
    NoIovaSpace(usize),
    /// An error from the vfio-ioctls crate.
    #[error("VFIO: {0}")]
    Vfio(#[from] vfio_ioctls::VfioError),
    /// Another OS error.
    #[error("{what}: {source}")]
    Io {
        /// What the driver was doing.
        what: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

fn limit_text(limit: Option<u64>) -> String {
    match limit {
        None => "unlimited".into(),
        Some(b) if b >= 1 << 20 => format!("{} KiB ({} MiB)", b >> 10, b >> 20),
        Some(b) => format!("{} KiB", b >> 10),
    }
}

/// Maps an error of opening a `/dev/vfio` file to the helpful variant.
pub(crate) fn open_error(path: PathBuf, e: io::Error) -> VfioBusError {
    match e.kind() {
        io::ErrorKind::PermissionDenied => VfioBusError::Permission { path, source: e },
        io::ErrorKind::NotFound => VfioBusError::NoVfio { path },
        _ => VfioBusError::Io {
            what: "opening a VFIO device file",
            source: e,
        },
    }
}

/// Maps an error of vfio-ioctls to the helpful variant where one exists.
pub(crate) fn from_vfio(e: vfio_ioctls::VfioError) -> VfioBusError {
    use vfio_ioctls::VfioError as V;
    match e {
        V::OpenContainer(io) => open_error(PathBuf::from("/dev/vfio/vfio"), io),
        V::OpenGroup(io, name) => open_error(PathBuf::from(format!("/dev/vfio/{name}")), io),
        V::GroupViable => VfioBusError::GroupNotViable(u32::MAX),
        other => VfioBusError::Vfio(other),
    }
}

/// The soft RLIMIT_MEMLOCK in bytes (`None`: unlimited or unknown).
pub(crate) fn memlock_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct to a valid pointer.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) };
    (rc == 0 && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}

/// Maps a failed DMA map (errno) to an error: ENOMEM from the type1 IOMMU driver is the
/// locked-memory limit.
pub(crate) fn map_error(errno: i32, needed: usize, limit: Option<u64>) -> VfioBusError {
    if errno == libc::ENOMEM {
        VfioBusError::MemlockTooLow { limit, needed }
    } else {
        VfioBusError::Io {
            what: "VFIO_IOMMU_MAP_DMA",
            source: io::Error::from_raw_os_error(errno),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_say_what_to_do() {
        let e = map_error(libc::ENOMEM, 2 << 20, Some(64 << 10));
        let s = e.to_string();
        assert!(s.contains("RLIMIT_MEMLOCK is 64 KiB"), "{s}");
        assert!(s.contains("ulimit -l"), "{s}");
        let s = map_error(libc::ENOMEM, 1, Some(8 << 20)).to_string();
        assert!(s.contains("8192 KiB (8 MiB)"), "{s}");
        assert!(
            map_error(libc::ENOMEM, 1, None)
                .to_string()
                .contains("unlimited")
        );
        assert!(matches!(
            map_error(libc::EINVAL, 1, None),
            VfioBusError::Io { .. }
        ));

        let e = open_error(
            PathBuf::from("/dev/vfio/42"),
            io::Error::from(io::ErrorKind::PermissionDenied),
        );
        assert!(
            e.to_string()
                .starts_with("permission denied opening /dev/vfio/42"),
            "{e}"
        );
        let e = open_error(
            PathBuf::from("/dev/vfio/vfio"),
            io::Error::from(io::ErrorKind::NotFound),
        );
        assert!(e.to_string().contains("modprobe vfio-pci"), "{e}");
        let e = from_vfio(vfio_ioctls::VfioError::OpenGroup(
            io::Error::from(io::ErrorKind::PermissionDenied),
            "7".into(),
        ));
        assert!(e.to_string().contains("/dev/vfio/7"), "{e}");

        let e = VfioBusError::NotBoundToVfio {
            address: "0000:3b:00.0".into(),
            driver: Some("mlx5_core".into()),
        };
        assert!(
            e.to_string()
                .starts_with("0000:3b:00.0 is bound to mlx5_core, not vfio-pci")
        );
        assert!(
            VfioBusError::NoIommuGroup("0000:3b:00.0".into())
                .to_string()
                .contains("intel_iommu=on")
        );
        assert!(
            VfioBusError::NoHugepages(io::Error::from_raw_os_error(libc::ENOMEM))
                .to_string()
                .contains("nr_hugepages")
        );
    }
}
