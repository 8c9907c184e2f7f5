//! Generator of the permute kernels (`kernels/permute.ptx`): any permutation of up to 8 axes,
//! tiles of T x T slots through shared memory, fused with a conversion.
//!
//! Parameter offsets follow `PermuteArgs` in `src/kernels/permute.rs`.

use super::{
    Class, Code, Gen, Space, Templates, Ty, addr, bits_ty, convert, load_scalar, log2, pack_word,
    store_scalar, transpose_words,
};

const LEN: u64 = 32;
const CHUNK: u64 = 96;
const NCHUNKS: u64 = 160;
const DST_STRIDES: u64 = 352; // low words read as 32-bit strides
const SRC_STRIDES: u64 = 416;
const DST_STEPS: u64 = 480;
const SRC_STEPS: u64 = 544;
const MAGIC32: u64 = 608;
const SHIFT32: u64 = 640;
const WORDS: u64 = 676;
const AXES: usize = 8;

/// Slots per tile side of the packed kernels and of the large element-wise kernels. Must agree
/// with `PERMUTE_TILE` in `src/kernels/permute.rs`.
const TILE: u64 = 64;
/// Rows of the packed kernels' block. Must agree with `PERMUTE_SMALL_BLOCK`.
const PACKED_BY: u64 = 8;

/// The element-wise kernels' variants: `(kind, slots per side, block rows)`. Must agree with
/// `PermuteArgs::tile`, `PERMUTE_BLOCK` and `PERMUTE_SMALL_BLOCK` in
/// `src/kernels/permute.rs`.
pub(super) const VARIANTS: [(&str, u64, u64); 2] = [("permute", 64, 16), ("permute32", 32, 8)];

/// Pitch of the shared tile in elements of `d`: T plus enough padding that rows start in
/// different banks (pitch in bytes an odd multiple of 4, or of 8 for 8-byte elements).
fn pitch(t: u64, d: Ty) -> u64 {
    t + (4 / d.size).max(1)
}

/// A slot's per-thread constants: local coordinates packed as `l0 | l1 << 16` (`0xFFFF` in
/// both halves for a slot past the side's pieces, never below the remaining extents, which
/// the origin clamps to 65535) and the byte offset of its element from the tile's origin, in
/// 32 bits (the planner keeps every offset inside a tile within `i32`; the low 32 bits of the
/// strides give the exact product then).
struct Slot {
    packed: String,
    off: String,
}

/// Computes slot `j` (a `.b32` register) of `side` with the strides of one operand.
fn slot(g: &mut Gen, c: &mut Code, side: u64, j: &str, strides: u64, shift: u32) -> Slot {
    let c0 = g.reg(Class::B32);
    let c1 = g.reg(Class::B32);
    c.line(format!(
        "ld.param.u32 {c0}, [p_args+{}];",
        CHUNK + 16 * side
    ));
    c.line(format!(
        "ld.param.u32 {c1}, [p_args+{}];",
        CHUNK + 16 * side + 8
    ));
    let q = g.reg(Class::B32);
    let r = g.reg(Class::B32);
    let t = g.reg(Class::B32);
    c.line(format!("div.u32 {q}, {j}, {c0};"));
    c.line(format!("mul.lo.u32 {t}, {q}, {c0};"));
    c.line(format!("sub.u32 {r}, {j}, {t};"));
    let n = g.reg(Class::B32);
    c.line(format!("mul.lo.u32 {n}, {c0}, {c1};"));
    let pinv = g.reg(Class::Pred);
    c.line(format!("setp.ge.u32 {pinv}, {j}, {n};"));
    let packed = g.reg(Class::B32);
    c.line(format!("shl.b32 {t}, {q}, 16;"));
    c.line(format!("or.b32 {packed}, {t}, {r};"));
    c.line(format!("@{pinv} mov.b32 {packed}, 0xFFFFFFFF;"));
    let (s0, s1) = (g.reg(Class::B32), g.reg(Class::B32));
    c.line(format!(
        "ld.param.u32 {s0}, [p_args+{}];",
        strides + 16 * side
    ));
    c.line(format!(
        "ld.param.u32 {s1}, [p_args+{}];",
        strides + 16 * side + 8
    ));
    let off = g.reg(Class::B32);
    c.line(format!("mul.lo.s32 {off}, {r}, {s0};"));
    c.line(format!("mad.lo.s32 {off}, {q}, {s1}, {off};"));
    c.line(format!("shl.b32 {off}, {off}, {shift};"));
    Slot { packed, off }
}

