//! The tiled kernels (`copy_tiled_bN`, `cast_tiled_S_D`, `copy_tiled_e_bN`,
//! `cast_tiled_e_S_D`, and the `cp.async` copies `copy_tiled_a_bN`).

use std::mem::{offset_of, size_of};

use super::code::{Class, Code, Gen, addr, pfx};
use super::convert::convert;
use super::load_store::{
    Space, load_scalar, load_vec, load_vec_words, pack_word, store_scalar, store_vec, unpack_words,
    vector_operand,
};
use super::templates::Templates;
use super::types::{Ty, log2};
use crate::abi::{
    TILED_ASYNC_BUFFERS, TILED_WIDE_THREADS, TiledArgs, TiledBatchAxis, TiledReadAxis,
    TiledWriteAxis, tiled_async_max_registers, tiled_ew_max_registers, tiled_ew_max_volume,
    tiled_max_registers, tiled_max_threads, tiled_per_thread, tiled_smem_bytes, tiled_smem_shifts,
    tiled_smem_unit, tiled_vectors,
};

/// Emits the division of the 32-bit registers `xs` by the axis in `len` / `magic` / `shift`
/// (fast division, `x < 2^31`): each `x` becomes its quotient, and the returned registers hold
/// the remainders (the coordinates on the axis).
fn split32(g: &mut Gen, c: &mut Code, xs: &[String]) -> Vec<String> {
    xs.iter()
        .map(|x| {
            let t = g.reg(Class::B32);
            let q = g.reg(Class::B32);
            let r = g.reg(Class::B32);
            c.line(format!("mul.hi.u32 {t}, {x}, %magic;"));
            c.line(format!("add.u32 {t}, {t}, {x};"));
            c.line(format!("shr.u32 {q}, {t}, %shift;"));
            c.line(format!("mul.lo.u32 {t}, {q}, %len;"));
            c.line(format!("sub.u32 {r}, {x}, {t};"));
            c.line(format!("mov.u32 {x}, {q};"));
            r
        })
        .collect()
}

/// Emits a loop over `count` (a register) axes of `stride` bytes each, starting at byte
/// `first` of the parameter block: `%pa` points at the axis, `%k` counts; `body` is emitted
/// once, inside the loop.
fn axis_loop(c: &mut Code, label: &str, count: &str, first: usize, stride: usize, body: Code) {
    axis_range_loop(c, label, "0", count, first, stride, body);
}

/// [`axis_loop`] over the axes from `from` (a register or `0`) to `to` (a register).
fn axis_range_loop(
    c: &mut Code,
    label: &str,
    from: &str,
    to: &str,
    first: usize,
    stride: usize,
    body: Code,
) {
    c.line("mov.u64 %pa, p_args;");
    c.line(format!("add.u64 %pa, %pa, {first};"));
    if from != "0" {
        c.line(format!("cvt.u64.u32 %cw, {from};"));
        c.line(format!("mad.lo.u64 %pa, %cw, {stride}, %pa;"));
    }
    c.line(format!("mov.u32 %k, {from};"));
    c.label(&format!("${label}"));
    c.line(format!("setp.ge.u32 %p0, %k, {to};"));
    c.line(format!("@%p0 bra.uni ${label}_END;"));
    c.0.push_str(&body.0);
    c.line(format!("add.u64 %pa, %pa, {stride};"));
    c.line("add.u32 %k, %k, 1;");
    c.line(format!("bra.uni ${label};"));
    c.label(&format!("${label}_END"));
}

/// One of the tables of tile axes in [`TiledArgs`] (read or write order): where its first
/// axis lies in the parameter block, the size of one axis, and where an axis keeps its extent
/// and its fast division.
#[derive(Clone, Copy)]
struct AxisTable {
    first: usize,
    stride: usize,
    len: usize,
    magic: usize,
    shift: usize,
}

/// The tile axes in read order ([`TiledArgs::read`]).
const READ_AXES: AxisTable = AxisTable {
    first: offset_of!(TiledArgs, read),
    stride: size_of::<TiledReadAxis>(),
    len: offset_of!(TiledReadAxis, len),
    magic: offset_of!(TiledReadAxis, magic),
    shift: offset_of!(TiledReadAxis, shift),
};

/// The tile axes in write order ([`TiledArgs::write`]).
const WRITE_AXES: AxisTable = AxisTable {
    first: offset_of!(TiledArgs, write),
    stride: size_of::<TiledWriteAxis>(),
    len: offset_of!(TiledWriteAxis, len),
    magic: offset_of!(TiledWriteAxis, magic),
    shift: offset_of!(TiledWriteAxis, shift),
};

/// Emits the loads of an axis's extent and fast division (`%len`, `%magic`, `%shift`) from
/// the axis at `%pa` of `table`.
fn axis_division(c: &mut Code, table: AxisTable) {
    c.line(format!("ld.param.u32 %len, [%pa+{}];", table.len));
    c.line(format!("ld.param.u32 %magic, [%pa+{}];", table.magic));
    c.line(format!("ld.param.u32 %shift, [%pa+{}];", table.shift));
}

/// Elements of a store whose coordinates on the low write axes one loop of the stores'
/// set-up splits ([`store_setup`]).
const LOW_GROUP: u64 = 4;

/// Emits the accumulation into `acc` (one register per field) of the coordinate that `x` has
/// on the axis at `%pa` (its division loaded) times each of `fields` (an axis's field at that
/// offset, `s32` or `u32`), leaving `x` its quotient.
fn accumulate(g: &mut Gen, body: &mut Code, x: &str, acc: &[String], fields: &[(usize, &str)]) {
    let cs = split32(g, body, &[x.to_string()]);
    for ((off, ty), a) in fields.iter().zip(acc) {
        let v = if *ty == "s32" { "%str" } else { "%rstr" };
        body.line(format!("ld.param.{ty} {v}, [%pa+{off}];"));
        body.line(format!("mad.lo.{ty} {a}, {}, {v}, {a};", cs[0]));
    }
}

