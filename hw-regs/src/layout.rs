//! The machinery behind every PRM layout: field descriptors, bit access in big-endian bytes,
//! and the `prm_layout!` macro that turns a list of named PRM fields into a zerocopy struct
//! with typed getters and setters.
//!
//! Bit numbering follows `mlx5_ifc.h`: a field's `bit_offset` counts from the most significant
//! bit of byte 0, so `DW@0x14 [31:12]` is bit offset `0x14 * 8 + (31 - 31)`, width 20.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// How a field is stored inside its layout.
///
/// ```
/// use rnic_hw_regs::{ctx::Qpc, FieldKind, PrmLayout};
///
/// let kind = |name: &str| Qpc::FIELDS.iter().find(|f| f.name == name).unwrap().kind;
/// assert_eq!(kind("mtu"), FieldKind::Bits);
/// assert_eq!(kind("primary_address_path"), FieldKind::Nested("ads"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// An unsigned integer of up to 64 bits, big-endian, possibly not byte aligned.
    Bits,
    /// An opaque byte array (a GID, a MAC half, a bitmask block).
    Bytes,
    /// A nested layout; the string is its `mlx5_ifc.h` name.
    Nested(&'static str),
}

/// One named field of a PRM layout, as `mlx5_ifc.h` places it.
///
/// ```
/// use rnic_hw_regs::{ctx::Qpc, PrmLayout};
///
/// // qpc.state is DW@0x00 [31:28]: the top 4 bits of byte 0.
/// let state = Qpc::FIELDS.iter().find(|f| f.name == "state").unwrap();
/// assert_eq!((state.bit_offset, state.bit_width), (0, 4));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldDesc {
    /// The field's name in `mlx5_ifc.h` (and so in the PRM).
    pub name: &'static str,
    /// Offset in bits from the most significant bit of byte 0.
    pub bit_offset: usize,
    /// Width in bits.
    pub bit_width: usize,
    /// How the field is stored.
    pub kind: FieldKind,
}

impl FieldDesc {
    /// The field called `name` in `fields` (a layout's [`PrmLayout::FIELDS`]). A `const fn`,
    /// so that code reading a structure through raw pointers (a CQE in a ring the device
    /// writes) takes each offset from the layout at compile time instead of restating it;
    /// a name the layout lacks panics (a compile error in a `const`).
    ///
    /// ```
    /// use rnic_hw_regs::{cqe::Cqe64, FieldDesc, PrmLayout};
    ///
    /// const QPN: FieldDesc = FieldDesc::named(Cqe64::FIELDS, "qpn");
    /// assert_eq!((QPN.bit_offset, QPN.bit_width), (0x38 * 8 + 8, 24));
    /// ```
    pub const fn named(fields: &[FieldDesc], name: &str) -> FieldDesc {
        let mut i = 0;
        while i < fields.len() {
            if str_eq(fields[i].name, name) {
                return fields[i];
            }
            i += 1;
        }
        panic!("the layout has no field of that name");
    }

    /// Where this bit field sits in the one big-endian dword that holds it (panics when the
    /// field is not a bit field or straddles two dwords; a compile error in a `const`).
    ///
    /// ```
    /// use rnic_hw_regs::{cqe::Cqe64, DwordField, FieldDesc, PrmLayout};
    ///
    /// // wqe_counter is DW@0x3C [31:16].
    /// const W: DwordField = FieldDesc::named(Cqe64::FIELDS, "wqe_counter").dword();
    /// assert_eq!(W, DwordField { byte: 0x3C, shift: 16, mask: 0xFFFF });
    /// assert_eq!(W.extract(0xBEEF_0033), 0xBEEF);
    /// ```
    pub const fn dword(self) -> DwordField {
        assert!(
            matches!(self.kind, FieldKind::Bits),
            "only bit fields are read as a dword"
        );
        let first = self.bit_offset % 32;
        assert!(
            self.bit_width >= 1 && first + self.bit_width <= 32,
            "the field is not inside one dword"
        );
        DwordField {
            byte: self.bit_offset / 32 * 4,
            shift: (32 - first - self.bit_width) as u32,
            mask: if self.bit_width == 32 {
                u32::MAX
            } else {
                (1u32 << self.bit_width) - 1
            },
        }
    }
}

