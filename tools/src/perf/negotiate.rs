//! perftest's parameter negotiation (perftest 6.28 and newer, `negotiate_params` in
//! `src/perftest_communication.c`): after the MTU exchange and before the QP addresses, each
//! side sends `struct perftest_parameters_negotiate` and refuses to run when a test parameter
//! differs, naming it as perftest does (` size mismatch: local=65536, remote=8`). A side
//! negotiates only with a peer of version 6.28 or newer, so older peers never see it.
//!
//! The block is the C struct as perftest's distributions build it (with `HAVE_MLX5DV`, as
//! every rdma-core build has), 320 bytes: seven `int`s, padding, `size` and `iters` (64-bit),
//! eight `int`s, a raw `struct ibv_device_attr` (232 bytes) and the `mlx5dv` comp mask. The
//! `int`s and 64-bit fields are big-endian (`hton_int`, `hton_64`); the device attributes are
//! the host's own layout and byte order (perftest copies `ibv_query_device`'s struct), of
//! which the peer reads `max_qp_rd_atom` (its outstanding reads are capped by it).

use super::{Conn, MAX_SIZE, PerfConfig, TestKind, Verb};
use crate::error::ToolError;
use rnic_verbs::{AtomicCap, DeviceAttr};

/// perftest's version that introduced the negotiation: a peer this new or newer negotiates.
#[allow(clippy::approx_constant)] // perftest 6.28, not tau
pub const NEGOTIATION_VERSION: f64 = 6.28;

/// perftest's `DEF_DURATION`: what `duration` carries without `-D`.
const DEFAULT_DURATION: u32 = 5;

/// Size of the block (`sizeof(struct perftest_parameters_negotiate)` with `HAVE_MLX5DV`).
pub const LEN: usize = 320;

/// Byte offsets in the block, each named once (the struct's field order; checked against a C
/// compiler's `offsetof` for x86-64).
mod field {
    pub(super) const TEST_METHOD: usize = 0;
    pub(super) const CONNECTION_TYPE: usize = 4;
    pub(super) const VERB: usize = 8;
    pub(super) const TST: usize = 12;
    pub(super) const ATOMIC_TYPE: usize = 16;
    pub(super) const TEST_TYPE: usize = 20;
    pub(super) const REPORT_FMT: usize = 24;
    // 4 bytes of padding: `size` is 8-byte aligned.
    pub(super) const SIZE: usize = 32;
    pub(super) const ITERS: usize = 40;
    pub(super) const AES_XTS: usize = 48;
    pub(super) const NUM_OF_QPS: usize = 52;
    pub(super) const DURATION: usize = 56;
    pub(super) const USE_RDMA_CM: usize = 60;
    pub(super) const USE_WRITE_WITH_IMM: usize = 64;
    pub(super) const NO_ENHANCED_REORDER: usize = 68;
    pub(super) const SIG_OFFLOAD: usize = 72;
    pub(super) const DATA_VALIDATION: usize = 76;
    /// `struct ibv_device_attr`, 232 bytes.
    pub(super) const ATTR: usize = 80;
    pub(super) const MLX5DV_COMP_MASK: usize = 312;

    /// Offsets inside `struct ibv_device_attr`.
    pub(super) mod attr {
        pub(in super::super) const FW_VER: usize = 0; // char[64]
        pub(in super::super) const NODE_GUID: usize = 64; // __be64
        pub(in super::super) const SYS_IMAGE_GUID: usize = 72; // __be64
        pub(in super::super) const MAX_MR_SIZE: usize = 80; // u64
        pub(in super::super) const PAGE_SIZE_CAP: usize = 88; // u64
        /// The `u32` / `int` fields from `vendor_id` to `max_srq_sge`, in order.
        pub(in super::super) const U32S: usize = 96;
        pub(in super::super) const MAX_PKEYS: usize = 224; // u16
        pub(in super::super) const LOCAL_CA_ACK_DELAY: usize = 226;
        pub(in super::super) const PHYS_PORT_CNT: usize = 227;
        pub(in super::super) const LEN: usize = 232;
        /// Index of `max_qp_rd_atom` among the `u32` fields.
        pub(in super::super) const MAX_QP_RD_ATOM: usize = 12;
        /// Index of `vendor_id`.
        pub(in super::super) const VENDOR_ID: usize = 0;
    }
}