/// Sets `p` when the slot's coordinates lie inside the tile (`%rem{2 side}`, `%rem{2 side+1}`).
fn inside(g: &mut Gen, c: &mut Code, side: u64, s: &Slot) -> String {
    let p = g.reg(Class::Pred);
    let (l0, l1) = (g.reg(Class::B32), g.reg(Class::B32));
    c.line(format!("and.b32 {l0}, {}, 65535;", s.packed));
    c.line(format!("shr.u32 {l1}, {}, 16;", s.packed));
    c.line(format!("setp.lt.u32 {p}, {l0}, %rem{};", 2 * side));
    c.line(format!(
        "setp.lt.and.u32 {p}, {l1}, %rem{}, {p};",
        2 * side + 1
    ));
    p
}

/// Splits the tile index `%bid` (below 2^31) over the pieces with 32-bit fast division:
/// `%boffd` / `%boffs` (bytes), `%rem0..3`, and `%pfull` when the tile is whole on every side
/// and every slot is used.
fn origin(g: &mut Gen, s: Ty, d: Ty) -> String {
    let mut c = Code::default();
    c.line("cvt.u32.u64 %x, %bid;");
    c.line("mov.b64 %boffd, 0;");
    c.line("mov.b64 %boffs, 0;");
    let pr = g.reg(Class::Pred);
    for k in 0..AXES as u64 {
        if k >= 4 {
            c.line(format!("setp.eq.u32 {pr}, %rank, {k};"));
            c.line(format!("@{pr} bra.uni $ORIGIN_DONE;"));
        }
        let (nch, magic, sh, q, t, cc) = (
            g.reg(Class::B32),
            g.reg(Class::B32),
            g.reg(Class::B32),
            g.reg(Class::B32),
            g.reg(Class::B32),
            g.reg(Class::B32),
        );
        c.line(format!("ld.param.u32 {nch}, [p_args+{}];", NCHUNKS + 8 * k));
        c.line(format!(
            "ld.param.u32 {magic}, [p_args+{}];",
            MAGIC32 + 4 * k
        ));
        c.line(format!("ld.param.u32 {sh}, [p_args+{}];", SHIFT32 + 4 * k));
        c.line(format!("mul.hi.u32 {t}, %x, {magic};"));
        c.line(format!("add.u32 {t}, {t}, %x;"));
        c.line(format!("shr.u32 {q}, {t}, {sh};"));
        c.line(format!("mul.lo.u32 {t}, {q}, {nch};"));
        c.line(format!("sub.u32 {cc}, %x, {t};"));
        let c64 = g.reg(Class::B64);
        c.line(format!("cvt.u64.u32 {c64}, {cc};"));
        let (ds, ss) = (g.reg(Class::B64), g.reg(Class::B64));
        c.line(format!(
            "ld.param.s64 {ds}, [p_args+{}];",
            DST_STEPS + 8 * k
        ));
        c.line(format!(
            "ld.param.s64 {ss}, [p_args+{}];",
            SRC_STEPS + 8 * k
        ));
        c.line(format!("mad.lo.s64 %boffd, {c64}, {ds}, %boffd;"));
        c.line(format!("mad.lo.s64 %boffs, {c64}, {ss}, %boffs;"));
        if k < 4 {
            let (ch, len, t64) = (g.reg(Class::B64), g.reg(Class::B64), g.reg(Class::B64));
            c.line(format!("ld.param.u64 {ch}, [p_args+{}];", CHUNK + 8 * k));
            c.line(format!("ld.param.u64 {len}, [p_args+{}];", LEN + 8 * k));
            c.line(format!("mul.lo.u64 {t64}, {c64}, {ch};"));
            c.line(format!("sub.u64 {t64}, {len}, {t64};"));
            c.line(format!("min.u64 {t64}, {t64}, 65535;"));
            c.line(format!("cvt.u32.u64 %rem{k}, {t64};"));
        }
        c.line(format!("mov.b32 %x, {q};"));
    }
    c.label("$ORIGIN_DONE");
    c.line(format!("shl.b64 %boffd, %boffd, {};", log2(d.size)));
    c.line(format!("shl.b64 %boffs, %boffs, {};", log2(s.size)));
    c.line("setp.ge.u32 %pfull, %rem0, %c0;");
    for k in 1..4 {
        c.line(format!("setp.ge.and.u32 %pfull, %rem{k}, %c{k}, %pfull;"));
    }
    c.line("and.pred %pfull, %pfull, %pslots;");
    c.text()
}

