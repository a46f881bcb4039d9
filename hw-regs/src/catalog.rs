//! The catalog of every layout declared with an `mlx5_ifc.h` name, so that a test can check
//! each one (size, and every field's offset and width) against the header.

use crate::layout::{FieldDesc, PrmLayout};

/// One layout as the catalog lists it.
///
/// ```
/// use rnic_hw_regs::catalog::{self, LayoutInfo};
/// use rnic_hw_regs::ctx::Qpc;
///
/// assert_eq!(catalog::find("qpc"), Some(&LayoutInfo::of::<Qpc>()));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayoutInfo {
    /// The structure's `mlx5_ifc.h` name without `mlx5_ifc_` and `_bits`.
    pub ifc_name: &'static str,
    /// Size in bytes.
    pub size: usize,
    /// Every declared field.
    pub fields: &'static [FieldDesc],
}

impl LayoutInfo {
    /// The catalog entry of layout `T`.
    ///
    /// ```
    /// use rnic_hw_regs::catalog::LayoutInfo;
    /// use rnic_hw_regs::ctx::Cqc;
    ///
    /// let info = LayoutInfo::of::<Cqc>();
    /// assert_eq!((info.ifc_name, info.size), ("cqc", 0x40));
    /// assert!(info.fields.iter().any(|f| f.name == "log_cq_size"));
    /// ```
    pub const fn of<T: PrmLayout>() -> Self {
        LayoutInfo {
            ifc_name: T::IFC_NAME,
            size: T::SIZE,
            fields: T::FIELDS,
        }
    }
}

/// Looks up a layout by its `mlx5_ifc.h` name.
///
/// ```
/// use rnic_hw_regs::catalog;
///
/// let mkc = catalog::find("mkc").unwrap();
/// assert_eq!(mkc.size, 0x40);
/// assert!(catalog::find("no_such_layout").is_none());
/// ```
pub fn find(ifc_name: &str) -> Option<&'static LayoutInfo> {
    IFC_LAYOUTS.iter().find(|l| l.ifc_name == ifc_name)
}

