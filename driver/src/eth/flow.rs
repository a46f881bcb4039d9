//! NIC RX flow steering: [`FlowTable`] (CREATE_FLOW_TABLE, SET_FLOW_TABLE_ROOT),
//! [`FlowGroup`] (CREATE_FLOW_GROUP), [`FlowRule`] (SET / DELETE_FLOW_TABLE_ENTRY) and the
//! match they share, [`FlowMatch`]. A rule keeps its group, table and TIR alive; dropping it
//! deletes the entry, then the group and table go when nothing holds them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rnic_hw_regs::cmd::{
    CreateFlowGroupIn, CreateFlowTableIn, DeleteFteIn, DestroyFlowGroupIn, DestroyFlowTableIn,
    SetFlowTableRootIn, SetFteIn, table_type,
};
use rnic_hw_regs::ctx::{
    DestFormatStruct, FteMatchParam, destination_type, flow_action, match_criteria,
};
use zerocopy::IntoBytes;

use super::Tir;
use crate::error::DriverError;
use crate::hca::Hca;

/// SET_FLOW_TABLE_ROOT op_mod that disconnects the root.
const ROOT_DISCONNECT: u16 = 1;

/// The header fields a rule matches on, as a criteria mask and a value (outer headers of
/// `fte_match_param`). A group takes the mask (which fields its rules compare), a rule the
/// values.
///
/// ```
/// use rnic_driver::eth::FlowMatch;
///
/// let m = FlowMatch::new().ethertype(0x0800).ip_protocol(1).dst_ipv4([10, 0, 0, 2]);
/// assert_eq!(m.value().outer_headers().ip_protocol(), 1);
/// assert_eq!(m.criteria().outer_headers().ethertype(), 0xFFFF);
/// assert_eq!(m.criteria().outer_headers().dst_ipv4(), u32::MAX);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowMatch {
    criteria: FteMatchParam,
    value: FteMatchParam,
}

impl FlowMatch {
    /// Matches everything.
    ///
    /// ```
    /// assert_eq!(rnic_driver::eth::FlowMatch::new().criteria(), &Default::default());
    /// ```
    pub fn new() -> FlowMatch {
        FlowMatch::default()
    }

    /// Destination MAC equal to `mac`.
    ///
    /// ```
    /// let m = rnic_driver::eth::FlowMatch::new().dmac([2, 0, 0, 0, 0, 1]);
    /// assert_eq!(m.value().outer_headers().dmac(), [2, 0, 0, 0, 0, 1]);
    /// ```
    pub fn dmac(mut self, mac: [u8; 6]) -> FlowMatch {
        self.criteria.outer_headers_mut().set_dmac([0xFF; 6]);
        self.value.outer_headers_mut().set_dmac(mac);
        self
    }

    /// Ethertype equal to `ethertype` (after any VLAN tag).
    ///
    /// ```
    /// let m = rnic_driver::eth::FlowMatch::new().ethertype(0x0806);
    /// assert_eq!(m.value().outer_headers().ethertype(), 0x0806);
    /// ```
    pub fn ethertype(mut self, ethertype: u16) -> FlowMatch {
        self.criteria.outer_headers_mut().set_ethertype(0xFFFF);
        self.value.outer_headers_mut().set_ethertype(ethertype);
        self
    }

    /// IP protocol equal to `proto` (1 ICMP, 6 TCP, 17 UDP).
    ///
    /// ```
    /// let m = rnic_driver::eth::FlowMatch::new().ip_protocol(17);
    /// assert_eq!(m.criteria().outer_headers().ip_protocol(), 0xFF);
    /// ```
    pub fn ip_protocol(mut self, proto: u8) -> FlowMatch {
        self.criteria.outer_headers_mut().set_ip_protocol(0xFF);
        self.value.outer_headers_mut().set_ip_protocol(proto);
        self
    }

    /// Destination IPv4 address equal to `ip`.
    ///
    /// ```
    /// let m = rnic_driver::eth::FlowMatch::new().dst_ipv4([10, 0, 0, 1]);
    /// assert_eq!(m.value().outer_headers().dst_ipv4(), 0x0A00_0001);
    /// ```
    pub fn dst_ipv4(mut self, ip: [u8; 4]) -> FlowMatch {
        self.criteria.outer_headers_mut().set_dst_ipv4(u32::MAX);
        self.value
            .outer_headers_mut()
            .set_dst_ipv4(u32::from_be_bytes(ip));
        self
    }