/// The read phase: all loads of the thread, then conversions and shared stores. Predicated
/// on the slots' coordinates unless the tile is known to be whole.
#[allow(clippy::too_many_arguments)]
fn read_phase(
    g: &mut Gen,
    (s, d): (Ty, Ty),
    (p, by): (u64, u64),
    ra: &[Slot],
    rb: &[Slot],
    whole: bool,
) -> String {
    let mut read = Code::default();
    let pb: Vec<(Option<String>, String)> = rb
        .iter()
        .map(|sl| {
            let p = (!whole).then(|| inside(g, &mut read, 1, sl));
            let a = g.reg(Class::B64);
            read.line(format!("mad.wide.s32 {a}, {}, 1, %sbase;", sl.off));
            (p, a)
        })
        .collect();
    let pa: Vec<Option<String>> = ra
        .iter()
        .map(|sl| (!whole).then(|| inside(g, &mut read, 0, sl)))
        .collect();
    let mut loaded = Vec::new();
    for (k, sa) in ra.iter().enumerate() {
        for (i, (pbi, base)) in pb.iter().enumerate() {
            let pr = match (&pa[k], pbi) {
                (Some(x), Some(y)) => {
                    let pr = g.reg(Class::Pred);
                    read.line(format!("and.pred {pr}, {x}, {y};"));
                    Some(pr)
                }
                _ => None,
            };
            let at = g.reg(Class::B64);
            read.line(format!("mad.wide.s32 {at}, {}, 1, {base};", sa.off));
            let v = load_scalar(
                g,
                &mut read,
                s,
                Space::GlobalNc,
                &format!("[{at}]"),
                pr.as_deref(),
            );
            loaded.push((k as u64, i as u64, v));
        }
    }
    let converted: Vec<(u64, u64, String)> = loaded
        .into_iter()
        .map(|(k, i, v)| (k, i, convert(g, &mut read, s, d, &v)))
        .collect();
    // The previous tile's write phase must be done with the shared tile; this tile's loads
    // are already in flight.
    read.line("bar.sync 0;");
    for (k, i, y) in converted {
        let off = (by * k * p + 32 * i) * d.size;
        store_scalar(&mut read, d, Space::Shared, &addr("%tsw", off), &y, None);
    }
    read.text()
}

/// The write phase: all shared loads, then (predicated) global stores.
fn write_phase(
    g: &mut Gen,
    d: Ty,
    (p, by): (u64, u64),
    wa: &[Slot],
    wb: &[Slot],
    whole: bool,
) -> String {
    let mut write = Code::default();
    let pw: Vec<(Option<String>, String)> = wa
        .iter()
        .map(|sl| {
            let p = (!whole).then(|| inside(g, &mut write, 0, sl));
            let a = g.reg(Class::B64);
            write.line(format!("mad.wide.s32 {a}, {}, 1, %dbase;", sl.off));
            (p, a)
        })
        .collect();
    let pbw: Vec<Option<String>> = wb
        .iter()
        .map(|sl| (!whole).then(|| inside(g, &mut write, 1, sl)))
        .collect();
    let mut vals = Vec::new();
    for k in 0..wb.len() {
        for i in 0..wa.len() {
            let off = (32 * i as u64 * p + by * k as u64) * d.size;
            let v = load_scalar(g, &mut write, d, Space::Shared, &addr("%tsr", off), None);
            vals.push((k, i, v));
        }
    }
    for (k, i, v) in vals {
        let pr = match (&pw[i].0, &pbw[k]) {
            (Some(x), Some(y)) => {
                let pr = g.reg(Class::Pred);
                write.line(format!("and.pred {pr}, {x}, {y};"));
                Some(pr)
            }
            _ => None,
        };
        let at = g.reg(Class::B64);
        write.line(format!("mad.wide.s32 {at}, {}, 1, {};", wb[k].off, pw[i].1));
        store_scalar(
            &mut write,
            d,
            Space::Global,
            &format!("[{at}]"),
            &v,
            pr.as_deref(),
        );
    }
    write.text()
}

