//! The strided kernels (`*_strided32_*`, `*_strided64_*`) and their per-element moves, which
//! the rank-generic strided kernels share.

use super::Op;
use super::code::{Class, Code, Gen, addr};
use super::convert::convert;
use super::layout::Layout;
use super::load_store::{Space, load_scalar, store_scalar};
use super::templates::Templates;
use super::types::log2;
use crate::abi::{STRIDED_BLOCK, STRIDED_ELEMS_PER_THREAD};

/// Elements per thread and iteration in the strided kernels.
const STRIDED_PER_THREAD: u64 = STRIDED_ELEMS_PER_THREAD as u64;

pub(super) fn strided_kernel(t: &mut Templates, name: &str, op: Op, lay: &Layout) -> String {
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
    let (extra_params, fill_val) = fill_param(&mut g, &mut prologue, op);
    lay.last_axis(&mut g, &mut prologue, "%rank", "%lds", s.map(|_| "%lss"));

    let mut body = Code::default();
    let (preds, xs) = element_slots(&mut g, &mut body, cls, &u);
    let doffs = zero_offsets(&mut g, &mut body, cls, &b);
    let soffs = s.map(|_| zero_offsets(&mut g, &mut body, cls, &b));
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

/// The fill value's parameter of a fill (`p_value`, loaded in `prologue`) and the register
/// that holds its bits (the low word for elements under 8 bytes); nothing for copies and casts.
pub(super) fn fill_param(g: &mut Gen, prologue: &mut Code, op: Op) -> (String, Option<String>) {
    match op {
        Op::Fill(e) => {
            prologue.line("ld.param.u64 %value, [p_value];");
            let v = if e.size == 8 {
                "%value".to_string()
            } else {
                let r = g.reg(Class::B32);
                prologue.line(format!("cvt.u32.u64 {r}, %value;"));
                r
            };
            (",\n\t.param .u64 p_value".to_string(), Some(v))
        }
        Op::Cast(..) => (String::new(), None),
    }
}

/// A thread's element slots of one iteration: the predicate of slot `j > 0` (`%left > j *
/// block`) and its linear index `%i + j * block`, in registers of class `cls` (type `u`).
pub(super) fn element_slots(
    g: &mut Gen,
    body: &mut Code,
    cls: Class,
    u: &str,
) -> (Vec<Option<String>>, Vec<String>) {
    const BLOCK: u64 = STRIDED_BLOCK as u64;
    let j_n = STRIDED_PER_THREAD as usize;
    let preds = (0..j_n)
        .map(|j| {
            (j > 0).then(|| {
                let p = g.reg(Class::Pred);
                body.line(format!("setp.gt.{u} {p}, %left, {};", j as u64 * BLOCK));
                p
            })
        })
        .collect();
    let xs = (0..j_n)
        .map(|j| {
            let x = g.reg(cls);
            body.line(format!("add.{u} {x}, %i, {};", j as u64 * BLOCK));
            x
        })
        .collect();
    (preds, xs)
}

/// One zeroed offset register per element slot (class `cls`, type `b`).
pub(super) fn zero_offsets(g: &mut Gen, body: &mut Code, cls: Class, b: &str) -> Vec<String> {
    (0..STRIDED_PER_THREAD)
        .map(|_| {
            let o = g.reg(cls);
            body.line(format!("mov.{b} {o}, 0;"));
            o
        })
        .collect()
}

/// The per-element part of a strided kernel's iteration: for each element, the destination
/// address from its offset in `doffs` (elements, `width`-bit registers: 32-bit offsets are
/// scaled with `mad.wide.s32`, 64-bit ones shifted and added), then the fill value `fill_val`
/// or the element loaded from the source at `soffs` and converted, stored under `preds`.
#[allow(clippy::too_many_arguments)]
pub(super) fn strided_moves(
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