/// Emits the sums over the axes of `table` from `from` (a register or `0`) on of the
/// coordinates of index `x` (a register, clobbered) times each of `fields`, into `acc`
/// (registers, set to `init` first): one loop, labelled `label`.
#[allow(clippy::too_many_arguments)]
fn split_index(
    g: &mut Gen,
    c: &mut Code,
    label: &str,
    table: AxisTable,
    from: &str,
    x: &str,
    (acc, init): (&[String], &[String]),
    fields: &[(usize, &str)],
) {
    for (a, l) in acc.iter().zip(init) {
        c.line(format!("mov.u32 {a}, {l};"));
    }
    let mut body = Code::default();
    axis_division(&mut body, table);
    accumulate(g, &mut body, x, acc, fields);
    axis_range_loop(c, label, from, "%trank", table.first, table.stride, body);
}

/// For a thread's accesses at the positions `base + i * step` of a tile (`i < n`), the sums
/// over the axes of `table` of each position's coordinate times each of `fields` (an axis's
/// field at that offset, `s32` or `u32`): `sums[i][f]`.
///
/// The leading axes whose product `P` divides `step` give every position the coordinates of
/// `base` on them (`i * step` is a multiple of `P`): one loop (`{label}_LO`) finds them and
/// splits `base` on them; the positions then differ only on the other axes, where position
/// `i`'s index is `base / P + i * step / P`, split by one loop per position (`{label}_i`,
/// [`split_index`]), so that only that position's registers are live in it (a single position
/// takes one loop over every axis). `base` and `step` are registers below 2^31 (left as they
/// were).
fn split_sums(
    g: &mut Gen,
    c: &mut Code,
    label: &str,
    table: AxisTable,
    (base, step): (&str, &str),
    n: usize,
    fields: &[(usize, &str)],
) -> Vec<Vec<String>> {
    // One position's sums, from `init`: its index `x` on the axes from `from` on.
    let position = |g: &mut Gen, c: &mut Code, name: &str, from: &str, x: &str, init: &[String]| {
        let acc: Vec<String> = fields.iter().map(|_| g.reg(Class::B32)).collect();
        split_index(g, c, name, table, from, x, (&acc, init), fields);
        acc
    };
    if n == 1 {
        // One position: nothing to share, one loop over every axis.
        let x = g.reg(Class::B32);
        c.line(format!("mov.u32 {x}, {base};"));
        let zeros = vec!["0".to_string(); fields.len()];
        return vec![position(g, c, &format!("{label}_0"), "0", &x, &zeros)];
    }
    let (high, t, m, q, r) = (
        g.reg(Class::B32),
        g.reg(Class::B32),
        g.reg(Class::B32),
        g.reg(Class::B32),
        g.reg(Class::B32),
    );
    let low: Vec<String> = fields.iter().map(|_| g.reg(Class::B32)).collect();
    c.line(format!("mov.u32 {high}, {base};"));
    c.line(format!("mov.u32 {t}, {step};"));
    c.line(format!("mov.u32 {m}, 0;"));
    for a in &low {
        c.line(format!("mov.u32 {a}, 0;"));
    }
    c.line("mov.u64 %pa, p_args;");
    c.line(format!("add.u64 %pa, %pa, {};", table.first));
    let lo = format!("${label}_LO");
    c.label(&lo);
    c.line(format!("setp.ge.u32 %p0, {m}, %trank;"));
    c.line(format!("@%p0 bra.uni {lo}_END;"));
    axis_division(c, table);
    // Whether the axis's extent divides what is left of `step` (`t`, below 2^31).
    c.line(format!("mul.hi.u32 {q}, {t}, %magic;"));
    c.line(format!("add.u32 {q}, {q}, {t};"));
    c.line(format!("shr.u32 {q}, {q}, %shift;"));
    c.line(format!("mul.lo.u32 {r}, {q}, %len;"));
    c.line(format!("setp.ne.u32 %p0, {r}, {t};"));
    c.line(format!("@%p0 bra.uni {lo}_END;"));
    c.line(format!("mov.u32 {t}, {q};"));
    accumulate(g, c, &high, &low, fields);
    c.line(format!("add.u64 %pa, %pa, {};", table.stride));
    c.line(format!("add.u32 {m}, {m}, 1;"));
    c.line(format!("bra.uni {lo};"));
    c.label(&format!("{lo}_END"));
    (0..n)
        .map(|i| {
            let x = g.reg(Class::B32);
            c.line(format!("mad.lo.u32 {x}, {t}, {i}, {high};"));
            position(g, c, &format!("{label}_{i}"), &m, &x, &low)
        })
        .collect()
}

/// Emits the shared-memory address (32-bit, from the tile's base `%tb`) of byte `b` (a
/// register) of the tile: [`tiled_smem_offset`](crate::abi::tiled_smem_offset), with the line
/// rotation's `shifts` ([`tiled_smem_shifts`](crate::abi::tiled_smem_shifts)). With
/// `units > 1` (a store of that many whole units starting at `b`, a power of two), returns
/// the address of the first unit with the low `log2(units)` bits of the rotation left out,
/// and a register with those bits: unit `m` of the store goes to that address plus
/// `(m ^ bits) * unit`.
fn smem_addr(
    g: &mut Gen,
    c: &mut Code,
    b: &str,
    d: Ty,
    shifts: &[u32],
    units: u64,
) -> (String, Option<String>) {
    let u = tiled_smem_unit(d.size as usize);
    let per_line = 128 / u;
    let (lu, lp) = (log2(u), log2(per_line));
    let unit = g.reg(Class::B32);
    let line = g.reg(Class::B32);
    let low = g.reg(Class::B32);
    let rot = g.reg(Class::B32);
    let t = g.reg(Class::B32);
    let a = g.reg(Class::B32);
    c.line(format!("shr.u32 {unit}, {b}, {lu};"));
    c.line(format!("shr.u32 {line}, {unit}, {lp};"));
    c.line(format!("and.b32 {low}, {unit}, {};", per_line - 1));
    c.line(format!("mov.b32 {rot}, {line};"));
    for s in shifts {
        c.line(format!("shr.u32 {t}, {line}, {s};"));
        c.line(format!("xor.b32 {rot}, {rot}, {t};"));
    }
    c.line(format!("and.b32 {rot}, {rot}, {};", per_line - 1));
    let bits = (units > 1).then(|| {
        let r = g.reg(Class::B32);
        c.line(format!("and.b32 {r}, {rot}, {};", units - 1));
        c.line(format!("and.b32 {rot}, {rot}, {};", !(units as u32 - 1)));
        r
    });
    c.line(format!("xor.b32 {low}, {low}, {rot};"));
    c.line(format!("shl.b32 {t}, {line}, {lp};"));
    c.line(format!("or.b32 {t}, {t}, {low};"));
    c.line(format!("shl.b32 {t}, {t}, {lu};"));
    if u > 1 {
        let inner = g.reg(Class::B32);
        c.line(format!("and.b32 {inner}, {b}, {};", u - 1));
        c.line(format!("or.b32 {t}, {t}, {inner};"));
    }
    c.line(format!("add.u32 {a}, {t}, %tb;"));
    (a, bits)
}

