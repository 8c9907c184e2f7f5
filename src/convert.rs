//! Host reference for the element conversions done by the cast kernels.
//!
//! A cast `S -> D` follows Rust's `as` and the `half` crate:
//!
//! * integer to integer: `as` (truncate, sign- or zero-extend);
//! * float to integer: truncate toward zero, saturate to the destination
//!   range, NaN to 0 (`as`); f16 and bf16 are first widened to f32;
//! * integer to f32 / f64, f64 to f32: round to nearest, ties to even;
//! * f32 to f64, f16 / bf16 to f32 / f64: exact;
//! * integer to f16 / bf16: `from_f32(x as f32)` (rounded twice, like `half`);
//! * f32 to f16 / bf16: `half`'s `from_f32` (nearest, ties to even; overflow
//!   to infinity; NaN stays NaN);
//! * f64 to f16 / bf16: rounded once, directly from the f64 value (nearest,
//!   ties to even). `half`'s own `from_f64` is not used: depending on the
//!   host CPU it rounds through f32 or ignores the low 32 bits of the f64,
//!   so it can differ from the correctly rounded result by one unit in the
//!   last place;
//! * f16 <-> bf16: through f32.
//!
//! NaN payloads are not specified; compare NaNs with `is_nan`.

// The complete host-side API of the kernels; the crate need not use every item.

use half::{bf16, f16};

use crate::element::DType;

/// An element value in a form from which every element type converts
/// exactly as [`cast_scalar`] specifies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// An integer value (any element integer type fits).
    Int(i128),
    /// A floating-point value (f16, bf16 and f32 widen to f64 exactly).
    Float(f64),
}

/// An element type with reference conversions.
#[cfg_attr(not(test), allow(dead_code))] // bit-level reference, used by tests
pub trait CastReference: Copy + 'static {
    /// The exact value of `self`.
    fn to_scalar(self) -> Scalar;
    /// The value converted to `Self` by the rules in the module docs.
    fn from_scalar(s: Scalar) -> Self;
    /// The bit pattern, zero-extended.
    fn to_bits_u64(self) -> u64;
    /// The value with the given bit pattern (low bits used).
    fn from_bits_u64(bits: u64) -> Self;
}

/// Converts `x` from `S` to `D` exactly as the cast kernels do.
pub fn cast_scalar<S: CastReference, D: CastReference>(x: S) -> D {
    D::from_scalar(x.to_scalar())
}

macro_rules! int_reference {
    ($($t:ty, $u:ty, $tag:literal;)*) => {$(
        impl CastReference for $t {
            fn to_scalar(self) -> Scalar {
                Scalar::Int(self as i128)
            }
            fn from_scalar(s: Scalar) -> Self {
                match s {
                    Scalar::Int(i) => i as $t,
                    Scalar::Float(f) => f as $t,
                }
            }
            fn to_bits_u64(self) -> u64 {
                self as $u as u64
            }
            fn from_bits_u64(bits: u64) -> Self {
                bits as $u as $t
            }
        }
    )*};
}

int_reference! {
    u8, u8, "u8";
    i8, u8, "i8";
    u16, u16, "u16";
    i16, u16, "i16";
    u32, u32, "u32";
    i32, u32, "i32";
    u64, u64, "u64";
    i64, u64, "i64";
}

impl CastReference for f32 {
    fn to_scalar(self) -> Scalar {
        Scalar::Float(self as f64)
    }
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::Int(i) => i as f32,
            Scalar::Float(f) => f as f32,
        }
    }
    fn to_bits_u64(self) -> u64 {
        self.to_bits() as u64
    }
    fn from_bits_u64(bits: u64) -> Self {
        f32::from_bits(bits as u32)
    }
}

impl CastReference for f64 {
    fn to_scalar(self) -> Scalar {
        Scalar::Float(self)
    }
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }
    fn to_bits_u64(self) -> u64 {
        self.to_bits()
    }
    fn from_bits_u64(bits: u64) -> Self {
        f64::from_bits(bits)
    }
}

