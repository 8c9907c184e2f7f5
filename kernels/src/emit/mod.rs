//! The PTX generator: expands the templates in `templates/` into one PTX module per
//! [`Kernel`], for every element size (fill, copy) and ordered pair of element types (cast).
//!
//! Template syntax: `{{KEY}}` is replaced by a value computed here. Every key used by a
//! template must be supplied, and every supplied key must be used. `{{args.FIELD}}` is the
//! byte offset of `FIELD` in the kernel's argument block and `{{args.SIZE}}` the block's size,
//! both taken from the [`ParamBlock`] of [`crate::abi`], as are the offsets the generated code
//! reads parameters at.

use std::fmt::Write as _;
use std::mem::{offset_of, size_of};

use crate::abi::{
    self, CONTIG_BLOCK, DType, FILL_GROUPS_PER_THREAD, FastDiv64, Kernel, Kind, MAX_BATCH_RANK,
    MAX_RANK, MAX_ROW_OUTER, ParamBlock, ROW_BLOCK, ROW_SCALAR_UNROLL, RowArgs, STRIDED_BLOCK,
    STRIDED_ELEMS_PER_THREAD, StridedArgs32, StridedArgs64, TRANSPOSE_BLOCK, TRANSPOSE_TILE,
    TransposeArgs,
};

mod permute;
#[cfg(test)]
mod tests;
mod tiled;

const PTX_VERSION: &str = "7.0";
const PTX_TARGET: &str = "sm_52";

/// Consecutive groups of 16 bytes written per thread and iteration by `fill_contig`.
const FILL_GROUPS: u64 = FILL_GROUPS_PER_THREAD as u64;
/// Elements per thread and iteration in the strided kernels.
const STRIDED_PER_THREAD: u64 = STRIDED_ELEMS_PER_THREAD as u64;
const TILE: u64 = TRANSPOSE_TILE as u64;
const TILE_PITCH: u64 = TILE + 1;
/// Rows of a transpose tile that a block moves per pass: its block's height.
const TILE_ROWS_PER_PASS: u64 = TRANSPOSE_BLOCK.1 as u64;

/// Units (16 bytes of the wider side) per lane and iteration in the row kernels.
fn row_units_per_lane(s: Ty, d: Ty) -> u64 {
    abi::row_units_per_lane(s.size as usize, d.size as usize)
}

/// Scalar elements per lane and iteration in the row kernels.
const ROW_UNROLL: u64 = ROW_SCALAR_UNROLL as u64;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Num {
    Uint,
    Sint,
    F16,
    Bf16,
    F32,
    F64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Ty {
    tag: &'static str,
    kind: Num,
    size: u64,
}

const fn ty(tag: &'static str, kind: Num, size: u64) -> Ty {
    Ty { tag, kind, size }
}

/// The register-level description of element type `t`.
fn elem_ty(t: DType) -> Ty {
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
fn bits_ty(size: u64) -> Ty {
    match size {
        1 => ty("b1", Num::Uint, 1),
        2 => ty("b2", Num::Uint, 2),
        4 => ty("b4", Num::Uint, 4),
        8 => ty("b8", Num::Uint, 8),
        _ => unreachable!(),
    }
}

impl Ty {
    fn signed(self) -> bool {
        self.kind == Num::Sint
    }

    /// Register class holding one element of this type.
    ///
    /// Integers of at most 32 bits are kept zero- or sign-extended to 32 bits
    /// when they are conversion inputs; conversion outputs only need correct
    /// low bits, because they are only stored.
    fn class(self) -> Class {
        match self.kind {
            Num::Uint | Num::Sint if self.size == 8 => Class::B64,
            Num::Uint | Num::Sint => Class::B32,
            Num::F16 | Num::Bf16 => Class::B16,
            Num::F32 => Class::F32,
            Num::F64 => Class::F64,
        }
    }

    /// Type suffix of a scalar load (extends narrow integers into 32 bits).
    fn ld_suffix(self) -> &'static str {
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
    fn st_suffix(self) -> &'static str {
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
    fn cvt_int_src(self) -> &'static str {
        match (self.signed(), self.size) {
            (false, 8) => "u64",
            (true, 8) => "s64",
            (false, _) => "u32",
            (true, _) => "s32",
        }
    }

    /// Integer type name of a `cvt` destination of exactly this width.
    fn cvt_int_dst(self) -> &'static str {
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

fn log2(x: u64) -> u32 {
    assert!(x.is_power_of_two());
    x.trailing_zeros()
}

/// Elements per vector group of a contiguous kernel.
fn group_elems(s: Ty, d: Ty) -> u64 {
    abi::contig_group_elems(s.size as usize, d.size as usize) as u64
}

/// Ratio of the larger to the smaller element size.
fn size_ratio(s: Ty, d: Ty) -> u64 {
    s.size.max(d.size) / s.size.min(d.size)
}

/// Groups per thread and iteration of a contiguous copy or cast kernel.
fn contig_groups_per_thread(s: Ty, d: Ty) -> u64 {
    u64::from(abi::contig_groups_per_thread(
        s.size as usize,
        d.size as usize,
    ))
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    Pred,
    B16,
    B32,
    B64,
    F32,
    F64,
}

const CLASSES: [Class; 6] = [
    Class::Pred,
    Class::B16,
    Class::B32,
    Class::B64,
    Class::F32,
    Class::F64,
];

impl Class {
    fn decl(self) -> &'static str {
        match self {
            Class::Pred => ".pred",
            Class::B16 => ".b16",
            Class::B32 => ".b32",
            Class::B64 => ".b64",
            Class::F32 => ".f32",
            Class::F64 => ".f64",
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            Class::Pred => "%vp",
            Class::B16 => "%vh",
            Class::B32 => "%vr",
            Class::B64 => "%vd",
            Class::F32 => "%vf",
            Class::F64 => "%vg",
        }
    }
}

/// Straight-line PTX emitter with a virtual register allocator.
#[derive(Default)]
struct Gen {
    next: [u32; 6],
}

/// One generated code fragment.
#[derive(Default)]
struct Code(String);

impl Code {
    fn line(&mut self, s: impl AsRef<str>) {
        self.0.push('\t');
        self.0.push_str(s.as_ref());
        self.0.push('\n');
    }

    fn label(&mut self, s: &str) {
        self.0.push_str(s);
        self.0.push_str(":\n");
    }

    fn text(self) -> String {
        self.0.trim_end_matches('\n').to_string()
    }
}

impl Gen {
    fn reg(&mut self, c: Class) -> String {
        let i = CLASSES.iter().position(|&x| x == c).unwrap();
        let n = self.next[i];
        self.next[i] += 1;
        format!("{}{}", c.prefix(), n)
    }

    fn decls(&self) -> String {
        let mut s = String::new();
        for (i, c) in CLASSES.iter().enumerate() {
            if self.next[i] > 0 {
                writeln!(s, "\t.reg {} {}<{}>;", c.decl(), c.prefix(), self.next[i]).unwrap();
            }
        }
        s.trim_end_matches('\n').to_string()
    }
}

fn pfx(pred: Option<&str>) -> String {
    pred.map(|p| format!("@{p} ")).unwrap_or_default()
}

fn addr(base: &str, off: u64) -> String {
    if off == 0 {
        format!("[{base}]")
    } else {
        format!("[{base}+{off}]")
    }
}

// ---------------------------------------------------------------------------
// Element conversions
// ---------------------------------------------------------------------------

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
fn convert(g: &mut Gen, c: &mut Code, s: Ty, d: Ty, x: &str) -> String {
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

// ---------------------------------------------------------------------------
// Loads and stores
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Space {
    GlobalNc,
    Global,
    Shared,
}

impl Space {
    fn ld(self) -> &'static str {
        match self {
            Space::GlobalNc => "ld.global.nc",
            Space::Global => "ld.global",
            Space::Shared => "ld.shared",
        }
    }

    fn st(self) -> &'static str {
        match self {
            Space::GlobalNc | Space::Global => "st.global",
            Space::Shared => "st.shared",
        }
    }
}

fn load_scalar(
    g: &mut Gen,
    c: &mut Code,
    t: Ty,
    sp: Space,
    at: &str,
    pred: Option<&str>,
) -> String {
    let r = g.reg(t.class());
    c.line(format!(
        "{}{}.{} {r}, {at};",
        pfx(pred),
        sp.ld(),
        t.ld_suffix()
    ));
    r
}

