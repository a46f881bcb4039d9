//! The catalog of every layout declared with an `mlx5_ifc.h` name, so that a test can check
//! each one (size, and every field's offset and width) against the header.

use crate::layout::{FieldDesc, PrmLayout};

/// One layout as the catalog lists it.
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
    pub const fn of<T: PrmLayout>() -> Self {
        LayoutInfo {
            ifc_name: T::IFC_NAME,
            size: T::SIZE,
            fields: T::FIELDS,
        }
    }
}

/// Looks up a layout by its `mlx5_ifc.h` name.
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