impl CastReference for f16 {
    fn to_scalar(self) -> Scalar {
        Scalar::Float(self.to_f32() as f64)
    }
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::Int(i) => f16::from_f32(i as f32),
            Scalar::Float(f) => f64_to_f16(f),
        }
    }
    fn to_bits_u64(self) -> u64 {
        self.to_bits() as u64
    }
    fn from_bits_u64(bits: u64) -> Self {
        f16::from_bits(bits as u16)
    }
}

impl CastReference for bf16 {
    fn to_scalar(self) -> Scalar {
        Scalar::Float(self.to_f32() as f64)
    }
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::Int(i) => bf16::from_f32(i as f32),
            Scalar::Float(f) => f64_to_bf16(f),
        }
    }
    fn to_bits_u64(self) -> u64 {
        self.to_bits() as u64
    }
    fn from_bits_u64(bits: u64) -> Self {
        bf16::from_bits(bits as u16)
    }
}

/// Rounds `x` to f32 toward zero and, if that was inexact, sets the lowest
/// mantissa bit ("round to odd"). Rounding the result once more to a format
/// with at most 22 significant bits (f16, bf16) gives the correctly rounded
/// value of `x` in that format.
pub fn f64_to_f32_round_odd(x: f64) -> f32 {
    let r = x as f32;
    if x.is_nan() || r as f64 == x {
        return r;
    }
    let mut bits = r.to_bits();
    if (r as f64).abs() > x.abs() {
        bits -= 1;
    }
    f32::from_bits(bits | 1)
}

/// The integer `i` as an f64 rounded to odd: toward zero, with the lowest mantissa bit set when
/// that was inexact. Rounding the result once more to a format with at most 51 significant bits
/// (f32 through `f64_to_f32_round_odd`, f16, bf16) gives the correctly rounded value of `i`.
pub fn i128_to_f64_round_odd(i: i128) -> f64 {
    let r = i as f64;
    // `r` is finite: |i| < 2^127 is far inside f64's range.
    let back = r as i128; // exact: r is an integer-valued f64 no larger than 2^127 in magnitude
    if back == i {
        return r;
    }
    let mut bits = r.to_bits();
    if back.unsigned_abs() > i.unsigned_abs() {
        bits -= 1;
    }
    f64::from_bits(bits | 1)
}

/// `x` rounded once to f16 (nearest, ties to even; overflow to infinity).
pub fn f64_to_f16(x: f64) -> f16 {
    f16::from_f32(f64_to_f32_round_odd(x))
}

/// `x` rounded once to bf16 (nearest, ties to even; overflow to infinity).
pub fn f64_to_bf16(x: f64) -> bf16 {
    bf16::from_f32(f64_to_f32_round_odd(x))
}

#[cfg_attr(not(test), allow(dead_code))] // bit-level reference, used by tests
fn cast_from<S: CastReference>(dst: &str, x: S) -> Option<u64> {
    Some(match dst {
        "u8" => cast_scalar::<S, u8>(x).to_bits_u64(),
        "i8" => cast_scalar::<S, i8>(x).to_bits_u64(),
        "u16" => cast_scalar::<S, u16>(x).to_bits_u64(),
        "i16" => cast_scalar::<S, i16>(x).to_bits_u64(),
        "u32" => cast_scalar::<S, u32>(x).to_bits_u64(),
        "i32" => cast_scalar::<S, i32>(x).to_bits_u64(),
        "u64" => cast_scalar::<S, u64>(x).to_bits_u64(),
        "i64" => cast_scalar::<S, i64>(x).to_bits_u64(),
        "f16" => cast_scalar::<S, f16>(x).to_bits_u64(),
        "bf16" => cast_scalar::<S, bf16>(x).to_bits_u64(),
        "f32" => cast_scalar::<S, f32>(x).to_bits_u64(),
        "f64" => cast_scalar::<S, f64>(x).to_bits_u64(),
        _ => return None,
    })
}