/// The test parameters both sides must agree on (perftest's enum values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Params {
    /// `RUN_REGULAR` 0, `RUN_ALL` 1 (`-a`), `RUN_INFINITELY` 2.
    pub test_method: u32,
    /// `RC` 0, `UC` 1, `UD` 2.
    pub connection_type: u32,
    /// `SEND` 0, `SEND_IMM` 1, `WRITE` 2, `WRITE_IMM` 3, `READ` 4, `ATOMIC` 5.
    pub verb: u32,
    /// `LAT` 0, `BW` 1.
    pub tst: u32,
    /// `CMP_AND_SWAP` 0, `FETCH_AND_ADD` 1 (0 for tests that are not atomic).
    pub atomic_type: u32,
    /// `ITERATIONS` 0, `DURATION` 1 (`-D`).
    pub test_type: u32,
    /// `GBS` 0 (`--report_gbits`), `MBS` 1.
    pub report_fmt: u32,
    /// Message size (`-a`: 2^23, or the MTU on UD).
    pub size: u64,
    /// Iterations (0 with `-D`).
    pub iters: u64,
    /// AES-XTS offload (0: rnic has none).
    pub aes_xts: u32,
    /// QPs (`-q`).
    pub num_of_qps: u32,
    /// `-D` seconds (5 when not given, as perftest's default).
    pub duration: u32,
    /// `-R` rdma_cm (0).
    pub use_rdma_cm: u32,
    /// perftest's separate write-with-immediate switch: 0, as perftest sends it
    /// (`--write_with_imm` sets `verb` to `WRITE_IMM`; nothing in perftest 6.29 sets this).
    pub use_write_with_imm: u32,
    /// `--no_enhanced_reorder` (0).
    pub no_enhanced_reorder: u32,
    /// Signature offload (0).
    pub sig_offload: u32,
    /// `--data_validation`: 0 (rnic refuses the flag, see [`super::validation`]).
    pub data_validation: u32,
}

/// Per field: its name as perftest prints it, where it sits, and the names of its values
/// (`None`: printed as a number).
const FIELDS: [(&str, usize, Option<&[&str]>); 17] = [
    (
        "test_method",
        field::TEST_METHOD,
        Some(&["RUN_REGULAR", "RUN_ALL", "RUN_INFINITELY"]),
    ),
    (
        "connection_type",
        field::CONNECTION_TYPE,
        Some(&["RC", "UC", "UD", "RawEth", "XRC", "DC", "SRD"]),
    ),
    (
        "verb",
        field::VERB,
        Some(&["SEND", "SEND_IMM", "WRITE", "WRITE_IMM", "READ", "ATOMIC"]),
    ),
    (
        "tst",
        field::TST,
        Some(&["LAT", "BW", "LAT_BY_BW", "FS_RATE"]),
    ),
    (
        "atomicType",
        field::ATOMIC_TYPE,
        Some(&["CMP_AND_SWAP", "FETCH_AND_ADD"]),
    ),
    (
        "test_type",
        field::TEST_TYPE,
        Some(&["ITERATIONS", "DURATION"]),
    ),
    ("report_fmt", field::REPORT_FMT, Some(&["GBS", "MBS"])),
    ("size", field::SIZE, None),
    ("iters", field::ITERS, None),
    ("aes_xts", field::AES_XTS, Some(&["OFF", "ON"])),
    ("num_of_qps", field::NUM_OF_QPS, None),
    ("duration", field::DURATION, None),
    ("use_rdma_cm", field::USE_RDMA_CM, Some(&["OFF", "ON"])),
    (
        "use_write_with_imm",
        field::USE_WRITE_WITH_IMM,
        Some(&["OFF", "ON"]),
    ),
    (
        "no_enhanced_reorder",
        field::NO_ENHANCED_REORDER,
        Some(&["OFF", "ON"]),
    ),
    ("sig_offload", field::SIG_OFFLOAD, Some(&["OFF", "ON"])),
    (
        "data_validation",
        field::DATA_VALIDATION,
        Some(&["OFF", "ON"]),
    ),
];

