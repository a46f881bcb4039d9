//! Flow steering state: flow tables, their groups and entries, and the root table of the NIC
//! receive table type (what the port's non-RoCE frames are matched against).

use std::collections::BTreeMap;

use rnic_hw_regs::ctx::FteMatchParam;

/// A flow table (CREATE_FLOW_TABLE) of the NIC RX type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FlowTable {
    pub level: u8,
    pub log_size: u8,
    pub miss_action: u8,
    pub miss_table: u32,
    /// Entries by flow index.
    pub entries: BTreeMap<u32, Fte>,
}

impl FlowTable {
    /// Number of flow indices.
    pub(crate) fn size(&self) -> u64 {
        1u64 << self.log_size.min(32)
    }
}

/// A flow group (CREATE_FLOW_GROUP): flow indices `start ..= end` of table `table`, whose
/// entries compare the fields `criteria` masks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FlowGroup {
    pub table: u32,
    pub start: u32,
    pub end: u32,
    pub criteria_enable: u8,
    pub criteria: FteMatchParam,
}

/// Where a matching entry sends the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FlowDest {
    /// To a TIR.
    Tir(u32),
    /// On to another flow table (of a higher level).
    Table(u32),
}

/// A flow table entry (SET_FLOW_TABLE_ENTRY).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fte {
    pub group: u32,
    pub action: u16,
    pub flow_tag: u32,
    /// The packet's fields must equal these under the group's criteria.
    pub value: FteMatchParam,
    pub dests: Vec<FlowDest>,
}

/// Flow steering: the tables, the groups, and the NIC RX root.
#[derive(Debug, Default)]
pub(crate) struct FlowSteering {
    pub tables: BTreeMap<u32, FlowTable>,
    pub groups: BTreeMap<u32, FlowGroup>,
    /// The NIC RX root table (SET_FLOW_TABLE_ROOT), if any.
    pub nic_rx_root: Option<u32>,
    /// Next table and group numbers handed out.
    pub next_table: u32,
    pub next_group: u32,
}

impl FlowSteering {
    /// Whether any entry of any table forwards to TIR `tirn`.
    pub(crate) fn uses_tir(&self, tirn: u32) -> bool {
        self.tables
            .values()
            .flat_map(|t| t.entries.values())
            .any(|e| e.dests.contains(&FlowDest::Tir(tirn)))
    }

    /// Whether table `id` is referenced: the root, another table's miss, or an entry's
    /// forward.
    pub(crate) fn table_referenced(&self, id: u32) -> bool {
        self.nic_rx_root == Some(id)
            || self.tables.values().any(|t| {
                (t.miss_action == rnic_hw_regs::ctx::table_miss_action::GOTO_TABLE
                    && t.miss_table == id)
                    || t.entries
                        .values()
                        .any(|e| e.dests.contains(&FlowDest::Table(id)))
            })
    }
}
