//! The contiguous kernels: `copy_contig_*` and `cast_contig_*` (casts to a wider type staged
//! through shared memory) and `fill_contig_*`.

use super::code::{Class, Code, Gen, addr, pfx};
use super::convert::convert;
use super::load_store::{Space, load_scalar, load_vec, store_scalar, store_vec};
use super::templates::Templates;
use super::types::{Ty, contig_groups_per_thread, group_elems, log2, size_ratio};
use crate::abi::{CONTIG_BLOCK, FILL_GROUPS_PER_THREAD};

/// Consecutive groups of 16 bytes written per thread and iteration by `fill_contig`.
const FILL_GROUPS: u64 = FILL_GROUPS_PER_THREAD as u64;

pub(super) fn contig_kernel(t: &mut Templates, name: &str, s: Ty, d: Ty) -> String {
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

/// Emits into `code` the fill value's patterns from `value` (a `.b64` register holding the
/// element's bits in its low `e.size` bytes), using the `.b32` registers `val` and `word`
/// (`regs` = `(value, val, word)`); returns the register to store as one element, the vector
/// type of a 16-byte store (`v4.u32` or `v2.u64`) and its operand (the element repeated).
pub(super) fn fill_pattern(
    code: &mut Code,
    e: Ty,
    (value, val, word): (&str, &str, &str),
) -> (String, &'static str, String) {
    let words = format!("{{{word}, {word}, {word}, {word}}}");
    match e.size {
        1 | 2 => {
            let (mask, times) = if e.size == 1 {
                (255, 0x0101_0101)
            } else {
                (65535, 0x0001_0001)
            };
            code.line(format!("cvt.u32.u64 {val}, {value};"));
            code.line(format!("and.b32 {val}, {val}, {mask};"));
            code.line(format!("mul.lo.u32 {word}, {val}, {times};"));
            (val.to_string(), "v4.u32", words)
        }
        4 => {
            code.line(format!("cvt.u32.u64 {val}, {value};"));
            code.line(format!("mov.b32 {word}, {val};"));
            (val.to_string(), "v4.u32", words)
        }
        8 => (value.to_string(), "v2.u64", format!("{{{value}, {value}}}")),
        _ => unreachable!("no element of {} bytes", e.size),
    }
}

pub(super) fn fill_contig_kernel(t: &mut Templates, name: &str, e: Ty) -> String {
    const BLOCK: u64 = CONTIG_BLOCK as u64;
    let v = 16 / e.size;
    let mut g = Gen::default();
    let mut pattern = Code::default();
    let (val, vec_ty, vec_regs) = fill_pattern(&mut pattern, e, ("%value", "%val", "%word"));
    let mut scalar = Code::default();
    store_scalar(&mut scalar, e, Space::Global, "[%da]", &val, None);

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