    /// The criteria mask (what a group compares).
    ///
    /// ```
    /// let m = rnic_driver::eth::FlowMatch::new().dmac([1; 6]);
    /// assert_eq!(m.criteria().outer_headers().dmac(), [0xFF; 6]);
    /// ```
    pub fn criteria(&self) -> &FteMatchParam {
        &self.criteria
    }

    /// The values (what a rule compares them with).
    ///
    /// ```
    /// let m = rnic_driver::eth::FlowMatch::new().dmac([1; 6]);
    /// assert_eq!(m.value().outer_headers().dmac(), [1; 6]);
    /// ```
    pub fn value(&self) -> &FteMatchParam {
        &self.value
    }
}

/// A NIC RX flow table.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
/// let t = rnic_driver::eth::FlowTable::create(&hca, 4, 0)?;
/// t.set_root()?;
/// assert!(t.is_root());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct FlowTable {
    hca: Arc<Hca>,
    id: u32,
    root: AtomicBool,
    done: bool,
}

impl FlowTable {
    /// CREATE_FLOW_TABLE (NIC RX) of `2^log_size` entries at `level`.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let t = rnic_driver::eth::FlowTable::create(&hca, 4, 0)?;
    /// assert!(t.id() > 0);
    /// let too_big = rnic_driver::eth::FlowTable::create(&hca, 40, 0).unwrap_err();
    /// assert!(too_big.cmd_status().is_some()); // the device's BAD_SIZE
    /// # Ok(()) }
    /// ```
    pub fn create(hca: &Arc<Hca>, log_size: u8, level: u8) -> Result<FlowTable, DriverError> {
        let mut i = CreateFlowTableIn::new_cmd();
        i.set_table_type(table_type::NIC_RX);
        i.flow_table_context_mut().set_log_size(log_size);
        i.flow_table_context_mut().set_level(level);
        let out = hca.cmdq().exec(&i, &[], &mut [])?;
        Ok(FlowTable {
            hca: hca.clone(),
            id: out.table_id(),
            root: AtomicBool::new(false),
            done: false,
        })
    }

    /// The table's number.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let a = rnic_driver::eth::FlowTable::create(&hca, 2, 0)?;
    /// let b = rnic_driver::eth::FlowTable::create(&hca, 2, 0)?;
    /// assert_ne!(a.id(), b.id());
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> u32 {
        self.id
    }

    /// SET_FLOW_TABLE_ROOT: the port's non-RoCE frames start here.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let t = rnic_driver::eth::FlowTable::create(&hca, 2, 0)?;
    /// assert!(!t.is_root());
    /// t.set_root()?;
    /// assert!(t.is_root());
    /// # Ok(()) }
    /// ```
    pub fn set_root(&self) -> Result<(), DriverError> {
        let mut i = SetFlowTableRootIn::new_cmd();
        i.set_table_type(table_type::NIC_RX);
        i.set_table_id(self.id);
        self.hca.cmdq().exec(&i, &[], &mut [])?;
        self.root.store(true, Ordering::Release);
        Ok(())
    }

    /// Whether [`Self::set_root`] made this the root (and it has not been dropped since).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// assert!(!rnic_driver::eth::FlowTable::create(&hca, 2, 0)?.is_root());
    /// # Ok(()) }
    /// ```
    pub fn is_root(&self) -> bool {
        self.root.load(Ordering::Acquire)
    }

    fn teardown(&mut self) -> Result<(), DriverError> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(());
        }
        if self.is_root() {
            let mut i = SetFlowTableRootIn::new_cmd();
            i.set_op_mod(ROOT_DISCONNECT);
            i.set_table_type(table_type::NIC_RX);
            self.hca.cmdq().exec(&i, &[], &mut [])?;
        }
        let mut i = DestroyFlowTableIn::new_cmd();
        i.set_table_type(table_type::NIC_RX);
        i.set_table_id(self.id);
        self.hca.cmdq().exec(&i, &[], &mut []).map(|_| ())
    }
}

