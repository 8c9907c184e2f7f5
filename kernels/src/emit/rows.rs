//! The row kernels (`*_rows_*`): rows contiguous on both sides, a team of lanes per row.

use super::code::{Class, Code, Gen, addr, pfx};
use super::contig::fill_pattern;
use super::convert::convert;
use super::layout::ROWS_OUTER;
use super::load_store::{Space, load_scalar, load_vec, store_scalar, store_vec};
use super::narrow::shift_right;
use super::templates::Templates;
use super::types::{Ty, group_elems, log2, size_ratio};
use crate::abi::{self, ROW_BLOCK, ROW_SCALAR_UNROLL, ROW_STAGED_MAX_REGISTERS, RowRuns};

/// Units (16 bytes of the wider side) per lane and iteration in the row kernels.
fn row_units_per_lane(s: Ty, d: Ty) -> u64 {
    abi::row_units_per_lane(s.size as usize, d.size as usize)
}

/// Scalar elements per lane and iteration in the row kernels.
const ROW_UNROLL: u64 = ROW_SCALAR_UNROLL as u64;

/// The row kernels' set-up: the outermost axis's strides (`%lds`, `%lss`), and the split of
/// row `%x` into the offsets `%od` and `%os` of its element zero.
fn row_frame(g: &mut Gen) -> (Code, Code) {
    let lay = &ROWS_OUTER;
    let mut prologue = Code::default();
    lay.last_axis(g, &mut prologue, "%rank", "%lds", Some("%lss"));
    let mut offsets = Code::default();
    lay.decompose(
        g,
        &mut offsets,
        "%rank",
        &["%x".to_string()],
        &["%od".to_string()],
        Some(&["%os".to_string()]),
        "%lds",
        Some("%lss"),
        "$ROW_FIN",
    );
    (prologue, offsets)
}

/// The row kernels' `k`-th scalar element of an iteration, `%j + k * %sstride` (the chain of
/// those sums in `jk`): the register holding its index in the row (`jk` before `%head`, else
/// `jk + %tailoff`), and the predicate of its existence (none for `k = 0`, which the loop
/// checks).
fn scalar_index(g: &mut Gen, code: &mut Code, k: u64, jk: &mut String) -> (String, Option<String>) {
    let pred = if k == 0 {
        None
    } else {
        let next = g.reg(Class::B64);
        code.line(format!("add.u64 {next}, {jk}, %sstride;"));
        *jk = next;
        let p = g.reg(Class::Pred);
        code.line(format!("setp.lt.u64 {p}, {jk}, %nscalar;"));
        Some(p)
    };
    let ph = g.reg(Class::Pred);
    let e = g.reg(Class::B64);
    code.line(format!("setp.lt.u64 {ph}, {jk}, %head;"));
    code.line(format!("add.u64 {e}, {jk}, %tailoff;"));
    code.line(format!("selp.b64 {e}, {jk}, {e}, {ph};"));
    (e, pred)
}

/// The row kernels' scalar elements `%j + k * %sstride` for `k < ROW_UNROLL` (element `k <
/// %head` is element `k`, the others `k + %tailoff`): loads first, then conversions and
/// stores. Element `e` is at `%dr + e` in the destination and at `%sr + e` in the source. For
/// the reversed rows (`runs`, copies only) each scalar element is a run, run `e` at `%dr + run *
/// e` and at `%sr - run * e` (runs read backwards) or `%sr + run * e`, its elements in order
/// or (runs read forwards) reversed.
fn scalar_elements(g: &mut Gen, s: Ty, d: Ty, runs: Option<RowRuns>) -> Code {
    assert!(runs.is_none() || s == d, "reversed rows are copies");
    let run = runs.map_or(1, |r| r.run as u64);
    let backwards = runs.is_some_and(|r| r.backwards);
    let mut scalar = Code::default();
    let mut pending = Vec::new();
    let mut jk = "%j".to_string();
    for k in 0..ROW_UNROLL {
        let (e, pred) = scalar_index(g, &mut scalar, k, &mut jk);
        let tmp = g.reg(Class::B64);
        let sa = g.reg(Class::B64);
        let da = g.reg(Class::B64);
        if run.is_power_of_two() {
            scalar.line(format!("shl.b64 {tmp}, {e}, {};", log2(run * s.size)));
        } else {
            scalar.line(format!("mul.lo.u64 {tmp}, {e}, {};", run * s.size));
        }
        let op = if backwards { "sub" } else { "add" };
        scalar.line(format!("{op}.s64 {sa}, %sr, {tmp};"));
        if runs.is_none() {
            scalar.line(format!("shl.b64 {tmp}, {e}, {};", log2(d.size)));
        }
        scalar.line(format!("add.s64 {da}, %dr, {tmp};"));
        for i in 0..run {
            // Runs read forwards are reversed, runs read backwards are not.
            let from = if runs.is_some() && !backwards {
                run - 1 - i
            } else {
                i
            };
            let x = load_scalar(
                g,
                &mut scalar,
                s,
                Space::GlobalNc,
                &addr(&sa, from * s.size),
                pred.as_deref(),
            );
            pending.push((x, addr(&da, i * d.size), pred.clone()));
        }
    }
    for (x, at, pred) in pending {
        let y = convert(g, &mut scalar, s, d, &x);
        store_scalar(&mut scalar, d, Space::Global, &at, &y, pred.as_deref());
    }
    scalar
}

/// The predicates of a lane's `units` units (or groups) `%g + j * team`: unit `j` exists if
/// `%left > j * team`, that is if `(%left - 1) >> tshift >= j` (none for unit 0).
fn unit_preds(g: &mut Gen, code: &mut Code, units: u64) -> Vec<Option<String>> {
    let mut preds: Vec<Option<String>> = vec![None];
    if units > 1 {
        let q = g.reg(Class::B64);
        code.line(format!("sub.u64 {q}, %left, 1;"));
        code.line(format!("shr.u64 {q}, {q}, %tshift;"));
        for j in 1..units {
            let p = g.reg(Class::Pred);
            code.line(format!("setp.ge.u64 {p}, {q}, {j};"));
            preds.push(Some(p));
        }
    }
    preds
}