fn store_scalar(c: &mut Code, t: Ty, sp: Space, at: &str, v: &str, pred: Option<&str>) {
    c.line(format!(
        "{}{}.{} {at}, {v};",
        pfx(pred),
        sp.st(),
        t.st_suffix()
    ));
}

/// Loads `count` consecutive elements of `t` (2, 4, 8 or 16 bytes in all,
/// aligned to that size) with one vector load and unpacks them into element
/// registers.
fn load_vec(
    g: &mut Gen,
    c: &mut Code,
    t: Ty,
    count: u64,
    at: &str,
    pred: Option<&str>,
) -> Vec<String> {
    let p = pfx(pred);
    let bytes = count * t.size;
    assert!(matches!(bytes, 2 | 4 | 8 | 16));
    let vec = |n: u64| match n {
        1 => String::new(),
        n => format!(".v{n}"),
    };
    if t.size >= 4 {
        let r: Vec<String> = (0..count).map(|_| g.reg(t.class())).collect();
        let vt = match (t.kind, t.size) {
            (Num::F64, _) => "f64",
            (Num::F32, _) => "f32",
            (_, 8) => "u64",
            _ => "u32",
        };
        let regs = if count == 1 {
            r[0].clone()
        } else {
            format!("{{{}}}", r.join(", "))
        };
        c.line(format!("{p}ld.global.nc{}.{vt} {regs}, {at};", vec(count)));
        return r;
    }
    if bytes == 2 {
        let w = g.reg(Class::B32);
        c.line(format!("{p}ld.global.nc.u16 {w}, {at};"));
        let mut e = unpack_word(g, c, t, &w);
        e.truncate(count as usize);
        return e;
    }
    let nw = bytes / 4;
    let w: Vec<String> = (0..nw).map(|_| g.reg(Class::B32)).collect();
    let regs = if nw == 1 {
        w[0].clone()
    } else {
        format!("{{{}}}", w.join(", "))
    };
    c.line(format!("{p}ld.global.nc{}.u32 {regs}, {at};", vec(nw)));
    let mut out = Vec::with_capacity(count as usize);
    for w in &w {
        out.extend(unpack_word(g, c, t, w));
    }
    out
}

fn unpack_word(g: &mut Gen, c: &mut Code, t: Ty, w: &str) -> Vec<String> {
    match (t.kind, t.size) {
        (Num::F16 | Num::Bf16, _) => {
            let a = g.reg(Class::B16);
            let b = g.reg(Class::B16);
            c.line(format!("mov.b32 {{{a}, {b}}}, {w};"));
            vec![a, b]
        }
        (Num::Uint, 2) => {
            let a = g.reg(Class::B32);
            let b = g.reg(Class::B32);
            c.line(format!("and.b32 {a}, {w}, 65535;"));
            c.line(format!("shr.u32 {b}, {w}, 16;"));
            vec![a, b]
        }
        (Num::Sint, 2) => {
            let a = g.reg(Class::B32);
            let b = g.reg(Class::B32);
            c.line(format!("bfe.s32 {a}, {w}, 0, 16;"));
            c.line(format!("shr.s32 {b}, {w}, 16;"));
            vec![a, b]
        }
        (Num::Uint, 1) => {
            let r: Vec<String> = (0..4).map(|_| g.reg(Class::B32)).collect();
            c.line(format!("and.b32 {}, {w}, 255;", r[0]));
            c.line(format!("bfe.u32 {}, {w}, 8, 8;", r[1]));
            c.line(format!("bfe.u32 {}, {w}, 16, 8;", r[2]));
            c.line(format!("shr.u32 {}, {w}, 24;", r[3]));
            r
        }
        (Num::Sint, 1) => {
            let r: Vec<String> = (0..4).map(|_| g.reg(Class::B32)).collect();
            c.line(format!("bfe.s32 {}, {w}, 0, 8;", r[0]));
            c.line(format!("bfe.s32 {}, {w}, 8, 8;", r[1]));
            c.line(format!("bfe.s32 {}, {w}, 16, 8;", r[2]));
            c.line(format!("shr.s32 {}, {w}, 24;", r[3]));
            r
        }
        _ => unreachable!(),
    }
}

/// Packs element registers of `t` (2, 4, 8 or 16 bytes in all) and stores
/// them with one vector store.
fn store_vec(
    g: &mut Gen,
    c: &mut Code,
    t: Ty,
    vals: &[String],
    sp: Space,
    at: &str,
    pred: Option<&str>,
) {
    let p = pfx(pred);
    let st = sp.st();
    let count = vals.len() as u64;
    let bytes = count * t.size;
    assert!(matches!(bytes, 2 | 4 | 8 | 16));
    let vec = |n: u64| match n {
        1 => String::new(),
        n => format!(".v{n}"),
    };
    if t.size >= 4 {
        let vt = match (t.kind, t.size) {
            (Num::F64, _) => "f64",
            (Num::F32, _) => "f32",
            (_, 8) => "u64",
            _ => "u32",
        };
        let regs = if count == 1 {
            vals[0].clone()
        } else {
            format!("{{{}}}", vals.join(", "))
        };
        c.line(format!("{p}{st}{}.{vt} {at}, {regs};", vec(count)));
        return;
    }
    if bytes == 2 {
        assert_eq!(t.size, 1);
        let w = g.reg(Class::B32);
        c.line(format!("prmt.b32 {w}, {}, {}, 0x3340;", vals[0], vals[1]));
        c.line(format!("{p}{st}.u16 {at}, {w};"));
        return;
    }
    let per_word = (4 / t.size) as usize;
    let words: Vec<String> = vals
        .chunks(per_word)
        .map(|e| pack_word(g, c, t, e))
        .collect();
    let regs = if words.len() == 1 {
        words[0].clone()
    } else {
        format!("{{{}}}", words.join(", "))
    };
    c.line(format!(
        "{p}{st}{}.u32 {at}, {regs};",
        vec(words.len() as u64)
    ));
}

fn pack_word(g: &mut Gen, c: &mut Code, t: Ty, e: &[String]) -> String {
    let w = g.reg(Class::B32);
    match (t.kind, t.size) {
        (Num::F16 | Num::Bf16, _) => {
            c.line(format!("mov.b32 {w}, {{{}, {}}};", e[0], e[1]));
        }
        (_, 2) => {
            c.line(format!("prmt.b32 {w}, {}, {}, 0x5410;", e[0], e[1]));
        }
        (_, 1) => {
            let lo = g.reg(Class::B32);
            let hi = g.reg(Class::B32);
            c.line(format!("prmt.b32 {lo}, {}, {}, 0x3340;", e[0], e[1]));
            c.line(format!("prmt.b32 {hi}, {}, {}, 0x3340;", e[2], e[3]));
            c.line(format!("prmt.b32 {w}, {lo}, {hi}, 0x5410;"));
        }
        _ => unreachable!(),
    }
    w
}

// ---------------------------------------------------------------------------
// Index decomposition for the strided and transpose kernels
// ---------------------------------------------------------------------------

/// Parameter layout of one argument block with per-axis arrays.
struct Layout {
    /// Index width in bits (32 or 64).
    width: u32,
    /// Number of axes in the argument arrays.
    axes: usize,
    shape: fn(usize) -> u64,
    magic: fn(usize) -> u64,
    shift: fn(usize) -> u64,
    dst_stride: fn(usize) -> u64,
    src_stride: fn(usize) -> u64,
    /// Name of the `.param` holding the block.
    param: &'static str,
}

/// Byte offset of element `k` of an array of `T` at byte offset `base`.
const fn at<T>(base: usize, k: usize) -> u64 {
    (base + k * size_of::<T>()) as u64
}

/// Byte offset of the magic number of element `k` of an array of [`FastDiv64`] at `base`.
const fn magic_at(base: usize, k: usize) -> u64 {
    at::<FastDiv64>(base, k) + offset_of!(FastDiv64, magic) as u64
}

/// Byte offset of the shift of element `k` of an array of [`FastDiv64`] at `base`.
const fn shift_at(base: usize, k: usize) -> u64 {
    at::<FastDiv64>(base, k) + offset_of!(FastDiv64, shift) as u64
}

