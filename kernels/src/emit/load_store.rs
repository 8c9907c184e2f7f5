//! Loads and stores: scalar and vector accesses to global and shared memory, and the packing
//! of 1- and 2-byte elements into and out of 32-bit words.

use super::code::{Class, Code, Gen, pfx};
use super::types::{Num, Ty};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Space {
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

pub(super) fn load_scalar(
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

pub(super) fn store_scalar(c: &mut Code, t: Ty, sp: Space, at: &str, v: &str, pred: Option<&str>) {
    c.line(format!(
        "{}{}.{} {at}, {v};",
        pfx(pred),
        sp.st(),
        t.st_suffix()
    ));
}

/// The vector suffix (empty for one register, else `.vN`) and the register operand (`%r`, or
/// `{%a, %b, ...}`) of one access of the registers `regs`.
pub(super) fn vector_operand(regs: &[String]) -> (String, String) {
    match regs {
        [one] => (String::new(), one.clone()),
        _ => (
            format!(".v{}", regs.len()),
            format!("{{{}}}", regs.join(", ")),
        ),
    }
}

/// Loads `count` consecutive elements of `t` (2, 4, 8 or 16 bytes in all,
/// aligned to that size) with one vector load and unpacks them into element
/// registers.
pub(super) fn load_vec(
    g: &mut Gen,
    c: &mut Code,
    t: Ty,
    count: u64,
    at: &str,
    pred: Option<&str>,
) -> Vec<String> {
    let bytes = count * t.size;
    assert!(matches!(bytes, 2 | 4 | 8 | 16));
    if t.size >= 4 {
        let r: Vec<String> = (0..count).map(|_| g.reg(t.class())).collect();
        let vt = match (t.kind, t.size) {
            (Num::F64, _) => "f64",
            (Num::F32, _) => "f32",
            (_, 8) => "u64",
            _ => "u32",
        };
        let (v, regs) = vector_operand(&r);
        c.line(format!("{}ld.global.nc{v}.{vt} {regs}, {at};", pfx(pred)));
        return r;
    }
    let w = load_vec_words(g, c, t, count, at, pred);
    unpack_words(g, c, t, count, &w)
}

/// The load of [`load_vec`] for elements of `t` under 4 bytes, without the unpacking: the
/// 32-bit word registers that hold the `count` elements (2, 4, 8 or 16 bytes in all; 2 bytes
/// load into the low half of one word). [`unpack_words`] gives the elements, where the code
/// places it: a kernel that unpacks only where it uses the elements keeps the load in flight
/// until then.
pub(super) fn load_vec_words(
    g: &mut Gen,
    c: &mut Code,
    t: Ty,
    count: u64,
    at: &str,
    pred: Option<&str>,
) -> Vec<String> {
    let p = pfx(pred);
    let bytes = count * t.size;
    assert!(t.size < 4 && matches!(bytes, 2 | 4 | 8 | 16));
    if bytes == 2 {
        let w = g.reg(Class::B32);
        c.line(format!("{p}ld.global.nc.u16 {w}, {at};"));
        return vec![w];
    }
    let w: Vec<String> = (0..bytes / 4).map(|_| g.reg(Class::B32)).collect();
    let (v, regs) = vector_operand(&w);
    c.line(format!("{p}ld.global.nc{v}.u32 {regs}, {at};"));
    w
}

/// The `count` elements of `t` (under 4 bytes) held in the words `w` of [`load_vec_words`].
pub(super) fn unpack_words(
    g: &mut Gen,
    c: &mut Code,
    t: Ty,
    count: u64,
    w: &[String],
) -> Vec<String> {
    let mut out = Vec::with_capacity(count as usize);
    for w in w {
        out.extend(unpack_word(g, c, t, w));
    }
    out.truncate(count as usize);
    out
}

pub(super) fn unpack_word(g: &mut Gen, c: &mut Code, t: Ty, w: &str) -> Vec<String> {
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
pub(super) fn store_vec(
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
    if t.size >= 4 {
        let vt = match (t.kind, t.size) {
            (Num::F64, _) => "f64",
            (Num::F32, _) => "f32",
            (_, 8) => "u64",
            _ => "u32",
        };
        let (v, regs) = vector_operand(vals);
        c.line(format!("{p}{st}{v}.{vt} {at}, {regs};"));
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
    let (v, regs) = vector_operand(&words);
    c.line(format!("{p}{st}{v}.u32 {at}, {regs};"));
}

pub(super) fn pack_word(g: &mut Gen, c: &mut Code, t: Ty, e: &[String]) -> String {
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