/// The source and destination addresses of a lane's `units` units: from `%gs` and `%gd`,
/// `%sstep` further in the source (`add`) or back (`sub`, the reversed rows) and `%dstep`
/// further in the destination per unit.
fn unit_addrs(
    g: &mut Gen,
    code: &mut Code,
    units: u64,
    src_op: &str,
) -> (Vec<String>, Vec<String>) {
    let mut saddrs = vec!["%gs".to_string()];
    let mut daddrs = vec!["%gd".to_string()];
    for _ in 1..units {
        let a = g.reg(Class::B64);
        code.line(format!(
            "{src_op}.s64 {a}, {}, %sstep;",
            saddrs.last().unwrap()
        ));
        saddrs.push(a);
        let a = g.reg(Class::B64);
        code.line(format!("add.s64 {a}, {}, %dstep;", daddrs.last().unwrap()));
        daddrs.push(a);
    }
    (saddrs, daddrs)
}

/// Row copy/cast: rows contiguous on both sides, a team of lanes per row,
/// units of 16 bytes of the wider side (as in the contiguous kernels, but
/// with the team size known only at run time).
pub(super) fn row_kernel(t: &mut Templates, name: &str, s: Ty, d: Ty) -> String {
    let unit = 16 / s.size.max(d.size);
    let mut g = Gen::default();

    let (prologue, offsets) = row_frame(&mut g);
    let scalar = scalar_elements(&mut g, s, d, None);

    // Units %g + j * team for j < units.
    let units = row_units_per_lane(s, d);
    let mut body = Code::default();
    let preds = unit_preds(&mut g, &mut body, units);
    let (saddrs, daddrs) = unit_addrs(&mut g, &mut body, units, "add");
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

    render_rows(
        t,
        name,
        (s, d),
        false,
        &g,
        [prologue, offsets, scalar, body],
    )
}

