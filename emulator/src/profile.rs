//! Device profiles: what the emulated ConnectX reports and asks for (DESIGN principle 9).

/// Everything that makes one emulated device differ from another: firmware version, command
/// queue geometry, firmware page demands, limits, MAC.
///
/// [`Profile::default`] is small and fast for tests (a few dozen firmware pages);
/// [`Profile::connectx4`] reproduces the values of the real ConnectX-4 trace (firmware
/// 14.12.1220, 6 boot pages and 12,868 init pages) for fidelity tests.
///
/// ```
/// use rnic_emulator::{Device, Profile, RunMode};
///
/// let p = Profile { first_qpn: 0x11, mac: [2, 0, 0, 0, 0, 7], ..Profile::default() };
/// assert_eq!(p.name, "emu");
/// let _dev = Device::new(p, RunMode::Deterministic); // CREATE_QP starts at QPN 0x11
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// A short name for logs ("emu", "connectx4").
    pub name: &'static str,
    /// Firmware version: major, minor, sub-minor.
    pub fw_version: (u16, u16, u16),
    /// PCI device id reported as `vendor_part_id` (vendor is always 0x15B3).
    pub pci_device_id: u16,
    /// log2 of the number of command queue entries (at most 5).
    pub log_cmdq_size: u8,
    /// log2 of the command queue entry stride in bytes (6 = 64 bytes).
    pub log_cmdq_stride: u8,
    /// Pages QUERY_PAGES asks for at boot.
    pub boot_pages: i32,
    /// Pages QUERY_PAGES asks for before INIT_HCA.
    pub init_pages: i32,
    /// Pages QUERY_PAGES (regular) asks for after INIT_HCA.
    pub regular_pages: i32,
    /// The port's permanent MAC address.
    pub mac: [u8; 6],
    /// Number of UAR pages the BAR holds (UAR indices start at [`Profile::FIRST_UAR`]).
    pub num_uars: u32,
    /// Internal timer frequency in kHz (`device_frequency_khz`).
    pub device_frequency_khz: u32,
    /// log2 of the maximum number of QPs (capability maximum).
    pub log_max_qp: u8,
    /// log2 of the maximum QP size in WQEs.
    pub log_max_qp_sz: u8,
    /// log2 of the maximum number of CQs.
    pub log_max_cq: u8,
    /// log2 of the maximum CQ size in CQEs.
    pub log_max_cq_sz: u8,
    /// log2 of the maximum number of EQs.
    pub log_max_eq: u8,
    /// log2 of the maximum number of memory keys.
    pub log_max_mkey: u8,
    /// log2 of the maximum number of PDs.
    pub log_max_pd: u8,
    /// log2 of the maximum number of SRQs.
    pub log_max_srq: u8,
    /// log2 of the largest message.
    pub log_max_msg: u8,
    /// Entries in the RoCE GID table.
    pub gid_table_size: u16,
    /// The first QPN CREATE_QP hands out (0x100; a replay of a capture may ask for the
    /// capture's QPN, e.g. rxe's 0x11). At least 2: QP0 and QP1 are special.
    pub first_qpn: u32,
    /// Largest path MTU the port supports (IB enum: 5 = 4096).
    pub max_mtu: u8,
    /// The port's Ethernet MTU at power-on (the NIC vport context's `mtu`; the host may
    /// change it with MODIFY_NIC_VPORT_CONTEXT): 1500, a standard Ethernet port, whose
    /// active RoCE MTU is 1024. A jumbo-frame port (9000) has an active MTU of 4096.
    pub port_mtu: u16,
    /// The firmware image's parameter-set ID (QUERY_ADAPTER `vsd_contd_psid`).
    pub psid: &'static str,
    /// Whether the device supports `atomic_req_8B_endianness_mode` 1 (8-byte atomic
    /// responses in host byte order); a ConnectX-4 does not.
    pub atomic_endianness_mode_1: bool,
    /// Firmware pages the device holds at most (MANAGE_PAGES give beyond it: no resources).
    pub max_fw_pages: u32,
}

impl Profile {
    /// The first UAR index handed out (UAR pages below it overlap the init segment); a real
    /// ConnectX-4 started at 0x10.
    ///
    /// ```
    /// use rnic_emulator::Profile;
    ///
    /// // UAR page 0x10 starts right after the init segment's 64 KiB.
    /// assert_eq!(Profile::FIRST_UAR as usize * 4096, 0x1_0000);
    /// ```
    pub const FIRST_UAR: u32 = 0x10;

    /// The ConnectX-4 of the real command trace.
    ///
    /// ```
    /// use rnic_emulator::Profile;
    ///
    /// let cx4 = Profile::connectx4();
    /// assert_eq!(cx4.fw_version, (14, 12, 1220));
    /// assert_eq!((cx4.boot_pages, cx4.init_pages), (6, 12_868));
    /// assert!(!cx4.atomic_endianness_mode_1);
    /// assert_eq!(cx4.log_max_qp, 23); // room for 10,000 QPs (the scale_qps test)
    /// ```
    pub fn connectx4() -> Self {
        Profile {
            name: "connectx4",
            fw_version: (14, 12, 1220),
            pci_device_id: 0x1013,
            log_cmdq_size: 5,
            log_cmdq_stride: 6,
            boot_pages: 6,
            init_pages: 12_868,
            regular_pages: 0,
            mac: [0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32],
            num_uars: 1024,
            device_frequency_khz: 275_000,
            log_max_qp: 23,
            log_max_qp_sz: 15,
            log_max_cq: 24,
            log_max_cq_sz: 22,
            log_max_eq: 8,
            log_max_mkey: 24,
            log_max_pd: 24,
            log_max_srq: 23,
            log_max_msg: 30,
            first_qpn: 0x100,
            gid_table_size: 256,
            max_mtu: 5,
            port_mtu: 1500,
            psid: "MT_2430110027",
            atomic_endianness_mode_1: false,
            max_fw_pages: 1 << 20,
        }
    }

    /// Size of BAR0 in bytes: the init segment's pages plus the UAR pages.
    ///
    /// ```
    /// use rnic_emulator::Profile;
    ///
    /// let p = Profile { num_uars: 16, ..Profile::default() };
    /// assert_eq!(p.bar_len(), (0x10 + 16) * 4096);
    /// ```
    pub fn bar_len(&self) -> usize {
        (Self::FIRST_UAR as usize + self.num_uars as usize) * 4096
    }
}

impl Default for Profile {
    /// A small device for tests: ConnectX-4 behaviour with few firmware pages (4 boot, 32
    /// init) and small limits; unlike the ConnectX-4 it supports
    /// `atomic_req_8B_endianness_mode` 1.
    fn default() -> Self {
        Profile {
            name: "emu",
            boot_pages: 4,
            init_pages: 32,
            num_uars: 64,
            log_max_qp: 12,
            log_max_cq: 12,
            log_max_eq: 5,
            log_max_mkey: 14,
            log_max_pd: 12,
            log_max_srq: 10,
            mac: [0x02, 0x52, 0x4e, 0x49, 0x43, 0x00],
            psid: "RNIC_EMU0000001",
            atomic_endianness_mode_1: true,
            max_fw_pages: 4096,
            ..Profile::connectx4()
        }
    }
}
