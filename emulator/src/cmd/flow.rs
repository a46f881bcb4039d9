//! Flow steering commands of the NIC RX table type: CREATE / DESTROY / QUERY_FLOW_TABLE,
//! CREATE / DESTROY_FLOW_GROUP, SET / QUERY / DELETE_FLOW_TABLE_ENTRY and
//! SET_FLOW_TABLE_ROOT (op_mod 0 connects a root table, 1 disconnects it).
//!
//! Rules, as a ConnectX enforces them: a table's miss or forward goes to a table of a higher
//! level; groups of a table cover disjoint index ranges inside it and compare outer L2-L4
//! fields (misc parameter sets are not modelled); an entry sits at an index of its group,
//! matches only under its group's criteria, and either drops or forwards to one TIR or
//! table that exists. Objects still referenced (a table with groups, the root, a miss or
//! forward target; a group with entries) are RESOURCE_BUSY to destroy. Other table types
//! and other vports are BAD_PARAM.

use rnic_hw_regs::PrmLayout;
use rnic_hw_regs::cmd::{
    CreateFlowGroupIn, CreateFlowGroupOut, CreateFlowTableIn, CreateFlowTableOut, DeleteFteIn,
    DeleteFteOut, DestroyFlowGroupIn, DestroyFlowGroupOut, DestroyFlowTableIn, DestroyFlowTableOut,
    QueryFlowTableIn, QueryFlowTableOut, QueryFteIn, QueryFteOut, SetFlowTableRootIn,
    SetFlowTableRootOut, SetFteIn, SetFteOut, table_type,
};
use rnic_hw_regs::ctx::{
    DestFormatStruct, FteMatchParam, destination_type, flow_action, match_criteria,
    table_miss_action,
};
use rnic_hw_regs::status::CmdStatus;
use zerocopy::{FromBytes, IntoBytes};

use super::{Cmd, CmdFail, CmdResult, check_op_mod, ensure, fail, syndrome as syn};
use crate::ctx::Ctx;
use crate::resources::{FlowDest, FlowGroup, FlowTable, Fte};

/// Largest flow table: 2^16 entries.
pub(crate) const MAX_LOG_FT_SIZE: u8 = 16;
/// Flow tables at most.
const MAX_TABLES: usize = 256;
/// Flow groups at most (all tables).
const MAX_GROUPS: usize = 4096;
/// SET_FLOW_TABLE_ROOT op_mod that disconnects the root.
const ROOT_DISCONNECT: u16 = 1;
/// The criteria sets this device compares.
const MODELLED_CRITERIA: u8 = match_criteria::OUTER_HEADERS;

/// The table-addressing fields every flow command carries: NIC RX, this function's vport.
fn check_addressing(table_type: u8, other_vport: bool, vport_number: u16) -> CmdResult {
    ensure(
        !other_vport && vport_number == 0,
        CmdStatus::BadParam,
        syn::OTHER_FUNCTION,
    )?;
    ensure(
        table_type == table_type::NIC_RX,
        CmdStatus::BadParam,
        syn::FT_TYPE,
    )
}

/// Checks that `next` is a table of a level above `level`.
fn check_next(ctx: &Ctx<'_>, level: u8, next: u32) -> CmdResult {
    let ok = ctx
        .state
        .res
        .flow
        .tables
        .get(&next)
        .is_some_and(|t| t.level > level);
    ensure(ok, CmdStatus::BadParam, syn::FT_BAD_NEXT)
}