/// Offset of field `f` of batch axis `k` in [`TiledArgs`] (the loop adds the axis).
const fn batch_field(f: usize) -> usize {
    offset_of!(TiledArgs, batch) + f
}

/// The split of tile index `tile` (a register; copied to `%x`, which is clobbered) over the
/// batch axes into `%od` / `%os`.
pub(super) fn origin(label: &str, tile: &str) -> Code {
    let mut c = Code::default();
    c.line(format!("mov.u32 %x, {tile};"));
    c.line("mov.b64 %od, 0;");
    c.line("mov.b64 %os, 0;");
    let mut body = Code::default();
    body.line(format!(
        "ld.param.u32 %len, [%pa+{}];",
        offset_of!(TiledBatchAxis, len)
    ));
    body.line(format!(
        "ld.param.u32 %magic, [%pa+{}];",
        offset_of!(TiledBatchAxis, magic)
    ));
    body.line(format!(
        "ld.param.u32 %shift, [%pa+{}];",
        offset_of!(TiledBatchAxis, shift)
    ));
    body.line(format!(
        "ld.param.s64 %bd, [%pa+{}];",
        offset_of!(TiledBatchAxis, dst)
    ));
    body.line(format!(
        "ld.param.s64 %bs, [%pa+{}];",
        offset_of!(TiledBatchAxis, src)
    ));
    body.line("mul.hi.u32 %q, %x, %magic;");
    body.line("add.u32 %q, %q, %x;");
    body.line("shr.u32 %q, %q, %shift;");
    body.line("mul.lo.u32 %c, %q, %len;");
    body.line("sub.u32 %c, %x, %c;");
    body.line("mov.u32 %x, %q;");
    body.line("cvt.u64.u32 %cw, %c;");
    body.line("mad.lo.s64 %od, %cw, %bd, %od;");
    body.line("mad.lo.s64 %os, %cw, %bs, %os;");
    axis_loop(
        &mut c,
        label,
        "%brank",
        batch_field(0),
        size_of::<TiledBatchAxis>(),
        body,
    );
    c
}