impl Params {
    /// What perftest would send for the same command line: `cfg` after the MTU exchange (a
    /// UD size already cut to the MTU, `mtu_bytes`), with perftest's defaults for what rnic
    /// does not offer.
    ///
    /// ```
    /// use clap::Parser;
    /// use rnic_tools::perf::{negotiate::Params, PerfArgs, PerfConfig, TestKind, Verb};
    ///
    /// #[derive(Parser)]
    /// struct Cli {
    ///     #[command(flatten)]
    ///     a: PerfArgs,
    /// }
    /// let a = Cli::parse_from(["ib_write_bw"]).a;
    /// let cfg = PerfConfig::from_args(Verb::Write, TestKind::Bw, &a).unwrap();
    /// let p = Params::of(&cfg, 1024); // ib_write_bw's defaults
    /// assert_eq!((p.verb, p.tst, p.size, p.iters, p.duration, p.report_fmt), (2, 1, 65536, 5000, 5, 1));
    /// ```
    pub fn of(cfg: &PerfConfig, mtu_bytes: u32) -> Params {
        let size = match (cfg.all, cfg.conn) {
            (true, Conn::Ud) => u64::from(mtu_bytes),
            (true, _) => MAX_SIZE,
            (false, _) => cfg.size,
        };
        Params {
            test_method: u32::from(cfg.all),
            connection_type: match cfg.conn {
                Conn::Rc => 0,
                Conn::Uc => 1,
                Conn::Ud => 2,
            },
            // perftest >= 6.28's VerbType; the with-immediate flags select SEND_IMM / WRITE_IMM
            // (its use_write_with_imm field stays 0: its parser never sets it).
            verb: match (cfg.verb, cfg.imm) {
                (Verb::Send, false) => 0,
                (Verb::Send, true) => 1,
                (Verb::Write, false) => 2,
                (Verb::Write, true) => 3,
                (Verb::Read, _) => 4,
                (Verb::Atomic, _) => 5,
            },
            tst: u32::from(cfg.kind == TestKind::Bw),
            atomic_type: u32::from(cfg.verb == Verb::Atomic && !cfg.atomic_cmp_swap),
            test_type: u32::from(cfg.duration.is_some()),
            report_fmt: u32::from(!cfg.gbits),
            size,
            iters: if cfg.duration.is_some() { 0 } else { cfg.iters },
            num_of_qps: cfg.qps,
            duration: cfg.duration.map_or(DEFAULT_DURATION, |d| d as u32),
            // perftest sends use_rdma_cm, which -R (and -z) turn on.
            use_rdma_cm: u32::from(cfg.rdma_cm),
            ..Params::default()
        }
    }

    /// The values in [`FIELDS`] order, widened.
    fn values(&self) -> [u64; 17] {
        let w = |v: u32| u64::from(v);
        [
            w(self.test_method),
            w(self.connection_type),
            w(self.verb),
            w(self.tst),
            w(self.atomic_type),
            w(self.test_type),
            w(self.report_fmt),
            self.size,
            self.iters,
            w(self.aes_xts),
            w(self.num_of_qps),
            w(self.duration),
            w(self.use_rdma_cm),
            w(self.use_write_with_imm),
            w(self.no_enhanced_reorder),
            w(self.sig_offload),
            w(self.data_validation),
        ]
    }

    fn from_values(v: [u64; 17]) -> Params {
        let n = |i: usize| v[i] as u32;
        Params {
            test_method: n(0),
            connection_type: n(1),
            verb: n(2),
            tst: n(3),
            atomic_type: n(4),
            test_type: n(5),
            report_fmt: n(6),
            size: v[7],
            iters: v[8],
            aes_xts: n(9),
            num_of_qps: n(10),
            duration: n(11),
            use_rdma_cm: n(12),
            use_write_with_imm: n(13),
            no_enhanced_reorder: n(14),
            sig_offload: n(15),
            data_validation: n(16),
        }
    }
}

/// What the peer sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remote {
    /// Its test parameters.
    pub params: Params,
    /// Its device's `max_qp_rd_atom` (our outstanding reads are capped by it).
    pub max_qp_rd_atom: u32,
    /// Its device's `vendor_id`.
    pub vendor_id: u32,
    /// Its `mlx5dv_context.comp_mask`.
    pub mlx5dv_comp_mask: u64,
}

/// The block for `p` and our device's attributes `attr`.
///
/// ```
/// use rnic_tools::perf::negotiate::{decode, encode, Params, LEN};
/// let ctx = rnic_verbs::Context::open("emu0").unwrap();
/// let p = Params { verb: 2, tst: 1, report_fmt: 1, size: 65536, iters: 5000, num_of_qps: 1, duration: 5, ..Params::default() };
/// let b = encode(&p, &ctx.query_device());
/// assert_eq!(b.len(), LEN);
/// assert_eq!(&b[8..12], &2u32.to_be_bytes()); // verb WRITE, big-endian
/// assert_eq!(decode(&b).unwrap().params, p);
/// ```
pub fn encode(p: &Params, attr: &DeviceAttr) -> [u8; LEN] {
    let mut b = [0u8; LEN];
    for ((_, at, _), v) in FIELDS.iter().zip(p.values()) {
        if *at == field::SIZE || *at == field::ITERS {
            b[*at..*at + 8].copy_from_slice(&v.to_be_bytes());
        } else {
            b[*at..*at + 4].copy_from_slice(&(v as u32).to_be_bytes());
        }
    }
    encode_attr(&mut b[field::ATTR..field::ATTR + field::attr::LEN], attr);
    // No mlx5dv capability bits (out-of-order receive WRs): the peer then turns its
    // enhanced reorder off, as it does for any peer without them.
    b[field::MLX5DV_COMP_MASK..].copy_from_slice(&0u64.to_be_bytes());
    b
}