/// CREATE_FLOW_TABLE.
pub(super) fn create_flow_table(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<CreateFlowTableIn>()?;
    cmd.output::<CreateFlowTableOut>()?;
    check_addressing(i.table_type(), i.other_vport(), i.vport_number())?;
    let c = *i.flow_table_context();
    ensure(
        !c.sw_owner() && !c.reformat_en() && !c.decap_en() && !c.termination_table(),
        CmdStatus::BadParam,
        syn::FT_UNSUPPORTED,
    )?;
    ensure(
        c.log_size() <= MAX_LOG_FT_SIZE,
        CmdStatus::BadSize,
        syn::FT_TOO_BIG,
    )?;
    match c.table_miss_action() {
        table_miss_action::DEFAULT => {}
        table_miss_action::GOTO_TABLE => check_next(ctx, c.level(), c.table_miss_id())?,
        _ => return fail(CmdStatus::BadParam, syn::FT_MISS_ACTION),
    }
    let flow = &mut ctx.state.res.flow;
    if flow.tables.len() >= MAX_TABLES {
        return fail(CmdStatus::NoResources, syn::FT_TABLE_FULL);
    }
    let id = flow.next_table;
    flow.next_table = (id % 0xFF_FFFF) + 1;
    flow.tables.insert(
        id,
        FlowTable {
            level: c.level(),
            log_size: c.log_size(),
            miss_action: c.table_miss_action(),
            miss_table: c.table_miss_id(),
            entries: Default::default(),
        },
    );
    cmd.output::<CreateFlowTableOut>()?.set_table_id(id);
    Ok(())
}

/// DESTROY_FLOW_TABLE.
pub(super) fn destroy_flow_table(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<DestroyFlowTableIn>()?;
    cmd.output::<DestroyFlowTableOut>()?;
    check_addressing(i.table_type(), i.other_vport(), i.vport_number())?;
    let id = i.table_id();
    let flow = &mut ctx.state.res.flow;
    ensure(
        flow.tables.contains_key(&id),
        CmdStatus::BadResource,
        syn::FT_UNKNOWN,
    )?;
    let busy = flow.groups.values().any(|g| g.table == id) || flow.table_referenced(id);
    ensure(!busy, CmdStatus::ResourceBusy, syn::FT_BUSY)?;
    flow.tables.remove(&id);
    Ok(())
}

/// QUERY_FLOW_TABLE.
pub(super) fn query_flow_table(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<QueryFlowTableIn>()?;
    cmd.output::<QueryFlowTableOut>()?;
    check_addressing(i.table_type(), false, 0)?;
    let Some(t) = ctx.state.res.flow.tables.get(&i.table_id()) else {
        return fail(CmdStatus::BadResource, syn::FT_UNKNOWN);
    };
    let (level, log_size, miss, miss_id) = (t.level, t.log_size, t.miss_action, t.miss_table);
    let c = cmd.output::<QueryFlowTableOut>()?.flow_table_context_mut();
    c.set_level(level);
    c.set_log_size(log_size);
    c.set_table_miss_action(miss);
    c.set_table_miss_id(miss_id);
    Ok(())
}

/// CREATE_FLOW_GROUP.
pub(super) fn create_flow_group(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<CreateFlowGroupIn>()?;
    cmd.output::<CreateFlowGroupOut>()?;
    check_addressing(i.table_type(), i.other_vport(), i.vport_number())?;
    let flow = &mut ctx.state.res.flow;
    let Some(t) = flow.tables.get(&i.table_id()) else {
        return fail(CmdStatus::BadResource, syn::FT_UNKNOWN);
    };
    let (start, end) = (i.start_flow_index(), i.end_flow_index());
    ensure(
        start <= end && u64::from(end) < t.size(),
        CmdStatus::BadParam,
        syn::FG_RANGE,
    )?;
    ensure(
        i.group_type() == 0 && i.match_criteria_enable() & !MODELLED_CRITERIA == 0,
        CmdStatus::BadParam,
        syn::FG_CRITERIA,
    )?;
    let overlaps = flow
        .groups
        .values()
        .any(|g| g.table == i.table_id() && g.start <= end && start <= g.end);
    ensure(!overlaps, CmdStatus::BadParam, syn::FG_OVERLAP)?;
    if flow.groups.len() >= MAX_GROUPS {
        return fail(CmdStatus::NoResources, syn::FT_TABLE_FULL);
    }
    let id = flow.next_group;
    flow.next_group = (id % 0xFF_FFFF) + 1;
    flow.groups.insert(
        id,
        FlowGroup {
            table: i.table_id(),
            start,
            end,
            criteria_enable: i.match_criteria_enable(),
            criteria: *i.match_criteria(),
        },
    );
    cmd.output::<CreateFlowGroupOut>()?.set_group_id(id);
    Ok(())
}

