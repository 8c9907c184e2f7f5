//! The rank-generic strided kernels (`fill_stridedn_bN`, `copy_stridedn_bN`,
//! `cast_stridedn_S_D`): any strides and any number of axes up to
//! [`STRIDEDN_MAX_RANK`](crate::abi::STRIDEDN_MAX_RANK), 64-bit index math.

use std::mem::{offset_of, size_of};

use super::Op;
use super::code::{Class, Code, Gen};
use super::strided::{element_slots, fill_param, strided_moves, zero_offsets};
use super::templates::Templates;
use crate::abi::{FastDiv64, STRIDED_BLOCK, STRIDED_ELEMS_PER_THREAD, StridedArgsN, StridedAxis};

/// The rank-generic strided kernel `name` (fill, copy or cast).
pub(super) fn stridedn_kernel(t: &mut Templates, name: &str, op: Op) -> String {
    const BLOCK: u64 = STRIDED_BLOCK as u64;
    const PER_THREAD: u64 = STRIDED_ELEMS_PER_THREAD as u64;
    let mut g = Gen::default();
    // The source type, of copies and casts.
    let s = match op {
        Op::Fill(_) => None,
        Op::Cast(s, _) => Some(s),
    };
    let mut prologue = Code::default();
    let (extra_params, fill_val) = fill_param(&mut g, &mut prologue, op);

    let mut body = Code::default();
    let (preds, xs) = element_slots(&mut g, &mut body, Class::B64, "u64");
    let doffs = zero_offsets(&mut g, &mut body, Class::B64, "b64");
    let soffs = s.map(|_| zero_offsets(&mut g, &mut body, Class::B64, "b64"));
    // Axes 0..rank-1 by division; the last axis takes what is left.
    let axes = offset_of!(StridedArgsN, axes);
    let mut ax = Code::default();
    ax.line(format!(
        "ld.param.u64 %len, [%pa+{}];",
        offset_of!(StridedAxis, len)
    ));
    ax.line(format!(
        "ld.param.u64 %magic, [%pa+{}];",
        offset_of!(StridedAxis, div) + offset_of!(FastDiv64, magic)
    ));
    ax.line(format!(
        "ld.param.u32 %shift, [%pa+{}];",
        offset_of!(StridedAxis, div) + offset_of!(FastDiv64, shift)
    ));
    ax.line(format!(
        "ld.param.s64 %ds, [%pa+{}];",
        offset_of!(StridedAxis, dst)
    ));
    if s.is_some() {
        ax.line(format!(
            "ld.param.s64 %ss, [%pa+{}];",
            offset_of!(StridedAxis, src)
        ));
    }
    for (j, x) in xs.iter().enumerate() {
        let t = g.reg(Class::B64);
        let q = g.reg(Class::B64);
        let c = g.reg(Class::B64);
        ax.line(format!("mul.hi.u64 {t}, {x}, %magic;"));
        ax.line(format!("add.u64 {t}, {t}, {x};"));
        ax.line(format!("shr.u64 {q}, {t}, %shift;"));
        ax.line(format!("mul.lo.u64 {t}, {q}, %len;"));
        ax.line(format!("sub.u64 {c}, {x}, {t};"));
        ax.line(format!("mad.lo.s64 {0}, {c}, %ds, {0};", doffs[j]));
        if let Some(so) = &soffs {
            ax.line(format!("mad.lo.s64 {0}, {c}, %ss, {0};", so[j]));
        }
        ax.line(format!("mov.b64 {x}, {q};"));
    }
    // `%rank - 1` axes in the loop; `%pa` then points at the last axis.
    let last = g.reg(Class::B32);
    body.line(format!("sub.u32 {last}, %rank, 1;"));
    body.line("mov.u64 %pa, p_args;");
    body.line(format!("add.u64 %pa, %pa, {axes};"));
    body.line("mov.u32 %k, 0;");
    body.label("$AX");
    body.line(format!("setp.ge.u32 %pax, %k, {last};"));
    body.line("@%pax bra.uni $AX_END;");
    body.0.push_str(&ax.0);
    body.line(format!("add.u64 %pa, %pa, {};", size_of::<StridedAxis>()));
    body.line("add.u32 %k, %k, 1;");
    body.line("bra.uni $AX;");
    body.label("$AX_END");
    body.line(format!(
        "ld.param.s64 %ds, [%pa+{}];",
        offset_of!(StridedAxis, dst)
    ));
    if s.is_some() {
        body.line(format!(
            "ld.param.s64 %ss, [%pa+{}];",
            offset_of!(StridedAxis, src)
        ));
    }
    for (j, x) in xs.iter().enumerate() {
        body.line(format!("mad.lo.s64 {0}, {x}, %ds, {0};", doffs[j]));
        if let Some(so) = &soffs {
            body.line(format!("mad.lo.s64 {0}, {x}, %ss, {0};", so[j]));
        }
    }
    strided_moves(
        &mut g,
        &mut body,
        op,
        fill_val.as_deref(),
        &doffs,
        soffs.as_deref(),
        &preds,
        64,
    );
    t.render(
        "stridedn.ptx",
        &[
            ("NAME", name.to_string()),
            ("EXTRA_PARAMS", extra_params),
            ("DECLS", g.decls()),
            ("PROLOGUE", prologue.text()),
            ("BLOCK", BLOCK.to_string()),
            ("PER_THREAD", PER_THREAD.to_string()),
            ("PER_BLOCK", (BLOCK * PER_THREAD).to_string()),
            ("BODY", body.text()),
        ],
    )
}