/// Converts the element with bit pattern `bits` (low bits used) from type
/// tag `src` to type tag `dst`, returning the result's bit pattern; `None`
/// for an unknown tag. `src == dst` returns the bits unchanged.
#[cfg_attr(not(test), allow(dead_code))] // bit-level reference, used by tests
pub fn cast_bits(src: &str, dst: &str, bits: u64) -> Option<u64> {
    if src == dst {
        let size = match src {
            "u8" | "i8" => 1,
            "u16" | "i16" | "f16" | "bf16" => 2,
            "u32" | "i32" | "f32" => 4,
            "u64" | "i64" | "f64" => 8,
            _ => return None,
        };
        return Some(if size == 8 {
            bits
        } else {
            bits & ((1u64 << (8 * size)) - 1)
        });
    }
    match src {
        "u8" => cast_from(dst, u8::from_bits_u64(bits)),
        "i8" => cast_from(dst, i8::from_bits_u64(bits)),
        "u16" => cast_from(dst, u16::from_bits_u64(bits)),
        "i16" => cast_from(dst, i16::from_bits_u64(bits)),
        "u32" => cast_from(dst, u32::from_bits_u64(bits)),
        "i32" => cast_from(dst, i32::from_bits_u64(bits)),
        "u64" => cast_from(dst, u64::from_bits_u64(bits)),
        "i64" => cast_from(dst, i64::from_bits_u64(bits)),
        "f16" => cast_from(dst, f16::from_bits_u64(bits)),
        "bf16" => cast_from(dst, bf16::from_bits_u64(bits)),
        "f32" => cast_from(dst, f32::from_bits_u64(bits)),
        "f64" => cast_from(dst, f64::from_bits_u64(bits)),
        _ => None,
    }
}

/// Whether `bits` is a NaN of the floating-point type `tag` (false for
/// integer tags).
#[cfg_attr(not(test), allow(dead_code))] // bit-level reference, used by tests
pub fn is_nan_bits(tag: &str, bits: u64) -> bool {
    match tag {
        "f16" => f16::from_bits(bits as u16).is_nan(),
        "bf16" => bf16::from_bits(bits as u16).is_nan(),
        "f32" => f32::from_bits(bits as u32).is_nan(),
        "f64" => f64::from_bits(bits).is_nan(),
        _ => false,
    }
}

macro_rules! dispatch_to {
    ($from:ty, $x:expr, $to:expr) => {
        match $to {
            DType::U8 => bytemuck::bytes_of(&cast_scalar::<$from, u8>($x)).to_vec(),
            DType::I8 => bytemuck::bytes_of(&cast_scalar::<$from, i8>($x)).to_vec(),
            DType::U16 => bytemuck::bytes_of(&cast_scalar::<$from, u16>($x)).to_vec(),
            DType::I16 => bytemuck::bytes_of(&cast_scalar::<$from, i16>($x)).to_vec(),
            DType::U32 => bytemuck::bytes_of(&cast_scalar::<$from, u32>($x)).to_vec(),
            DType::I32 => bytemuck::bytes_of(&cast_scalar::<$from, i32>($x)).to_vec(),
            DType::U64 => bytemuck::bytes_of(&cast_scalar::<$from, u64>($x)).to_vec(),
            DType::I64 => bytemuck::bytes_of(&cast_scalar::<$from, i64>($x)).to_vec(),
            DType::F16 => bytemuck::bytes_of(&cast_scalar::<$from, f16>($x)).to_vec(),
            DType::BF16 => bytemuck::bytes_of(&cast_scalar::<$from, bf16>($x)).to_vec(),
            DType::F32 => bytemuck::bytes_of(&cast_scalar::<$from, f32>($x)).to_vec(),
            DType::F64 => bytemuck::bytes_of(&cast_scalar::<$from, f64>($x)).to_vec(),
        }
    };
}