/// DESTROY_FLOW_GROUP.
pub(super) fn destroy_flow_group(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<DestroyFlowGroupIn>()?;
    cmd.output::<DestroyFlowGroupOut>()?;
    check_addressing(i.table_type(), i.other_vport(), i.vport_number())?;
    let flow = &mut ctx.state.res.flow;
    let Some(g) = flow.groups.get(&i.group_id()) else {
        return fail(CmdStatus::BadResource, syn::FG_UNKNOWN);
    };
    ensure(
        g.table == i.table_id(),
        CmdStatus::BadResource,
        syn::FG_UNKNOWN,
    )?;
    let busy = flow
        .tables
        .get(&g.table)
        .is_some_and(|t| t.entries.values().any(|e| e.group == i.group_id()));
    ensure(!busy, CmdStatus::ResourceBusy, syn::FG_BUSY)?;
    flow.groups.remove(&i.group_id());
    Ok(())
}

/// Whether `value` has a bit set that `mask` does not.
fn outside(value: &FteMatchParam, mask: &FteMatchParam) -> bool {
    value
        .as_bytes()
        .iter()
        .zip(mask.as_bytes())
        .any(|(v, m)| v & !m != 0)
}

/// The destination of an entry forwarding from a table of `level`.
fn destination(ctx: &Ctx<'_>, level: u8, d: &DestFormatStruct) -> Result<FlowDest, CmdFail> {
    match d.destination_type() {
        destination_type::TIR => {
            ensure(
                ctx.state.res.tirs.get(d.destination_id()).is_some(),
                CmdStatus::BadResource,
                syn::FTE_BAD_TIR,
            )?;
            Ok(FlowDest::Tir(d.destination_id()))
        }
        destination_type::FLOW_TABLE => {
            check_next(ctx, level, d.destination_id())?;
            Ok(FlowDest::Table(d.destination_id()))
        }
        _ => fail(CmdStatus::BadParam, syn::FTE_DEST_TYPE),
    }
}

/// SET_FLOW_TABLE_ENTRY (op_mod 0: a new entry).
pub(super) fn set_fte(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<SetFteIn>()?;
    cmd.output::<SetFteOut>()?;
    check_addressing(i.table_type(), i.other_vport(), i.vport_number())?;
    let flow = &ctx.state.res.flow;
    let Some(t) = flow.tables.get(&i.table_id()) else {
        return fail(CmdStatus::BadResource, syn::FT_UNKNOWN);
    };
    let index = i.flow_index();
    let fc = *i.flow_context();
    let holder = flow
        .groups
        .iter()
        .find(|(_, g)| g.table == i.table_id() && (g.start..=g.end).contains(&index));
    let Some((&gid, g)) = holder else {
        return fail(CmdStatus::BadParam, syn::FTE_INDEX);
    };
    ensure(fc.group_id() == gid, CmdStatus::BadParam, syn::FTE_INDEX)?;
    ensure(
        !t.entries.contains_key(&index),
        CmdStatus::BadParam,
        syn::FTE_EXISTS,
    )?;
    ensure(
        !outside(fc.match_value(), &g.criteria),
        CmdStatus::BadParam,
        syn::FTE_VALUE_OUTSIDE_CRITERIA,
    )?;
    let level = t.level;
    let action = fc.action();
    ensure(
        action == flow_action::FWD_DEST || action == flow_action::DROP,
        CmdStatus::BadParam,
        syn::FTE_ACTION,
    )?;
    let want = u32::from(action == flow_action::FWD_DEST);
    ensure(
        fc.destination_list_size() == want
            && !fc.extended_destination()
            && fc.flow_counter_list_size() == 0,
        CmdStatus::BadParam,
        syn::FTE_DESTS,
    )?;
    let mut dests = Vec::new();
    if want == 1 {
        let at = SetFteIn::DESTINATION_OFFSET;
        let Some(bytes) = cmd.input.get(at..at + DestFormatStruct::SIZE) else {
            return fail(CmdStatus::BadInputLength, syn::FTE_DESTS);
        };
        let d = DestFormatStruct::read_from_bytes(bytes).unwrap_or_default();
        dests.push(destination(ctx, level, &d)?);
    }
    let entry = Fte {
        group: gid,
        action,
        flow_tag: fc.flow_tag(),
        value: *fc.match_value(),
        dests,
    };
    if let Some(t) = ctx.state.res.flow.tables.get_mut(&i.table_id()) {
        t.entries.insert(index, entry);
    }
    Ok(())
}

