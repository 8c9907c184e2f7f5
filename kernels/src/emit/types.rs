//! Element types as the generated code sees them ([`Ty`]: register class, load, store and
//! `cvt` suffixes), and the element counts and size ratios derived from them.

use super::code::Class;
use crate::abi::{self, DType};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Num {
    Uint,
    Sint,
    F16,
    Bf16,
    F32,
    F64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Ty {
    tag: &'static str,
    pub(super) kind: Num,
    pub(super) size: u64,
}

pub(super) const fn ty(tag: &'static str, kind: Num, size: u64) -> Ty {
    Ty { tag, kind, size }
}

/// The register-level description of element type `t`.
pub(super) fn elem_ty(t: DType) -> Ty {
    let kind = match t {
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => Num::Uint,
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => Num::Sint,
        DType::F16 => Num::F16,
        DType::BF16 => Num::Bf16,
        DType::F32 => Num::F32,
        DType::F64 => Num::F64,
    };
    ty(t.name(), kind, t.size() as u64)
}

/// Raw-bits type used by fill and copy modules of element size `size`.
pub(super) fn bits_ty(size: u64) -> Ty {
    match size {
        1 => ty("b1", Num::Uint, 1),
        2 => ty("b2", Num::Uint, 2),
        4 => ty("b4", Num::Uint, 4),
        8 => ty("b8", Num::Uint, 8),
        _ => unreachable!(),
    }
}

impl Ty {
    pub(super) fn signed(self) -> bool {
        self.kind == Num::Sint
    }

    /// Register class holding one element of this type.
    ///
    /// Integers of at most 32 bits are kept zero- or sign-extended to 32 bits
    /// when they are conversion inputs; conversion outputs only need correct
    /// low bits, because they are only stored.
    pub(super) fn class(self) -> Class {
        match self.kind {
            Num::Uint | Num::Sint if self.size == 8 => Class::B64,
            Num::Uint | Num::Sint => Class::B32,
            Num::F16 | Num::Bf16 => Class::B16,
            Num::F32 => Class::F32,
            Num::F64 => Class::F64,
        }
    }

    /// Type suffix of a scalar load (extends narrow integers into 32 bits).
    pub(super) fn ld_suffix(self) -> &'static str {
        match (self.kind, self.size) {
            (Num::Uint, 1) => "u8",
            (Num::Sint, 1) => "s8",
            (Num::Uint, 2) => "u16",
            (Num::Sint, 2) => "s16",
            (Num::Uint | Num::Sint, 4) => "u32",
            (Num::Uint | Num::Sint, 8) => "u64",
            (Num::F16 | Num::Bf16, _) => "b16",
            (Num::F32, _) => "f32",
            (Num::F64, _) => "f64",
            _ => unreachable!(),
        }
    }

    /// Type suffix of a scalar store (truncates to the element width).
    pub(super) fn st_suffix(self) -> &'static str {
        match (self.kind, self.size) {
            (Num::Uint | Num::Sint, 1) => "u8",
            (Num::Uint | Num::Sint, 2) => "u16",
            (Num::Uint | Num::Sint, 4) => "u32",
            (Num::Uint | Num::Sint, 8) => "u64",
            (Num::F16 | Num::Bf16, _) => "b16",
            (Num::F32, _) => "f32",
            (Num::F64, _) => "f64",
            _ => unreachable!(),
        }
    }

    /// Integer type name of the register form used as a `cvt` source.
    pub(super) fn cvt_int_src(self) -> &'static str {
        match (self.signed(), self.size) {
            (false, 8) => "u64",
            (true, 8) => "s64",
            (false, _) => "u32",
            (true, _) => "s32",
        }
    }

    /// Integer type name of a `cvt` destination of exactly this width.
    pub(super) fn cvt_int_dst(self) -> &'static str {
        match (self.signed(), self.size) {
            (false, 1) => "u8",
            (true, 1) => "s8",
            (false, 2) => "u16",
            (true, 2) => "s16",
            (false, 4) => "u32",
            (true, 4) => "s32",
            (false, 8) => "u64",
            (true, 8) => "s64",
            _ => unreachable!(),
        }
    }
}

pub(super) fn log2(x: u64) -> u32 {
    assert!(x.is_power_of_two());
    x.trailing_zeros()
}

/// Elements per vector group of a contiguous kernel.
pub(super) fn group_elems(s: Ty, d: Ty) -> u64 {
    abi::contig_group_elems(s.size as usize, d.size as usize) as u64
}

/// Ratio of the larger to the smaller element size.
pub(super) fn size_ratio(s: Ty, d: Ty) -> u64 {
    s.size.max(d.size) / s.size.min(d.size)
}

/// Groups per thread and iteration of a contiguous copy or cast kernel.
pub(super) fn contig_groups_per_thread(s: Ty, d: Ty) -> u64 {
    u64::from(abi::contig_groups_per_thread(
        s.size as usize,
        d.size as usize,
    ))
}