/// `str` equality (`==` on `str` is not `const`).
const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// A bit field as one read of its big-endian dword: the dword's byte offset, then the
/// value is `(dword >> shift) & mask` ([`FieldDesc::dword`] derives it from a layout).
///
/// ```
/// use rnic_hw_regs::DwordField;
///
/// // DW@0x38 [23:0]: the low 24 bits of the dword at byte 0x38.
/// let qpn = DwordField { byte: 0x38, shift: 0, mask: 0xFF_FFFF };
/// assert_eq!(qpn.extract(0x0A00_0123), 0x123);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DwordField {
    /// Byte offset of the (4-byte aligned) dword in the layout.
    pub byte: usize,
    /// Right shift that brings the field's least significant bit to bit 0.
    pub shift: u32,
    /// Mask of the field's width, applied after the shift.
    pub mask: u32,
}

impl DwordField {
    /// The field's value in `dword` (the host-order value of the big-endian dword at
    /// [`Self::byte`]).
    ///
    /// ```
    /// use rnic_hw_regs::DwordField;
    ///
    /// let send_opcode = DwordField { byte: 0x38, shift: 24, mask: 0xFF };
    /// assert_eq!(send_opcode.extract(0x0A00_0123), 0x0A);
    /// ```
    #[inline(always)]
    pub const fn extract(self, dword: u32) -> u32 {
        (dword >> self.shift) & self.mask
    }
}

/// A fixed-size structure that crosses the PCI bus, declared with `prm_layout!`.
///
/// Code generic over layouts can size buffers and walk fields:
///
/// ```
/// use rnic_hw_regs::{ctx::Cqc, PrmLayout};
///
/// fn widest_field<T: PrmLayout>() -> &'static str {
///     T::FIELDS.iter().max_by_key(|f| f.bit_width).map_or("", |f| f.name)
/// }
/// assert_eq!(Cqc::IFC_NAME, "cqc");
/// assert_eq!(Cqc::SIZE, 0x40);
/// assert_eq!(widest_field::<Cqc>(), "dbr_addr");
/// ```
pub trait PrmLayout: FromBytes + IntoBytes + KnownLayout + Immutable + Unaligned + Sized {
    /// The structure's name in `mlx5_ifc.h` without `mlx5_ifc_` and `_bits` (e.g. `"qpc"`),
    /// or `""` for structures that header does not define (WQE segments, CQEs, EQEs).
    const IFC_NAME: &'static str;
    /// Size in bytes.
    const SIZE: usize;
    /// Every named field, in declaration order.
    const FIELDS: &'static [FieldDesc];
}

/// A Rust type a bit field can be read as.
///
/// ```
/// use rnic_hw_regs::FieldValue;
///
/// assert_eq!(<u16 as FieldValue>::BITS, 16);
/// assert!(bool::from_raw(1));
/// assert_eq!(true.into_raw(), 1);
/// assert_eq!(u8::from_raw(0xAB), 0xAB);
/// ```
pub trait FieldValue: Copy {
    /// How many bits the type holds.
    const BITS: usize;
    /// Converts the raw field value (already masked to the field's width).
    fn from_raw(raw: u64) -> Self;
    /// The raw value to store.
    fn into_raw(self) -> u64;
}

macro_rules! field_value_uint {
    ($($t:ty),*) => {$(
        impl FieldValue for $t {
            const BITS: usize = <$t>::BITS as usize;
            #[inline]
            fn from_raw(raw: u64) -> Self {
                // The caller masked `raw` to a width that fits this type (checked at compile
                // time by `prm_layout!`), so the conversion never truncates.
                raw as $t
            }
            #[inline]
            fn into_raw(self) -> u64 {
                self.into()
            }
        }
    )*};
}
field_value_uint!(u8, u16, u32, u64);

