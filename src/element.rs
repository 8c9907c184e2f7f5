//! The element types devspan moves: one sealed trait over the twelve numeric types.

use std::fmt::{Debug, Display};

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};
use half::{bf16, f16};

/// ```
/// use devspan::{DType, DeviceElement};
/// assert_eq!(f32::DTYPE, DType::F32);
/// assert_eq!(DType::BF16.size(), 2);
/// ```
pub use devspan_kernels::abi::DType;

mod sealed {
    pub trait Sealed {}
}

/// An element type devspan can view, copy, fill and cast on the device.
///
/// Implemented for `u8, i8, u16, i16, u32, i32, u64, i64, half::f16, half::bf16, f32, f64`
/// and sealed: the kernels exist for exactly these.
///
/// ```
/// use devspan::DeviceElement;
/// fn bytes_of<T: DeviceElement>(n: usize) -> usize { n * T::DTYPE.size() }
/// assert_eq!(bytes_of::<half::f16>(3), 6);
/// ```
pub trait DeviceElement:
    sealed::Sealed
    + bytemuck::Pod
    + DeviceRepr
    + ValidAsZeroBits
    + Default
    + Debug
    + Display
    + PartialEq
    + Send
    + Sync
    + 'static
{
    /// The runtime tag of this type.
    const DTYPE: DType;

    /// The value's bits, zero-extended to 64 bits (what fill kernels take).
    ///
    /// ```
    /// use devspan::DeviceElement;
    /// assert_eq!((-1i16).to_bits_u64(), 0xffff);
    /// ```
    fn to_bits_u64(self) -> u64;
}

macro_rules! element {
    ($($t:ty => $tag:ident, $bits:ty;)*) => {$(
        impl sealed::Sealed for $t {}
        impl DeviceElement for $t {
            const DTYPE: DType = DType::$tag;
            #[inline]
            fn to_bits_u64(self) -> u64 {
                bytemuck::cast::<$t, $bits>(self) as u64
            }
        }
    )*};
}

element! {
    u8 => U8, u8;
    i8 => I8, u8;
    u16 => U16, u16;
    i16 => I16, u16;
    u32 => U32, u32;
    i32 => I32, u32;
    u64 => U64, u64;
    i64 => I64, u64;
    f16 => F16, u16;
    bf16 => BF16, u16;
    f32 => F32, u32;
    f64 => F64, u64;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_rust() {
        fn check<T: DeviceElement>() {
            assert_eq!(T::DTYPE.size(), std::mem::size_of::<T>(), "{}", T::DTYPE);
        }
        check::<u8>();
        check::<i8>();
        check::<u16>();
        check::<i16>();
        check::<u32>();
        check::<i32>();
        check::<u64>();
        check::<i64>();
        check::<f16>();
        check::<bf16>();
        check::<f32>();
        check::<f64>();
    }

    #[test]
    fn bits_are_zero_extended() {
        assert_eq!((-1i8).to_bits_u64(), 0xff);
        assert_eq!((-2i32).to_bits_u64(), 0xffff_fffe);
        assert_eq!(1.0f32.to_bits_u64(), 0x3f80_0000);
        assert_eq!(f16::ONE.to_bits_u64(), 0x3c00);
        assert_eq!(bf16::ONE.to_bits_u64(), 0x3f80);
        assert_eq!((-1i64).to_bits_u64(), u64::MAX);
    }
}