/// Every layout declared with an `mlx5_ifc.h` name.
pub const IFC_LAYOUTS: &[LayoutInfo] = &[
    LayoutInfo::of::<crate::ctx::Ads>(),
    LayoutInfo::of::<crate::ctx::Qpc>(),
    LayoutInfo::of::<crate::caps::CmdHcaCap>(),
    LayoutInfo::of::<crate::caps::RoceCap>(),
    LayoutInfo::of::<crate::caps::AtomicCaps>(),
    LayoutInfo::of::<crate::caps::OdpPerTransportServiceCap>(),
    LayoutInfo::of::<crate::caps::OdpCap>(),
    LayoutInfo::of::<crate::caps::HcaCapUnion>(),
    LayoutInfo::of::<crate::ctx::Eqc>(),
    LayoutInfo::of::<crate::ctx::Cqc>(),
    LayoutInfo::of::<crate::ctx::Mkc>(),
    LayoutInfo::of::<crate::ctx::Srqc>(),
    LayoutInfo::of::<crate::ctx::RoceAddrLayout>(),
    LayoutInfo::of::<crate::ctx::MacAddressLayout>(),
    LayoutInfo::of::<crate::ctx::NicVportContext>(),
    LayoutInfo::of::<crate::cmd::EnableHcaIn>(),
    LayoutInfo::of::<crate::cmd::EnableHcaOut>(),
    LayoutInfo::of::<crate::cmd::DisableHcaIn>(),
    LayoutInfo::of::<crate::cmd::DisableHcaOut>(),
    LayoutInfo::of::<crate::cmd::InitHcaIn>(),
    LayoutInfo::of::<crate::cmd::InitHcaOut>(),
    LayoutInfo::of::<crate::cmd::TeardownHcaIn>(),
    LayoutInfo::of::<crate::cmd::TeardownHcaOut>(),
    LayoutInfo::of::<crate::cmd::QueryIssiIn>(),
    LayoutInfo::of::<crate::cmd::QueryIssiOut>(),
    LayoutInfo::of::<crate::cmd::SetIssiIn>(),
    LayoutInfo::of::<crate::cmd::SetIssiOut>(),
    LayoutInfo::of::<crate::cmd::QueryAdapterParamBlock>(),
    LayoutInfo::of::<crate::cmd::QueryAdapterIn>(),
    LayoutInfo::of::<crate::cmd::QueryAdapterOut>(),
    LayoutInfo::of::<crate::cmd::NopIn>(),
    LayoutInfo::of::<crate::cmd::NopOut>(),
    LayoutInfo::of::<crate::cmd::QueryPagesIn>(),
    LayoutInfo::of::<crate::cmd::QueryPagesOut>(),
    LayoutInfo::of::<crate::cmd::ManagePagesIn>(),
    LayoutInfo::of::<crate::cmd::ManagePagesOut>(),
    LayoutInfo::of::<crate::cmd::QueryHcaCapIn>(),
    LayoutInfo::of::<crate::cmd::QueryHcaCapOut>(),
    LayoutInfo::of::<crate::cmd::SetHcaCapIn>(),
    LayoutInfo::of::<crate::cmd::SetHcaCapOut>(),
    LayoutInfo::of::<crate::cmd::AccessRegisterIn>(),
    LayoutInfo::of::<crate::cmd::AccessRegisterOut>(),
    LayoutInfo::of::<crate::cmd::RegisterHostEndianness>(),
    LayoutInfo::of::<crate::cmd::CreateEqIn>(),
    LayoutInfo::of::<crate::cmd::CreateEqOut>(),
    LayoutInfo::of::<crate::cmd::DestroyEqIn>(),
    LayoutInfo::of::<crate::cmd::DestroyEqOut>(),
    LayoutInfo::of::<crate::cmd::QueryEqIn>(),
    LayoutInfo::of::<crate::cmd::QueryEqOut>(),
    LayoutInfo::of::<crate::cmd::GenEqeIn>(),
    LayoutInfo::of::<crate::cmd::AllocPdIn>(),
    LayoutInfo::of::<crate::cmd::AllocPdOut>(),
    LayoutInfo::of::<crate::cmd::DeallocPdIn>(),
    LayoutInfo::of::<crate::cmd::DeallocPdOut>(),
    LayoutInfo::of::<crate::cmd::AllocUarIn>(),
    LayoutInfo::of::<crate::cmd::AllocUarOut>(),
    LayoutInfo::of::<crate::cmd::DeallocUarIn>(),
    LayoutInfo::of::<crate::cmd::DeallocUarOut>(),
    LayoutInfo::of::<crate::cmd::ModifyFieldSelect>(),
    LayoutInfo::of::<crate::cmd::ResizeFieldSelect>(),
    LayoutInfo::of::<crate::cmd::ModifyFieldSelectResizeFieldSelectAuto>(),
    LayoutInfo::of::<crate::cmd::CreateCqIn>(),
    LayoutInfo::of::<crate::cmd::CreateCqOut>(),
    LayoutInfo::of::<crate::cmd::DestroyCqIn>(),
    LayoutInfo::of::<crate::cmd::DestroyCqOut>(),
    LayoutInfo::of::<crate::cmd::QueryCqIn>(),
    LayoutInfo::of::<crate::cmd::QueryCqOut>(),
    LayoutInfo::of::<crate::cmd::ModifyCqIn>(),
    LayoutInfo::of::<crate::cmd::ModifyCqOut>(),
    LayoutInfo::of::<crate::cmd::CreateQpIn>(),
    LayoutInfo::of::<crate::cmd::CreateQpOut>(),
    LayoutInfo::of::<crate::cmd::DestroyQpIn>(),
    LayoutInfo::of::<crate::cmd::DestroyQpOut>(),
    LayoutInfo::of::<crate::cmd::Rst2InitQpIn>(),
    LayoutInfo::of::<crate::cmd::Rst2InitQpOut>(),
    LayoutInfo::of::<crate::cmd::Init2InitQpIn>(),
    LayoutInfo::of::<crate::cmd::Init2InitQpOut>(),
    LayoutInfo::of::<crate::cmd::Init2RtrQpIn>(),
    LayoutInfo::of::<crate::cmd::Init2RtrQpOut>(),
    LayoutInfo::of::<crate::cmd::Rtr2RtsQpIn>(),
    LayoutInfo::of::<crate::cmd::Rtr2RtsQpOut>(),
    LayoutInfo::of::<crate::cmd::Rts2RtsQpIn>(),
    LayoutInfo::of::<crate::cmd::Rts2RtsQpOut>(),
    LayoutInfo::of::<crate::cmd::Sqerr2RtsQpIn>(),
    LayoutInfo::of::<crate::cmd::Sqerr2RtsQpOut>(),
    LayoutInfo::of::<crate::cmd::Qp2ErrIn>(),
    LayoutInfo::of::<crate::cmd::Qp2ErrOut>(),
    LayoutInfo::of::<crate::cmd::Qp2RstIn>(),
    LayoutInfo::of::<crate::cmd::Qp2RstOut>(),
    LayoutInfo::of::<crate::cmd::QueryQpIn>(),
    LayoutInfo::of::<crate::cmd::QueryQpOut>(),
    LayoutInfo::of::<crate::cmd::CreateMkeyIn>(),
    LayoutInfo::of::<crate::cmd::CreateMkeyOut>(),
    LayoutInfo::of::<crate::cmd::QueryMkeyIn>(),
    LayoutInfo::of::<crate::cmd::QueryMkeyOut>(),
    LayoutInfo::of::<crate::cmd::DestroyMkeyIn>(),
    LayoutInfo::of::<crate::cmd::DestroyMkeyOut>(),
    LayoutInfo::of::<crate::cmd::QuerySpecialContextsIn>(),
    LayoutInfo::of::<crate::cmd::QuerySpecialContextsOut>(),
    LayoutInfo::of::<crate::cmd::ModifyNicVportFieldSelect>(),
    LayoutInfo::of::<crate::cmd::QueryNicVportContextIn>(),
    LayoutInfo::of::<crate::cmd::QueryNicVportContextOut>(),
    LayoutInfo::of::<crate::cmd::ModifyNicVportContextIn>(),
    LayoutInfo::of::<crate::cmd::ModifyNicVportContextOut>(),
    LayoutInfo::of::<crate::cmd::QueryVportStateIn>(),
    LayoutInfo::of::<crate::cmd::QueryVportStateOut>(),
    LayoutInfo::of::<crate::cmd::ModifyVportStateIn>(),
    LayoutInfo::of::<crate::cmd::ModifyVportStateOut>(),
    LayoutInfo::of::<crate::cmd::QueryRoceAddressIn>(),
    LayoutInfo::of::<crate::cmd::QueryRoceAddressOut>(),
    LayoutInfo::of::<crate::cmd::SetRoceAddressIn>(),
    LayoutInfo::of::<crate::cmd::SetRoceAddressOut>(),
    LayoutInfo::of::<crate::cmd::CreateSrqIn>(),
    LayoutInfo::of::<crate::cmd::CreateSrqOut>(),
    LayoutInfo::of::<crate::cmd::DestroySrqIn>(),
    LayoutInfo::of::<crate::cmd::DestroySrqOut>(),
    LayoutInfo::of::<crate::cmd::QuerySrqIn>(),
    LayoutInfo::of::<crate::cmd::QuerySrqOut>(),
    LayoutInfo::of::<crate::cmd::ArmRqIn>(),
    LayoutInfo::of::<crate::cmd::ArmRqOut>(),
    LayoutInfo::of::<crate::ctx::Wq>(),
    LayoutInfo::of::<crate::ctx::Rqc>(),
    LayoutInfo::of::<crate::ctx::Sqc>(),
    LayoutInfo::of::<crate::ctx::Tisc>(),
    LayoutInfo::of::<crate::ctx::RxHashFieldSelect>(),
    LayoutInfo::of::<crate::ctx::Tirc>(),
    LayoutInfo::of::<crate::ctx::FlowTableContext>(),
    LayoutInfo::of::<crate::ctx::Ipv4Layout>(),
    LayoutInfo::of::<crate::ctx::Ipv6Layout>(),
    LayoutInfo::of::<crate::ctx::Ipv6LayoutIpv4LayoutAuto>(),
    LayoutInfo::of::<crate::ctx::FteMatchSetLyr24>(),
    LayoutInfo::of::<crate::ctx::FteMatchParam>(),
    LayoutInfo::of::<crate::ctx::FlowContext>(),
    LayoutInfo::of::<crate::ctx::DestFormatStruct>(),
    LayoutInfo::of::<crate::cmd::AllocTransportDomainIn>(),
    LayoutInfo::of::<crate::cmd::AllocTransportDomainOut>(),
    LayoutInfo::of::<crate::cmd::DeallocTransportDomainIn>(),
    LayoutInfo::of::<crate::cmd::DeallocTransportDomainOut>(),
    LayoutInfo::of::<crate::cmd::CreateTisIn>(),
    LayoutInfo::of::<crate::cmd::CreateTisOut>(),
    LayoutInfo::of::<crate::cmd::DestroyTisIn>(),
    LayoutInfo::of::<crate::cmd::DestroyTisOut>(),
    LayoutInfo::of::<crate::cmd::QueryTisIn>(),
    LayoutInfo::of::<crate::cmd::QueryTisOut>(),
    LayoutInfo::of::<crate::cmd::CreateTirIn>(),
    LayoutInfo::of::<crate::cmd::CreateTirOut>(),
    LayoutInfo::of::<crate::cmd::DestroyTirIn>(),
    LayoutInfo::of::<crate::cmd::DestroyTirOut>(),
    LayoutInfo::of::<crate::cmd::QueryTirIn>(),
    LayoutInfo::of::<crate::cmd::QueryTirOut>(),
    LayoutInfo::of::<crate::cmd::CreateRqIn>(),
    LayoutInfo::of::<crate::cmd::CreateRqOut>(),
    LayoutInfo::of::<crate::cmd::ModifyRqIn>(),
    LayoutInfo::of::<crate::cmd::ModifyRqOut>(),
    LayoutInfo::of::<crate::cmd::DestroyRqIn>(),
    LayoutInfo::of::<crate::cmd::DestroyRqOut>(),
    LayoutInfo::of::<crate::cmd::QueryRqIn>(),
    LayoutInfo::of::<crate::cmd::QueryRqOut>(),
    LayoutInfo::of::<crate::cmd::CreateSqIn>(),
    LayoutInfo::of::<crate::cmd::CreateSqOut>(),
    LayoutInfo::of::<crate::cmd::ModifySqIn>(),
    LayoutInfo::of::<crate::cmd::ModifySqOut>(),
    LayoutInfo::of::<crate::cmd::DestroySqIn>(),
    LayoutInfo::of::<crate::cmd::DestroySqOut>(),
    LayoutInfo::of::<crate::cmd::QuerySqIn>(),
    LayoutInfo::of::<crate::cmd::QuerySqOut>(),
    LayoutInfo::of::<crate::cmd::CreateFlowTableIn>(),
    LayoutInfo::of::<crate::cmd::CreateFlowTableOut>(),
    LayoutInfo::of::<crate::cmd::DestroyFlowTableIn>(),
    LayoutInfo::of::<crate::cmd::DestroyFlowTableOut>(),
    LayoutInfo::of::<crate::cmd::QueryFlowTableIn>(),
    LayoutInfo::of::<crate::cmd::QueryFlowTableOut>(),
    LayoutInfo::of::<crate::cmd::CreateFlowGroupIn>(),
    LayoutInfo::of::<crate::cmd::CreateFlowGroupOut>(),
    LayoutInfo::of::<crate::cmd::DestroyFlowGroupIn>(),
    LayoutInfo::of::<crate::cmd::DestroyFlowGroupOut>(),
    LayoutInfo::of::<crate::cmd::SetFteIn>(),
    LayoutInfo::of::<crate::cmd::SetFteOut>(),
    LayoutInfo::of::<crate::cmd::QueryFteIn>(),
    LayoutInfo::of::<crate::cmd::QueryFteOut>(),
    LayoutInfo::of::<crate::cmd::DeleteFteIn>(),
    LayoutInfo::of::<crate::cmd::DeleteFteOut>(),
    LayoutInfo::of::<crate::cmd::SetFlowTableRootIn>(),
    LayoutInfo::of::<crate::cmd::SetFlowTableRootOut>(),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_fields_fit() {
        for (i, a) in IFC_LAYOUTS.iter().enumerate() {
            assert!(!a.ifc_name.is_empty());
            for b in &IFC_LAYOUTS[i + 1..] {
                assert_ne!(a.ifc_name, b.ifc_name, "listed twice");
            }
            for f in a.fields {
                assert!(
                    f.bit_offset + f.bit_width <= a.size * 8,
                    "{}.{}",
                    a.ifc_name,
                    f.name
                );
            }
        }
        assert_eq!(find("qpc").map(|l| l.size), Some(0xE8));
    }
}