impl FieldValue for bool {
    const BITS: usize = 1;
    #[inline]
    fn from_raw(raw: u64) -> Self {
        raw != 0
    }
    #[inline]
    fn into_raw(self) -> u64 {
        self.into()
    }
}

/// Bit access in big-endian byte buffers, MSB-first numbering.
#[doc(hidden)]
pub mod bits {
    /// Mask of the low `width` bits (`width` in 1..=64).
    #[inline(always)]
    const fn mask(width: usize) -> u64 {
        if width >= 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        }
    }

    /// Reads the `width`-bit field at `bit_offset`. The field spans at most 8 bytes
    /// (`prm_layout!` checks this at compile time).
    #[inline(always)]
    pub fn get(bytes: &[u8], bit_offset: usize, width: usize) -> u64 {
        let first = bit_offset / 8;
        let end = (bit_offset + width).div_ceil(8);
        let mut acc: u64 = 0;
        for b in &bytes[first..end] {
            acc = (acc << 8) | u64::from(*b);
        }
        let shift = end * 8 - (bit_offset + width);
        (acc >> shift) & mask(width)
    }

    /// Writes `value` (truncated to `width` bits) into the field at `bit_offset`, leaving the
    /// other bits of the bytes it shares untouched.
    #[inline(always)]
    pub fn set(bytes: &mut [u8], bit_offset: usize, width: usize, value: u64) {
        debug_assert!(
            width >= 64 || value >> width == 0,
            "value {value:#x} does not fit a {width}-bit field"
        );
        let first = bit_offset / 8;
        let end = (bit_offset + width).div_ceil(8);
        let shift = end * 8 - (bit_offset + width);
        let span = &mut bytes[first..end];
        let mut acc: u64 = 0;
        for b in span.iter() {
            acc = (acc << 8) | u64::from(*b);
        }
        let m = mask(width) << shift;
        acc = (acc & !m) | ((value << shift) & m);
        for b in span.iter_mut().rev() {
            *b = acc as u8;
            acc >>= 8;
        }
    }
}