/// The write phase in 4-byte words of two 2-byte elements: lane `tx` takes A slots `2 tx` and
/// `2 tx + 1` (one word of the destination, see `PermuteArgs::words`), row `ty` B slots
/// `ty + by k`; the two elements come from shared memory at `%tsr2` (`[2 tx][ty]`).
fn write_words(
    g: &mut Gen,
    d: Ty,
    (p, by): (u64, u64),
    wa: &Slot,
    wb: &[Slot],
    whole: bool,
) -> String {
    let mut write = Code::default();
    let pa = (!whole).then(|| inside(g, &mut write, 0, wa));
    let base = g.reg(Class::B64);
    write.line(format!("mad.wide.s32 {base}, {}, 1, %dbase;", wa.off));
    let words: Vec<String> = (0..wb.len() as u64)
        .map(|k| {
            let off = by * k * d.size;
            let lo = load_scalar(g, &mut write, d, Space::Shared, &addr("%tsr2", off), None);
            let hi = load_scalar(
                g,
                &mut write,
                d,
                Space::Shared,
                &addr("%tsr2", off + p * d.size),
                None,
            );
            pack_word(g, &mut write, d, &[lo, hi])
        })
        .collect();
    store_words(g, &mut write, pa.as_deref(), &base, wb, &words);
    write.text()
}

/// Stores `words[k]` at `base` plus the destination offset of B slot `wb[k]`, predicated (when
/// `pa` is given: a partial tile) on `pa` and on the B slot lying inside the tile.
fn store_words(
    g: &mut Gen,
    c: &mut Code,
    pa: Option<&str>,
    base: &str,
    wb: &[Slot],
    words: &[String],
) {
    for (sb, w) in wb.iter().zip(words) {
        let pr = pa.map(|pa| {
            let pb = inside(g, c, 1, sb);
            let pr = g.reg(Class::Pred);
            c.line(format!("and.pred {pr}, {pa}, {pb};"));
            pr
        });
        let at = g.reg(Class::B64);
        c.line(format!("mad.wide.s32 {at}, {}, 1, {base};", sb.off));
        store_scalar(
            c,
            bits_ty(4),
            Space::Global,
            &format!("[{at}]"),
            w,
            pr.as_deref(),
        );
    }
}