/// The tiled kernel `name` from `s` to `d`: 16-byte vectors on both sides (`vector`) or one
/// element per access; with `wide` (element-wise, [`Kind::TiledEW`](crate::abi::Kind)), in
/// blocks of up to [`TILED_WIDE_THREADS`] threads with a tile of up to
/// [`tiled_ew_max_volume`] elements.
pub(super) fn tiled_kernel(
    t: &mut Templates,
    name: &str,
    s: Ty,
    d: Ty,
    vector: bool,
    wide: bool,
) -> String {
    let (ss, ds) = (s.size as usize, d.size as usize);
    let k = u64::from(tiled_per_thread(vector, ss, ds));
    let (vs, vd) = tiled_vectors(vector, ss, ds);
    let (vs, vd) = (u64::from(vs), u64::from(vd));
    let (reads, writes) = (k / vs, k / vd);
    let unit = tiled_smem_unit(ds);
    // Whole units per load's worth of destination elements (0: less than one unit).
    let units = vs * d.size / unit;
    let copy = s == d;
    let shifts = tiled_smem_shifts(vector, ss, ds);
    let (max_threads, tile_bytes) = if wide {
        (TILED_WIDE_THREADS, tiled_ew_max_volume(ds) * d.size)
    } else {
        (
            tiled_max_threads(vector, ss, ds),
            tiled_smem_bytes(vector, ss, ds),
        )
    };
    let mut g = Gen::default();

    // --- Set-up: the loads' source offsets and places in shared memory: for copies, the
    // offsets of all loads at once ([`source_offsets`]); for casts, one loop over the read
    // axes per load (so that only that load's registers are live in it).
    let mut setup = Code::default();
    // Where a thread's accesses lie in the tile: the vector kernels interleave their threads
    // (access i of thread t at position t + i * threads of the read order, and of the write
    // order in units of `vd` elements); the element-wise ones give each warp consecutive runs
    // of 32 positions ([`warp_runs`]: access i at `base + i * step`), so that a warp's
    // successive loads, and its stores, continue each other along the fastest axes.
    let (rpos, wpos) = if vector {
        slot_counts(&mut g, &mut setup, &[("%rcnt", vs), ("%wcnt", vd)]);
        (None, ("%ti".to_string(), "%nt".to_string()))
    } else {
        let r = (g.reg(Class::B32), g.reg(Class::B32));
        warp_runs(&mut g, &mut setup, "%rcnt", reads, (&r.0, &r.1));
        let w = (g.reg(Class::B32), g.reg(Class::B32));
        warp_runs(&mut g, &mut setup, "%wcnt", writes, (&w.0, &w.1));
        (Some(r), w)
    };
    let wpos = (wpos.0.as_str(), wpos.1.as_str());
    let mut rsoff = if copy {
        let (base, step) = rpos
            .clone()
            .unwrap_or_else(|| interleaved(&mut g, &mut setup, log2(vs)));
        source_offsets(&mut g, &mut setup, "RAX", (&base, &step), reads as usize)
    } else {
        Vec::new()
    };
    let mut raddr = Vec::new();
    let mut rbits = Vec::new();
    for i in 0..reads {
        let x = g.reg(Class::B32);
        let b = g.reg(Class::B32);
        match &rpos {
            Some((base, step)) => setup.line(format!("mad.lo.u32 {x}, {step}, {i}, {base};")),
            None => {
                setup.line(format!("mad.lo.u32 {x}, %nt, {i}, %ti;"));
                setup.line(format!("shl.b32 {x}, {x}, {};", log2(vs)));
            }
        }
        setup.line(format!("shl.b32 {b}, {x}, {};", log2(d.size)));
        let (a, bits) = smem_addr(&mut g, &mut setup, &b, d, shifts, units.max(1));
        if !copy {
            let o = g.reg(Class::B32);
            source_offset(&mut g, &mut setup, &x, &o, &format!("RAX_{i}"));
            rsoff.push(o);
        }
        raddr.push(a);
        rbits.push(bits);
    }

    // --- Set-up: the stores' destination offsets and their elements' places in shared memory.
    // The stores' set-up splits their positions at the low write axes for copies of at least
    // four elements per store; the other copies place each element on its own, sharing the
    // coordinates that their stores have in common ([`element_setup`]); casts keep one loop
    // over every axis per element (the split and the sharing cost them registers).
    let split = copy && vd >= 4;
    let (wdoff, gpacked) = if split || !copy {
        store_setup(&mut g, &mut setup, d, shifts, vd, writes, split, wpos)
    } else {
        element_setup(&mut g, &mut setup, d, shifts, vd, writes, wpos)
    };
    let rpacked = (vs == 1).then(|| pack_pairs(&mut g, &mut setup, &raddr));

    // --- Per tile: loads, from the tile's source base `%sb`. Vector loads of casts from 1- and
    // 2-byte elements load words, unpacked into elements where the stage uses them: the next
    // tile's loads then stay in flight through the gather (unpacked in the loads, their first
    // use came right after them).
    let unpack_late = !copy && vs > 1 && s.size < 4;
    let mut loads = Code::default();
    let loaded: Vec<Vec<String>> = (0..reads as usize)
        .map(|i| {
            let a = g.reg(Class::B64);
            loads.line(format!("mad.wide.s32 {a}, {}, {}, %sb;", rsoff[i], s.size));
            let at = addr(&a, 0);
            let p = slot_pred(&mut g, &mut loads, "%rcnt", i);
            let p = Some(p.as_str());
            if vs == 1 {
                vec![load_scalar(&mut g, &mut loads, s, Space::GlobalNc, &at, p)]
            } else if copy {
                load_words(&mut g, &mut loads, vs * s.size, unit, &at, p)
            } else if unpack_late {
                load_vec_words(&mut g, &mut loads, s, vs, &at, p)
            } else {
                load_vec(&mut g, &mut loads, s, vs, &at, p)
            }
        })
        .collect();

    // --- Per tile: the loaded (and converted) elements into shared memory.
    let mut stage = Code::default();
    for (i, vals) in loaded.iter().enumerate() {
        let p = slot_pred(&mut g, &mut stage, "%rcnt", i);
        let p = Some(p.as_str());
        let raddr_i = match &rpacked {
            Some(packed) => unpack(&mut g, &mut stage, packed, i, "%tb"),
            None => raddr[i].clone(),
        };
        let stored: Vec<String> = if copy {
            vals.clone()
        } else {
            let elems = if unpack_late {
                unpack_words(&mut g, &mut stage, s, vs, vals)
            } else {
                vals.clone()
            };
            elems
                .iter()
                .map(|x| convert(&mut g, &mut stage, s, d, x))
                .collect()
        };
        if units == 0 {
            // Less than one unit: one store at the exact address.
            if stored.len() == 1 {
                store_scalar(
                    &mut stage,
                    d,
                    Space::Shared,
                    &addr(&raddr_i, 0),
                    &stored[0],
                    p,
                );
            } else {
                store_vec(
                    &mut g,
                    &mut stage,
                    d,
                    &stored,
                    Space::Shared,
                    &addr(&raddr_i, 0),
                    p,
                );
            }
            continue;
        }
        // Whole units: copies hold them already; casts pack elements into words.
        let unit_vals: Vec<String> = if copy || d.size >= 4 {
            stored
        } else {
            stored
                .chunks((4 / d.size) as usize)
                .map(|e| pack_word(&mut g, &mut stage, d, e))
                .collect()
        };
        assert_eq!(unit_vals.len() as u64, units);
        let st = if unit == 8 { "b64" } else { "b32" };
        let st = if copy || d.size < 4 {
            st
        } else {
            d.st_suffix()
        };
        for (m, v) in unit_vals.iter().enumerate() {
            let at = match &rbits[i] {
                Some(bits) => {
                    let x = g.reg(Class::B32);
                    let a = g.reg(Class::B32);
                    stage.line(format!("xor.b32 {x}, {bits}, {m};"));
                    stage.line(format!("mad.lo.u32 {a}, {x}, {unit}, {raddr_i};"));
                    a
                }
                None => raddr_i.clone(),
            };
            stage.line(format!("{}st.shared.{st} [{at}], {v};", pfx(p)));
        }
    }

    // --- Per tile: gathers from shared memory and stores to `%dcur`.
    let gather = gather_stores(&mut g, d, &wdoff, &gpacked, vd, "%tb");

    let mut first = origin("BAX0", "%tile");
    first.line(format!("mad.lo.s64 %sb, %os, {}, %src;", s.size));
    first.line(format!("mad.lo.s64 %db, %od, {}, %dst;", d.size));
    // The next tile's index, not the current one's.
    let next = origin("BAX1", "%next");

    t.render(
        "tiled.ptx",
        &[
            ("NAME", name.to_string()),
            ("PER_THREAD", k.to_string()),
            ("READS", reads.to_string()),
            ("WRITES", writes.to_string()),
            ("VS", vs.to_string()),
            ("VD", vd.to_string()),
            ("DSIZE", d.size.to_string()),
            ("SSIZE", s.size.to_string()),
            ("UNIT", unit.to_string()),
            ("MAX_THREADS", max_threads.to_string()),
            (
                "MAXNREG",
                if wide {
                    tiled_ew_max_registers(ds)
                } else {
                    tiled_max_registers(vector, copy, ss, ds)
                }
                .map_or(String::new(), |n| format!(".maxnreg {n}\n")),
            ),
            ("TILE_BYTES", tile_bytes.to_string()),
            ("DECLS", g.decls()),
            ("SETUP", setup.text()),
            ("ORIGIN_FIRST", first.text()),
            ("ORIGIN_NEXT", next.text()),
            ("LOADS", loads.text()),
            ("STAGE", stage.text()),
            ("GATHER", gather.text()),
        ],
    )
}

