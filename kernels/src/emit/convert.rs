//! Element conversions: the code that converts one element between any two element types
//! ([`convert`]), with its bf16, round-to-odd and float-to-integer steps.

use super::code::{Class, Code, Gen};
use super::types::{Num, Ty, ty};

/// Widens a bf16 held in a `.b16` register to f32 (exact).
fn bf16_to_f32(g: &mut Gen, c: &mut Code, h: &str) -> String {
    let z = g.reg(Class::B16);
    let w = g.reg(Class::B32);
    let f = g.reg(Class::F32);
    c.line(format!("mov.b16 {z}, 0;"));
    c.line(format!("mov.b32 {w}, {{{z}, {h}}};"));
    c.line(format!("mov.b32 {f}, {w};"));
    f
}

/// Rounds an f32 to bf16 (nearest, ties to even; NaN stays a quiet NaN).
///
/// `exact`: the value is known to be representable (no rounding needed).
/// `maybe_nan`: the value may be a NaN.
fn f32_to_bf16(g: &mut Gen, c: &mut Code, f: &str, exact: bool, maybe_nan: bool) -> String {
    let b = g.reg(Class::B32);
    c.line(format!("mov.b32 {b}, {f};"));
    let word = if exact {
        b
    } else {
        let t0 = g.reg(Class::B32);
        let t1 = g.reg(Class::B32);
        let t2 = g.reg(Class::B32);
        let t3 = g.reg(Class::B32);
        c.line(format!("shr.u32 {t0}, {b}, 16;"));
        c.line(format!("and.b32 {t1}, {t0}, 1;"));
        c.line(format!("add.u32 {t2}, {b}, {t1};"));
        c.line(format!("add.u32 {t3}, {t2}, 32767;"));
        if maybe_nan {
            let p = g.reg(Class::Pred);
            let q = g.reg(Class::B32);
            let r = g.reg(Class::B32);
            c.line(format!("setp.nan.f32 {p}, {f}, {f};"));
            c.line(format!("or.b32 {q}, {b}, 4194304;"));
            c.line(format!("selp.b32 {r}, {q}, {t3}, {p};"));
            r
        } else {
            t3
        }
    };
    let h = g.reg(Class::B16);
    c.line(format!("mov.b32 {{_, {h}}}, {word};"));
    h
}

/// Rounds an f64 to f32 toward zero and marks inexact results by setting
/// the lowest mantissa bit (round to odd), so that a second rounding to a
/// narrower format is correctly rounded.
fn f64_to_f32_odd(g: &mut Gen, c: &mut Code, x: &str) -> String {
    let f = g.reg(Class::F32);
    let y = g.reg(Class::F64);
    let p = g.reg(Class::Pred);
    let b = g.reg(Class::B32);
    let o = g.reg(Class::B32);
    let r = g.reg(Class::B32);
    let out = g.reg(Class::F32);
    c.line(format!("cvt.rz.f32.f64 {f}, {x};"));
    c.line(format!("cvt.f64.f32 {y}, {f};"));
    c.line(format!("setp.neu.f64 {p}, {y}, {x};"));
    c.line(format!("mov.b32 {b}, {f};"));
    c.line(format!("or.b32 {o}, {b}, 1;"));
    c.line(format!("selp.b32 {r}, {o}, {b}, {p};"));
    c.line(format!("mov.b32 {out}, {r};"));
    out
}

/// Float (f32 or f64 register) to integer: truncation toward zero,
/// saturation to the destination range, NaN to zero.
fn float_to_int(g: &mut Gen, c: &mut Code, x: &str, fsrc: &str, d: Ty) -> String {
    let cls = d.class();
    let r = g.reg(cls);
    c.line(format!("cvt.rzi.{}.{fsrc} {r}, {x};", d.cvt_int_dst()));
    if fsrc == "f64" || d.size == 8 {
        let p = g.reg(Class::Pred);
        let out = g.reg(cls);
        let w = if d.size == 8 { 64 } else { 32 };
        c.line(format!("setp.nan.{fsrc} {p}, {x}, {x};"));
        c.line(format!("selp.b{w} {out}, 0, {r}, {p};"));
        out
    } else {
        r
    }
}

/// Emits the conversion of one element `x` (in `s.class()`) to `d`; returns
/// the register holding the result (in `d.class()`).
pub(super) fn convert(g: &mut Gen, c: &mut Code, s: Ty, d: Ty, x: &str) -> String {
    use Num::*;
    if s == d {
        return x.to_string();
    }
    match (s.kind, d.kind) {
        (Uint | Sint, Uint | Sint) => match (s.size == 8, d.size == 8) {
            (true, true) | (false, false) => x.to_string(),
            (true, false) => {
                let r = g.reg(Class::B32);
                c.line(format!("cvt.u32.u64 {r}, {x};"));
                r
            }
            (false, true) => {
                let r = g.reg(Class::B64);
                let t = if s.signed() { "s64.s32" } else { "u64.u32" };
                c.line(format!("cvt.{t} {r}, {x};"));
                r
            }
        },
        (Uint | Sint, F32) => {
            let r = g.reg(Class::F32);
            c.line(format!("cvt.rn.f32.{} {r}, {x};", s.cvt_int_src()));
            r
        }
        (Uint | Sint, F64) => {
            let r = g.reg(Class::F64);
            c.line(format!("cvt.rn.f64.{} {r}, {x};", s.cvt_int_src()));
            r
        }
        (Uint | Sint, F16) => {
            // Integers that f32 cannot hold exactly are >= 2^24 in magnitude
            // and overflow f16 either way, so a direct conversion equals the
            // rounding through f32.
            let r = g.reg(Class::B16);
            c.line(format!("cvt.rn.f16.{} {r}, {x};", s.cvt_int_src()));
            r
        }
        (Uint | Sint, Bf16) => {
            let f = g.reg(Class::F32);
            c.line(format!("cvt.rn.f32.{} {f}, {x};", s.cvt_int_src()));
            f32_to_bf16(g, c, &f, s.size == 1, false)
        }
        (F16, _) | (Bf16, _) => {
            if s.kind == F16 && d.kind == F64 {
                let r = g.reg(Class::F64);
                c.line(format!("cvt.f64.f16 {r}, {x};"));
                return r;
            }
            let f = if s.kind == F16 {
                let f = g.reg(Class::F32);
                c.line(format!("cvt.f32.f16 {f}, {x};"));
                f
            } else {
                bf16_to_f32(g, c, x)
            };
            let f32t = ty("f32", F32, 4);
            convert(g, c, f32t, d, &f)
        }
        (F32, F16) => {
            let r = g.reg(Class::B16);
            c.line(format!("cvt.rn.f16.f32 {r}, {x};"));
            r
        }
        (F32, Bf16) => f32_to_bf16(g, c, x, false, true),
        (F32, F64) => {
            let r = g.reg(Class::F64);
            c.line(format!("cvt.f64.f32 {r}, {x};"));
            r
        }
        (F32, Uint | Sint) => float_to_int(g, c, x, "f32", d),
        (F64, F16) => {
            let r = g.reg(Class::B16);
            c.line(format!("cvt.rn.f16.f64 {r}, {x};"));
            r
        }
        (F64, Bf16) => {
            let f = f64_to_f32_odd(g, c, x);
            f32_to_bf16(g, c, &f, false, true)
        }
        (F64, F32) => {
            let r = g.reg(Class::F32);
            c.line(format!("cvt.rn.f32.f64 {r}, {x};"));
            r
        }
        (F64, Uint | Sint) => float_to_int(g, c, x, "f64", d),
        (F32, F32) | (F64, F64) => unreachable!(),
    }
}