/// The element-wise kernel `name` for `s -> d` with tiles of `tt` x `tt` slots and blocks of
/// (32, `by`) threads. With 2-byte destinations and 64-slot tiles, the kernel also has a
/// write phase in 4-byte words, taken when `PermuteArgs::words` is set.
pub(super) fn permute_kernel(
    t: &mut Templates,
    name: &str,
    s: Ty,
    d: Ty,
    tt: u64,
    by: u64,
) -> String {
    let p = pitch(tt, d);
    let (nx, ny) = (tt / 32, tt / by);
    let (ssh, dsh) = (log2(s.size), log2(d.size));
    let mut g = Gen::default();

    // Per-thread constants.
    let mut setup = Code::default();
    let tmp = g.reg(Class::B32);
    setup.line(format!("mad.lo.u32 {tmp}, %ty, {p}, %tx;"));
    setup.line(format!("mad.lo.u32 %tsw, {tmp}, {}, %tile;", d.size));
    setup.line(format!("mad.lo.u32 {tmp}, %tx, {p}, %ty;"));
    setup.line(format!("mad.lo.u32 %tsr, {tmp}, {}, %tile;", d.size));
    let jx: Vec<String> = (0..nx)
        .map(|i| {
            let j = g.reg(Class::B32);
            setup.line(format!("add.u32 {j}, %tx, {};", 32 * i));
            j
        })
        .collect();
    let jy: Vec<String> = (0..ny)
        .map(|k| {
            let j = g.reg(Class::B32);
            setup.line(format!("add.u32 {j}, %ty, {};", by * k));
            j
        })
        .collect();
    let rb: Vec<Slot> = jx
        .iter()
        .map(|j| slot(&mut g, &mut setup, 1, j, SRC_STRIDES, ssh))
        .collect();
    let ra: Vec<Slot> = jy
        .iter()
        .map(|j| slot(&mut g, &mut setup, 0, j, SRC_STRIDES, ssh))
        .collect();
    let wa: Vec<Slot> = jx
        .iter()
        .map(|j| slot(&mut g, &mut setup, 0, j, DST_STRIDES, dsh))
        .collect();
    let wb: Vec<Slot> = jy
        .iter()
        .map(|j| slot(&mut g, &mut setup, 1, j, DST_STRIDES, dsh))
        .collect();

    // Chunks and whether every slot of both sides is used.
    for k in 0..4u64 {
        setup.line(format!("ld.param.u32 %c{k}, [p_args+{}];", CHUNK + 8 * k));
    }
    let (n0, n1) = (g.reg(Class::B32), g.reg(Class::B32));
    setup.line(format!("mul.lo.u32 {n0}, %c0, %c1;"));
    setup.line(format!("mul.lo.u32 {n1}, %c2, %c3;"));
    setup.line(format!("setp.eq.u32 %pslots, {n0}, {tt};"));
    setup.line(format!("setp.eq.and.u32 %pslots, {n1}, {tt}, %pslots;"));

    // Word stores: A slot 2 tx, its pair's shared address, and the flag.
    let words = (d.size == 2 && tt == 64).then(|| {
        let j = g.reg(Class::B32);
        setup.line(format!("shl.b32 {j}, %tx, 1;"));
        let wa2 = slot(&mut g, &mut setup, 0, &j, DST_STRIDES, dsh);
        let tmp = g.reg(Class::B32);
        setup.line(format!("mad.lo.u32 {tmp}, {j}, {p}, %ty;"));
        setup.line(format!("mad.lo.u32 %tsr2, {tmp}, {}, %tile;", d.size));
        let flag = g.reg(Class::B32);
        let pw = g.reg(Class::Pred);
        setup.line(format!("ld.param.u32 {flag}, [p_args+{WORDS}];"));
        setup.line(format!("setp.ne.u32 {pw}, {flag}, 0;"));
        (wa2, pw)
    });
    let origin = origin(&mut g, s, d);
    let read = read_phase(&mut g, (s, d), (p, by), &ra, &rb, false);
    let read_whole = read_phase(&mut g, (s, d), (p, by), &ra, &rb, true);
    let mut writes = Vec::new();
    for (whole, tag) in [(false, "P"), (true, "W")] {
        let elems = write_phase(&mut g, d, (p, by), &wa, &wb, whole);
        writes.push(match &words {
            None => elems,
            Some((wa2, pw)) => {
                let w = write_words(&mut g, d, (p, by), wa2, &wb, whole);
                format!(
                    "\t@{pw} bra.uni $WORDS_{tag};\n{elems}\tbra.uni $WRITTEN_{tag};\n$WORDS_{tag}:\n{w}$WRITTEN_{tag}:\n"
                )
            }
        });
    }
    let write_whole = writes.pop().expect("two write phases");
    let write = writes.pop().expect("two write phases");

    t.render(
        "permute.ptx",
        &[
            ("NAME", name.to_string()),
            ("T", tt.to_string()),
            ("BY", by.to_string()),
            ("PITCH", p.to_string()),
            ("TILE_BYTES", (tt * p * d.size).to_string()),
            ("DECLS", g.decls()),
            ("SETUP", setup.text()),
            ("ORIGIN", origin),
            ("READ", read),
            ("WRITE", write),
            ("READ_WHOLE", read_whole),
            ("WRITE_WHOLE", write_whole),
        ],
    )
}