/// The pipelined tiled copy `name` of elements `d` (vectors on both sides,
/// [`TILED_ASYNC_BUFFERS`] tiles in shared memory): `templates/tiled_async.ptx`.
pub(super) fn tiled_async_kernel(t: &mut Templates, name: &str, d: Ty) -> String {
    let ds = d.size as usize;
    let k = u64::from(tiled_per_thread(true, ds, ds));
    let vd = u64::from(tiled_vectors(true, ds, ds).1);
    let writes = k / vd;
    // Elements per 4-byte unit, and units per thread and tile.
    let per_unit = 4 / d.size;
    let units = k / per_unit;
    let nbuf = u64::from(TILED_ASYNC_BUFFERS);
    let ahead = nbuf - 1;
    let tile_bytes = tiled_smem_bytes(true, ds, ds);
    let shifts = tiled_smem_shifts(true, ds, ds);
    let mut g = Gen::default();

    // --- Set-up: how many units (stores) a thread has.
    let mut setup = Code::default();
    slot_counts(&mut g, &mut setup, &[("%ucnt", per_unit), ("%wcnt", vd)]);
    // --- Set-up: each unit's source offset (elements from the tile's first) and place in
    // shared memory; consecutive threads take consecutive units.
    let (ubase, ustep) = interleaved(&mut g, &mut setup, log2(per_unit));
    let usoff = source_offsets(&mut g, &mut setup, "UAX", (&ubase, &ustep), units as usize);
    let mut uaddr = Vec::new();
    for j in 0..units {
        let b = g.reg(Class::B32);
        setup.line(format!("mad.lo.u32 {b}, %nt, {j}, %ti;"));
        setup.line(format!("shl.b32 {b}, {b}, 2;"));
        uaddr.push(smem_addr(&mut g, &mut setup, &b, d, shifts, 1).0);
    }
    let upacked = pack_pairs(&mut g, &mut setup, &uaddr);
    // The stores' set-up runs after the prologue has started the first tiles' copies.
    let mut store_set = Code::default();
    let (wdoff, gpacked) = store_setup(
        &mut g,
        &mut store_set,
        d,
        shifts,
        vd,
        writes,
        true,
        ("%ti", "%nt"),
    );

    // --- Per tile: the copies of a tile's units from `%sb` into the buffer at `%lb`.
    let mut loads = Code::default();
    for (j, off) in usoff.iter().enumerate() {
        let p = slot_pred(&mut g, &mut loads, "%ucnt", j);
        let a = unpack(&mut g, &mut loads, &upacked, j, "%lb");
        let ga = g.reg(Class::B64);
        loads.line(format!("mad.wide.s32 {ga}, {off}, {}, %sb;", d.size));
        loads.line(format!("@{p} cp.async.ca.shared.global [{a}], [{ga}], 4;"));
    }
    let loads = loads.text();
    // --- Per tile: gathers from the buffer at `%gb` and stores to `%dcur`.
    let gather = gather_stores(&mut g, d, &wdoff, &gpacked, vd, "%gb").text();

    // The destination origins of the tiles from i to i + ahead.
    let od: Vec<String> = (0..nbuf).map(|_| g.reg(Class::B64)).collect();
    let origin_of = |label: &str| origin(label, "%ta").text();
    // Prologue: warp 0 leaves the origins of the block's first `nbuf` tiles in slots 0 to
    // nbuf - 1; every thread then starts the copies of the first `ahead` tiles.
    let mut pro = Code::default();
    pro.line("mov.u32 %ta, %tile;");
    pro.line("@!%pw0 bra.uni $P_SYNC;");
    for j in 0..nbuf {
        if j > 0 {
            pro.line("add.u32 %ta, %ta, %nb;");
            pro.line("setp.ge.u32 %p0, %ta, %tiles;");
            pro.line("@%p0 bra.uni $P_SYNC;");
        }
        pro.0.push_str(&origin_of(&format!("PAX{j}")));
        pro.0.push('\n');
        pro.line(format!(
            "@%pl0 st.shared.v2.u64 [%nx+{}], {{%od, %os}};",
            16 * j
        ));
    }
    pro.label("$P_SYNC");
    pro.line("bar.sync 0;");
    pro.line("mov.u32 %lb, %tb;");
    pro.line("mov.u32 %ta, %tile;");
    for j in 0..ahead {
        if j > 0 {
            pro.line("add.u32 %ta, %ta, %nb;");
        }
        pro.line("setp.lt.u32 %pv, %ta, %tiles;");
        pro.line(format!("@!%pv bra.uni $P_COMMIT{j};"));
        pro.line(format!("ld.shared.v2.u64 {{%od, %os}}, [%nx+{}];", 16 * j));
        pro.line(format!("mov.u64 {}, %od;", od[j as usize]));
        pro.line(format!("mad.lo.s64 %sb, %os, {}, %src;", d.size));
        pro.0.push_str(&loads);
        pro.0.push('\n');
        pro.label(&format!("$P_COMMIT{j}"));
        pro.line("cp.async.commit_group;");
        pro.line("add.u32 %lb, %lb, %tby;");
    }
    pro.line("mov.u32 %gb, %tb;");
    pro.line(format!("mov.u32 %sl, {ahead};"));
    let mut rotate = Code::default();
    for j in 0..ahead as usize {
        rotate.line(format!("mov.u64 {}, {};", od[j], od[j + 1]));
    }

    t.render(
        "tiled_async.ptx",
        &[
            ("NAME", name.to_string()),
            ("NBUF", nbuf.to_string()),
            ("AHEAD", ahead.to_string()),
            ("AHEAD_LESS", (ahead - 1).to_string()),
            ("UNITS", units.to_string()),
            ("WRITES", writes.to_string()),
            ("VD", vd.to_string()),
            ("DSIZE", d.size.to_string()),
            ("SSIZE", d.size.to_string()),
            ("MAX_THREADS", tiled_max_threads(true, ds, ds).to_string()),
            (
                "MAXNREG",
                tiled_async_max_registers(ds).map_or(String::new(), |n| format!(".maxnreg {n}\n")),
            ),
            ("TILE_BYTES", tile_bytes.to_string()),
            ("DECLS", g.decls()),
            ("SETUP", setup.text()),
            ("SETUP_STORES", store_set.text()),
            ("PROLOGUE", pro.text()),
            ("ORIGIN_AHEAD", origin_of("BAXA")),
            ("LOADS", loads),
            ("OD_FIRST", od[0].clone()),
            ("OD_LAST", od[ahead as usize].clone()),
            ("GATHER", gather),
            ("ROTATE", rotate.text()),
        ],
    )
}