drop_by_teardown!(FlowTable, "flow table", id);

/// A flow group: flow indices `start ..= end` of a table, whose rules compare the fields
/// a [`FlowMatch`]'s criteria name.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
/// use rnic_driver::eth::{FlowGroup, FlowMatch, FlowTable};
/// let t = std::sync::Arc::new(FlowTable::create(&hca, 4, 0)?);
/// let g = FlowGroup::create(&t, 0, 7, &FlowMatch::new().ethertype(0))?;
/// // Groups of a table may not overlap: the device says BAD_PARAM.
/// let e = FlowGroup::create(&t, 4, 9, &FlowMatch::new()).unwrap_err();
/// assert_eq!(e.cmd_status(), Some(rnic_hw_regs::status::CmdStatus::BadParam));
/// # drop(g);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct FlowGroup {
    table: Arc<FlowTable>,
    id: u32,
    done: bool,
}

impl FlowGroup {
    /// CREATE_FLOW_GROUP of indices `start ..= end` of `table`, comparing what `m`'s
    /// criteria mask (its values are not used here).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # use rnic_driver::eth::{FlowGroup, FlowMatch, FlowTable};
    /// let t = std::sync::Arc::new(FlowTable::create(&hca, 2, 0)?);
    /// assert!(FlowGroup::create(&t, 0, 4, &FlowMatch::new()).is_err()); // beyond 4 entries
    /// assert!(FlowGroup::create(&t, 0, 3, &FlowMatch::new()).is_ok());
    /// # Ok(()) }
    /// ```
    pub fn create(
        table: &Arc<FlowTable>,
        start: u32,
        end: u32,
        m: &FlowMatch,
    ) -> Result<FlowGroup, DriverError> {
        let mut i = CreateFlowGroupIn::new_cmd();
        i.set_table_type(table_type::NIC_RX);
        i.set_table_id(table.id);
        i.set_start_flow_index(start);
        i.set_end_flow_index(end);
        if m.criteria != FteMatchParam::default() {
            i.set_match_criteria_enable(match_criteria::OUTER_HEADERS);
        }
        *i.match_criteria_mut() = m.criteria;
        let out = table.hca.cmdq().exec(&i, &[], &mut [])?;
        Ok(FlowGroup {
            table: table.clone(),
            id: out.group_id(),
            done: false,
        })
    }

    /// The group's number.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # use rnic_driver::eth::{FlowGroup, FlowMatch, FlowTable};
    /// let t = std::sync::Arc::new(FlowTable::create(&hca, 2, 0)?);
    /// assert!(FlowGroup::create(&t, 0, 1, &FlowMatch::new())?.id() > 0);
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> u32 {
        self.id
    }

    fn teardown(&mut self) -> Result<(), DriverError> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(());
        }
        let mut i = DestroyFlowGroupIn::new_cmd();
        i.set_table_type(table_type::NIC_RX);
        i.set_table_id(self.table.id);
        i.set_group_id(self.id);
        self.table.hca.cmdq().exec(&i, &[], &mut []).map(|_| ())
    }
}

drop_by_teardown!(FlowGroup, "flow group", id);

/// What a matching rule does.
///
/// ```
/// # fn f(tir: &std::sync::Arc<rnic_driver::eth::Tir>) {
/// use rnic_driver::eth::FlowAction;
/// let a = FlowAction::Forward(tir);
/// assert!(matches!(a, FlowAction::Forward(_)));
/// assert!(matches!(FlowAction::Drop, FlowAction::Drop));
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub enum FlowAction<'a> {
    /// Deliver to the TIR's RQ.
    Forward(&'a Arc<Tir>),
    /// Drop the frame.
    Drop,
}