/// The packed variant of `copy_permute_bN` for 1- and 2-byte elements
/// (`copy_permute_packed_bN`, same template and arguments): every global access moves a 4-byte
/// word of `k = 4 / size` elements. Requires (checked by the planner, see
/// `PermuteArgs::pack`) that axis 0 has destination stride 1 and axis 2 source stride 1, that
/// both have extents and chunks that are multiples of `k`, that every other stride of the
/// same operand is a multiple of `k`, and that both base addresses are 4-byte aligned.
///
/// Tile of 64 x 64 slots; groups of `k` slots along a side form one word. Read phase: each
/// thread loads `k` words (A slots `k ag .. k ag + k`, B group `bg`) per micro-block, transposes
/// the `k x k` block in registers and stores `k` words to shared memory at `[B][A group]`
/// (pitch `64 / k + 1` words). Write phase: each thread loads words `[B slot][A group]` and
/// stores them along the destination's fastest axis.
pub(super) fn permute_packed_kernel(t: &mut Templates, name: &str, e: Ty) -> String {
    assert!(e.size <= 2 && PACKED_BY == 8);
    let tt = TILE;
    let k = 4 / e.size;
    let gs = tt / k; // groups (words) per side
    let pw = gs + 1; // shared pitch in words
    let m = gs * gs / 256; // micro-blocks per thread
    let nw = tt * gs / 256; // words per thread in the write phase
    let sh = log2(e.size);
    let w = bits_ty(4);
    let mut g = Gen::default();
    let mut setup = Code::default();

    // Thread id, and the per-thread group / slot indices.
    let (tid, bg, ag0, tmp) = (
        g.reg(Class::B32),
        g.reg(Class::B32),
        g.reg(Class::B32),
        g.reg(Class::B32),
    );
    setup.line(format!("mad.lo.u32 {tid}, %ty, 32, %tx;"));
    setup.line(format!("rem.u32 {bg}, {tid}, {gs};"));
    setup.line(format!("div.u32 {ag0}, {tid}, {gs};"));
    // Read phase: shared word (k bg) * pw + ag0.
    setup.line(format!("mul.lo.u32 {tmp}, {bg}, {};", k * pw));
    setup.line(format!("add.u32 {tmp}, {tmp}, {ag0};"));
    setup.line(format!("mad.lo.u32 %tsw, {tmp}, 4, %tile;"));
    // Write phase: A group wa = tid % gs, B slot tid / gs + (256 / gs) i; shared word
    // (tid / gs) * pw + wa.
    setup.line(format!("mul.lo.u32 {tmp}, {ag0}, {pw};"));
    setup.line(format!("add.u32 {tmp}, {tmp}, {bg};"));
    setup.line(format!("mad.lo.u32 %tsr, {tmp}, 4, %tile;"));
    let jb = g.reg(Class::B32);
    setup.line(format!("mul.lo.u32 {jb}, {bg}, {k};"));
    // The read side's B group and the write side's A group start at slot k * (tid % gs).
    let rb = slot(&mut g, &mut setup, 1, &jb, SRC_STRIDES, sh);
    let wa = slot(&mut g, &mut setup, 0, &jb, DST_STRIDES, sh);
    // A slots of the read phase: k (ag0 + (256 / gs) i) + r.
    let mut ra = Vec::new();
    for i in 0..m {
        for r in 0..k {
            let j = g.reg(Class::B32);
            setup.line(format!("add.u32 {j}, {ag0}, {};", (256 / gs) * i));
            setup.line(format!("mad.lo.u32 {j}, {j}, {k}, {r};"));
            ra.push(slot(&mut g, &mut setup, 0, &j, SRC_STRIDES, sh));
        }
    }
    // B slots of the write phase: tid / gs + (256 / gs) i.
    let wb: Vec<Slot> = (0..nw)
        .map(|i| {
            let j = g.reg(Class::B32);
            setup.line(format!("add.u32 {j}, {ag0}, {};", (256 / gs) * i));
            slot(&mut g, &mut setup, 1, &j, DST_STRIDES, sh)
        })
        .collect();
    for kk in 0..4u64 {
        setup.line(format!("ld.param.u32 %c{kk}, [p_args+{}];", CHUNK + 8 * kk));
    }
    let (n0, n1) = (g.reg(Class::B32), g.reg(Class::B32));
    setup.line(format!("mul.lo.u32 {n0}, %c0, %c1;"));
    setup.line(format!("mul.lo.u32 {n1}, %c2, %c3;"));
    setup.line(format!("setp.eq.u32 %pslots, {n0}, {tt};"));
    setup.line(format!("setp.eq.and.u32 %pslots, {n1}, {tt}, %pslots;"));

    let origin = origin(&mut g, e, e);
    let mut phases = Vec::new();
    for whole in [false, true] {
        // Read: m micro-blocks of k words each.
        let mut read = Code::default();
        let pb = (!whole).then(|| inside(&mut g, &mut read, 1, &rb));
        let base = g.reg(Class::B64);
        read.line(format!("mad.wide.s32 {base}, {}, 1, %sbase;", rb.off));
        let mut words = Vec::new();
        for sa in &ra {
            let pr = pb.as_ref().map(|pb| {
                let pa = inside(&mut g, &mut read, 0, sa);
                let pr = g.reg(Class::Pred);
                read.line(format!("and.pred {pr}, {pa}, {pb};"));
                pr
            });
            let at = g.reg(Class::B64);
            read.line(format!("mad.wide.s32 {at}, {}, 1, {base};", sa.off));
            words.push(load_scalar(
                &mut g,
                &mut read,
                w,
                Space::GlobalNc,
                &format!("[{at}]"),
                pr.as_deref(),
            ));
        }
        let blocks: Vec<Vec<String>> = words
            .chunks(k as usize)
            .map(|block| transpose_words(&mut g, &mut read, e.size, block))
            .collect();
        // The previous tile's write phase must be done with the shared tile.
        read.line("bar.sync 0;");
        for (i, cols) in blocks.iter().enumerate() {
            for (b, x) in cols.iter().enumerate() {
                let off = 4 * (b as u64 * pw + (256 / gs) * i as u64);
                store_scalar(&mut read, w, Space::Shared, &addr("%tsw", off), x, None);
            }
        }
        // Write: nw words.
        let mut write = Code::default();
        let pa = (!whole).then(|| inside(&mut g, &mut write, 0, &wa));
        let base = g.reg(Class::B64);
        write.line(format!("mad.wide.s32 {base}, {}, 1, %dbase;", wa.off));
        let vals: Vec<String> = (0..nw)
            .map(|i| {
                let off = 4 * (256 / gs) * i * pw;
                load_scalar(
                    &mut g,
                    &mut write,
                    w,
                    Space::Shared,
                    &addr("%tsr", off),
                    None,
                )
            })
            .collect();
        store_words(&mut g, &mut write, pa.as_deref(), &base, &wb, &vals);
        phases.push((read.text(), write.text()));
    }
    let (whole_r, whole_w) = phases.pop().expect("two phases");
    let (read, write) = phases.pop().expect("two phases");
    let text = t.render(
        "permute.ptx",
        &[
            ("NAME", name.to_string()),
            ("T", tt.to_string()),
            ("BY", PACKED_BY.to_string()),
            ("PITCH", pw.to_string()),
            ("TILE_BYTES", (tt * pw * 4).to_string()),
            ("DECLS", g.decls()),
            ("SETUP", setup.text()),
            ("ORIGIN", origin),
            ("READ", read),
            ("WRITE", write),
            ("READ_WHOLE", whole_r),
            ("WRITE_WHOLE", whole_w),
        ],
    );
    // The template's comment describes the element-wise phases; these are the packed ones.
    let body = text.find(".shared").map_or(text.as_str(), |at| &text[at..]);
    format!(
        "// Any-permutation copy of {}-byte elements in 4-byte words (PermuteArgs with\n\
         // pack = {k}; see src/kernels/permute.rs). Tiles of {tt} x {tt} slots; a thread\n\
         // loads {k} words along the source's fastest axis per {k} x {k} block, transposes\n\
         // the block in registers (prmt) and stores {k} words to shared memory at\n\
         // [B slot][A group] (pitch {pw} words); the write phase stores words along the\n\
         // destination's fastest axis. Origin, whole-tile path and grid as in\n\
         // copy_permute_bN.\n{body}",
        e.size
    )
}