/// Emits, for each `(cnt, v)`, how many slots of `v` elements a thread has in a tile when the
/// threads interleave: slot `i` (of thread `t`) exists while `(t + i * threads) * v < volume`,
/// so for `i` below `cnt`.
fn slot_counts(g: &mut Gen, setup: &mut Code, counts: &[(&str, u64)]) {
    for &(cnt, v) in counts {
        let m = g.reg(Class::B32);
        let q = g.reg(Class::Pred);
        setup.line(format!("shr.u32 {m}, %vol, {};", log2(v)));
        setup.line(format!("setp.lt.u32 {q}, %ti, {m};"));
        setup.line(format!("sub.u32 {m}, {m}, %ti;"));
        setup.line(format!("add.u32 {m}, {m}, %nt;"));
        setup.line(format!("sub.u32 {m}, {m}, 1;"));
        setup.line(format!("div.u32 {cnt}, {m}, %nt;"));
        setup.line(format!("selp.b32 {cnt}, {cnt}, 0, {q};"));
    }
}

/// The source offsets (elements from the tile's first) of a thread's `n` accesses to the
/// tile in read order, access `i` at position `base + i * step` (registers):
/// [`split_sums`] over the read axes (loops labelled `label`).
fn source_offsets(
    g: &mut Gen,
    setup: &mut Code,
    label: &str,
    (base, step): (&str, &str),
    n: usize,
) -> Vec<String> {
    let field = [(offset_of!(TiledReadAxis, src), "s32")];
    let sums = split_sums(g, setup, label, READ_AXES, (base, step), n, &field);
    sums.into_iter().map(|mut f| f.remove(0)).collect()
}

/// Emits the positions of a thread's accesses of `2^shift` elements when the threads
/// interleave: access `i` of thread `t` at `base + i * step`, `base = t << shift`,
/// `step = threads << shift` (returned as registers).
fn interleaved(g: &mut Gen, setup: &mut Code, shift: u32) -> (String, String) {
    let (base, step) = (g.reg(Class::B32), g.reg(Class::B32));
    setup.line(format!("shl.b32 {base}, %ti, {shift};"));
    setup.line(format!("shl.b32 {step}, %nt, {shift};"));
    (base, step)
}

/// Emits the positions (in read or write order) of a thread's `n` one-element slots when
/// each warp takes `n` consecutive runs of 32 positions: slot `i` of lane `l` of warp `w` at
/// `base + i * 32`, `base = w * n * 32 + l` (into `base` and `step` = 32); `cnt` gets how many
/// of its slots lie below the tile's volume (`%vol`; they are the first ones). Every position
/// below `%ntid.x * n` belongs to one slot of one thread (`%ntid.x` is a multiple of 32). A
/// warp's accesses then cover 32 consecutive positions each, as with interleaved threads,
/// and its successive accesses continue each other.
fn warp_runs(g: &mut Gen, setup: &mut Code, cnt: &str, n: u64, (base, step): (&str, &str)) {
    let (t, q) = (g.reg(Class::B32), g.reg(Class::Pred));
    setup.line(format!("and.b32 {t}, %ti, 31;"));
    setup.line(format!("and.b32 {base}, %ti, 0xffffffe0;"));
    setup.line(format!("mad.lo.u32 {base}, {base}, {n}, {t};"));
    setup.line(format!("mov.u32 {step}, 32;"));
    setup.line(format!("setp.lt.u32 {q}, {base}, %vol;"));
    setup.line(format!("sub.u32 {t}, %vol, {base};"));
    setup.line(format!("add.u32 {t}, {t}, 31;"));
    setup.line(format!("shr.u32 {t}, {t}, 5;"));
    setup.line(format!("min.u32 {t}, {t}, {n};"));
    setup.line(format!("selp.b32 {cnt}, {t}, 0, {q};"));
}

/// Emits `o` = the source offset (elements from the tile's first) of read-order position `x`
/// (a register, clobbered): one loop over the read axes, labelled `label` ([`split_index`]).
fn source_offset(g: &mut Gen, setup: &mut Code, x: &str, o: &str, label: &str) {
    let field = [(offset_of!(TiledReadAxis, src), "s32")];
    let acc = [o.to_string()];
    let init = ["0".to_string()];
    split_index(g, setup, label, READ_AXES, "0", x, (&acc, &init), &field);
}

/// The predicate of slot `i` of a thread's loads (`cnt` = `%rcnt` or `%ucnt`) or stores
/// (`%wcnt`), computed where it is used.
fn slot_pred(g: &mut Gen, c: &mut Code, cnt: &str, i: usize) -> String {
    let p = g.reg(Class::Pred);
    c.line(format!("setp.gt.u32 {p}, {cnt}, {i};"));
    p
}