/// A flow rule: one entry of a group (SET_FLOW_TABLE_ENTRY); dropping it deletes it.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
/// use rnic_driver::eth::{FlowAction, FlowGroup, FlowMatch, FlowRule, FlowTable};
/// let t = std::sync::Arc::new(FlowTable::create(&hca, 2, 0)?);
/// let m = FlowMatch::new().ethertype(0x88B5);
/// let g = std::sync::Arc::new(FlowGroup::create(&t, 0, 1, &m)?);
/// let r = FlowRule::create(&g, 0, &m, FlowAction::Drop, 0)?;
/// assert_eq!(r.index(), 0);
/// // A value the group's criteria do not cover is refused by the device.
/// let other = FlowMatch::new().ethertype(0x88B5).ip_protocol(1);
/// assert!(FlowRule::create(&g, 1, &other, FlowAction::Drop, 0).is_err());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct FlowRule {
    group: Arc<FlowGroup>,
    _tir: Option<Arc<Tir>>,
    index: u32,
    done: bool,
}

impl FlowRule {
    /// SET_FLOW_TABLE_ENTRY at flow `index` of `group`'s table, matching `m`'s values under
    /// the group's criteria, with `action`; `flow_tag` comes back in receive completions.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # use rnic_driver::eth::{FlowAction, FlowGroup, FlowMatch, FlowRule, FlowTable};
    /// let t = std::sync::Arc::new(FlowTable::create(&hca, 2, 0)?);
    /// let g = std::sync::Arc::new(FlowGroup::create(&t, 0, 1, &FlowMatch::new())?);
    /// let outside = FlowRule::create(&g, 2, &FlowMatch::new(), FlowAction::Drop, 0).unwrap_err();
    /// assert_eq!(outside.cmd_status(), Some(rnic_hw_regs::status::CmdStatus::BadParam));
    /// # Ok(()) }
    /// ```
    pub fn create(
        group: &Arc<FlowGroup>,
        index: u32,
        m: &FlowMatch,
        action: FlowAction<'_>,
        flow_tag: u32,
    ) -> Result<FlowRule, DriverError> {
        let table = &group.table;
        let mut i = SetFteIn::new_cmd();
        i.set_table_type(table_type::NIC_RX);
        i.set_table_id(table.id);
        i.set_flow_index(index);
        let fc = i.flow_context_mut();
        fc.set_group_id(group.id);
        fc.set_flow_tag(flow_tag & 0xFF_FFFF);
        *fc.match_value_mut() = m.value;
        let mut dest = DestFormatStruct::default();
        let tir = match action {
            FlowAction::Forward(tir) => {
                if !Arc::ptr_eq(tir.hca(), &table.hca) {
                    return Err(DriverError::InvalidArgument(
                        "a flow rule forwarding to a TIR of another device".into(),
                    ));
                }
                fc.set_action(flow_action::FWD_DEST);
                fc.set_destination_list_size(1);
                dest.set_destination_type(destination_type::TIR);
                dest.set_destination_id(tir.tirn());
                Some(tir.clone())
            }
            FlowAction::Drop => {
                fc.set_action(flow_action::DROP);
                None
            }
        };
        let extra: &[u8] = if tir.is_some() { dest.as_bytes() } else { &[] };
        table.hca.cmdq().exec(&i, extra, &mut [])?;
        Ok(FlowRule {
            group: group.clone(),
            _tir: tir,
            index,
            done: false,
        })
    }

    /// The rule's flow index.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # use rnic_driver::eth::{FlowAction, FlowGroup, FlowMatch, FlowRule, FlowTable};
    /// let t = std::sync::Arc::new(FlowTable::create(&hca, 2, 0)?);
    /// let g = std::sync::Arc::new(FlowGroup::create(&t, 0, 3, &FlowMatch::new())?);
    /// assert_eq!(FlowRule::create(&g, 3, &FlowMatch::new(), FlowAction::Drop, 0)?.index(), 3);
    /// # Ok(()) }
    /// ```
    pub fn index(&self) -> u32 {
        self.index
    }

    fn teardown(&mut self) -> Result<(), DriverError> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(());
        }
        let table = &self.group.table;
        let mut i = DeleteFteIn::new_cmd();
        i.set_table_type(table_type::NIC_RX);
        i.set_table_id(table.id);
        i.set_flow_index(self.index);
        table.hca.cmdq().exec(&i, &[], &mut []).map(|_| ())
    }
}

drop_by_teardown!(FlowRule, "flow rule", index);