/// One element converted between element types, as little-endian bytes (the host reference
/// of the cast kernels).
pub fn convert_bytes(from: DType, to: DType, b: &[u8]) -> Vec<u8> {
    macro_rules! go {
        ($t:ty) => {{
            let x: $t = bytemuck::pod_read_unaligned(b);
            dispatch_to!($t, x, to)
        }};
    }
    match from {
        DType::U8 => go!(u8),
        DType::I8 => go!(i8),
        DType::U16 => go!(u16),
        DType::I16 => go!(i16),
        DType::U32 => go!(u32),
        DType::I32 => go!(i32),
        DType::U64 => go!(u64),
        DType::I64 => go!(i64),
        DType::F16 => go!(f16),
        DType::BF16 => go!(bf16),
        DType::F32 => go!(f32),
        DType::F64 => go!(f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Integers round once to f16 and bf16 through the round-to-odd f64: the result is the
    /// nearest value to the integer itself, also where rounding through f32 or f64 first
    /// would land on a tie.
    #[test]
    fn integers_round_once_to_half_precision() {
        // 2^24 + 2^16 + 1 lies just above a bf16 tie (bf16 steps of 2^17 there); rounding it
        // to f32 first (steps of 2) keeps it above, but through f32's nearest of 2^24+2^16 it
        // would tie and go to even.
        let i: i128 = (1 << 24) + (1 << 16) + 1;
        let want = bf16::from_bits(0x4b81); // 2^24 + 2^17
        assert_eq!(f64_to_bf16(i128_to_f64_round_odd(i)), want);
        // 2^60 + 2^52 + 1: f64 steps of 2^8 there; rounding to f64 alone would tie for bf16.
        let j: i128 = (1 << 60) + (1 << 52) + 1;
        assert_eq!(
            f64_to_bf16(i128_to_f64_round_odd(j)).to_f64(),
            ((1u64 << 60) + (1u64 << 53)) as f64
        );
        assert_eq!(
            f64_to_bf16(i128_to_f64_round_odd(-j)).to_f64(),
            -(((1u64 << 60) + (1u64 << 53)) as f64)
        );
        // Exact integers stay exact; f16 overflows to infinity.
        assert_eq!(i128_to_f64_round_odd(12345), 12345.0);
        assert_eq!(f64_to_f16(i128_to_f64_round_odd(70000)), f16::INFINITY);
        assert_eq!(f64_to_f16(i128_to_f64_round_odd(2049)).to_f64(), 2048.0);
        assert_eq!(f64_to_f16(i128_to_f64_round_odd(2051)).to_f64(), 2052.0);
        // The float value of the issue: above the f16 tie at 1 + 2^-11 by 2^-40.
        assert_eq!(f64_to_f16(1.0004882812509095).to_bits(), 0x3c01);
    }

    /// Correct rounding of `x` to a binary format with `p` significant bits,
    /// minimum normal exponent `emin` and maximum exponent `emax`, by exact
    /// scaling; returns the rounded value as f64 (infinite on overflow).
    fn round_exact(x: f64, p: i32, emin: i32, emax: i32) -> f64 {
        if !x.is_finite() || x == 0.0 {
            return x;
        }
        let e = ((x.to_bits() >> 52) & 0x7FF) as i32 - 1023;
        let e = e.max(emin);
        let q = (2.0f64).powi(e - p + 1);
        let r = (x.abs() / q).round_ties_even() * q;
        let max = (2.0 - (2.0f64).powi(1 - p)) * (2.0f64).powi(emax);
        let half_ulp_above = max + (2.0f64).powi(emax - p);
        let r = if x.abs() >= half_ulp_above {
            f64::INFINITY
        } else {
            r
        };
        r.copysign(x)
    }

    fn f16_exact(x: f64) -> f64 {
        round_exact(x, 11, -14, 15)
    }

    fn bf16_exact(x: f64) -> f64 {
        round_exact(x, 8, -126, 127)
    }

    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    fn same(a: f64, b: f64) -> bool {
        (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
    }

    /// Values around every rounding boundary of the narrow formats, plus
    /// random bit patterns in the interesting exponent range.
    fn samples(rng: &mut Rng, narrow_bits: u32, count: usize) -> Vec<f64> {
        let mut v = Vec::new();
        for _ in 0..count {
            let r = rng.next();
            let exp = 1023 - 150 + (r % 300);
            let x = f64::from_bits((r & 0x800F_FFFF_FFFF_FFFF) | (exp << 52));
            v.push(x);
            // Just around a tie of the narrow format.
            let mant_cut = 52 - narrow_bits;
            let tie = (x.to_bits() & !((1u64 << mant_cut) - 1)) | (1u64 << (mant_cut - 1));
            for d in [-2i64, -1, 0, 1, 2] {
                v.push(f64::from_bits(tie.wrapping_add(d as u64)));
            }
            v.push(f64::from_bits(tie | 1 << 20));
            v.push(f64::from_bits(tie | 1 << 28));
            v.push(f64::from_bits(tie | 1 << 29));
        }
        v
    }

    #[test]
    fn f64_to_f16_is_correctly_rounded() {
        let mut rng = Rng(0x1234_5678_9ABC_DEF1);
        let mut xs = samples(&mut rng, 10, 40_000);
        xs.extend([
            0.0,
            -0.0,
            65504.0,
            65519.999,
            65520.0,
            65536.0,
            1e300,
            -1e300,
            5.960464477539063e-8,
            2.980232238769531e-8,
            2.9802322387695312e-8 * 1.0000001,
            1e-300,
            f64::MIN_POSITIVE,
            1.0 + 2f64.powi(-11),
            1.0 + 2f64.powi(-11) + 2f64.powi(-40),
            1.0 + 3.0 * 2f64.powi(-11) - 2f64.powi(-40),
        ]);
        for x in xs {
            let got = f64_to_f16(x).to_f64();
            assert!(
                same(got, f16_exact(x)),
                "{x:e} ({:#x}): {got:e} vs {:e}",
                x.to_bits(),
                f16_exact(x)
            );
        }
        assert!(f64_to_f16(f64::NAN).is_nan());
        assert_eq!(f64_to_f16(f64::INFINITY), f16::INFINITY);
        assert_eq!(f64_to_f16(f64::NEG_INFINITY), f16::NEG_INFINITY);
    }

    #[test]
    fn f64_to_bf16_is_correctly_rounded() {
        let mut rng = Rng(0x0F1E_2D3C_4B5A_6978);
        let mut xs = samples(&mut rng, 7, 40_000);
        for e in [-133, -130, -127, -126, -125, 126, 127, 128] {
            let p = 2f64.powi(e);
            xs.extend([
                p,
                p * 1.00390625,
                p * 1.0039062500001,
                p * 0.99,
                p * 1.5,
                -p * 1.99609375,
            ]);
        }
        xs.extend([
            f32::MAX as f64,
            f32::MAX as f64 * 1.0000001,
            3.3961e38,
            3.3895313892515355e38,
            1e39,
            f64::MAX,
        ]);
        for x in xs {
            let got = f64_to_bf16(x).to_f64();
            assert!(
                same(got, bf16_exact(x)),
                "{x:e} ({:#x}): {got:e} vs {:e}",
                x.to_bits(),
                bf16_exact(x)
            );
        }
        assert!(f64_to_bf16(f64::NAN).is_nan());
        assert!(f64_to_bf16(-f64::NAN).is_nan());
        // NaN whose payload lies only in the low 32 bits.
        assert!(f64_to_bf16(f64::from_bits(0x7FF0_0000_0000_0001)).is_nan());
        assert!(f64_to_f16(f64::from_bits(0x7FF0_0000_0000_0001)).is_nan());
    }

    #[test]
    fn f32_to_narrow_is_correctly_rounded() {
        let mut rng = Rng(0xDEAD_BEEF_CAFE_F00D);
        for _ in 0..200_000 {
            let r = rng.next();
            let f = f32::from_bits(r as u32);
            if f.is_nan() {
                assert!(cast_scalar::<f32, f16>(f).is_nan());
                assert!(cast_scalar::<f32, bf16>(f).is_nan());
                continue;
            }
            let x = f as f64;
            assert!(
                same(cast_scalar::<f32, f16>(f).to_f64(), f16_exact(x)),
                "{f:e}"
            );
            assert!(
                same(cast_scalar::<f32, bf16>(f).to_f64(), bf16_exact(x)),
                "{f:e}"
            );
        }
    }

    #[test]
    fn round_to_odd() {
        assert_eq!(f64_to_f32_round_odd(1.0), 1.0);
        assert_eq!(
            f64_to_f32_round_odd(1.0 + 2f64.powi(-30)).to_bits(),
            0x3F80_0001
        );
        assert_eq!(
            f64_to_f32_round_odd(-(1.0 + 2f64.powi(-30))).to_bits(),
            0xBF80_0001
        );
        assert_eq!(
            f64_to_f32_round_odd(2.0 - 2f64.powi(-30)).to_bits(),
            0x3FFF_FFFF
        );
        assert_eq!(f64_to_f32_round_odd(1e300).to_bits(), 0x7F7F_FFFF);
        assert_eq!(f64_to_f32_round_odd(-1e300).to_bits(), 0xFF7F_FFFF);
        assert_eq!(f64_to_f32_round_odd(1e-300).to_bits(), 1);
        assert_eq!(f64_to_f32_round_odd(f64::INFINITY), f32::INFINITY);
        assert!(f64_to_f32_round_odd(f64::NAN).is_nan());
    }

    #[test]
    fn float_to_int_saturates() {
        assert_eq!(cast_scalar::<f32, u8>(f32::NAN), 0);
        assert_eq!(cast_scalar::<f64, i64>(f64::NAN), 0);
        assert_eq!(cast_scalar::<f16, i32>(f16::NAN), 0);
        assert_eq!(cast_scalar::<bf16, u64>(bf16::NAN), 0);
        assert_eq!(cast_scalar::<f32, u8>(300.7), 255);
        assert_eq!(cast_scalar::<f32, u8>(255.9), 255);
        assert_eq!(cast_scalar::<f32, u8>(-0.9), 0);
        assert_eq!(cast_scalar::<f32, u8>(-1.0), 0);
        assert_eq!(cast_scalar::<f32, i8>(-128.9), -128);
        assert_eq!(cast_scalar::<f32, i8>(-129.0), -128);
        assert_eq!(cast_scalar::<f32, i8>(127.99), 127);
        assert_eq!(cast_scalar::<f64, i16>(-1e10), i16::MIN);
        assert_eq!(cast_scalar::<f64, u16>(65535.99), u16::MAX);
        assert_eq!(cast_scalar::<f32, i32>(f32::INFINITY), i32::MAX);
        assert_eq!(cast_scalar::<f32, i32>(f32::NEG_INFINITY), i32::MIN);
        assert_eq!(cast_scalar::<f32, i32>(2147483648.0), i32::MAX);
        assert_eq!(cast_scalar::<f64, i32>(-2147483648.9), i32::MIN);
        assert_eq!(cast_scalar::<f64, u32>(4294967295.9), u32::MAX);
        assert_eq!(cast_scalar::<f64, u64>(1.8446744073709552e19), u64::MAX);
        assert_eq!(cast_scalar::<f64, u64>(-5.0), 0);
        assert_eq!(cast_scalar::<f64, i64>(9.2e18), 9_200_000_000_000_000_000);
        assert_eq!(cast_scalar::<f64, i64>(1e19), i64::MAX);
        assert_eq!(cast_scalar::<f32, i64>(-1e19), i64::MIN);
        assert_eq!(cast_scalar::<f16, u8>(f16::from_f32(-7.5)), 0);
        assert_eq!(cast_scalar::<f16, i8>(f16::from_f32(-7.5)), -7);
        assert_eq!(cast_scalar::<f16, u16>(f16::INFINITY), u16::MAX);
        assert_eq!(cast_scalar::<bf16, i16>(bf16::from_f32(-40000.0)), i16::MIN);
        assert_eq!(cast_scalar::<f64, u8>(f64::MIN_POSITIVE), 0);
    }

    #[test]
    fn int_to_int_is_as() {
        assert_eq!(cast_scalar::<i8, u64>(-1), u64::MAX);
        assert_eq!(cast_scalar::<i8, u16>(-2), 0xFFFE);
        assert_eq!(cast_scalar::<u8, i8>(200), -56);
        assert_eq!(cast_scalar::<u64, i8>(0x1234_5678_9ABC_DEF0), -16);
        assert_eq!(cast_scalar::<i64, u32>(-1), u32::MAX);
        assert_eq!(cast_scalar::<u32, i64>(u32::MAX), 4_294_967_295);
        assert_eq!(cast_scalar::<i32, i64>(-5), -5);
        assert_eq!(cast_scalar::<u16, i16>(0x8000), i16::MIN);
        assert_eq!(cast_scalar::<i16, u8>(-1), 255);
    }

    #[test]
    fn int_to_float_rounds() {
        assert_eq!(cast_scalar::<u64, f32>(u64::MAX), 18446744073709551616.0);
        assert_eq!(cast_scalar::<i64, f64>(i64::MAX), 9223372036854775808.0);
        assert_eq!(cast_scalar::<u32, f32>(16_777_217), 16_777_216.0);
        assert_eq!(cast_scalar::<u32, f32>(16_777_219), 16_777_220.0);
        assert_eq!(cast_scalar::<i32, f16>(65519), f16::from_f32(65504.0));
        assert_eq!(cast_scalar::<i32, f16>(65520), f16::INFINITY);
        assert_eq!(cast_scalar::<i64, f16>(i64::MIN), f16::NEG_INFINITY);
        assert_eq!(cast_scalar::<u16, f16>(2049), f16::from_f32(2048.0));
        assert_eq!(cast_scalar::<u16, f16>(2051), f16::from_f32(2052.0));
        assert_eq!(cast_scalar::<u16, bf16>(257), bf16::from_f32(256.0));
        assert_eq!(cast_scalar::<u16, bf16>(259), bf16::from_f32(260.0));
        // Rounded through f32 first, as `half` does: 2^24 + 2^16 + 1 becomes
        // the bf16 tie 2^24 + 2^16, which rounds to even (2^24).
        assert_eq!(
            cast_scalar::<i32, bf16>((1 << 24) + (1 << 16) + 1),
            bf16::from_f32(16_777_216.0)
        );
        assert_eq!(
            cast_scalar::<u64, bf16>(u64::MAX),
            bf16::from_f32(18446744073709551616.0)
        );
        assert_eq!(cast_scalar::<i8, bf16>(-128), bf16::from_f32(-128.0));
        assert_eq!(cast_scalar::<u8, f16>(255), f16::from_f32(255.0));
    }

    #[test]
    fn float_to_float() {
        assert_eq!(
            cast_scalar::<f32, bf16>(f32::from_bits(0x3F80_8000)).to_bits(),
            0x3F80
        );
        assert_eq!(
            cast_scalar::<f32, bf16>(f32::from_bits(0x3F81_8000)).to_bits(),
            0x3F82
        );
        assert_eq!(
            cast_scalar::<f32, bf16>(f32::from_bits(0x3F80_8001)).to_bits(),
            0x3F81
        );
        assert_eq!(cast_scalar::<f32, bf16>(f32::MAX), bf16::INFINITY);
        assert_eq!(
            cast_scalar::<f32, bf16>(f32::from_bits(0x0000_8000)).to_bits(),
            0
        );
        assert_eq!(
            cast_scalar::<f32, bf16>(f32::from_bits(0x0001_8000)).to_bits(),
            2
        );
        assert!(cast_scalar::<f32, bf16>(f32::from_bits(0x7F80_0001)).is_nan());
        assert_eq!(cast_scalar::<f32, f16>(65520.0), f16::INFINITY);
        assert_eq!(cast_scalar::<f32, f16>(-65519.0), f16::from_f32(-65504.0));
        assert_eq!(cast_scalar::<f32, f16>(2f32.powi(-25)).to_bits(), 0);
        assert_eq!(
            cast_scalar::<f32, f16>(2f32.powi(-25) * 1.0001).to_bits(),
            1
        );
        assert_eq!(cast_scalar::<f32, f16>(3.0 * 2f32.powi(-25)).to_bits(), 2);
        assert_eq!(cast_scalar::<f16, f32>(f16::from_bits(1)), 2f32.powi(-24));
        assert_eq!(
            cast_scalar::<bf16, f64>(bf16::from_bits(1)),
            2f64.powi(-133)
        );
        assert_eq!(
            cast_scalar::<f16, f64>(f16::from_bits(0x8001)),
            -(2f64.powi(-24))
        );
        assert_eq!(cast_scalar::<f64, f32>(1e-45), f32::from_bits(1));
        assert_eq!(cast_scalar::<f64, f32>(1e39), f32::INFINITY);
        assert_eq!(
            cast_scalar::<f64, f32>(f64::from_bits(0x3FF0_0000_1000_0000)),
            1.0
        );
        assert_eq!(
            cast_scalar::<f64, f32>(f64::from_bits(0x3FF0_0000_3000_0000)).to_bits(),
            0x3F80_0002
        );
        assert_eq!(cast_scalar::<f16, bf16>(f16::MAX), bf16::from_f32(65536.0));
        assert_eq!(cast_scalar::<bf16, f16>(bf16::MAX), f16::INFINITY);
        assert_eq!(cast_scalar::<bf16, f16>(bf16::from_f32(1e-8)).to_bits(), 0);
        assert!(cast_scalar::<bf16, f16>(bf16::NAN).is_nan());
        assert!(cast_scalar::<f16, bf16>(f16::NAN).is_nan());
        assert!(cast_scalar::<f16, f64>(f16::NAN).is_nan());
        assert_eq!(cast_scalar::<f32, f64>(-0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(cast_scalar::<f64, f16>(-0.0).to_bits(), 0x8000);
        assert_eq!(cast_scalar::<f64, bf16>(-1e-300).to_bits(), 0x8000);
    }

    #[test]
    fn cast_bits_covers_every_pair() {
        let tags = [
            "u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64", "f16", "bf16", "f32", "f64",
        ];
        for s in tags {
            for d in tags {
                for bits in [
                    0u64,
                    1,
                    0x7F,
                    0x80,
                    0xFF,
                    0x7FFF,
                    0x8000,
                    0xFFFF,
                    0x7F80_0001,
                    u64::MAX,
                ] {
                    assert!(cast_bits(s, d, bits).is_some(), "{s} -> {d}");
                }
            }
        }
        assert_eq!(cast_bits("f32", "u8", 300.5f32.to_bits() as u64), Some(255));
        assert_eq!(cast_bits("i8", "i64", 0xFF), Some(u64::MAX));
        assert_eq!(cast_bits("u8", "u8", 0x1FF), Some(0xFF));
        assert_eq!(cast_bits("f8", "u8", 0), None);
        assert!(is_nan_bits("bf16", 0x7FC0));
        assert!(!is_nan_bits("u16", 0x7FC0));
    }
}