/// `struct ibv_device_attr` in the host's layout and byte order (what a C peer on the same
/// architecture reads back); the GUIDs are big-endian (`__be64`).
fn encode_attr(a: &mut [u8], attr: &DeviceAttr) {
    use field::attr::{
        FW_VER, LOCAL_CA_ACK_DELAY, MAX_MR_SIZE, MAX_PKEYS, NODE_GUID, PAGE_SIZE_CAP,
        PHYS_PORT_CNT, SYS_IMAGE_GUID, U32S,
    };
    let fw = attr.fw_ver.as_bytes();
    let n = fw.len().min(63);
    a[FW_VER..FW_VER + n].copy_from_slice(&fw[..n]);
    a[NODE_GUID..NODE_GUID + 8].copy_from_slice(&attr.node_guid.to_be_bytes());
    a[SYS_IMAGE_GUID..SYS_IMAGE_GUID + 8].copy_from_slice(&attr.sys_image_guid.to_be_bytes());
    a[MAX_MR_SIZE..MAX_MR_SIZE + 8].copy_from_slice(&attr.max_mr_size.to_ne_bytes());
    a[PAGE_SIZE_CAP..PAGE_SIZE_CAP + 8].copy_from_slice(&attr.page_size_cap.to_ne_bytes());
    let atomic = match attr.atomic_cap {
        AtomicCap::None => 0,
        AtomicCap::Hca => 1,
        AtomicCap::Glob => 2,
    };
    // vendor_id .. max_srq_sge; the fields rnic does not model (EE, RDD, raw QPs, multicast,
    // FMR, device_cap_flags) are 0, as a device without them reports.
    let u32s: [u32; 32] = [
        attr.vendor_id,
        attr.vendor_part_id,
        attr.hw_ver,
        attr.max_qp,
        attr.max_qp_wr,
        0, // device_cap_flags
        attr.max_sge,
        attr.max_sge_rd,
        attr.max_cq,
        attr.max_cqe,
        attr.max_mr,
        attr.max_pd,
        attr.max_qp_rd_atom,
        0, // max_ee_rd_atom
        attr.max_res_rd_atom,
        attr.max_qp_init_rd_atom,
        0, // max_ee_init_rd_atom
        atomic,
        0, // max_ee
        0, // max_rdd
        0, // max_mw
        0, // max_raw_ipv6_qp
        0, // max_raw_ethy_qp
        0, // max_mcast_grp
        0, // max_mcast_qp_attach
        0, // max_total_mcast_qp_attach
        attr.max_ah,
        0, // max_fmr
        0, // max_map_per_fmr
        attr.max_srq,
        attr.max_srq_wr,
        attr.max_srq_sge,
    ];
    for (i, v) in u32s.iter().enumerate() {
        a[U32S + 4 * i..U32S + 4 * i + 4].copy_from_slice(&v.to_ne_bytes());
    }
    a[MAX_PKEYS..MAX_PKEYS + 2].copy_from_slice(&attr.max_pkeys.to_ne_bytes());
    a[LOCAL_CA_ACK_DELAY] = attr.local_ca_ack_delay;
    a[PHYS_PORT_CNT] = attr.phys_port_cnt;
}

/// Parses the peer's block.
///
/// ```
/// use rnic_tools::perf::negotiate::decode;
/// assert!(decode(&[0u8; 12]).is_err()); // too short
/// ```
pub fn decode(b: &[u8]) -> Result<Remote, ToolError> {
    if b.len() != LEN {
        return Err(ToolError::Protocol(format!(
            "parameter negotiation: {} bytes, expected {LEN}",
            b.len()
        )));
    }
    let be32 = |at: usize| u64::from(u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]));
    let be64 = |at: usize| u64::from_be_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
    let mut v = [0u64; 17];
    for (slot, (_, at, _)) in v.iter_mut().zip(FIELDS.iter()) {
        *slot = if *at == field::SIZE || *at == field::ITERS {
            be64(*at)
        } else {
            be32(*at)
        };
    }
    let attr_u32 = |i: usize| {
        let at = field::ATTR + field::attr::U32S + 4 * i;
        u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    };
    Ok(Remote {
        params: Params::from_values(v),
        max_qp_rd_atom: attr_u32(field::attr::MAX_QP_RD_ATOM),
        vendor_id: attr_u32(field::attr::VENDOR_ID),
        mlx5dv_comp_mask: be64(field::MLX5DV_COMP_MASK),
    })
}