/// Declares a PRM layout: a `#[repr(transparent)]` wrapper over its big-endian bytes with a
/// typed getter and setter per field, a `Debug` that prints named fields, and a
/// [`PrmLayout`] impl whose `FIELDS` list tests compare with `mlx5_ifc.h`.
///
/// Field kinds, in PRM notation:
/// - `dw(OFF, HI, LO)`: bits HI..LO of the big-endian dword at byte OFF (`DW@OFF [HI:LO]`);
/// - `qw(OFF)`: the big-endian 64-bit value at byte OFF;
/// - `bytes(OFF, LEN)`: LEN opaque bytes at OFF (getter returns `[u8; LEN]`);
/// - `nested(OFF)`: another layout at OFF (getter returns `&T`, the second name `&mut T`).
///
/// Offsets, bit ranges and value widths are checked at compile time.
macro_rules! prm_layout {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident ($ifc:literal, $size:expr) {
            $(
                $(#[$fmeta:meta])*
                $get:ident / $set:ident : $ty:ty = $kind:ident ( $($arg:expr),* $(,)? );
            )*
        }
    ) => {
        $(#[$meta])*
        #[doc = prm_layout!(@example [$name, $ifc, $size] $( $get $set $ty, $kind($($arg),*); )*)]
        #[derive(
            Clone, Copy, PartialEq, Eq,
            zerocopy::FromBytes, zerocopy::IntoBytes, zerocopy::KnownLayout,
            zerocopy::Immutable, zerocopy::Unaligned,
        )]
        #[repr(transparent)]
        $vis struct $name(pub [u8; $size]);

        impl $name {
            $( prm_layout!(@acc [$(#[$fmeta])*] $get $set $ty, $kind($($arg),*)); )*
        }

        impl $crate::layout::PrmLayout for $name {
            const IFC_NAME: &'static str = $ifc;
            const SIZE: usize = $size;
            const FIELDS: &'static [$crate::layout::FieldDesc] = &[
                $( prm_layout!(@desc $get $ty, $kind($($arg),*)), )*
            ];
        }

        impl Default for $name {
            fn default() -> Self {
                Self([0; $size])
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                let mut d = f.debug_struct(stringify!($name));
                $( prm_layout!(@dbg d self $get, $kind); )*
                d.finish()
            }
        }

        const _: () = {
            assert!(core::mem::size_of::<$name>() == $size);
            $( prm_layout!(@check $size, $ty, $kind($($arg),*)); )*
        };
    };

    // ---- doc example: the first `dw` field if any, else the constants only ----
    (@example [$name:ident, $ifc:literal, $size:expr]
        $get:ident $set:ident $ty:ty, dw($($arg:expr),*); $($rest:tt)*
    ) => {
        concat!(
            "\n\n# Example\n\n",
            "A zeroed layout, one field set and read back, and the [`PrmLayout`](",
            "crate::layout::PrmLayout) constants:\n\n",
            "```\n",
            "use rnic_hw_regs::{FieldValue, PrmLayout};\n",
            "use zerocopy::{FromBytes, FromZeros, IntoBytes};\n",
            "# use rnic_hw_regs::{caps::*, cmd::*, cmdq::*, cqe::*, ctx::*};\n",
            "# use rnic_hw_regs::{doorbell::*, eqe::*, init_seg::*, umr::*, wqe::*};\n\n",
            "let mut v = ", stringify!($name), "::new_zeroed();\n",
            "let one = <", stringify!($ty), " as FieldValue>::from_raw(1);\n",
            "v.", stringify!($set), "(one);\n",
            "assert_eq!(v.", stringify!($get), "(), one);\n",
            "assert_eq!(", stringify!($name), "::IFC_NAME, ", stringify!($ifc), ");\n",
            "assert_eq!(v.as_bytes().len(), ", stringify!($name), "::SIZE);\n",
            "assert_eq!(", stringify!($name), "::SIZE, ", stringify!($size), ");\n",
            "let back = ", stringify!($name), "::read_from_bytes(v.as_bytes()).unwrap();\n",
            "assert_eq!(back.", stringify!($get), "(), one);\n",
            "```\n",
        )
    };
    (@example [$($hdr:tt)*]
        $get:ident $set:ident $ty:ty, $kind:ident($($arg:expr),*); $($rest:tt)*
    ) => {
        prm_layout!(@example [$($hdr)*] $($rest)*)
    };
    (@example [$name:ident, $ifc:literal, $size:expr]) => {
        concat!(
            "\n\n# Example\n\n",
            "A zeroed layout, its [`PrmLayout`](crate::layout::PrmLayout) constants, ",
            "and a round trip through its bytes:\n\n",
            "```\n",
            "use rnic_hw_regs::PrmLayout;\n",
            "use zerocopy::{FromBytes, FromZeros, IntoBytes};\n",
            "# use rnic_hw_regs::{caps::*, cmd::*, cmdq::*, cqe::*, ctx::*};\n",
            "# use rnic_hw_regs::{doorbell::*, eqe::*, init_seg::*, umr::*, wqe::*};\n\n",
            "let v = ", stringify!($name), "::new_zeroed();\n",
            "assert_eq!(", stringify!($name), "::IFC_NAME, ", stringify!($ifc), ");\n",
            "assert_eq!(v.as_bytes().len(), ", stringify!($name), "::SIZE);\n",
            "assert_eq!(", stringify!($name), "::SIZE, ", stringify!($size), ");\n",
            "let back = ", stringify!($name), "::read_from_bytes(v.as_bytes()).unwrap();\n",
            "assert_eq!(back, v);\n",
            "```\n",
        )
    };

    // ---- accessors ----
    (@acc [$(#[$fmeta:meta])*] $get:ident $set:ident $ty:ty, dw($off:expr, $hi:expr, $lo:expr)) => {
        $(#[$fmeta])*
        #[doc = concat!("\n\nPRM: `DW@", stringify!($off), " [", stringify!($hi), ":", stringify!($lo), "]`.")]
        #[inline]
        pub fn $get(&self) -> $ty {
            <$ty as $crate::layout::FieldValue>::from_raw($crate::layout::bits::get(
                &self.0, $off * 8 + 31 - $hi, $hi - $lo + 1,
            ))
        }
        #[doc = concat!("Sets [`Self::", stringify!($get), "`].")]
        #[inline]
        pub fn $set(&mut self, value: $ty) {
            $crate::layout::bits::set(
                &mut self.0, $off * 8 + 31 - $hi, $hi - $lo + 1,
                $crate::layout::FieldValue::into_raw(value),
            )
        }
    };
    (@acc [$(#[$fmeta:meta])*] $get:ident $set:ident $ty:ty, qw($off:expr)) => {
        $(#[$fmeta])*
        #[doc = concat!("\n\nPRM: 64 bits at `", stringify!($off), "`.")]
        #[inline]
        pub fn $get(&self) -> $ty {
            <$ty as $crate::layout::FieldValue>::from_raw(
                $crate::layout::bits::get(&self.0, $off * 8, 64),
            )
        }
        #[doc = concat!("Sets [`Self::", stringify!($get), "`].")]
        #[inline]
        pub fn $set(&mut self, value: $ty) {
            $crate::layout::bits::set(
                &mut self.0, $off * 8, 64, $crate::layout::FieldValue::into_raw(value),
            )
        }
    };
    (@acc [$(#[$fmeta:meta])*] $get:ident $set:ident $ty:ty, bytes($off:expr, $len:expr)) => {
        $(#[$fmeta])*
        #[doc = concat!("\n\nPRM: ", stringify!($len), " bytes at `", stringify!($off), "`.")]
        #[inline]
        pub fn $get(&self) -> [u8; $len] {
            let mut out = [0u8; $len];
            out.copy_from_slice(&self.0[$off..$off + $len]);
            out
        }
        #[doc = concat!("Sets [`Self::", stringify!($get), "`].")]
        #[inline]
        pub fn $set(&mut self, value: [u8; $len]) {
            self.0[$off..$off + $len].copy_from_slice(&value)
        }
    };
    (@acc [$(#[$fmeta:meta])*] $get:ident $set:ident $ty:ty, nested($off:expr)) => {
        $(#[$fmeta])*
        #[doc = concat!("\n\nPRM: nested at `", stringify!($off), "`.")]
        #[inline]
        pub fn $get(&self) -> &$ty {
            // SAFETY: `$ty` is a `#[repr(transparent)]` byte array (align 1, every bit pattern
            // valid) and the compile-time check below keeps `$off + size_of::<$ty>()` inside
            // `self.0`.
            unsafe { &*self.0.as_ptr().add($off).cast::<$ty>() }
        }
        #[doc = concat!("Mutable access to [`Self::", stringify!($get), "`].")]
        #[inline]
        pub fn $set(&mut self) -> &mut $ty {
            // SAFETY: as in the shared accessor; the borrow of `self` is exclusive.
            unsafe { &mut *self.0.as_mut_ptr().add($off).cast::<$ty>() }
        }
    };

    // ---- descriptors ----
    (@desc $get:ident $ty:ty, dw($off:expr, $hi:expr, $lo:expr)) => {
        $crate::layout::FieldDesc {
            name: stringify!($get), bit_offset: $off * 8 + 31 - $hi, bit_width: $hi - $lo + 1,
            kind: $crate::layout::FieldKind::Bits,
        }
    };
    (@desc $get:ident $ty:ty, qw($off:expr)) => {
        $crate::layout::FieldDesc {
            name: stringify!($get), bit_offset: $off * 8, bit_width: 64,
            kind: $crate::layout::FieldKind::Bits,
        }
    };
    (@desc $get:ident $ty:ty, bytes($off:expr, $len:expr)) => {
        $crate::layout::FieldDesc {
            name: stringify!($get), bit_offset: $off * 8, bit_width: $len * 8,
            kind: $crate::layout::FieldKind::Bytes,
        }
    };
    (@desc $get:ident $ty:ty, nested($off:expr)) => {
        $crate::layout::FieldDesc {
            name: stringify!($get), bit_offset: $off * 8,
            bit_width: <$ty as $crate::layout::PrmLayout>::SIZE * 8,
            kind: $crate::layout::FieldKind::Nested(<$ty as $crate::layout::PrmLayout>::IFC_NAME),
        }
    };

    // ---- Debug ----
    (@dbg $d:ident $s:ident $get:ident, nested) => { $d.field(stringify!($get), $s.$get()); };
    (@dbg $d:ident $s:ident $get:ident, $kind:ident) => { $d.field(stringify!($get), &$s.$get()); };

    // ---- compile-time checks ----
    (@check $size:expr, $ty:ty, dw($off:expr, $hi:expr, $lo:expr)) => {
        assert!($off % 4 == 0 && $off + 4 <= $size, "dword outside the layout");
        assert!($hi < 32 && $lo <= $hi, "bad bit range");
        assert!($hi - $lo < <$ty as $crate::layout::FieldValue>::BITS, "type too narrow");
    };
    (@check $size:expr, $ty:ty, qw($off:expr)) => {
        assert!($off % 4 == 0 && $off + 8 <= $size, "qword outside the layout");
        assert!(<$ty as $crate::layout::FieldValue>::BITS == 64, "qw fields are u64");
    };
    (@check $size:expr, $ty:ty, bytes($off:expr, $len:expr)) => {
        assert!($off + $len <= $size, "bytes outside the layout");
    };
    (@check $size:expr, $ty:ty, nested($off:expr)) => {
        assert!(
            $off + <$ty as $crate::layout::PrmLayout>::SIZE <= $size,
            "nested layout outside the layout"
        );
    };
}

#[cfg(test)]
mod tests {
    use super::bits;
    use proptest::prelude::*;

    #[test]
    fn get_reads_msb_first_fields() {
        // DW@0 = 0x12345678: [31:28] = 1, [27:24] = 2, [15:0] = 0x5678.
        let b = [0x12, 0x34, 0x56, 0x78];
        assert_eq!(bits::get(&b, 0, 4), 1);
        assert_eq!(bits::get(&b, 4, 4), 2);
        assert_eq!(bits::get(&b, 16, 16), 0x5678);
        assert_eq!(bits::get(&b, 0, 32), 0x1234_5678);
        assert_eq!(bits::get(&b, 31, 1), 0);
        assert_eq!(bits::get(&b, 30, 1), 0);
        assert_eq!(bits::get(&b, 29, 1), 0);
        assert_eq!(bits::get(&b, 28, 1), 1);
    }

    #[test]
    fn set_writes_only_its_bits() {
        let mut b = [0xFF; 8];
        bits::set(&mut b, 9, 5, 0);
        assert_eq!(b, [0xFF, 0x83, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]);
        bits::set(&mut b, 0, 64, 0x0102_0304_0506_0708);
        assert_eq!(b, [1, 2, 3, 4, 5, 6, 7, 8]);
    }

    proptest! {
        #[test]
        fn set_then_get_round_trips(
            buf in proptest::array::uniform8(any::<u8>()),
            off in 0usize..64,
            width in 1usize..=32,
            value in any::<u64>(),
        ) {
            prop_assume!(off + width <= 64);
            let mut b = buf;
            let v = value & ((1u64 << width) - 1);
            bits::set(&mut b, off, width, v);
            prop_assert_eq!(bits::get(&b, off, width), v);
            // Bits outside the field are unchanged.
            for bit in (0..64).filter(|i| *i < off || *i >= off + width) {
                prop_assert_eq!(bits::get(&b, bit, 1), bits::get(&buf, bit, 1));
            }
        }
    }
}
