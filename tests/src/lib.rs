//! Helpers for rnic's cross-crate tests: finding the shared golden data, and reading it.
//!
//! Golden data that comes from other projects (the ConnectX-4 command trace, the
//! `mlx5_ifc.h` layout table) stays outside the repository, in the shared folder. Tests find
//! it through [`shared_dir`]: the variable `RNIC_SHARED_DIR` if set, else `../shared` beside
//! the checkout. When the variable is set the data must be there (CI sets it, so CI always
//! runs these tests); when it is not set and `../shared` is absent, tests skip with a printed
//! reason so that a user's fresh clone still passes `cargo test`.

use std::path::PathBuf;

pub mod trace;

/// The environment variable naming the shared golden-data folder.
pub const SHARED_DIR_VAR: &str = "RNIC_SHARED_DIR";

/// The shared folder holding `data/` and `reference/`, or `None` (with a reason printed to
/// stderr) when the test should skip.
///
/// # Panics
/// When `RNIC_SHARED_DIR` is set but does not name a directory: a run that asked for the
/// golden data must not pass without it.
pub fn shared_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(SHARED_DIR_VAR) {
        let dir = PathBuf::from(dir);
        assert!(
            dir.is_dir(),
            "{SHARED_DIR_VAR}={} is not a directory: the golden data is missing",
            dir.display()
        );
        return Some(dir);
    }
    let default = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared");
    if default.is_dir() {
        Some(default)
    } else {
        eprintln!(
            "skipped: no shared golden data ({SHARED_DIR_VAR} is unset and {} is absent)",
            default.display()
        );
        None
    }
}

/// A file inside the shared folder (`rel` like `"data/mlx5-trace/trace-mlx5_core.txt.gz"`), or
/// `None` to skip, as [`shared_dir`] decides.
///
/// # Panics
/// When the shared folder exists but lacks the file.
pub fn shared_file(rel: &str) -> Option<PathBuf> {
    let path = shared_dir()?.join(rel);
    assert!(
        path.is_file(),
        "golden data file {} is missing",
        path.display()
    );
    Some(path)
}

/// The fields `fields` (tshark's `-e` names) of each frame of the capture `pcap` that
/// matches the display filter `filter`, tab-separated, one line per frame; `None` (with a
/// reason printed to stderr) when tshark cannot be run, so the test skips that part.
///
/// # Panics
/// When tshark runs and fails (a capture it cannot read is a failed test).
///
/// ```no_run
/// let pcap = std::path::Path::new("arp.pcap");
/// if let Some(lines) = rnic_tests::tshark_fields(pcap, "arp", &["arp.opcode", "arp.src.proto_ipv4"]) {
///     assert!(lines.iter().any(|l| l == "2\t10.0.0.2")); // 10.0.0.2 answered
/// }
/// ```
pub fn tshark_fields(pcap: &std::path::Path, filter: &str, fields: &[&str]) -> Option<Vec<String>> {
    let mut cmd = std::process::Command::new("tshark");
    cmd.arg("-r").arg(pcap).args(["-Y", filter, "-T", "fields"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("skipped: tshark cannot be run: {e}");
            return None;
        }
    };
    assert!(
        out.status.success(),
        "tshark on {}: {}",
        pcap.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    Some(text.lines().map(str::to_string).collect())
}