/// Set-up of a thread's `writes` stores of `vd` elements of `d`: their destination offsets
/// (elements from the tile's first) and their elements' places in shared memory, packed two
/// to a register ([`pack_pairs`]). Store `i` starts at write-order position
/// `(base + i * step) * vd`, with `wpos = (base, step)` (registers or special registers).
#[allow(clippy::too_many_arguments)]
fn store_setup(
    g: &mut Gen,
    setup: &mut Code,
    d: Ty,
    shifts: &[u32],
    vd: u64,
    writes: u64,
    split: bool,
    wpos: (&str, &str),
) -> (Vec<String>, Vec<String>) {
    let write = offset_of!(TiledArgs, write);
    let stride = size_of::<TiledWriteAxis>();
    let field = |f: usize, reg: &str, ty: &str| format!("ld.param.{ty} {reg}, [%pa+{f}];");
    // With `split`, the low write axes: the first `lo` ones, whose product `span` is the first
    // multiple of `vd` (a store's elements differ only on them, as `vd` divides every store's
    // first position); the others are split once per store. Without, every axis is low.
    let (lo, span) = (g.reg(Class::B32), g.reg(Class::B32));
    if split {
        setup.line(format!("mov.u32 {lo}, 0;"));
        setup.line(format!("mov.u32 {span}, 1;"));
        setup.line("mov.u64 %pa, p_args;");
        setup.line(format!("add.u64 %pa, %pa, {write};"));
        setup.label("$WLO");
        let t = g.reg(Class::B32);
        setup.line(format!("and.b32 {t}, {span}, {};", vd - 1));
        setup.line(format!("setp.eq.u32 %p0, {t}, 0;"));
        setup.line("@%p0 bra.uni $WLO_END;");
        setup.line(format!("setp.ge.u32 %p0, {lo}, %trank;"));
        setup.line("@%p0 bra.uni $WLO_END;");
        setup.line(field(offset_of!(TiledWriteAxis, len), "%len", "u32"));
        setup.line(format!("mul.lo.u32 {span}, {span}, %len;"));
        setup.line(format!("add.u64 %pa, %pa, {stride};"));
        setup.line(format!("add.u32 {lo}, {lo}, 1;"));
        setup.line("bra.uni $WLO;");
        setup.label("$WLO_END");
    }
    let low_end = if split { lo.as_str() } else { "%trank" };
    // Loads an axis's division and read stride.
    let axis_head = |body: &mut Code| {
        body.line(field(offset_of!(TiledWriteAxis, len), "%len", "u32"));
        body.line(field(offset_of!(TiledWriteAxis, magic), "%magic", "u32"));
        body.line(field(offset_of!(TiledWriteAxis, shift), "%shift", "u32"));
        body.line(field(offset_of!(TiledWriteAxis, read), "%rstr", "u32"));
    };
    let mut wdoff = Vec::new();
    let mut gaddr: Vec<Vec<String>> = Vec::new();
    for i in 0..writes as usize {
        // Store i's first position, split at `span`: the high axes give the read-order and
        // destination offsets common to its elements.
        let (xlo, xhi, rhi, o) = (
            g.reg(Class::B32),
            g.reg(Class::B32),
            g.reg(Class::B32),
            g.reg(Class::B32),
        );
        setup.line(format!("mad.lo.u32 {xhi}, {}, {i}, {};", wpos.1, wpos.0));
        setup.line(format!("shl.b32 {xhi}, {xhi}, {};", log2(vd)));
        if split {
            setup.line(format!("rem.u32 {xlo}, {xhi}, {span};"));
            setup.line(format!("div.u32 {xhi}, {xhi}, {span};"));
            setup.line(format!("mov.u32 {rhi}, 0;"));
            setup.line(format!("mov.u32 {o}, 0;"));
            let mut body = Code::default();
            axis_head(&mut body);
            let c = split32(g, &mut body, std::slice::from_ref(&xhi));
            body.line(field(offset_of!(TiledWriteAxis, dst), "%str", "s32"));
            body.line(format!("mad.lo.s32 {o}, {}, %str, {o};", c[0]));
            body.line(format!("mad.lo.u32 {rhi}, {}, %rstr, {rhi};", c[0]));
            axis_range_loop(
                setup,
                &format!("WHI_{i}"),
                lo.as_str(),
                "%trank",
                write,
                stride,
                body,
            );
        } else {
            setup.line(format!("mov.u32 {xlo}, {xhi};"));
            setup.line(format!("mov.u32 {rhi}, 0;"));
            setup.line(format!("mov.u32 {o}, 0;"));
        }
        // The store's elements on the low axes, four to a loop with `split` (each axis's
        // parameters loaded once for them, and only their registers live in it), else one:
        // element j at low write-order position `x`, read-order position `r`.
        let mut row = Vec::new();
        let per_loop = if split { LOW_GROUP } else { 1 };
        for group in 0..vd.div_ceil(per_loop) {
            let js = group * per_loop..vd.min((group + 1) * per_loop);
            let xs: Vec<String> = js.clone().map(|_| g.reg(Class::B32)).collect();
            let rs: Vec<String> = js.clone().map(|_| g.reg(Class::B32)).collect();
            for (j, (x, r)) in js.zip(xs.iter().zip(&rs)) {
                setup.line(format!("add.u32 {x}, {xlo}, {j};"));
                setup.line(format!("mov.u32 {r}, {rhi};"));
            }
            let mut body = Code::default();
            axis_head(&mut body);
            let c = split32(g, &mut body, &xs);
            if group == 0 {
                body.line(field(offset_of!(TiledWriteAxis, dst), "%str", "s32"));
                body.line(format!("mad.lo.s32 {o}, {}, %str, {o};", c[0]));
            }
            for (r, c) in rs.iter().zip(&c) {
                body.line(format!("mad.lo.u32 {r}, {c}, %rstr, {r};"));
            }
            axis_range_loop(
                setup,
                &format!("WLO_{i}_{group}"),
                "0",
                low_end,
                write,
                stride,
                body,
            );
            for r in &rs {
                setup.line(format!("shl.b32 {r}, {r}, {};", log2(d.size)));
                row.push(smem_addr(g, setup, r, d, shifts, 1).0);
            }
        }
        wdoff.push(o);
        gaddr.push(row);
    }
    // The gathers' places (and the element-wise kernels' places of their loads) are kept
    // two to a register, as offsets from the tile (below 2^16): fewer registers, so more
    // resident blocks; each access then adds its offset to the tile's address.
    let flat: Vec<String> = gaddr.iter().flatten().cloned().collect();
    let gpacked = pack_pairs(g, setup, &flat);
    (wdoff, gpacked)
}

