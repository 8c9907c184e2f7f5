//! Fast division by a fixed divisor as the kernels compute it: 64-bit ([`FastDiv64`])
//! and 32-bit ([`fast_div32`]).

use crate::abi::param_block;

/// Division by a fixed divisor `d` as a multiply and a shift, exactly as the
/// kernels compute it: `q = (mulhi64(n, magic) + n) >> shift`, valid for
/// `n < 2^63`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FastDiv64 {
    /// Low 64 bits of `ceil(2^(64 + shift) / d)` (0 for `d == 1`).
    pub magic: u64,
    /// `ceil(log2(d))`.
    pub shift: u32,
    /// Padding; zero.
    pub _pad: u32,
}

impl FastDiv64 {
    /// Parameters for divisor `d`; `d == 0` is treated as 1.
    pub fn new(d: u64) -> Self {
        if d <= 1 {
            return Self::default();
        }
        let shift = 64 - (d - 1).leading_zeros();
        let magic = ((1u128 << 64) * ((1u128 << shift) - u128::from(d)) / u128::from(d) + 1) as u64;
        Self {
            magic,
            shift,
            _pad: 0,
        }
    }

    /// `n / d` computed like the kernels do (a shift of 64 or more gives 0,
    /// like PTX `shr`).
    pub fn div(&self, n: u64) -> u64 {
        let hi = ((u128::from(n) * u128::from(self.magic)) >> 64) as u64;
        hi.wrapping_add(n).checked_shr(self.shift).unwrap_or(0)
    }
}

/// 32-bit fast division parameters `(magic, shift)` for divisor `d`:
/// `q = (mulhi32(n, magic) + n) >> shift`, valid for `n < 2^31`; `d <= 1`
/// gives `(0, 0)`.
pub fn fast_div32(d: u32) -> (u32, u32) {
    if d <= 1 {
        return (0, 0);
    }
    // A power of two needs no division: the formula below gives a magic of 1 for it.
    if d.is_power_of_two() {
        return (1, d.trailing_zeros());
    }
    let shift = 32 - (d - 1).leading_zeros();
    let magic = ((1u64 << 32) * ((1u64 << shift) - u64::from(d)) / u64::from(d) + 1) as u32;
    (magic, shift)
}

/// `n / d` from [`fast_div32`] parameters, computed like the kernels do.
pub fn fast_div32_apply(n: u32, magic: u32, shift: u32) -> u32 {
    let hi = ((u64::from(n) * u64::from(magic)) >> 32) as u32;
    hi.wrapping_add(n).checked_shr(shift).unwrap_or(0)
}

// SAFETY: `#[repr(C)]`, integers only, the padding an explicit field.
param_block!(FastDiv64 { magic, shift, _pad });