/// QUERY_FLOW_TABLE_ENTRY.
pub(super) fn query_fte(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<QueryFteIn>()?;
    cmd.output::<QueryFteOut>()?;
    check_addressing(i.table_type(), false, 0)?;
    let Some(t) = ctx.state.res.flow.tables.get(&i.table_id()) else {
        return fail(CmdStatus::BadResource, syn::FT_UNKNOWN);
    };
    let Some(e) = t.entries.get(&i.flow_index()).cloned() else {
        return fail(CmdStatus::BadResource, syn::FTE_UNKNOWN);
    };
    let mut d = DestFormatStruct::default();
    if let Some(dest) = e.dests.first() {
        let (ty, id) = match *dest {
            FlowDest::Tir(n) => (destination_type::TIR, n),
            FlowDest::Table(n) => (destination_type::FLOW_TABLE, n),
        };
        d.set_destination_type(ty);
        d.set_destination_id(id);
    }
    let out = cmd.output::<QueryFteOut>()?;
    let fc = out.flow_context_mut();
    fc.set_group_id(e.group);
    fc.set_action(e.action);
    fc.set_flow_tag(e.flow_tag);
    fc.set_destination_list_size(e.dests.len() as u32);
    *fc.match_value_mut() = e.value;
    if !e.dests.is_empty() {
        let at = QueryFteOut::DESTINATION_OFFSET;
        if let Some(slot) = cmd.output.get_mut(at..at + DestFormatStruct::SIZE) {
            slot.copy_from_slice(d.as_bytes());
        }
    }
    Ok(())
}

/// DELETE_FLOW_TABLE_ENTRY.
pub(super) fn delete_fte(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<DeleteFteIn>()?;
    cmd.output::<DeleteFteOut>()?;
    check_addressing(i.table_type(), i.other_vport(), i.vport_number())?;
    let Some(t) = ctx.state.res.flow.tables.get_mut(&i.table_id()) else {
        return fail(CmdStatus::BadResource, syn::FT_UNKNOWN);
    };
    if t.entries.remove(&i.flow_index()).is_none() {
        return fail(CmdStatus::BadResource, syn::FTE_UNKNOWN);
    }
    Ok(())
}

/// SET_FLOW_TABLE_ROOT.
pub(super) fn set_flow_table_root(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0, ROOT_DISCONNECT])?;
    let i = cmd.fixed::<SetFlowTableRootIn>()?;
    cmd.output::<SetFlowTableRootOut>()?;
    check_addressing(i.table_type(), i.other_vport(), i.vport_number())?;
    ensure(
        !i.table_of_other_vport() && !i.table_eswitch_owner_vhca_id_valid(),
        CmdStatus::BadParam,
        syn::OTHER_FUNCTION,
    )?;
    let flow = &mut ctx.state.res.flow;
    if cmd.op_mod == ROOT_DISCONNECT {
        flow.nic_rx_root = None;
        return Ok(());
    }
    ensure(
        flow.tables.contains_key(&i.table_id()),
        CmdStatus::BadResource,
        syn::FT_UNKNOWN,
    )?;
    flow.nic_rx_root = Some(i.table_id());
    Ok(())
}