/// `templates/rows.ptx` for kernel `name` from `s` to `d` (`sd`), with the parts `[prologue,
/// offsets, scalar, body]` emitted with the registers of `g`. A row fill (`fill`) takes the
/// value's parameter `p_value` and finds each row's head from the destination alone (the
/// template's other side is the destination too).
fn render_rows(
    t: &mut Templates,
    name: &str,
    (s, d): (Ty, Ty),
    fill: bool,
    g: &Gen,
    [prologue, offsets, scalar, body]: [Code; 4],
) -> String {
    const BLOCK: u64 = ROW_BLOCK as u64;
    let v = group_elems(s, d);
    let unit = 16 / s.size.max(d.size);
    let units = row_units_per_lane(s, d);
    let (narrow, narrow_size, other, other_size) = if fill {
        ("%dr", d.size, "%dr", d.size)
    } else if d.size <= s.size {
        ("%dr", d.size, "%sr", s.size)
    } else {
        ("%sr", s.size, "%dr", d.size)
    };
    let extra = if fill { ",\n\t.param .u64 p_value" } else { "" };
    t.render(
        "rows.ptx",
        &[
            ("NAME", name.to_string()),
            ("EXTRA_PARAMS", extra.to_string()),
            ("BLOCK", BLOCK.to_string()),
            ("LOG2_BLOCK", log2(BLOCK).to_string()),
            ("UNROLL", ROW_UNROLL.to_string()),
            ("LOG2_UNROLL", log2(ROW_UNROLL).to_string()),
            ("DECLS", g.decls()),
            ("PROLOGUE", prologue.text()),
            ("OFFSETS", offsets.text()),
            ("LOG2_V", log2(v).to_string()),
            ("V_MASK", (v - 1).to_string()),
            ("LOG2_R", log2(size_ratio(s, d)).to_string()),
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

/// Row fill (`fill_rows_bN`): the row copy's frame (`templates/rows.ptx`, a team of lanes per
/// row, 16-byte units from the element where the row reaches a 16-byte boundary, the elements
/// before it and after the last whole unit one at a time) storing the value of `p_value`
/// (the element's bits) into rows contiguous in the destination. The source's fields of the
/// arguments are unused (the frame's source offsets stay 0).
pub(super) fn fill_row_kernel(t: &mut Templates, name: &str, e: Ty) -> String {
    let mut g = Gen::default();

    let lay = &ROWS_OUTER;
    let mut prologue = Code::default();
    lay.last_axis(&mut g, &mut prologue, "%rank", "%lds", None);
    let value = g.reg(Class::B64);
    let (low, word) = (g.reg(Class::B32), g.reg(Class::B32));
    prologue.line(format!("ld.param.u64 {value}, [p_value];"));
    let (val, vec_ty, vec_regs) = fill_pattern(&mut prologue, e, (&value, &low, &word));
    let mut offsets = Code::default();
    lay.decompose(
        &mut g,
        &mut offsets,
        "%rank",
        &["%x".to_string()],
        &["%od".to_string()],
        None,
        "%lds",
        None,
        "$ROW_FIN",
    );

    // Scalar elements `%j + k * %sstride` (k < ROW_UNROLL), at `%dr + e * size`.
    let mut scalar = Code::default();
    let mut jk = "%j".to_string();
    for k in 0..ROW_UNROLL {
        let (el, pred) = scalar_index(&mut g, &mut scalar, k, &mut jk);
        let da = g.reg(Class::B64);
        scalar.line(format!("shl.b64 {da}, {el}, {};", log2(e.size)));
        scalar.line(format!("add.s64 {da}, %dr, {da};"));
        store_scalar(
            &mut scalar,
            e,
            Space::Global,
            &addr(&da, 0),
            &val,
            pred.as_deref(),
        );
    }

    // Units `%g + j * team` (j < units), `%dstep` bytes apart from `%gd`.
    let units = row_units_per_lane(e, e);
    let mut body = Code::default();
    let preds = unit_preds(&mut g, &mut body, units);
    let mut at = "%gd".to_string();
    for (j, p) in preds.iter().enumerate() {
        if j > 0 {
            let a = g.reg(Class::B64);
            body.line(format!("add.s64 {a}, {at}, %dstep;"));
            at = a;
        }
        body.line(format!(
            "{}st.global.{vec_ty} {}, {vec_regs};",
            pfx(p.as_deref()),
            addr(&at, 0)
        ));
    }

    render_rows(t, name, (e, e), true, &g, [prologue, offsets, scalar, body])
}

/// The address `base + offset(e) * size(t)` of row element `e` (a `.b64` register) of a
/// gathered or scattered row ([`row_gather_kernel`]) on its side in periods (`base` the row's
/// `%sr` or `%dr`), and its position inside its period (`.b32`): `p = e / period` by the
/// period's fast division, `k = e - p * period`, offset `p * step + k * stride`.
fn gather_position(g: &mut Gen, c: &mut Code, base: &str, t: Ty, e: &str) -> (String, String) {
    let tmp = g.reg(Class::B64);
    let p = g.reg(Class::B64);
    let k = g.reg(Class::B64);
    let off = g.reg(Class::B64);
    let a = g.reg(Class::B64);
    let k32 = g.reg(Class::B32);
    c.line(format!("mul.hi.u64 {tmp}, {e}, %pmagic;"));
    c.line(format!("add.u64 {tmp}, {tmp}, {e};"));
    c.line(format!("shr.u64 {p}, {tmp}, %pshift;"));
    c.line(format!("mul.lo.u64 {tmp}, {p}, %per;"));
    c.line(format!("sub.u64 {k}, {e}, {tmp};"));
    c.line(format!("cvt.u32.u64 {k32}, {k};"));
    c.line(format!("mul.lo.s64 {off}, {p}, %pstep;"));
    c.line(format!("mad.lo.s64 {off}, {k}, %pstride, {off};"));
    c.line(format!("shl.b64 {off}, {off}, {};", log2(t.size)));
    c.line(format!("add.s64 {a}, {base}, {off};"));
    (a, k32)
}

/// Moves the address `a` of a gathered or scattered row's element at position `k32` of its
/// period to the next element's: `%instep` bytes on inside the period, `%wrapstep` to the next
/// period's element 0 where `k32 + 1` reaches the period.
fn gather_step(g: &mut Gen, c: &mut Code, a: &str, k32: &str) {
    let p = g.reg(Class::Pred);
    let t = g.reg(Class::B64);
    c.line(format!("add.u32 {k32}, {k32}, 1;"));
    c.line(format!("setp.eq.u32 {p}, {k32}, %per32;"));
    c.line(format!("selp.b64 {t}, %wrapstep, %instep, {p};"));
    c.line(format!("add.s64 {a}, {a}, {t};"));
    c.line(format!("selp.b32 {k32}, 0, {k32}, {p};"));
}

/// The address `base + e * size(t)` of element `e` of a row contiguous on its side.
fn contiguous_at(g: &mut Gen, c: &mut Code, base: &str, t: Ty, e: &str) -> String {
    let a = g.reg(Class::B64);
    c.line(format!("shl.b64 {a}, {e}, {};", log2(t.size)));
    c.line(format!("add.s64 {a}, {base}, {a};"));
    a
}

/// The gathered row copy or cast (`copy_rows_gather_bN`, `cast_rows_gather_S_D`, template
/// `rows_gather.ptx`, [`RowGatherArgs`](crate::abi::RowGatherArgs)): rows contiguous in the
/// destination, each element loaded alone from where the row's periods put it, a team of
/// lanes per row, units of `16 / max(size)` elements stored as one aligned vector of the
/// destination. With `scatter`, its mirror (`copy_rows_scatter_bN`, copies only): rows
/// contiguous in the source, units of `16 / size` elements loaded as one aligned vector of the
/// source, each element stored alone where the destination's periods put it.
pub(super) fn row_gather_kernel(
    t: &mut Templates,
    name: &str,
    s: Ty,
    d: Ty,
    scatter: bool,
) -> String {
    use crate::abi::{FastDiv64, RowGatherArgs};
    use std::mem::offset_of;
    assert!(!scatter || s == d, "scattered rows are copies");
    const BLOCK: u64 = ROW_BLOCK as u64;
    let u = 16 / s.size.max(d.size);
    // The contiguous side (its row stored or loaded in aligned units) and the side in periods.
    let (contig, contig_ty, per_base, per_ty) = if scatter {
        ("%sr", s, "%dr", d)
    } else {
        ("%dr", d, "%sr", s)
    };
    let unit_bytes = u * contig_ty.size;
    let mut g = Gen::default();
    let (prologue, offsets) = row_frame(&mut g);
    // The source and destination addresses of element `e`: one on the contiguous side, the
    // other (with its position in the period) on the side in periods.
    let addrs = |g: &mut Gen, c: &mut Code, e: &str| {
        let (pa, k32) = gather_position(g, c, per_base, per_ty, e);
        let ca = contiguous_at(g, c, contig, contig_ty, e);
        if scatter {
            (ca, pa, k32)
        } else {
            (pa, ca, k32)
        }
    };

    // Scalar elements `%j + k * %sstride` for k < ROW_UNROLL (element k < %head is element
    // k, the others k + %tailoff): loads first, then conversions and stores.
    let mut scalar = Code::default();
    let mut pending = Vec::new();
    let mut jk = "%j".to_string();
    for k in 0..ROW_UNROLL {
        let (e, pred) = scalar_index(&mut g, &mut scalar, k, &mut jk);
        let (sa, da, _) = addrs(&mut g, &mut scalar, &e);
        let x = load_scalar(
            &mut g,
            &mut scalar,
            s,
            Space::GlobalNc,
            &addr(&sa, 0),
            pred.as_deref(),
        );
        pending.push((x, addr(&da, 0), pred));
    }
    for (x, at, pred) in pending {
        let y = convert(&mut g, &mut scalar, s, d, &x);
        store_scalar(&mut scalar, d, Space::Global, &at, &y, pred.as_deref());
    }

    // Units %g + j * team for j < units: element e = head + unit * u, all loads first.
    let units = row_units_per_lane(s, d);
    let mut body = Code::default();
    let preds = unit_preds(&mut g, &mut body, units);
    let mut loaded = Vec::new();
    let mut unit = "%g".to_string();
    for (j, pred) in preds.iter().enumerate() {
        if j > 0 {
            let next = g.reg(Class::B64);
            body.line(format!("add.u64 {next}, {unit}, %team;"));
            unit = next;
        }
        let e = g.reg(Class::B64);
        body.line(format!("shl.b64 {e}, {unit}, {};", log2(u)));
        body.line(format!("add.u64 {e}, {e}, %head;"));
        let (vals, da, k32) = if scatter {
            let sa = contiguous_at(&mut g, &mut body, "%sr", s, &e);
            let vals = load_vec(&mut g, &mut body, s, u, &addr(&sa, 0), pred.as_deref());
            let (da, k32) = gather_position(&mut g, &mut body, "%dr", d, &e);
            (vals, da, k32)
        } else {
            let (sa, k32) = gather_position(&mut g, &mut body, "%sr", s, &e);
            let mut vals = Vec::new();
            for i in 0..u {
                if i > 0 {
                    gather_step(&mut g, &mut body, &sa, &k32);
                }
                vals.push(load_scalar(
                    &mut g,
                    &mut body,
                    s,
                    Space::GlobalNc,
                    &addr(&sa, 0),
                    pred.as_deref(),
                ));
            }
            (vals, contiguous_at(&mut g, &mut body, "%dr", d, &e), k32)
        };
        loaded.push((vals, da, k32, pred.clone()));
    }
    for (vals, da, k32, pred) in loaded {
        let conv: Vec<String> = vals
            .iter()
            .map(|x| convert(&mut g, &mut body, s, d, x))
            .collect();
        if scatter {
            for (i, y) in conv.iter().enumerate() {
                if i > 0 {
                    gather_step(&mut g, &mut body, &da, &k32);
                }
                store_scalar(
                    &mut body,
                    d,
                    Space::Global,
                    &addr(&da, 0),
                    y,
                    pred.as_deref(),
                );
            }
        } else {
            store_vec(
                &mut g,
                &mut body,
                d,
                &conv,
                Space::Global,
                &addr(&da, 0),
                pred.as_deref(),
            );
        }
    }

    let (contig_name, periodic) = if scatter {
        ("source", "destination")
    } else {
        ("destination", "source")
    };
    let doc = if scatter {
        format!(
            "// Scattered row copy (RowGatherArgs, {size} bytes): for every row q < rows, split\n\
             // over the outer axes (axis 0 fastest) into element offsets od and os, and\n\
             // every i < row_len, element k = i % period of period p = i / period:\n\
             // dst + (od + k * period_stride + p * period_step) * {sz} receives\n\
             // src + (os + i) * {sz} (the period fields describe the destination).\n\
             //\n\
             // Teams, rows and grids as in the gathered rows (rows_gather.ptx), with the\n\
             // sides' roles swapped: head is the number of elements before the source\n\
             // reaches a {unit_bytes}-byte boundary; each unit of {u} elements from element\n\
             // head is loaded as one aligned vector of the source, and its elements stored\n\
             // one by one, each unit's first destination offset found by a division by the\n\
             // period, the next by a step (period_stride inside a period, the step to the\n\
             // next period's element 0 where it ends). The elements before head and the tail\n\
             // after the last whole unit are the row's scalar elements.",
            size = std::mem::size_of::<RowGatherArgs>(),
            sz = s.size,
        )
    } else {
        format!(
            "// Gathered row copy/cast (RowGatherArgs, {size} bytes): for every row q < rows, split\n\
             // over the outer axes (axis 0 fastest) into element offsets od and os, and\n\
             // every i < row_len, element k = i % period of period p = i / period:\n\
             // dst + (od + i) * size(D) receives\n\
             // convert(src + (os + k * period_stride + p * period_step) * size(S)).\n\
             //\n\
             // A team of 2^team_shift consecutive threads (lanes) works on one row at a\n\
             // time; a block holds {BLOCK} >> team_shift teams. The rows are spread over\n\
             // grid y and the teams of a block (grid-strided), the work inside a row over\n\
             // grid x (grid-strided), so any grid is correct; with rows_first the block's\n\
             // two coordinates swap roles (x over the rows, y inside a row), so that blocks\n\
             // launched one after another take the same piece of consecutive rows. All\n\
             // index math is 64-bit but for the position inside a period (32-bit, period\n\
             // < 2^31).\n\
             //\n\
             // Per row: head is the number of elements before the destination reaches a\n\
             // {unit_bytes}-byte boundary. The units of {u} elements from element head\n\
             // ({unit_bytes} bytes of the destination, one aligned store) move whole: lane\n\
             // l of the block of piece x takes the {units} units x * team * {units} + l +\n\
             // team * j (j < {units}), finds the source offset of each unit's first element\n\
             // by a division by the period and of the next by a step (period_stride inside\n\
             // a period, the step to the next period's element 0 where it ends), loads all\n\
             // their elements one by one, then converts and stores them, and strides by\n\
             // nx * team * {units} (nx the grid's pieces), so that consecutive lanes store\n\
             // consecutive units. The elements before head and the tail after the last\n\
             // whole unit are the row's scalar elements: lane l of the block of piece x\n\
             // takes scalar elements x * team + l + k * nx * team, {ROW_UNROLL} per\n\
             // iteration.",
            size = std::mem::size_of::<RowGatherArgs>(),
        )
    };
    let div = offset_of!(RowGatherArgs, period_div);
    t.render(
        "rows_gather.ptx",
        &[
            ("DOC", doc),
            ("NAME", name.to_string()),
            ("BLOCK", BLOCK.to_string()),
            ("LOG2_BLOCK", log2(BLOCK).to_string()),
            ("LOG2_UNROLL", log2(ROW_UNROLL).to_string()),
            ("DECLS", g.decls()),
            ("PROLOGUE", prologue.text()),
            ("OFFSETS", offsets.text()),
            (
                "PERIOD_MAGIC",
                (div + offset_of!(FastDiv64, magic)).to_string(),
            ),
            (
                "PERIOD_SHIFT",
                (div + offset_of!(FastDiv64, shift)).to_string(),
            ),
            ("SRC_SHIFT", log2(s.size).to_string()),
            ("DST_SHIFT", log2(d.size).to_string()),
            ("PER_SHIFT", log2(per_ty.size).to_string()),
            ("PERIODIC", periodic.to_string()),
            ("CONTIG", contig_name.to_string()),
            ("CONTIG_REG", contig.to_string()),
            ("CONTIG_SHIFT", log2(contig_ty.size).to_string()),
            ("LOG2_U", log2(u).to_string()),
            ("U_MASK", (u - 1).to_string()),
            ("UNIT_BYTES", unit_bytes.to_string()),
            ("UNIT_MASK", (unit_bytes - 1).to_string()),
            ("UNITS", units.to_string()),
            ("LOG2_UNITS", log2(units).to_string()),
            ("SCALAR", scalar.text()),
            ("UNIT_BODY", body.text()),
        ],
    )
}

/// The reversed row copy of elements of `s` bytes read as `runs` says (`copy_rows_rev_bN`,
/// `copy_rows_rev3_bN`: runs of 1 or 3 in reverse order, each in order; `copy_runs_revR_bN`:
/// runs of R in order, each reversed; template `rows_rev.ptx`). A group of runs that fills
/// whole 16-byte vectors (one, or three for runs of 3) moves in registers: its source bytes
/// loaded as aligned blocks or, where they are off their alignment, shifted out of one more
/// (`shift_right`), then put in place by a fixed permutation of bytes ([`permuted_words`]).
pub(super) fn row_rev_kernel(t: &mut Templates, name: &str, s: Ty, runs: RowRuns) -> String {
    const BLOCK: u64 = ROW_BLOCK as u64;
    let size = s.size as usize;
    assert!(runs.exists(size), "{runs:?} of {size}-byte elements");
    let run = runs.run as u64;
    let run_bytes = runs.run_bytes(size);
    let group_bytes = runs.group_bytes(size);
    let per_group = runs.runs_per_group(size);
    let vectors = group_bytes / 16;
    let src_op = if runs.backwards { "sub" } else { "add" };
    let mut g = Gen::default();

    let (prologue, offsets) = row_frame(&mut g);
    let scalar = scalar_elements(&mut g, s, s, Some(runs));

    // Output byte `b` of a group from byte `from(b)` of its source bytes: the runs in reverse
    // order, each in order; or the runs in order, each reversed.
    let from = move |b: u64| {
        let (q, r) = (b / run_bytes, b % run_bytes);
        if runs.backwards {
            (per_group - 1 - q) * run_bytes + r
        } else {
            let (k, o) = (r / s.size, r % s.size);
            q * run_bytes + (run - 1 - k) * s.size + o
        }
    };

    // Groups %g + j * team for j < units; group j's source bytes lie j * team * group_bytes
    // bytes further (`add`) or back (`sub`) than the first's.
    let units = row_units_per_lane(s, s);
    let mut body = Code::default();
    let preds = unit_preds(&mut g, &mut body, units);
    let (saddrs, daddrs) = unit_addrs(&mut g, &mut body, units, src_op);
    let loaded: Vec<Vec<String>> = (0..units as usize)
        .map(|j| {
            let w: Vec<String> = (0..4 * vectors).map(|_| g.reg(Class::B32)).collect();
            for h in 0..vectors as usize {
                body.line(format!(
                    "{}ld.global.nc.v4.u32 {{{}}}, {};",
                    pfx(preds[j].as_deref()),
                    w[4 * h..4 * h + 4].join(", "),
                    addr(&saddrs[j], 16 * h as u64)
                ));
            }
            w
        })
        .collect();
    for (j, w) in loaded.iter().enumerate() {
        let out = permuted_words(&mut g, &mut body, w, &from);
        store_group(&mut body, &out, &daddrs[j], preds[j].as_deref());
    }

    // The same groups where their source bytes start `%m32` past a 16-byte boundary: each
    // from the aligned blocks that cover them, one more (all loads first), shifted right by
    // `%m32`.
    let mut shifted = Code::default();
    let spreds = unit_preds(&mut g, &mut shifted, units);
    let (sats, dests) = unit_addrs(&mut g, &mut shifted, units, src_op);
    let sbase: Vec<String> = sats
        .iter()
        .map(|at| {
            let b = g.reg(Class::B64);
            shifted.line(format!("and.b64 {b}, {at}, -16;"));
            b
        })
        .collect();
    let blocks: Vec<Vec<String>> = (0..units as usize)
        .map(|j| {
            let w: Vec<String> = (0..4 * (vectors + 1)).map(|_| g.reg(Class::B32)).collect();
            for h in 0..vectors as usize + 1 {
                shifted.line(format!(
                    "{}ld.global.nc.v4.u32 {{{}}}, [{}+{}];",
                    pfx(spreds[j].as_deref()),
                    w[4 * h..4 * h + 4].join(", "),
                    sbase[j],
                    16 * h
                ));
            }
            w
        })
        .collect();
    for (j, w) in blocks.iter().enumerate() {
        let bytes: Vec<String> = (0..vectors as usize)
            .flat_map(|h| shift_right(&mut g, &mut shifted, &w[4 * h..4 * h + 8], "%m32", false))
            .collect();
        let out = permuted_words(&mut g, &mut shifted, &bytes, &from);
        store_group(&mut shifted, &out, &dests[j], spreds[j].as_deref());
    }

    // Groups of three vectors go through shared memory, a warp's 32 consecutive groups at a
    // time, where a team is one or more whole warps.
    let (shared, staged_decls, staged_entry, staged, maxnreg) = if vectors == 3 {
        let smem = format!("{name}_stage");
        let entry = "\tsetp.ge.u32 %p0, %tshift, 5;\n\t@%p0 bra.uni $STAGED_START;".to_string();
        let (mut loops, decls) = staged_start(&smem, runs.backwards);
        for (label, shifted) in [("$STAGED", false), ("$STAGED_SHIFTED", true)] {
            let l = staged_loop(&mut g, label, units, runs.backwards, shifted, &from);
            loops.0.push_str(&l.0);
        }
        let bytes = u64::from(ROW_BLOCK) / 32 * STAGE_BYTES;
        let shared = format!(".shared .align 16 .b8 {smem}[{bytes}];\n");
        let maxnreg = format!(".maxnreg {ROW_STAGED_MAX_REGISTERS}\n");
        (shared, decls, entry, loops.text(), maxnreg)
    } else {
        Default::default()
    };

    // Runs to bytes and groups to bytes: shifts where they are powers of two.
    let scale = |n: u64| {
        if n.is_power_of_two() {
            ("shl.b64", u64::from(log2(n)))
        } else {
            ("mul.lo.u64", n)
        }
    };
    let (run_op, run_scale) = scale(run_bytes);
    let (group_op, group_scale) = scale(group_bytes);

    // head in runs (the elements until the destination's boundary divided by the run, or for
    // runs of 3 times 11, 3's inverse modulo 16 and so modulo every power of two up to 16);
    // m from the first byte of group 0's source bytes.
    let mut head_m = Code::default();
    head_m.line("neg.s64 %t, %dr;");
    head_m.line("and.b64 %t, %t, 15;");
    if run == 3 {
        head_m.line(format!("shr.u64 %head, %t, {};", log2(s.size)));
        head_m.line("mul.lo.u64 %head, %head, 11;");
        head_m.line(format!("and.b64 %head, %head, {};", per_group - 1));
    } else {
        head_m.line(format!("shr.u64 %head, %t, {};", log2(run_bytes)));
    }
    head_m.line(format!("{run_op} %t, %head, {run_scale};"));
    if runs.backwards {
        // Group 0's highest run ends where run head does.
        head_m.line("sub.s64 %t, %sr, %t;");
        head_m.line(format!("add.s64 %t, %t, {run_bytes};"));
    } else {
        head_m.line("add.s64 %t, %sr, %t;");
    }
    head_m.line("and.b64 %m, %t, 15;");
    let mut group0 = Code::default();
    group0.line(format!("{run_op} %t, %head, {run_scale};"));
    if runs.backwards {
        group0.line("sub.s64 %gs0, %sr, %t;");
        group0.line(format!("add.s64 %gs0, %gs0, {run_bytes};"));
        group0.line(format!("sub.s64 %gs0, %gs0, {group_bytes};"));
    } else {
        group0.line("add.s64 %gs0, %sr, %t;");
    }

    let order = if runs == RowRuns::SHIFTED {
        format!(
            "the element at src + (os + i) * {}: rows read forwards, as runs of one element \
             each reversed, for rows whose two sides are off each other's 16-byte alignment",
            s.size
        )
    } else if runs.backwards {
        format!(
            "the run at src + (os - {run} * i) * {}, its elements in order: the runs go \
             forwards in the destination and backwards in the source, from the source's run \
             zero",
            s.size
        )
    } else {
        format!(
            "the run at src + (os + {run} * i) * {}, its elements in reverse order",
            s.size
        )
    };
    t.render(
        "rows_rev.ptx",
        &[
            ("NAME", name.to_string()),
            ("BLOCK", BLOCK.to_string()),
            ("LOG2_BLOCK", log2(BLOCK).to_string()),
            ("UNROLL", ROW_UNROLL.to_string()),
            ("LOG2_UNROLL", log2(ROW_UNROLL).to_string()),
            (
                "DECLS",
                [g.decls(), staged_decls].join("\n").trim_end().to_string(),
            ),
            ("PROLOGUE", prologue.text()),
            ("OFFSETS", offsets.text()),
            ("S", s.size.to_string()),
            ("SHIFT", log2(s.size).to_string()),
            ("RUN", run.to_string()),
            ("ORDER", order),
            ("GB", group_bytes.to_string()),
            ("GROUP_OP", group_op.to_string()),
            ("GROUP_SCALE", group_scale.to_string()),
            ("SRC_OP", src_op.to_string()),
            ("HEAD_M", head_m.text()),
            ("GROUP0", group0.text()),
            ("V", per_group.to_string()),
            ("LOG2_V", log2(per_group).to_string()),
            ("V_MASK", (per_group - 1).to_string()),
            ("UNITS", units.to_string()),
            ("LOG2_UNITS", log2(units).to_string()),
            ("SCALAR", scalar.text()),
            ("UNIT_BODY", body.text()),
            ("UNIT_BODY_SHIFTED", shifted.text()),
            ("SHARED", shared),
            ("STAGED_ENTRY", staged_entry),
            ("STAGED", staged),
            ("MAXNREG", maxnreg),
        ],
    )
}

/// Bytes of shared memory per warp and unit of the staged loops: the 97 aligned 16-byte
/// blocks that cover 32 groups of three vectors at any alignment.
const STAGE_BYTES: u64 = 97 * 16;

/// The start of the staged loops of groups of three vectors (the template's `$STAGED_START`,
/// entered where a team is whole warps, so that every branch below is uniform in a warp):
/// the warp's first group `%gw` (the groups of a warp's lanes are consecutive), the exit where
/// it has none, and the lane's addresses in its warp's buffer: `%sl` its block `lane` (blocks
/// `lane + 32 h` move between global and shared memory), `%sg` the first block of the source
/// bytes of the lane's group, `%sd` its group's first block in the destination's order.
/// Returns the code and the declarations of its named registers.
fn staged_start(smem: &str, backwards: bool) -> (Code, String) {
    let mut c = Code::default();
    // The unstaged loops end here.
    c.line("bra $ROW_NEXT;");
    c.label("$STAGED_START");
    let decls = "\t.reg .b32 %lw, %sbw, %lw16, %lim, %lo, %sl, %sg, %sd, %uj;\n\
                 \t.reg .b64 %gw, %cj, %lw64, %cs, %cd, %lj;"
        .to_string();
    c.line("and.b32 %lw, %thr, 31;");
    c.line("cvt.u64.u32 %lw64, %lw;");
    c.line("sub.u64 %gw, %g, %lw64;");
    c.line("setp.ge.u64 %p0, %gw, %nunits;");
    c.line("@%p0 bra.uni $ROW_NEXT;");
    c.line(format!("mov.u32 %sbw, {smem};"));
    c.line("shr.u32 %lo, %thr, 5;");
    c.line(format!("mad.lo.u32 %sbw, %lo, {STAGE_BYTES}, %sbw;"));
    c.line("shl.b32 %lw16, %lw, 4;");
    // The lane's group: its own in the destination, and in the source the same one (runs
    // forwards) or the one as far from the warp's last (backwards).
    c.line("mul.lo.u32 %lim, %lw, 48;");
    if backwards {
        c.line("sub.u32 %lo, 1488, %lim;");
    } else {
        c.line("mov.u32 %lo, %lim;");
    }
    c.line("add.u32 %sd, %sbw, %lim;");
    c.line("add.u32 %sg, %sbw, %lo;");
    c.line("add.u32 %sl, %sbw, %lw16;");
    c.line("cvt.u64.u32 %lw64, %lw16;");
    c.line("setp.ne.u32 %p1, %m32, 0;");
    c.line("@%p1 bra.uni $STAGED_SHIFTED;");
    (c, decls)
}

/// A staged loop over the warp's chunks (`label`; `shifted`: the groups' source bytes start
/// `%m32` past a 16-byte boundary), one at a time: per pass from `%gw` (`%ustride` groups
/// apart), the warp's `units` chunks `%cj`, `team` groups apart, each the 32 consecutive
/// groups from `%cj`, of which the first `v = clamp(%nunits - %cj, 0, 32)` exist:
/// the warp loads the 16-byte blocks that cover their source bytes, each lane the blocks
/// `lane + 32 h` (consecutive lanes, consecutive blocks), and stores them in its buffer;
/// each lane takes its group's source bytes from there, puts them in place in registers
/// (shifted out of one block more where `shifted`), and stores the group in the buffer in
/// the destination's order; the warp then stores the chunk's destination blocks the same
/// way it loaded. Blocks of groups that do not exist are neither loaded nor stored.
fn staged_loop(
    g: &mut Gen,
    label: &str,
    units: u64,
    backwards: bool,
    shifted: bool,
    from: &dyn Fn(u64) -> u64,
) -> Code {
    let mut c = Code::default();
    // Blocks per chunk: 96, or 97 when shifted (the last only for lane 0).
    let blocks = if shifted { 4 } else { 3 };
    c.label(label);
    c.line("mov.b64 %cj, %gw;");
    c.line("mov.u32 %uj, 0;");
    c.label(&format!("{label}_UNIT"));
    c.line("sub.u64 %left, %nunits, %cj;");
    // 3 v in %lim; the first block that exists (runs backwards) in %lo.
    c.line("max.s64 %lj, %left, 0;");
    c.line("min.s64 %lj, %lj, 32;");
    c.line("cvt.u32.u64 %lim, %lj;");
    c.line("mul.lo.u32 %lim, %lim, 3;");
    c.line("sub.u32 %lo, 96, %lim;");
    c.line("mul.lo.u64 %cs, %cj, 48;");
    c.line("add.s64 %cd, %gd0, %cs;");
    if backwards {
        c.line("sub.s64 %cs, %gs0, %cs;");
        c.line("sub.s64 %cs, %cs, 1488;");
    } else {
        c.line("add.s64 %cs, %gs0, %cs;");
    }
    if shifted {
        c.line("and.b64 %cs, %cs, -16;");
    }
    c.line("add.s64 %cs, %cs, %lw64;");
    c.line("add.s64 %cd, %cd, %lw64;");
    let mut loaded = Vec::new();
    let mut stores = Vec::new();
    for h in 0..blocks {
        let k = g.reg(Class::B32);
        let p = g.reg(Class::Pred);
        c.line(format!("add.u32 {k}, %lw, {};", 32 * h));
        // Loads: the blocks of groups that exist; shifted, up to one block past them.
        match (backwards, shifted) {
            (false, false) => c.line(format!("setp.lt.u32 {p}, {k}, %lim;")),
            (true, false) => c.line(format!("setp.ge.u32 {p}, {k}, %lo;")),
            (false, true) => {
                c.line(format!("setp.le.u32 {p}, {k}, %lim;"));
                c.line(format!("setp.ne.and.u32 {p}, %lim, 0, {p};"));
            }
            (true, true) => {
                c.line(format!("setp.ge.u32 {p}, {k}, %lo;"));
                c.line(format!("setp.le.and.u32 {p}, {k}, 96, {p};"));
                c.line(format!("setp.ne.and.u32 {p}, %lim, 0, {p};"));
            }
        }
        let regs: Vec<String> = (0..4).map(|_| g.reg(Class::B32)).collect();
        c.line(format!(
            "@{p} ld.global.nc.v4.u32 {{{}}}, [%cs+{}];",
            regs.join(", "),
            512 * h
        ));
        loaded.push((regs, p));
        if h < 3 {
            let q = g.reg(Class::Pred);
            c.line(format!("setp.lt.u32 {q}, {k}, %lim;"));
            stores.push(q);
        }
    }
    for (h, (regs, p)) in loaded.iter().enumerate() {
        // Block 96 (shifted) is lane 0's alone; the others' would land past the buffer.
        let pred = if h == 3 {
            format!("@{p} ")
        } else {
            String::new()
        };
        c.line(format!(
            "{pred}st.shared.v4.u32 [%sl+{}], {{{}}};",
            512 * h,
            regs.join(", ")
        ));
    }
    c.line("bar.warp.sync 0xffffffff;");
    let words: Vec<String> = (0..4 * blocks).map(|_| g.reg(Class::B32)).collect();
    for h in 0..blocks as usize {
        c.line(format!(
            "ld.shared.v4.u32 {{{}}}, [%sg+{}];",
            words[4 * h..4 * h + 4].join(", "),
            16 * h
        ));
    }
    let bytes: Vec<String> = if shifted {
        (0..3)
            .flat_map(|h| shift_right(g, &mut c, &words[4 * h..4 * h + 8], "%m32", false))
            .collect()
    } else {
        words
    };
    let out = permuted_words(g, &mut c, &bytes, from);
    c.line("bar.warp.sync 0xffffffff;");
    for h in 0..3 {
        c.line(format!(
            "st.shared.v4.u32 [%sd+{}], {{{}}};",
            16 * h,
            out[4 * h..4 * h + 4].join(", ")
        ));
    }
    c.line("bar.warp.sync 0xffffffff;");
    for (h, q) in stores.iter().enumerate() {
        let regs: Vec<String> = (0..4).map(|_| g.reg(Class::B32)).collect();
        c.line(format!(
            "ld.shared.v4.u32 {{{}}}, [%sl+{}];",
            regs.join(", "),
            512 * h
        ));
        c.line(format!(
            "@{q} st.global.v4.u32 [%cd+{}], {{{}}};",
            512 * h,
            regs.join(", ")
        ));
    }
    c.line("bar.warp.sync 0xffffffff;");
    // The warp's next unit, while it has groups; then the next pass.
    c.line("add.u64 %cj, %cj, %team;");
    c.line("add.u32 %uj, %uj, 1;");
    c.line(format!("setp.lt.u32 %p0, %uj, {units};"));
    c.line("setp.lt.and.u64 %p0, %cj, %nunits, %p0;");
    c.line(format!("@%p0 bra.uni {label}_UNIT;"));
    c.line("add.u64 %gw, %gw, %ustride;");
    c.line("setp.lt.u64 %p0, %gw, %nunits;");
    c.line(format!("@%p0 bra.uni {label};"));
    c.line("bra.uni $ROW_NEXT;");
    c
}

/// Stores the words `out` of a group as 16-byte vectors from `at`, under `pred`.
fn store_group(code: &mut Code, out: &[String], at: &str, pred: Option<&str>) {
    for (h, w) in out.chunks(4).enumerate() {
        code.line(format!(
            "{}st.global.v4.u32 {}, {{{}}};",
            pfx(pred),
            addr(at, 16 * h as u64),
            w.join(", ")
        ));
    }
}

/// The words of bytes `from(b)` of the bytes `w` (`w[0]` lowest) for every byte `b`: a word
/// that is a whole input word is that register; any other is one `prmt` for the first two
/// input words it takes bytes of, one more for each further word, or one for the bytes of a
/// single word.
fn permuted_words(
    g: &mut Gen,
    c: &mut Code,
    w: &[String],
    from: &dyn Fn(u64) -> u64,
) -> Vec<String> {
    (0..w.len() as u64)
        .map(|k| {
            let src: Vec<u64> = (4 * k..4 * k + 4).map(from).collect();
            let mut words: Vec<u64> = Vec::new();
            for &b in &src {
                if !words.contains(&(b / 4)) {
                    words.push(b / 4);
                }
            }
            let nibbles = |sel: &dyn Fn(usize, u64) -> u64| {
                let v = (0..4).fold(0u64, |acc, i| acc | sel(i, src[i]) << (4 * i));
                format!("0x{v:04x}")
            };
            let a = words[0];
            if words.len() == 1 {
                if src.iter().enumerate().all(|(i, &b)| b == 4 * a + i as u64) {
                    return w[a as usize].clone();
                }
                let d = g.reg(Class::B32);
                let sel = nibbles(&|_, b| b % 4);
                c.line(format!("prmt.b32 {d}, {}, 0, {sel};", w[a as usize]));
                return d;
            }
            // The first two words, then each further one into the bytes it supplies.
            let b1 = words[1];
            let mut acc = g.reg(Class::B32);
            let sel = nibbles(&|_, b| match b / 4 {
                x if x == a => b % 4,
                x if x == b1 => 4 + b % 4,
                _ => 0,
            });
            c.line(format!(
                "prmt.b32 {acc}, {}, {}, {sel};",
                w[a as usize], w[b1 as usize]
            ));
            for &x in &words[2..] {
                let d = g.reg(Class::B32);
                let sel = nibbles(&|i, b| if b / 4 == x { 4 + b % 4 } else { i as u64 });
                c.line(format!("prmt.b32 {d}, {acc}, {}, {sel};", w[x as usize]));
                acc = d;
            }
            acc
        })
        .collect()
}