/// The first parameter that differs, as perftest reports it (`" verb mismatch: local=WRITE,
/// remote=READ"`); `None` when they agree.
///
/// ```
/// use rnic_tools::perf::negotiate::{mismatch, Params};
/// let ours = Params { verb: 2, size: 65536, ..Params::default() };
/// assert_eq!(mismatch(&ours, &ours), None);
/// let theirs = Params { size: 8, ..ours };
/// assert_eq!(mismatch(&ours, &theirs).unwrap(), " size mismatch: local=65536, remote=8");
/// let theirs = Params { verb: 4, ..ours };
/// assert_eq!(mismatch(&ours, &theirs).unwrap(), " verb mismatch: local=WRITE, remote=READ");
/// ```
pub fn mismatch(local: &Params, remote: &Params) -> Option<String> {
    let (l, r) = (local.values(), remote.values());
    FIELDS
        .iter()
        .zip(l.iter().zip(r.iter()))
        .find_map(|((name, _, names), (&a, &b))| {
            (a != b).then(|| {
                let show = |x: u64| match names.and_then(|n| n.get(x as usize)) {
                    Some(s) => (*s).to_string(),
                    None => x.to_string(),
                };
                format!(" {name} mismatch: local={}, remote={}", show(a), show(b))
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offsets a C compiler gives `struct perftest_parameters_negotiate` (x86-64,
    /// `HAVE_MLX5DV`): size 32, iters 40, aes_xts 48, data_validation 76, attr 80 (232
    /// bytes), mlx5dv_comp_mask 312, total 320; inside the attributes vendor_id 96,
    /// max_qp 108, max_qp_rd_atom 144, max_srq_sge 220, max_pkeys 224, phys_port_cnt 227.
    #[test]
    fn the_layout_is_the_c_struct() {
        assert_eq!((field::SIZE, field::ITERS, field::AES_XTS), (32, 40, 48));
        assert_eq!(
            (field::DATA_VALIDATION, field::ATTR, field::MLX5DV_COMP_MASK),
            (76, 80, 312)
        );
        assert_eq!(field::ATTR + field::attr::LEN, field::MLX5DV_COMP_MASK);
        assert_eq!(field::MLX5DV_COMP_MASK + 8, LEN);
        let u = |i: usize| field::attr::U32S + 4 * i;
        assert_eq!(
            (u(3), u(field::attr::MAX_QP_RD_ATOM), u(31)),
            (108, 144, 220)
        );
        assert_eq!(u(32), field::attr::MAX_PKEYS);
    }

    #[test]
    fn every_field_round_trips_and_mismatches_are_named() {
        let ctx = rnic_verbs::Context::open("emu0").unwrap();
        let attr = ctx.query_device();
        let p = Params {
            test_method: 1,
            connection_type: 2,
            verb: 3,
            tst: 1,
            atomic_type: 1,
            test_type: 1,
            report_fmt: 0,
            size: 1 << 23,
            iters: 0x1_0000_0001,
            aes_xts: 1,
            num_of_qps: 128,
            duration: 7,
            use_rdma_cm: 1,
            use_write_with_imm: 1,
            no_enhanced_reorder: 1,
            sig_offload: 1,
            data_validation: 1,
        };
        let b = encode(&p, &attr);
        let r = decode(&b).unwrap();
        assert_eq!(r.params, p);
        assert_eq!(r.max_qp_rd_atom, attr.max_qp_rd_atom);
        assert_eq!(r.vendor_id, attr.vendor_id);
        assert_eq!(
            &b[field::ATTR..field::ATTR + 4],
            attr.fw_ver.as_bytes().get(..4).unwrap()
        );
        // Each field on its own: a change there is reported under its name.
        let l = p.values();
        for (i, (name, _, _)) in FIELDS.iter().enumerate() {
            let mut v = l;
            v[i] ^= 1;
            let m = mismatch(&p, &Params::from_values(v)).unwrap();
            assert!(m.starts_with(&format!(" {name} mismatch: ")), "{m}");
        }
        assert!(decode(&b[..LEN - 1]).is_err());
        assert!(decode(&[b.as_slice(), &[0]].concat()).is_err());
    }
}