/// The axes of [`StridedArgs64`].
const STRIDED64: Layout = Layout {
    width: 64,
    axes: MAX_RANK,
    shape: |k| at::<u64>(offset_of!(StridedArgs64, shape), k),
    magic: |k| magic_at(offset_of!(StridedArgs64, div), k),
    shift: |k| shift_at(offset_of!(StridedArgs64, div), k),
    dst_stride: |k| at::<i64>(offset_of!(StridedArgs64, dst_strides), k),
    src_stride: |k| at::<i64>(offset_of!(StridedArgs64, src_strides), k),
    param: "p_args",
};

/// The axes of [`StridedArgs32`].
const STRIDED32: Layout = Layout {
    width: 32,
    axes: MAX_RANK,
    shape: |k| at::<u32>(offset_of!(StridedArgs32, shape), k),
    magic: |k| at::<u32>(offset_of!(StridedArgs32, magic), k),
    shift: |k| at::<u32>(offset_of!(StridedArgs32, shift), k),
    dst_stride: |k| at::<i32>(offset_of!(StridedArgs32, dst_strides), k),
    src_stride: |k| at::<i32>(offset_of!(StridedArgs32, src_strides), k),
    param: "p_args",
};

/// The batch axes of [`TransposeArgs`].
const TRANSPOSE_BATCH: Layout = Layout {
    width: 64,
    axes: MAX_BATCH_RANK,
    shape: |k| at::<u64>(offset_of!(TransposeArgs, batch_shape), k),
    magic: |k| magic_at(offset_of!(TransposeArgs, batch_div), k),
    shift: |k| shift_at(offset_of!(TransposeArgs, batch_div), k),
    dst_stride: |k| at::<i64>(offset_of!(TransposeArgs, batch_dst_strides), k),
    src_stride: |k| at::<i64>(offset_of!(TransposeArgs, batch_src_strides), k),
    param: "p_args",
};

/// The outer axes of [`RowArgs`].
const ROWS_OUTER: Layout = Layout {
    width: 64,
    axes: MAX_ROW_OUTER,
    shape: |k| at::<u64>(offset_of!(RowArgs, shape), k),
    magic: |k| magic_at(offset_of!(RowArgs, div), k),
    shift: |k| shift_at(offset_of!(RowArgs, div), k),
    dst_stride: |k| at::<i64>(offset_of!(RowArgs, dst_strides), k),
    src_stride: |k| at::<i64>(offset_of!(RowArgs, src_strides), k),
    param: "p_args",
};

impl Layout {
    fn idx_class(&self) -> Class {
        if self.width == 64 {
            Class::B64
        } else {
            Class::B32
        }
    }

    fn u(&self) -> String {
        format!("u{}", self.width)
    }

    fn s(&self) -> String {
        format!("s{}", self.width)
    }

    fn b(&self) -> String {
        format!("b{}", self.width)
    }

    /// Selects the strides of the outermost axis (`rank - 1`) into the
    /// registers `last_d` (and `last_s`).
    fn last_axis(&self, g: &mut Gen, c: &mut Code, rank: &str, last_d: &str, last_s: Option<&str>) {
        let cls = self.idx_class();
        let (s, b, param) = (self.s(), self.b(), self.param);
        c.line(format!(
            "ld.param.{s} {last_d}, [{param}+{}];",
            (self.dst_stride)(0)
        ));
        if let Some(ls) = last_s {
            c.line(format!(
                "ld.param.{s} {ls}, [{param}+{}];",
                (self.src_stride)(0)
            ));
        }
        for k in 1..self.axes {
            let p = g.reg(Class::Pred);
            c.line(format!("setp.eq.u32 {p}, {rank}, {};", k + 1));
            let t = g.reg(cls);
            c.line(format!(
                "ld.param.{s} {t}, [{param}+{}];",
                (self.dst_stride)(k)
            ));
            c.line(format!("selp.{b} {last_d}, {t}, {last_d}, {p};"));
            if let Some(ls) = last_s {
                let t = g.reg(cls);
                c.line(format!(
                    "ld.param.{s} {t}, [{param}+{}];",
                    (self.src_stride)(k)
                ));
                c.line(format!("selp.{b} {ls}, {t}, {ls}, {p};"));
            }
        }
    }