/// [`store_setup`] without the split at the low write axes: each of a store's `vd` elements
/// is placed on its own, element `j` of store `i` at write-order position `((base + i * step)
/// << log2(vd)) + j` (`wpos = (base, step)`), through [`split_sums`] over the write axes (the destination offset of
/// element 0, the read-order position of each).
fn element_setup(
    g: &mut Gen,
    setup: &mut Code,
    d: Ty,
    shifts: &[u32],
    vd: u64,
    writes: u64,
    wpos: (&str, &str),
) -> (Vec<String>, Vec<String>) {
    let (dst, read) = (
        (offset_of!(TiledWriteAxis, dst), "s32"),
        (offset_of!(TiledWriteAxis, read), "u32"),
    );
    let step = g.reg(Class::B32);
    setup.line(format!("shl.b32 {step}, {}, {};", wpos.1, log2(vd)));
    let mut wdoff = Vec::new();
    let mut rows: Vec<Vec<String>> = (0..writes).map(|_| Vec::new()).collect();
    for j in 0..vd as usize {
        let base = g.reg(Class::B32);
        setup.line(format!("shl.b32 {base}, {}, {};", wpos.0, log2(vd)));
        setup.line(format!("add.u32 {base}, {base}, {j};"));
        let fields: &[(usize, &str)] = if j == 0 { &[read, dst] } else { &[read] };
        let sums = split_sums(
            g,
            setup,
            &format!("WEL_{j}"),
            WRITE_AXES,
            (&base, &step),
            writes as usize,
            fields,
        );
        for (i, f) in sums.into_iter().enumerate() {
            let r = &f[0];
            setup.line(format!("shl.b32 {r}, {r}, {};", log2(d.size)));
            rows[i].push(smem_addr(g, setup, r, d, shifts, 1).0);
            if j == 0 {
                wdoff.push(f[1].clone());
            }
        }
    }
    let flat: Vec<String> = rows.iter().flatten().cloned().collect();
    let gpacked = pack_pairs(g, setup, &flat);
    (wdoff, gpacked)
}

/// Per tile: the gathers of a thread's stores from shared memory (places from the tile at
/// register `base`), and the stores to the tile's destination base `%dcur`.
fn gather_stores(
    g: &mut Gen,
    d: Ty,
    wdoff: &[String],
    gpacked: &[String],
    vd: u64,
    base: &str,
) -> Code {
    let mut gather = Code::default();
    let mut slot = 0usize;
    let gathered: Vec<Vec<String>> = (0..wdoff.len())
        .map(|i| {
            let p = slot_pred(g, &mut gather, "%wcnt", i);
            (0..vd)
                .map(|_| {
                    let a = unpack(g, &mut gather, gpacked, slot, base);
                    slot += 1;
                    load_scalar(g, &mut gather, d, Space::Shared, &addr(&a, 0), Some(&p))
                })
                .collect()
        })
        .collect();
    for (i, vals) in gathered.iter().enumerate() {
        let a = g.reg(Class::B64);
        gather.line(format!(
            "mad.wide.s32 {a}, {}, {}, %dcur;",
            wdoff[i], d.size
        ));
        let at = addr(&a, 0);
        let p = slot_pred(g, &mut gather, "%wcnt", i);
        let p = Some(p.as_str());
        if vals.len() == 1 {
            store_scalar(&mut gather, d, Space::Global, &at, &vals[0], p);
        } else {
            store_vec(g, &mut gather, d, vals, Space::Global, &at, p);
        }
    }
    gather
}

/// Packs the shared-memory addresses `addrs` two to a register, as 16-bit offsets from the
/// tile's address `%tb` (every place in the tile lies below 2^16 bytes from it).
fn pack_pairs(g: &mut Gen, c: &mut Code, addrs: &[String]) -> Vec<String> {
    addrs
        .chunks(2)
        .map(|pair| {
            let w = g.reg(Class::B32);
            c.line(format!("sub.u32 {w}, {}, %tb;", pair[0]));
            if let Some(a) = pair.get(1) {
                let hi = g.reg(Class::B32);
                c.line(format!("sub.u32 {hi}, {a}, %tb;"));
                c.line(format!("shl.b32 {hi}, {hi}, 16;"));
                c.line(format!("or.b32 {w}, {w}, {hi};"));
            }
            w
        })
        .collect()
}

/// The address of entry `i` packed by [`pack_pairs`] in a tile whose address is in register
/// `base` (`%tb`, or the buffer of a pipelined kernel).
fn unpack(g: &mut Gen, c: &mut Code, packed: &[String], i: usize, base: &str) -> String {
    let (w, half) = (&packed[i / 2], i % 2);
    let t = g.reg(Class::B32);
    if half == 0 {
        c.line(format!("and.b32 {t}, {w}, 65535;"));
    } else {
        c.line(format!("shr.u32 {t}, {w}, 16;"));
    }
    c.line(format!("add.u32 {t}, {t}, {base};"));
    t
}

/// Loads `bytes` (16 or 8) raw bytes as units of `unit` bytes (4 or 8) with one vector load.
fn load_words(
    g: &mut Gen,
    c: &mut Code,
    bytes: u64,
    unit: u64,
    at: &str,
    pred: Option<&str>,
) -> Vec<String> {
    let n = bytes / unit;
    let (cls, ty) = if unit == 8 {
        (Class::B64, "u64")
    } else {
        (Class::B32, "u32")
    };
    let r: Vec<String> = (0..n).map(|_| g.reg(cls)).collect();
    let (v, regs) = vector_operand(&r);
    c.line(format!("{}ld.global.nc{v}.{ty} {regs}, {at};", pfx(pred)));
    r
}