    /// Decomposes the linear indices `xs` over the axes (axis 0 fastest) and
    /// accumulates element offsets into `doffs` (and `soffs`), which must be
    /// initialised. `xs` are clobbered. Branches on the uniform `rank`.
    #[allow(clippy::too_many_arguments)]
    fn decompose(
        &self,
        g: &mut Gen,
        c: &mut Code,
        rank: &str,
        xs: &[String],
        doffs: &[String],
        soffs: Option<&[String]>,
        last_d: &str,
        last_s: Option<&str>,
        fin: &str,
    ) {
        let cls = self.idx_class();
        let (u, s, param) = (self.u(), self.s(), self.param);
        let p = g.reg(Class::Pred);
        for k in 0..self.axes - 1 {
            c.line(format!("setp.eq.u32 {p}, {rank}, {};", k + 1));
            c.line(format!("@{p} bra.uni {fin};"));
            let shape = g.reg(cls);
            let magic = g.reg(cls);
            let shift = g.reg(Class::B32);
            let ds = g.reg(cls);
            c.line(format!(
                "ld.param.{u} {shape}, [{param}+{}];",
                (self.shape)(k)
            ));
            c.line(format!(
                "ld.param.{u} {magic}, [{param}+{}];",
                (self.magic)(k)
            ));
            c.line(format!(
                "ld.param.u32 {shift}, [{param}+{}];",
                (self.shift)(k)
            ));
            c.line(format!(
                "ld.param.{s} {ds}, [{param}+{}];",
                (self.dst_stride)(k)
            ));
            let ss = soffs.map(|_| {
                let ss = g.reg(cls);
                c.line(format!(
                    "ld.param.{s} {ss}, [{param}+{}];",
                    (self.src_stride)(k)
                ));
                ss
            });
            for (j, x) in xs.iter().enumerate() {
                let t = g.reg(cls);
                let q = g.reg(cls);
                let cc = g.reg(cls);
                c.line(format!("mul.hi.{u} {t}, {x}, {magic};"));
                c.line(format!("add.{u} {t}, {t}, {x};"));
                c.line(format!("shr.{u} {q}, {t}, {shift};"));
                c.line(format!("mul.lo.{u} {t}, {q}, {shape};"));
                c.line(format!("sub.{u} {cc}, {x}, {t};"));
                c.line(format!("mad.lo.{s} {0}, {cc}, {ds}, {0};", doffs[j]));
                if let (Some(so), Some(ss)) = (soffs, ss.as_ref()) {
                    c.line(format!("mad.lo.{s} {0}, {cc}, {ss}, {0};", so[j]));
                }
                c.line(format!("mov.{} {x}, {q};", self.b()));
            }
        }
        c.label(fin);
        for (j, x) in xs.iter().enumerate() {
            c.line(format!("mad.lo.{s} {0}, {x}, {last_d}, {0};", doffs[j]));
            if let (Some(so), Some(ls)) = (soffs, last_s) {
                c.line(format!("mad.lo.{s} {0}, {x}, {ls}, {0};", so[j]));
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Templates
// ---------------------------------------------------------------------------

/// An argument block as templates see it: its fields and its size in bytes.
type Block = (&'static [abi::Field], usize);

const fn block<T: ParamBlock>() -> Option<Block> {
    Some((T::FIELDS, size_of::<T>()))
}

/// Every template: its file name in `templates/`, its text and the argument block its
/// `{{args.FIELD}}` keys refer to.
const TEMPLATES: [(&str, &str, Option<Block>); 12] = [
    (
        "header.ptx",
        include_str!("../../templates/header.ptx"),
        None,
    ),
    (
        "contig.ptx",
        include_str!("../../templates/contig.ptx"),
        None,
    ),
    (
        "contig_widen.ptx",
        include_str!("../../templates/contig_widen.ptx"),
        None,
    ),
    (
        "fill_contig.ptx",
        include_str!("../../templates/fill_contig.ptx"),
        None,
    ),
    (
        "strided32.ptx",
        include_str!("../../templates/strided32.ptx"),
        block::<StridedArgs32>(),
    ),
    (
        "strided64.ptx",
        include_str!("../../templates/strided64.ptx"),
        block::<StridedArgs64>(),
    ),
    (
        "transpose.ptx",
        include_str!("../../templates/transpose.ptx"),
        block::<TransposeArgs>(),
    ),
    (
        "transpose_packed.ptx",
        include_str!("../../templates/transpose_packed.ptx"),
        None,
    ),
    (
        "rows.ptx",
        include_str!("../../templates/rows.ptx"),
        block::<RowArgs>(),
    ),
    (
        "permute.ptx",
        include_str!("../../templates/permute.ptx"),
        block::<abi::PermuteArgs>(),
    ),
    (
        "tiled.ptx",
        include_str!("../../templates/tiled.ptx"),
        block::<abi::TiledArgs>(),
    ),
    (
        "stridedn.ptx",
        include_str!("../../templates/stridedn.ptx"),
        block::<abi::StridedArgsN>(),
    ),
];

/// The templates, expanded on request.
struct Templates;

impl Templates {
    /// Template `name` with its `{{args.FIELD}}` and `{{args.SIZE}}` keys replaced.
    fn get(&self, name: &str) -> String {
        let &(_, text, _) = TEMPLATES
            .iter()
            .find(|t| t.0 == name)
            .unwrap_or_else(|| panic!("no template {name}"));
        self.render_text(name, text)
    }

    /// `text` of template `name` with its `{{args.FIELD}}` and `{{args.SIZE}}` keys replaced.
    fn render_text(&self, name: &str, text: &str) -> String {
        let &(_, _, block) = TEMPLATES
            .iter()
            .find(|t| t.0 == name)
            .unwrap_or_else(|| panic!("no template {name}"));
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(pos) = rest.find("{{args.") {
            out.push_str(&rest[..pos]);
            let after = &rest[pos + "{{args.".len()..];
            let end = after
                .find("}}")
                .unwrap_or_else(|| panic!("template {name}: unclosed {{{{args."));
            let key = &after[..end];
            let (fields, size) =
                block.unwrap_or_else(|| panic!("template {name} has no argument block"));
            let value = if key == "SIZE" {
                size
            } else {
                fields
                    .iter()
                    .find(|f| f.name == key)
                    .unwrap_or_else(|| panic!("template {name}: no field {key}"))
                    .offset
            };
            write!(out, "{value}").unwrap();
            rest = &after[end + 2..];
        }
        out.push_str(rest);
        out
    }

    fn render(&mut self, name: &str, vars: &[(&str, String)]) -> String {
        let mut text = self.get(name);
        for (k, v) in vars {
            let key = format!("{{{{{k}}}}}");
            assert!(
                text.contains(&key),
                "template {name} does not use {{{{{k}}}}}"
            );
            text = text.replace(&key, v);
        }
        if let Some(pos) = text.find("{{") {
            let end = text[pos..].find("}}").map_or(text.len(), |e| pos + e + 2);
            panic!("template {name}: no value for {}", &text[pos..end]);
        }
        text
    }
}

/// The element operation of a kernel.
#[derive(Clone, Copy)]
enum Op {
    /// Store a constant of `size` bytes.
    Fill(Ty),
    /// Copy bit patterns (`s == d`) or convert `s` to `d`.
    Cast(Ty, Ty),
}

// --- contiguous ---

fn contig_kernel(t: &mut Templates, name: &str, s: Ty, d: Ty) -> String {
    const BLOCK: u64 = CONTIG_BLOCK as u64;
    let v = group_elems(s, d);
    let r = size_ratio(s, d);
    // A unit is the elements of one 16-byte piece of the wider side; the
    // narrower side of a unit is 16 / r bytes. Consecutive threads take
    // consecutive units, so every vector access of a warp is contiguous.
    let unit = 16 / s.size.max(d.size);
    if d.size > s.size {
        return contig_widen_kernel(t, name, s, d);
    }
    let units_per_thread = contig_groups_per_thread(s, d) * r;
    let mut g = Gen::default();

    let mut scalar = Code::default();
    let x = load_scalar(&mut g, &mut scalar, s, Space::GlobalNc, "[%sa]", None);
    let y = convert(&mut g, &mut scalar, s, d, &x);
    store_scalar(&mut scalar, d, Space::Global, "[%da]", &y, None);

    let mut body = Code::default();
    let preds: Vec<Option<String>> = (0..units_per_thread)
        .map(|j| {
            (j > 0).then(|| {
                let p = g.reg(Class::Pred);
                body.line(format!("setp.gt.u64 {p}, %left, {};", j * BLOCK));
                p
            })
        })
        .collect();
    let src_step = BLOCK * unit * s.size;
    let dst_step = BLOCK * unit * d.size;
    let loaded: Vec<Vec<String>> = (0..units_per_thread)
        .map(|j| {
            let at = addr("%gs", j * src_step);
            if s == d {
                let w: Vec<String> = (0..4).map(|_| g.reg(Class::B32)).collect();
                body.line(format!(
                    "{}ld.global.nc.v4.u32 {{{}}}, {at};",
                    pfx(preds[j as usize].as_deref()),
                    w.join(", ")
                ));
                w
            } else {
                load_vec(
                    &mut g,
                    &mut body,
                    s,
                    unit,
                    &at,
                    preds[j as usize].as_deref(),
                )
            }
        })
        .collect();
    for (j, vals) in loaded.iter().enumerate() {
        let at = addr("%gd", j as u64 * dst_step);
        let p = preds[j].as_deref();
        if s == d {
            body.line(format!(
                "{}st.global.v4.u32 {at}, {{{}}};",
                pfx(p),
                vals.join(", ")
            ));
        } else {
            let conv: Vec<String> = vals
                .iter()
                .map(|x| convert(&mut g, &mut body, s, d, x))
                .collect();
            store_vec(&mut g, &mut body, d, &conv, Space::Global, &at, p);
        }
    }

    t.render(
        "contig.ptx",
        &[
            ("NAME", name.to_string()),
            ("DECLS", g.decls()),
            ("LOG2_V", log2(v).to_string()),
            ("V_MASK", (v - 1).to_string()),
            ("LOG2_R", log2(r).to_string()),
            ("BLOCK", BLOCK.to_string()),
            ("SRC_SHIFT", log2(s.size).to_string()),
            ("DST_SHIFT", log2(d.size).to_string()),
            ("SRC_UNIT_SHIFT", log2(unit * s.size).to_string()),
            ("DST_UNIT_SHIFT", log2(unit * d.size).to_string()),
            (
                "UNITS_PER_BLOCK_ITER",
                (BLOCK * units_per_thread).to_string(),
            ),
            ("SCALAR", scalar.text()),
            ("UNIT_BODY", body.text()),
        ],
    )
}

/// Contiguous cast to a wider type: each thread loads whole 16-byte groups
/// of the source, the converted groups pass through shared memory (16-byte
/// slots, XOR-swizzled against bank conflicts), and the block then writes
/// them out as consecutive 16-byte pieces, one per thread and instruction.
fn contig_widen_kernel(t: &mut Templates, name: &str, s: Ty, d: Ty) -> String {
    const BLOCK: u64 = CONTIG_BLOCK as u64;
    let v = group_elems(s, d);
    let r = size_ratio(s, d);
    let gpt = contig_groups_per_thread(s, d);
    let per_chunk = (16 / d.size) as usize;
    let mut g = Gen::default();

    let mut scalar = Code::default();
    let x = load_scalar(&mut g, &mut scalar, s, Space::GlobalNc, "[%sa]", None);
    let y = convert(&mut g, &mut scalar, s, d, &x);
    store_scalar(&mut scalar, d, Space::Global, "[%da]", &y, None);

    let mut slots = Code::default();
    let sw: Vec<String> = (0..r)
        .map(|k| {
            let x = g.reg(Class::B32);
            let y = g.reg(Class::B32);
            let p = g.reg(Class::B32);
            slots.line(format!("mad.lo.u32 {x}, %thr, {r}, {k};"));
            slots.line(format!("shr.u32 {y}, {x}, 3;"));
            slots.line(format!("and.b32 {y}, {y}, 7;"));
            slots.line(format!("xor.b32 {p}, {x}, {y};"));
            slots.line(format!("mad.lo.u32 {p}, {p}, 16, %stage;"));
            p
        })
        .collect();

    let mut stage = Code::default();
    let loaded: Vec<Vec<String>> = (0..gpt)
        .map(|j| {
            let p = g.reg(Class::Pred);
            stage.line(format!(
                "setp.lt.u64 {p}, %thr{}, %left;",
                if j == 0 {
                    "64".to_string()
                } else {
                    format!("_{j}")
                }
            ));
            load_vec(
                &mut g,
                &mut stage,
                s,
                v,
                &addr("%gs", j * BLOCK * 16),
                Some(&p),
            )
        })
        .collect();
    for (j, vals) in loaded.iter().enumerate() {
        let conv: Vec<String> = vals
            .iter()
            .map(|x| convert(&mut g, &mut stage, s, d, x))
            .collect();
        for (k, chunk) in conv.chunks(per_chunk).enumerate() {
            let at = addr(&sw[k], j as u64 * BLOCK * r * 16);
            store_vec(&mut g, &mut stage, d, chunk, Space::Shared, &at, None);
        }
    }

    let mut out = Code::default();
    for m in 0..gpt * r {
        let p = g.reg(Class::Pred);
        let c = g.reg(Class::B64);
        out.line(format!("add.u64 {c}, %thr64, {};", m * BLOCK));
        out.line(format!("setp.lt.u64 {p}, {c}, %nchunks;"));
        let w: Vec<String> = (0..4).map(|_| g.reg(Class::B32)).collect();
        out.line(format!(
            "ld.shared.v4.u32 {{{}}}, {};",
            w.join(", "),
            addr("%sr", m * BLOCK * 16)
        ));
        out.line(format!(
            "@{p} st.global.v4.u32 {}, {{{}}};",
            addr("%gd", m * BLOCK * 16),
            w.join(", ")
        ));
    }

    let mut thr_extra = Code::default();
    for j in 1..gpt {
        thr_extra.line(format!("add.u64 %thr_{j}, %thr64, {};", j * BLOCK));
    }
    let thr_regs: String = (1..gpt).map(|j| format!(", %thr_{j}")).collect();

    t.render(
        "contig_widen.ptx",
        &[
            ("NAME", name.to_string()),
            ("STAGE_BYTES", (BLOCK * gpt * r * 16).to_string()),
            ("DECLS", g.decls()),
            ("THR_REGS", thr_regs),
            ("LOG2_V", log2(v).to_string()),
            ("V_MASK", (v - 1).to_string()),
            ("LOG2_R", log2(r).to_string()),
            ("BLOCK", BLOCK.to_string()),
            ("SRC_SHIFT", log2(s.size).to_string()),
            ("DST_SHIFT", log2(d.size).to_string()),
            ("DST_GROUP_SHIFT", log2(v * d.size).to_string()),
            ("GROUPS_PER_BLOCK_ITER", (BLOCK * gpt).to_string()),
            ("SCALAR", scalar.text()),
            ("SLOTS", slots.text()),
            ("THR_EXTRA", thr_extra.text()),
            ("STAGE", stage.text()),
            ("WRITE_OUT", out.text()),
        ],
    )
}

fn fill_contig_kernel(t: &mut Templates, name: &str, e: Ty) -> String {
    const BLOCK: u64 = CONTIG_BLOCK as u64;
    let v = 16 / e.size;
    let mut g = Gen::default();
    let mut pattern = Code::default();
    let (val, vec_ty, vec_regs) = match e.size {
        1 => {
            pattern.line("cvt.u32.u64 %val, %value;");
            pattern.line("and.b32 %val, %val, 255;");
            pattern.line("mul.lo.u32 %word, %val, 16843009;");
            ("%val", "v4.u32", "{%word, %word, %word, %word}")
        }
        2 => {
            pattern.line("cvt.u32.u64 %val, %value;");
            pattern.line("and.b32 %val, %val, 65535;");
            pattern.line("mul.lo.u32 %word, %val, 65537;");
            ("%val", "v4.u32", "{%word, %word, %word, %word}")
        }
        4 => {
            pattern.line("cvt.u32.u64 %val, %value;");
            pattern.line("mov.b32 %word, %val;");
            ("%val", "v4.u32", "{%word, %word, %word, %word}")
        }
        8 => ("%value", "v2.u64", "{%value, %value}"),
        _ => unreachable!(),
    };
    let mut scalar = Code::default();
    store_scalar(&mut scalar, e, Space::Global, "[%da]", val, None);

    let mut body = Code::default();
    for j in 0..FILL_GROUPS {
        let p = (j > 0).then(|| {
            let p = g.reg(Class::Pred);
            body.line(format!("setp.gt.u64 {p}, %left, {};", j * BLOCK));
            p
        });
        body.line(format!(
            "{}st.global.{vec_ty} {}, {vec_regs};",
            pfx(p.as_deref()),
            addr("%gd", j * BLOCK * 16)
        ));
    }

    t.render(
        "fill_contig.ptx",
        &[
            ("NAME", name.to_string()),
            ("DECLS", g.decls()),
            ("PATTERN", pattern.text()),
            ("LOG2_V", log2(v).to_string()),
            ("V_MASK", (v - 1).to_string()),
            ("BLOCK", BLOCK.to_string()),
            ("DST_SHIFT", log2(e.size).to_string()),
            ("GROUPS_PER_BLOCK_ITER", (BLOCK * FILL_GROUPS).to_string()),
            ("SCALAR", scalar.text()),
            ("GROUP_BODY", body.text()),
        ],
    )
}

// --- strided ---

fn strided_kernel(t: &mut Templates, name: &str, op: Op, lay: &Layout) -> String {
    const BLOCK: u64 = STRIDED_BLOCK as u64;
    let mut g = Gen::default();
    let cls = lay.idx_class();
    let (u, b) = (lay.u(), lay.b());
    // The source type, of copies and casts.
    let s = match op {
        Op::Fill(_) => None,
        Op::Cast(s, _) => Some(s),
    };

    let mut prologue = Code::default();
    let extra_params;
    let fill_val = match op {
        Op::Fill(e) => {
            extra_params = ",\n\t.param .u64 p_value".to_string();
            prologue.line("ld.param.u64 %value, [p_value];");
            if e.size == 8 {
                Some("%value".to_string())
            } else {
                let r = g.reg(Class::B32);
                prologue.line(format!("cvt.u32.u64 {r}, %value;"));
                Some(r)
            }
        }
        Op::Cast(..) => {
            extra_params = String::new();
            None
        }
    };
    lay.last_axis(&mut g, &mut prologue, "%rank", "%lds", s.map(|_| "%lss"));

    let mut body = Code::default();
    let j_n = STRIDED_PER_THREAD as usize;
    let preds: Vec<Option<String>> = (0..j_n)
        .map(|j| {
            (j > 0).then(|| {
                let p = g.reg(Class::Pred);
                body.line(format!("setp.gt.{u} {p}, %left, {};", j as u64 * BLOCK));
                p
            })
        })
        .collect();
    let xs: Vec<String> = (0..j_n)
        .map(|j| {
            let x = g.reg(cls);
            body.line(format!("add.{u} {x}, %i, {};", j as u64 * BLOCK));
            x
        })
        .collect();
    let zero_offs = |g: &mut Gen, body: &mut Code| -> Vec<String> {
        (0..j_n)
            .map(|_| {
                let o = g.reg(cls);
                body.line(format!("mov.{b} {o}, 0;"));
                o
            })
            .collect()
    };
    let doffs = zero_offs(&mut g, &mut body);
    let soffs = s.map(|_| zero_offs(&mut g, &mut body));
    lay.decompose(
        &mut g,
        &mut body,
        "%rank",
        &xs,
        &doffs,
        soffs.as_deref(),
        "%lds",
        s.map(|_| "%lss"),
        "$FIN",
    );
    strided_moves(
        &mut g,
        &mut body,
        op,
        fill_val.as_deref(),
        &doffs,
        soffs.as_deref(),
        &preds,
        lay.width,
    );

    let template = if lay.width == 64 {
        "strided64.ptx"
    } else {
        "strided32.ptx"
    };
    t.render(
        template,
        &[
            ("NAME", name.to_string()),
            ("EXTRA_PARAMS", extra_params),
            ("DECLS", g.decls()),
            ("PROLOGUE", prologue.text()),
            ("BLOCK", BLOCK.to_string()),
            ("PER_BLOCK", (BLOCK * STRIDED_PER_THREAD).to_string()),
            ("BODY", body.text()),
        ],
    )
}

/// The per-element part of a strided kernel's iteration: for each element, the destination
/// address from its offset in `doffs` (elements, `width`-bit registers: 32-bit offsets are
/// scaled with `mad.wide.s32`, 64-bit ones shifted and added), then the fill value `fill_val`
/// or the element loaded from the source at `soffs` and converted, stored under `preds`.
#[allow(clippy::too_many_arguments)]
fn strided_moves(
    g: &mut Gen,
    body: &mut Code,
    op: Op,
    fill_val: Option<&str>,
    doffs: &[String],
    soffs: Option<&[String]>,
    preds: &[Option<String>],
    width: u32,
) {
    let d = match op {
        Op::Fill(e) => e,
        Op::Cast(_, d) => d,
    };
    let address = |g: &mut Gen, body: &mut Code, base: &str, off: &str, size: u64| -> String {
        let a = g.reg(Class::B64);
        if width == 64 {
            let t = g.reg(Class::B64);
            body.line(format!("shl.b64 {t}, {off}, {};", log2(size)));
            body.line(format!("add.s64 {a}, {base}, {t};"));
        } else {
            body.line(format!("mad.wide.s32 {a}, {off}, {size}, {base};"));
        }
        a
    };
    let j_n = doffs.len();
    let daddrs: Vec<String> = doffs
        .iter()
        .map(|o| address(g, body, "%dst", o, d.size))
        .collect();
    let values: Vec<String> = match (op, soffs) {
        (Op::Fill(_), _) => vec![fill_val.expect("a fill value").to_string(); j_n],
        (Op::Cast(s, d), Some(soffs)) => {
            let saddrs: Vec<String> = soffs
                .iter()
                .map(|o| address(g, body, "%src", o, s.size))
                .collect();
            let loaded: Vec<String> = (0..j_n)
                .map(|j| {
                    load_scalar(
                        g,
                        body,
                        s,
                        Space::GlobalNc,
                        &addr(&saddrs[j], 0),
                        preds[j].as_deref(),
                    )
                })
                .collect();
            loaded.iter().map(|x| convert(g, body, s, d, x)).collect()
        }
        _ => unreachable!(),
    };
    for j in 0..j_n {
        store_scalar(
            body,
            d,
            Space::Global,
            &addr(&daddrs[j], 0),
            &values[j],
            preds[j].as_deref(),
        );
    }
}

// --- transpose ---

/// Splits `%bz` over the batch axes into `%boffd` / `%boffs` (labels get
/// `prefix`).
fn batch_offsets(g: &mut Gen, prefix: &str) -> String {
    let lay = &TRANSPOSE_BATCH;
    let mut batch = Code::default();
    let x = g.reg(Class::B64);
    batch.line(format!("mov.b64 {x}, %bz;"));
    let p = g.reg(Class::Pred);
    batch.line(format!("setp.eq.u32 {p}, %rank, 0;"));
    batch.line(format!("@{p} bra.uni ${prefix}BATCH_OFFSET_DONE;"));
    lay.decompose(
        g,
        &mut batch,
        "%rank",
        &[x],
        &["%boffd".to_string()],
        Some(&["%boffs".to_string()]),
        "%lds",
        Some("%lss"),
        &format!("${prefix}BATCH_FIN"),
    );
    batch.label(&format!("${prefix}BATCH_OFFSET_DONE"));
    batch.text()
}

/// Transposes the P x P block of elements held in `w` (word k holds P
/// elements of column k); returns words holding the rows.
fn transpose_words(g: &mut Gen, c: &mut Code, size: u64, w: &[String]) -> Vec<String> {
    if size == 2 {
        let x0 = g.reg(Class::B32);
        let x1 = g.reg(Class::B32);
        c.line(format!("prmt.b32 {x0}, {}, {}, 0x5410;", w[0], w[1]));
        c.line(format!("prmt.b32 {x1}, {}, {}, 0x7632;", w[0], w[1]));
        return vec![x0, x1];
    }
    let t: Vec<String> = (0..4).map(|_| g.reg(Class::B32)).collect();
    c.line(format!("prmt.b32 {}, {}, {}, 0x5140;", t[0], w[0], w[1]));
    c.line(format!("prmt.b32 {}, {}, {}, 0x5140;", t[1], w[2], w[3]));
    c.line(format!("prmt.b32 {}, {}, {}, 0x7362;", t[2], w[0], w[1]));
    c.line(format!("prmt.b32 {}, {}, {}, 0x7362;", t[3], w[2], w[3]));
    let x: Vec<String> = (0..4).map(|_| g.reg(Class::B32)).collect();
    c.line(format!("prmt.b32 {}, {}, {}, 0x5410;", x[0], t[0], t[1]));
    c.line(format!("prmt.b32 {}, {}, {}, 0x7632;", x[1], t[0], t[1]));
    c.line(format!("prmt.b32 {}, {}, {}, 0x5410;", x[2], t[2], t[3]));
    c.line(format!("prmt.b32 {}, {}, {}, 0x7632;", x[3], t[2], t[3]));
    x
}

/// Registers used by the packed transpose path.
const PACKED_DECLS: &str =
    "\t.reg .b32 %ptrow;\n\t.reg .b64 %prt, %pct, %pscs, %pdrs, %prr, %pcc, %psp, %pdp;";

/// The packed path of a transpose between equal 1- or 2-byte types (full
/// tiles only, so no bounds checks).
fn packed_transpose(t: &mut Templates, g: &mut Gen, s: Ty, d: Ty) -> String {
    let size = s.size;
    let p = 4 / size;
    let tile = TILE * p;
    let lay = &TRANSPOSE_BATCH;

    let mut chk = Code::default();
    let a = g.reg(Class::B64);
    let m = g.reg(Class::B64);
    chk.line(format!("or.b64 {a}, %dst, %src;"));
    chk.line(format!("and.b64 {a}, {a}, 3;"));
    chk.line(format!("or.b64 {m}, %scs, %drs;"));
    for k in 0..lay.axes {
        for off in [(lay.dst_stride)(k), (lay.src_stride)(k)] {
            let x = g.reg(Class::B64);
            chk.line(format!("ld.param.s64 {x}, [p_args+{off}];"));
            chk.line(format!("or.b64 {m}, {m}, {x};"));
        }
    }
    chk.line(format!("and.b64 {m}, {m}, {};", p - 1));
    chk.line(format!("or.b64 {a}, {a}, {m};"));
    let pc = g.reg(Class::Pred);
    chk.line(format!("setp.ne.u64 {pc}, {a}, 0;"));
    chk.line(format!("@{pc} bra.uni $SCALAR_PATH;"));

    // Read phase: word (i, k) holds rows prr..prr+P of column
    // c0 + P*(ty + 8i) + k, at %psp + (8Pi + k) * %pscs. Passes are issued
    // in chunks (loads of a chunk before its shared stores).
    let mut rd = Code::default();
    let passes = TILE / TILE_ROWS_PER_PASS;
    let chunk = if p == 4 { 2 } else { passes };
    for h in 0..passes / chunk {
        let mut words = Vec::new();
        for i in h * chunk..(h + 1) * chunk {
            let row: Vec<String> = (0..p)
                .map(|k| {
                    let at = g.reg(Class::B64);
                    let w = g.reg(Class::B32);
                    rd.line(format!(
                        "mad.lo.s64 {at}, %pscs, {}, %psp;",
                        TILE_ROWS_PER_PASS * p * i + k
                    ));
                    rd.line(format!("ld.global.nc.u32 {w}, [{at}];"));
                    w
                })
                .collect();
            words.push((i, row));
        }
        for (i, row) in words {
            let conv: Vec<String> = row
                .iter()
                .map(|w| {
                    if s == d {
                        w.clone()
                    } else {
                        let e = unpack_word(g, &mut rd, s, w);
                        let y: Vec<String> =
                            e.iter().map(|x| convert(g, &mut rd, s, d, x)).collect();
                        pack_word(g, &mut rd, d, &y)
                    }
                })
                .collect();
            let x = transpose_words(g, &mut rd, size, &conv);
            let col = g.reg(Class::B32);
            let sa = g.reg(Class::B32);
            rd.line(format!("add.u32 {col}, %ty, {};", TILE_ROWS_PER_PASS * i));
            rd.line(format!("xor.b32 {col}, {col}, %tx;"));
            rd.line(format!("mad.lo.u32 {sa}, {col}, 4, %ptrow;"));
            for (q, xq) in x.iter().enumerate() {
                rd.line(format!(
                    "st.shared.u32 {}, {xq};",
                    addr(&sa, q as u64 * 128)
                ));
            }
        }
    }

    // Write phase: T / 8 rows per thread, one word each: row r0 + ty + 8i,
    // columns pcc..pcc+P, at %pdp + 8i * %pdrs.
    let mut wr = Code::default();
    for i in 0..tile / TILE_ROWS_PER_PASS {
        let y = g.reg(Class::B32);
        let z = g.reg(Class::B32);
        let sa = g.reg(Class::B32);
        let v = g.reg(Class::B32);
        let at = g.reg(Class::B64);
        wr.line(format!("add.u32 {y}, %ty, {};", TILE_ROWS_PER_PASS * i));
        wr.line(format!("shr.u32 {z}, {y}, {};", log2(p)));
        wr.line(format!("xor.b32 {z}, {z}, %tx;"));
        wr.line(format!("mad.lo.u32 {y}, {y}, 32, {z};"));
        wr.line(format!("mad.lo.u32 {sa}, {y}, 4, %u32tile;"));
        wr.line(format!("ld.shared.u32 {v}, [{sa}];"));
        wr.line(format!(
            "mad.lo.s64 {at}, %pdrs, {}, %pdp;",
            TILE_ROWS_PER_PASS * i
        ));
        wr.line(format!("st.global.u32 [{at}], {v};"));
    }

    let batch = batch_offsets(g, "P_");
    t.render(
        "transpose_packed.ptx",
        &[
            ("T", tile.to_string()),
            ("P", p.to_string()),
            ("CHECK", chk.text()),
            ("LOG2_T", log2(tile).to_string()),
            ("SIZE_SHIFT", log2(size).to_string()),
            ("ROW_BYTES_PER_TX", (p * 128).to_string()),
            ("BATCH_OFFSETS", batch),
            ("READ", rd.text()),
            ("WRITE", wr.text()),
        ],
    )
}

/// Whether the transpose kernel for `s -> d` has the packed path.
fn transpose_packed(s: Ty, d: Ty) -> bool {
    s.size == d.size && s.size <= 2
}

fn transpose_kernel(t: &mut Templates, name: &str, s: Ty, d: Ty) -> String {
    let lay = &TRANSPOSE_BATCH;
    let mut g = Gen::default();
    let mut prologue = Code::default();
    lay.last_axis(&mut g, &mut prologue, "%rank", "%lds", Some("%lss"));

    let batch = batch_offsets(&mut g, "");

    let rows = (TILE / TILE_ROWS_PER_PASS) as usize;
    let mut read = Code::default();
    let loaded: Vec<String> = (0..rows)
        .map(|j| {
            load_scalar(
                &mut g,
                &mut read,
                s,
                Space::GlobalNc,
                &format!("[%sp{j}]"),
                Some(&format!("%pr{j}")),
            )
        })
        .collect();
    for (j, x) in loaded.iter().enumerate() {
        let y = convert(&mut g, &mut read, s, d, x);
        let off = j as u64 * TILE_ROWS_PER_PASS * TILE_PITCH * d.size;
        store_scalar(&mut read, d, Space::Shared, &addr("%tsw", off), &y, None);
    }

    let mut write = Code::default();
    let vals: Vec<String> = (0..rows)
        .map(|j| {
            let off = j as u64 * TILE_ROWS_PER_PASS * d.size;
            load_scalar(
                &mut g,
                &mut write,
                d,
                Space::Shared,
                &addr("%tsr", off),
                None,
            )
        })
        .collect();
    for (j, v) in vals.iter().enumerate() {
        store_scalar(
            &mut write,
            d,
            Space::Global,
            &format!("[%dp{j}]"),
            v,
            Some(&format!("%pw{j}")),
        );
    }

    let mut tile_bytes = TILE * TILE_PITCH * d.size;
    let (packed_decls, packed) = if transpose_packed(s, d) {
        let p = 4 / s.size;
        tile_bytes = tile_bytes.max(TILE * p * 32 * 4);
        (PACKED_DECLS.to_string(), packed_transpose(t, &mut g, s, d))
    } else {
        (String::new(), String::new())
    };

    t.render(
        "transpose.ptx",
        &[
            ("NAME", name.to_string()),
            ("TILE_BYTES", tile_bytes.to_string()),
            ("PACKED_DECLS", packed_decls),
            ("DECLS", g.decls()),
            ("PROLOGUE", prologue.text()),
            ("DSIZE", d.size.to_string()),
            ("SRC_SHIFT", log2(s.size).to_string()),
            ("DST_SHIFT", log2(d.size).to_string()),
            (
                "SRC_STEP_SHIFT",
                (log2(s.size) + log2(TILE_ROWS_PER_PASS)).to_string(),
            ),
            (
                "DST_STEP_SHIFT",
                (log2(d.size) + log2(TILE_ROWS_PER_PASS)).to_string(),
            ),
            ("PACKED_PATH", packed),
            ("BATCH_OFFSETS", batch),
            ("READ", read.text()),
            ("WRITE", write.text()),
        ],
    )
}

// --- rows ---

/// Row copy/cast: rows contiguous on both sides, a team of lanes per row,
/// units of 16 bytes of the wider side (as in the contiguous kernels, but
/// with the team size known only at run time).
fn row_kernel(t: &mut Templates, name: &str, s: Ty, d: Ty) -> String {
    const BLOCK: u64 = ROW_BLOCK as u64;
    let lay = &ROWS_OUTER;
    let v = group_elems(s, d);
    let r = size_ratio(s, d);
    let unit = 16 / s.size.max(d.size);
    let mut g = Gen::default();

    let mut prologue = Code::default();
    lay.last_axis(&mut g, &mut prologue, "%rank", "%lds", Some("%lss"));

    let mut offsets = Code::default();
    lay.decompose(
        &mut g,
        &mut offsets,
        "%rank",
        &["%x".to_string()],
        &["%od".to_string()],
        Some(&["%os".to_string()]),
        "%lds",
        Some("%lss"),
        "$ROW_FIN",
    );

    // Scalar elements %j + k * %sstride for k < ROW_UNROLL: loads
    // first, then conversions and stores.
    let mut scalar = Code::default();
    let mut pending = Vec::new();
    let mut jk = "%j".to_string();
    for k in 0..ROW_UNROLL {
        let pred = if k == 0 {
            None
        } else {
            let next = g.reg(Class::B64);
            scalar.line(format!("add.u64 {next}, {jk}, %sstride;"));
            jk = next;
            let p = g.reg(Class::Pred);
            scalar.line(format!("setp.lt.u64 {p}, {jk}, %nscalar;"));
            Some(p)
        };
        let ph = g.reg(Class::Pred);
        let e = g.reg(Class::B64);
        let tmp = g.reg(Class::B64);
        let sa = g.reg(Class::B64);
        let da = g.reg(Class::B64);
        scalar.line(format!("setp.lt.u64 {ph}, {jk}, %head;"));
        scalar.line(format!("add.u64 {e}, {jk}, %tailoff;"));
        scalar.line(format!("selp.b64 {e}, {jk}, {e}, {ph};"));
        scalar.line(format!("shl.b64 {tmp}, {e}, {};", log2(s.size)));
        scalar.line(format!("add.s64 {sa}, %sr, {tmp};"));
        scalar.line(format!("shl.b64 {tmp}, {e}, {};", log2(d.size)));
        scalar.line(format!("add.s64 {da}, %dr, {tmp};"));
        let x = load_scalar(
            &mut g,
            &mut scalar,
            s,
            Space::GlobalNc,
            &addr(&sa, 0),
            pred.as_deref(),
        );
        pending.push((x, da, pred));
    }
    for (x, da, pred) in pending {
        let y = convert(&mut g, &mut scalar, s, d, &x);
        store_scalar(
            &mut scalar,
            d,
            Space::Global,
            &addr(&da, 0),
            &y,
            pred.as_deref(),
        );
    }

    // Units %g + j * team for j < units: unit j exists if %left > j * team,
    // that is if (%left - 1) >> tshift >= j.
    let units = row_units_per_lane(s, d);
    let mut body = Code::default();
    let mut preds: Vec<Option<String>> = vec![None];
    if units > 1 {
        let q = g.reg(Class::B64);
        body.line(format!("sub.u64 {q}, %left, 1;"));
        body.line(format!("shr.u64 {q}, {q}, %tshift;"));
        for j in 1..units {
            let p = g.reg(Class::Pred);
            body.line(format!("setp.ge.u64 {p}, {q}, {j};"));
            preds.push(Some(p));
        }
    }
    let mut saddrs = vec!["%gs".to_string()];
    let mut daddrs = vec!["%gd".to_string()];
    for _ in 1..units {
        let a = g.reg(Class::B64);
        body.line(format!("add.s64 {a}, {}, %sstep;", saddrs.last().unwrap()));
        saddrs.push(a);
        let a = g.reg(Class::B64);
        body.line(format!("add.s64 {a}, {}, %dstep;", daddrs.last().unwrap()));
        daddrs.push(a);
    }
    let loaded: Vec<Vec<String>> = (0..units as usize)
        .map(|j| {
            let at = addr(&saddrs[j], 0);
            if s == d {
                let w: Vec<String> = (0..4).map(|_| g.reg(Class::B32)).collect();
                body.line(format!(
                    "{}ld.global.nc.v4.u32 {{{}}}, {at};",
                    pfx(preds[j].as_deref()),
                    w.join(", ")
                ));
                w
            } else {
                load_vec(&mut g, &mut body, s, unit, &at, preds[j].as_deref())
            }
        })
        .collect();
    for (j, vals) in loaded.iter().enumerate() {
        let at = addr(&daddrs[j], 0);
        let p = preds[j].as_deref();
        if s == d {
            body.line(format!(
                "{}st.global.v4.u32 {at}, {{{}}};",
                pfx(p),
                vals.join(", ")
            ));
        } else {
            let conv: Vec<String> = vals
                .iter()
                .map(|x| convert(&mut g, &mut body, s, d, x))
                .collect();
            store_vec(&mut g, &mut body, d, &conv, Space::Global, &at, p);
        }
    }

    let (narrow, narrow_size, other, other_size) = if d.size <= s.size {
        ("%dr", d.size, "%sr", s.size)
    } else {
        ("%sr", s.size, "%dr", d.size)
    };
    t.render(
        "rows.ptx",
        &[
            ("NAME", name.to_string()),
            ("BLOCK", BLOCK.to_string()),
            ("LOG2_BLOCK", log2(BLOCK).to_string()),
            ("UNROLL", ROW_UNROLL.to_string()),
            ("LOG2_UNROLL", log2(ROW_UNROLL).to_string()),
            ("DECLS", g.decls()),
            ("PROLOGUE", prologue.text()),
            ("OFFSETS", offsets.text()),
            ("LOG2_V", log2(v).to_string()),
            ("V_MASK", (v - 1).to_string()),
            ("LOG2_R", log2(r).to_string()),
            ("UNITS", units.to_string()),
            ("LOG2_UNITS", log2(units).to_string()),
            ("SRC_SHIFT", log2(s.size).to_string()),
            ("DST_SHIFT", log2(d.size).to_string()),
            ("SRC_UNIT_SHIFT", log2(unit * s.size).to_string()),
            ("DST_UNIT_SHIFT", log2(unit * d.size).to_string()),
            ("NARROW", narrow.to_string()),
            ("NARROW_SHIFT", log2(narrow_size).to_string()),
            ("OTHER", other.to_string()),
            ("OTHER_SHIFT", log2(other_size).to_string()),
            ("SCALAR", scalar.text()),
            ("UNIT_BODY", body.text()),
        ],
    )
}

// ---------------------------------------------------------------------------
// Modules
// ---------------------------------------------------------------------------

fn module(t: &mut Templates, kernels: Vec<String>) -> String {
    let header = t.render(
        "header.ptx",
        &[
            ("VERSION", PTX_VERSION.to_string()),
            ("TARGET", PTX_TARGET.to_string()),
        ],
    );
    let mut out = header.trim_end().to_string();
    out.push('\n');
    for k in kernels {
        out.push('\n');
        out.push_str(k.trim_end());
        out.push('\n');
    }
    out
}

/// Every module as `(name, PTX text)`, sorted by name: one per [`Kernel`] of
/// [`Kernel::all`], named [`Kernel::module_name`] like the one kernel it holds. A module holds
/// a single kernel so that the driver's JIT compiles only the kernels a process uses:
/// compiling a module costs time in proportion to all the code in it.
pub fn modules() -> Vec<(String, String)> {
    let mut mods: Vec<(String, String)> = Kernel::all()
        .into_iter()
        .map(|k| (k.module_name(), module_ptx(k)))
        .collect();
    mods.sort_by(|a, b| a.0.cmp(&b.0));
    mods
}

/// The PTX module of kernel `k`: the header and the kernel.
pub fn module_ptx(k: Kernel) -> String {
    let mut t = Templates;
    let text = kernel(&mut t, k);
    module(&mut t, vec![text])
}

/// The PTX text of kernel `k`, its entry point named [`Kernel::module_name`].
fn kernel(t: &mut Templates, k: Kernel) -> String {
    let name = k.module_name();
    match k {
        Kernel::Fill { kind, size } => {
            let e = bits_ty(size as u64);
            match kind {
                Kind::Contig => fill_contig_kernel(t, &name, e),
                Kind::Strided32 => strided_kernel(t, &name, Op::Fill(e), &STRIDED32),
                Kind::Strided64 => strided_kernel(t, &name, Op::Fill(e), &STRIDED64),
                Kind::StridedN => tiled::stridedn_kernel(t, &name, Op::Fill(e)),
                _ => panic!("no fill kernel {name}"),
            }
        }
        Kernel::Copy { kind, size } => match kind.wide() {
            Some(w) => {
                let by = u64::from(w.block.1);
                permute::permute_wide_kernel(t, &name, w.vectors, (w.tile, by))
            }
            None => {
                let e = bits_ty(size as u64);
                elementwise(t, &name, k, e, e)
            }
        },
        Kernel::Cast { from, to, .. } => elementwise(t, &name, k, elem_ty(from), elem_ty(to)),
    }
}

/// The copy or cast kernel `k` (not a wide one) from `s` to `d`.
fn elementwise(t: &mut Templates, name: &str, k: Kernel, s: Ty, d: Ty) -> String {
    let tile = || {
        let tt = k.kind().permute_tile().expect("a permute kind");
        (tt, u64::from(k.block().1))
    };
    match k.kind() {
        Kind::Contig => contig_kernel(t, name, s, d),
        Kind::Strided32 => strided_kernel(t, name, Op::Cast(s, d), &STRIDED32),
        Kind::Strided64 => strided_kernel(t, name, Op::Cast(s, d), &STRIDED64),
        Kind::Transpose => transpose_kernel(t, name, s, d),
        Kind::Rows => row_kernel(t, name, s, d),
        Kind::Permute | Kind::Permute32 => permute::permute_kernel(t, name, s, d, tile()),
        Kind::PermutePacked | Kind::PermutePacked128 => {
            permute::permute_packed_kernel(t, name, s, tile())
        }
        Kind::PermuteVec => permute::permute_vec_kernel(t, name, tile()),
        Kind::Tiled => tiled::tiled_kernel(t, name, s, d, true),
        Kind::TiledE => tiled::tiled_kernel(t, name, s, d, false),
        Kind::StridedN => tiled::stridedn_kernel(t, name, Op::Cast(s, d)),
        Kind::PermuteW16 | Kind::PermuteW32 | Kind::PermuteW64 => {
            unreachable!("the wide kernels are copies of runs")
        }
    }
}
