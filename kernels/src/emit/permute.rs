//! Generator of the permute kernels (`kernels/permute.ptx`): any permutation of up to 8 axes,
//! tiles of T x T slots through shared memory, fused with a conversion.
//!
//! Parameter offsets are those of [`PermuteArgs`].

use std::mem::offset_of;

use super::code::{Class, Code, Gen, addr, pfx};
use super::convert::convert;
use super::load_store::{Space, load_scalar, pack_word, store_scalar};
use super::templates::Templates;
use super::transpose::transpose_words;
use super::types::{Ty, bits_ty, log2};
use crate::abi::{PERMUTE_AXES, PermuteArgs};

const RANK: u64 = offset_of!(PermuteArgs, rank) as u64;
const LEN: u64 = offset_of!(PermuteArgs, len) as u64;
const CHUNK: u64 = offset_of!(PermuteArgs, chunk) as u64;
const NCHUNKS: u64 = offset_of!(PermuteArgs, nchunks) as u64;
/// Read as 32-bit strides: the low words of the 64-bit ones.
const DST_STRIDES: u64 = offset_of!(PermuteArgs, dst_strides) as u64;
const SRC_STRIDES: u64 = offset_of!(PermuteArgs, src_strides) as u64;
const DST_STEPS: u64 = offset_of!(PermuteArgs, dst_steps) as u64;
const SRC_STEPS: u64 = offset_of!(PermuteArgs, src_steps) as u64;
const MAGIC32: u64 = offset_of!(PermuteArgs, magic32) as u64;
const SHIFT32: u64 = offset_of!(PermuteArgs, shift32) as u64;
const WORDS: u64 = offset_of!(PermuteArgs, words) as u64;
const ORIGIN32: u64 = offset_of!(PermuteArgs, origin32) as u64;
const AXES: usize = PERMUTE_AXES;

/// Pitch of the shared tile in elements of `d`: T plus enough padding that rows start in
/// different banks (pitch in bytes an odd multiple of 4, or of 8 for 8-byte elements).
fn pitch(t: u64, d: Ty) -> u64 {
    t + (4 / d.size).max(1)
}

/// A slot's per-thread constants: where its local coordinates come from (for partial tiles)
/// and the byte offset of its element from the tile's origin, in 32 bits (the planner keeps
/// every offset inside a tile within `i32`; the low 32 bits of the strides give the exact
/// product then).
struct Slot {
    coords: Coords,
    off: String,
}

impl Slot {
    /// The register of the slot's coordinates, packed one slot per register (as `slot` makes
    /// them; only `pair_coords` pairs them up).
    fn packed(&self) -> String {
        match &self.coords {
            Coords::Packed(p) => p.clone(),
            Coords::Pair(..) => unreachable!("coordinates already paired"),
        }
    }
}

/// A slot's local coordinates.
enum Coords {
    /// Packed in a register as `l0 | l1 << 16` (`0xFFFF` in both halves for a slot past the
    /// side's pieces, never below the remaining extents, which the origin clamps to 255).
    Packed(String),
    /// Two slots' coordinates in one register: half `h` (0 or 1) holds `l0 | l1 << 8` in bits
    /// `16 h ..` (`0xFF` in both bytes for a slot past the side's pieces). Coordinates are
    /// below 128, the most slots a side has.
    Pair(String, u32),
}

/// Computes slot `j` (a `.b32` register) of `side` with the strides of one operand: its
/// packed coordinates `r | q << 16` (`q, r = j / c0, j % c0`; `0xFFFFFFFF` past the side's
/// `c0 * c1` slots) and its offset.
fn slot(g: &mut Gen, c: &mut Code, (side, j): (u64, &str), (strides, shift): (u64, u32)) -> Slot {
    let c0 = g.reg(Class::B32);
    c.line(format!(
        "ld.param.u32 {c0}, [p_args+{}];",
        CHUNK + 16 * side
    ));
    let (q, r, t) = (g.reg(Class::B32), g.reg(Class::B32), g.reg(Class::B32));
    c.line(format!("div.u32 {q}, {j}, {c0};"));
    c.line(format!("mul.lo.u32 {t}, {q}, {c0};"));
    c.line(format!("sub.u32 {r}, {j}, {t};"));
    let (c1, n, t) = (g.reg(Class::B32), g.reg(Class::B32), g.reg(Class::B32));
    c.line(format!(
        "ld.param.u32 {c1}, [p_args+{}];",
        CHUNK + 16 * side + 8
    ));
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
    Slot {
        coords: Coords::Packed(packed),
        off,
    }
}

/// A thread's slots, as `[rb, ra, wa, wb]`: for the read phase (source strides, elements of
/// `2^ssh` bytes) B slots `lane + step i` (`i < nx`) and A slots `%ty + by k` (`k < ny`); for
/// the write phase (destination strides, `2^dsh` bytes) A slots `lane + step i` and B slots
/// `%ty + by k`.
fn thread_slots(
    g: &mut Gen,
    setup: &mut Code,
    (lane, step, nx): (&str, u64, u64),
    (by, ny): (u64, u64),
    (ssh, dsh): (u32, u32),
    pair: bool,
) -> [Vec<Slot>; 4] {
    let jx: Vec<String> = (0..nx)
        .map(|i| {
            let j = g.reg(Class::B32);
            setup.line(format!("add.u32 {j}, {lane}, {};", step * i));
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
    let mut slots = |js: &[String], side, strides, shift| -> Vec<Slot> {
        let mut slots: Vec<Slot> = js
            .iter()
            .map(|j| slot(g, setup, (side, j), (strides, shift)))
            .collect();
        if pair {
            pair_coords(g, setup, &mut slots);
        }
        slots
    };
    [
        slots(&jx, 1, SRC_STRIDES, ssh),
        slots(&jy, 0, SRC_STRIDES, ssh),
        slots(&jx, 0, DST_STRIDES, dsh),
        slots(&jy, 1, DST_STRIDES, dsh),
    ]
}

/// Keeps the coordinates of two slots per register ([`Coords::Pair`]): the low bytes of
/// each half of their packed coordinates.
fn pair_coords(g: &mut Gen, c: &mut Code, slots: &mut [Slot]) {
    for two in slots.chunks_mut(2) {
        let a = two[0].packed();
        let b = two.get(1).map_or_else(|| a.clone(), Slot::packed);
        let pair = g.reg(Class::B32);
        // Bytes 0 and 2 of a, then bytes 0 and 2 of b.
        c.line(format!("prmt.b32 {pair}, {a}, {b}, 0x6420;"));
        for (h, s) in two.iter_mut().enumerate() {
            s.coords = Coords::Pair(pair.clone(), h as u32);
        }
    }
}

/// Loads the tile axes' chunks into `%c0..3` and sets `%pslots` when both sides use all `tt`
/// slots.
fn used_slots(g: &mut Gen, setup: &mut Code, tt: u64) {
    for k in 0..4u64 {
        setup.line(format!("ld.param.u32 %c{k}, [p_args+{}];", CHUNK + 8 * k));
    }
    let (n0, n1) = (g.reg(Class::B32), g.reg(Class::B32));
    setup.line(format!("mul.lo.u32 {n0}, %c0, %c1;"));
    setup.line(format!("mul.lo.u32 {n1}, %c2, %c3;"));
    setup.line(format!("setp.eq.u32 %pslots, {n0}, {tt};"));
    setup.line(format!("setp.eq.and.u32 %pslots, {n1}, {tt}, %pslots;"));
}

/// Sets `p` when the slot's coordinates lie inside the tile (`%rem{2 side}`, `%rem{2 side+1}`).
fn inside(g: &mut Gen, c: &mut Code, side: u64, s: &Slot) -> String {
    let p = g.reg(Class::Pred);
    let (l0, l1) = (g.reg(Class::B32), g.reg(Class::B32));
    match &s.coords {
        Coords::Packed(packed) => {
            c.line(format!("and.b32 {l0}, {packed}, 65535;"));
            c.line(format!("shr.u32 {l1}, {packed}, 16;"));
        }
        Coords::Pair(pair, h) => {
            c.line(format!("bfe.u32 {l0}, {pair}, {}, 8;", 16 * h));
            c.line(format!("bfe.u32 {l1}, {pair}, {}, 8;", 16 * h + 8));
        }
    }
    c.line(format!("setp.lt.u32 {p}, {l0}, %rem{};", 2 * side));
    c.line(format!(
        "setp.lt.and.u32 {p}, {l1}, %rem{}, {p};",
        2 * side + 1
    ));
    p
}

/// Splits `%x` by the piece count of axis `k` with 32-bit fast division: returns the quotient
/// (the index left for the next axes) and the remainder (the piece of axis `k`), and the
/// piece count's register.
fn split_piece(g: &mut Gen, c: &mut Code, k: u64) -> (String, String, String) {
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
    (q, cc, t)
}

/// Splits the tile index `%bid` (below 2^31) over the pieces with 32-bit fast division:
/// `%boffd` / `%boffs` (bytes) and `%pfull` when the tile is whole on every side and every
/// slot is used; with `rem`, also the remaining extents `%rem0..3` (which partial tiles need).
/// With `PermuteArgs::origin32` set, offsets and remaining extents are summed in 32 bits
/// (`origin32`), else in 64. `tag` makes the labels distinct.
fn origin(g: &mut Gen, (ssh, dsh): (u32, u32), tag: &str, rem: bool) -> String {
    let mut c = Code::default();
    let p32 = g.reg(Class::Pred);
    let flag = g.reg(Class::B32);
    c.line(format!("ld.param.u32 {flag}, [p_args+{ORIGIN32}];"));
    c.line(format!("setp.ne.u32 {p32}, {flag}, 0;"));
    c.line("mov.b32 %x, %bid;");
    c.line("mov.pred %pfull, %pslots;");
    c.line(format!("@{p32} bra.uni $ORIGIN32{tag};"));
    c.line("mov.b64 %boffd, 0;");
    c.line("mov.b64 %boffs, 0;");
    let pr = g.reg(Class::Pred);
    // The rank from the parameters where it is needed: no register held across the loop.
    let rank = g.reg(Class::B32);
    c.line(format!("ld.param.u32 {rank}, [p_args+{RANK}];"));
    for k in 0..AXES as u64 {
        if k >= 4 {
            c.line(format!("setp.eq.u32 {pr}, {rank}, {k};"));
            c.line(format!("@{pr} bra.uni $ORIGIN_DONE{tag};"));
        }
        let (q, cc, _) = split_piece(g, &mut c, k);
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
            // Whole along axis k when the rest of it holds a chunk (chunks are below 65536).
            c.line(format!("setp.ge.and.u64 %pfull, {t64}, {ch}, %pfull;"));
            if rem {
                c.line(format!("min.u64 {t64}, {t64}, 255;"));
                c.line(format!("cvt.u32.u64 %rem{k}, {t64};"));
            }
        }
        c.line(format!("mov.b32 %x, {q};"));
    }
    c.line(format!("bra.uni $ORIGIN_DONE{tag};"));
    origin32(g, &mut c, tag, rem);
    c.label(&format!("$ORIGIN_DONE{tag}"));
    c.line(format!("shl.b64 %boffd, %boffd, {dsh};"));
    c.line(format!("shl.b64 %boffs, %boffs, {ssh};"));
    c.text()
}

/// The 32-bit form of `origin`'s loop (label `$ORIGIN32{tag}`; ends at its label
/// `$ORIGIN32_DONE{tag}`, just before `origin`'s `$ORIGIN_DONE{tag}`, with `%boffd` / `%boffs`
/// in elements).
fn origin32(g: &mut Gen, c: &mut Code, tag: &str, rem: bool) {
    c.label(&format!("$ORIGIN32{tag}"));
    let (od, os) = (g.reg(Class::B32), g.reg(Class::B32));
    c.line(format!("mov.b32 {od}, 0;"));
    c.line(format!("mov.b32 {os}, 0;"));
    let pr = g.reg(Class::Pred);
    // The rank from the parameters where it is needed: no register held across the loop.
    let rank = g.reg(Class::B32);
    c.line(format!("ld.param.u32 {rank}, [p_args+{RANK}];"));
    for k in 0..AXES as u64 {
        if k >= 4 {
            c.line(format!("setp.eq.u32 {pr}, {rank}, {k};"));
            c.line(format!("@{pr} bra.uni $ORIGIN32_DONE{tag};"));
        }
        let (q, cc, t) = split_piece(g, c, k);
        // The low words of the steps: exact, as every origin offset is below 2^31.
        let (ds, ss) = (g.reg(Class::B32), g.reg(Class::B32));
        c.line(format!(
            "ld.param.u32 {ds}, [p_args+{}];",
            DST_STEPS + 8 * k
        ));
        c.line(format!(
            "ld.param.u32 {ss}, [p_args+{}];",
            SRC_STEPS + 8 * k
        ));
        c.line(format!("mad.lo.s32 {od}, {cc}, {ds}, {od};"));
        c.line(format!("mad.lo.s32 {os}, {cc}, {ss}, {os};"));
        if k < 4 {
            let (ch, len) = (g.reg(Class::B32), g.reg(Class::B32));
            c.line(format!("ld.param.u32 {ch}, [p_args+{}];", CHUNK + 8 * k));
            c.line(format!("ld.param.u32 {len}, [p_args+{}];", LEN + 8 * k));
            c.line(format!("mul.lo.u32 {t}, {cc}, {ch};"));
            c.line(format!("sub.u32 {t}, {len}, {t};"));
            c.line(format!("setp.ge.and.u32 %pfull, {t}, {ch}, %pfull;"));
            if rem {
                c.line(format!("min.u32 %rem{k}, {t}, 255;"));
            }
        }
        c.line(format!("mov.b32 %x, {q};"));
    }
    c.label(&format!("$ORIGIN32_DONE{tag}"));
    c.line(format!("cvt.s64.s32 %boffd, {od};"));
    c.line(format!("cvt.s64.s32 %boffs, {os};"));
}

/// For each slot of `side`: its inside-the-tile predicate (partial tiles only) and the
/// address `base` plus the slot's offset.
fn slot_bases(
    g: &mut Gen,
    c: &mut Code,
    slots: &[Slot],
    side: u64,
    base: &str,
    whole: bool,
) -> Vec<(Option<String>, String)> {
    slots
        .iter()
        .map(|sl| {
            let p = (!whole).then(|| inside(g, c, side, sl));
            let a = g.reg(Class::B64);
            c.line(format!("mad.wide.s32 {a}, {}, 1, {base};", sl.off));
            (p, a)
        })
        .collect()
}

/// For each slot of `side`: its inside-the-tile predicate (partial tiles only).
fn slot_preds(
    g: &mut Gen,
    c: &mut Code,
    slots: &[Slot],
    side: u64,
    whole: bool,
) -> Vec<Option<String>> {
    slots
        .iter()
        .map(|sl| (!whole).then(|| inside(g, c, side, sl)))
        .collect()
}

/// The read phase, in two parts: all loads of the thread; then conversions, the barrier and
/// the shared stores. Predicated on the slots' coordinates unless the tile is known to be
/// whole.
#[allow(clippy::too_many_arguments)]
fn read_phase(
    g: &mut Gen,
    (s, d): (Ty, Ty),
    (p, by): (u64, u64),
    ra: &[Slot],
    rb: &[Slot],
    whole: bool,
) -> (String, String) {
    let mut read = Code::default();
    let pb = slot_bases(g, &mut read, rb, 1, "%sbase", whole);
    let pa = slot_preds(g, &mut read, ra, 0, whole);
    let mut loaded = Vec::new();
    for (k, sa) in ra.iter().enumerate() {
        for (i, (pbi, base)) in pb.iter().enumerate() {
            let pr = both(g, &mut read, pa[k].as_deref(), pbi.as_deref());
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
    let mut rest = Code::default();
    let converted: Vec<(u64, u64, String)> = loaded
        .into_iter()
        .map(|(k, i, v)| (k, i, convert(g, &mut rest, s, d, &v)))
        .collect();
    // The previous tile's write phase must be done with the shared tile; this tile's loads
    // are already in flight.
    rest.line("bar.sync 0;");
    for (k, i, y) in converted {
        let off = (by * k * p + 32 * i) * d.size;
        store_scalar(&mut rest, d, Space::Shared, &addr("%tsw", off), &y, None);
    }
    (read.text(), rest.text())
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
    let pw = slot_bases(g, &mut write, wa, 0, "%dbase", whole);
    let pbw = slot_preds(g, &mut write, wb, 1, whole);
    let mut vals = Vec::new();
    for k in 0..wb.len() {
        for i in 0..wa.len() {
            let off = (32 * i as u64 * p + by * k as u64) * d.size;
            let v = load_scalar(g, &mut write, d, Space::Shared, &addr("%tsr", off), None);
            vals.push((k, i, v));
        }
    }
    for (k, i, v) in vals {
        let pr = both(g, &mut write, pw[i].0.as_deref(), pbw[k].as_deref());
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
    store_words(g, &mut write, (pa.as_deref(), "u32"), &base, wb, &words);
    write.text()
}

/// Stores `words[k]` (`st.global.{ty}`: a 4-byte word `u32`, or a vector `v4.u32` given as
/// `{a, b, c, d}`) at `base` plus the destination offset of B slot `wb[k]`, predicated (when
/// `pa` is given: a partial tile) on `pa` and on the B slot lying inside the tile.
fn store_words(
    g: &mut Gen,
    c: &mut Code,
    (pa, ty): (Option<&str>, &str),
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
        c.line(format!("{}st.global.{ty} [{at}], {w};", pfx(pr.as_deref())));
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
    (tt, by): (u64, u64),
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
    // Kernels with word stores keep their slots' coordinates in pairs: else ptxas 12.9 spills
    // 4-8 bytes of them for sm_80 (64 registers there); the others keep them one per
    // register, which ptxas fits in fewer registers for sm_90 (copy_permute_b4: 32 against
    // 40 with pairs, a resident block of 512 threads more).
    let words = d.size == 2 && tt == 64;
    let [rb, ra, wa, wb] = thread_slots(
        &mut g,
        &mut setup,
        ("%tx", 32, nx),
        (by, ny),
        (ssh, dsh),
        words,
    );

    used_slots(&mut g, &mut setup, tt);

    // Word stores: A slot 2 tx, its pair's shared address, and the flag.
    let words = words.then(|| {
        let j = g.reg(Class::B32);
        setup.line(format!("shl.b32 {j}, %tx, 1;"));
        let wa2 = slot(&mut g, &mut setup, (0, &j), (DST_STRIDES, dsh));
        let tmp = g.reg(Class::B32);
        setup.line(format!("mad.lo.u32 {tmp}, {j}, {p}, %ty;"));
        setup.line(format!("mad.lo.u32 %tsr2, {tmp}, {}, %tile;", d.size));
        let flag = g.reg(Class::B32);
        let pw = g.reg(Class::Pred);
        setup.line(format!("ld.param.u32 {flag}, [p_args+{WORDS}];"));
        setup.line(format!("setp.ne.u32 {pw}, {flag}, 0;"));
        (wa2, pw)
    });
    let origins = origins(&mut g, (ssh, dsh), true);
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

    let parts = Parts {
        geometry: (tt, by, p, tt * p * d.size),
        decls: g.decls(),
        setup: setup.text(),
        origins,
        phases: [
            (read.0, read.1, write),
            (read_whole.0, read_whole.1, write_whole),
        ],
    };
    render(t, name, parts, None)
}

/// Loads the entry of a slot table in shared memory at `base + off` (8 bytes: packed
/// coordinates, then offset): for whole tiles only the offset (`inside` is not called for
/// them), else both.
fn table_entry(g: &mut Gen, c: &mut Code, base: &str, off: u64, whole: bool) -> Slot {
    let o = g.reg(Class::B32);
    if whole {
        c.line(format!("ld.shared.u32 {o}, [{base}+{}];", off + 4));
        return Slot {
            coords: Coords::Packed(String::new()),
            off: o,
        };
    }
    let packed = g.reg(Class::B32);
    c.line(format!(
        "ld.shared.v2.u32 {{{packed}, {o}}}, [{base}+{off}];"
    ));
    Slot {
        coords: Coords::Packed(packed),
        off: o,
    }
}

/// The packed variants of `copy_permute_bN` for 1- and 2-byte elements
/// (`copy_permute_packed_bN`, `copy_permute_packed128_bN`; same template and arguments):
/// every global access moves a 4-byte word of `k = 4 / size` elements. Requires (checked by
/// the planner, see `PermuteArgs::packed`) that axis 0 has destination stride 1 and axis 2
/// source stride 1, that both have extents and chunks that are multiples of `k`, that every
/// other stride of the same operand is a multiple of `k`, and that both base addresses are
/// 4-byte aligned.
///
/// Tile of `tt` x `tt` slots, block (32, `by`); groups of `k` slots along a side form one word.
/// A group lies inside one piece of its side's first axis, so only its first slot is
/// decomposed: the other `k - 1` words of a group are `r` source strides of axis 0 further.
/// The block first writes two tables to shared memory: per A group its first slot's packed
/// coordinates and source offset, per B slot its packed coordinates and destination offset.
/// A thread keeps in registers only its own B group (read phase) and A group (write phase);
/// the other slots come from the tables, so a thread can move many words per tile.
///
/// Read phase: each thread loads `k` words (A slots `k ag .. k ag + k`, B group `bg`) per
/// micro-block, transposes the `k x k` block in registers and stores `k` words to shared
/// memory at `[B slot][A group]`. Write phase: each thread loads words `[B slot][A group]`
/// and stores them along the destination's fastest axis. With 32 groups or more per side the
/// shared tile has a pitch of `tt / k` words and the word column of row `R` is XOR-swizzled
/// by `(R / k) mod 32`; with fewer, the pitch is padded by one word.
pub(super) fn permute_packed_kernel(
    t: &mut Templates,
    name: &str,
    e: Ty,
    (tt, by): (u64, u64),
) -> String {
    assert!(e.size <= 2);
    let nthr = 32 * by;
    let k = 4 / e.size;
    let gs = tt / k; // groups (words) per side
    assert!(nthr % gs == 0 && gs % (nthr / gs) == 0 && nthr >= tt);
    let rows = nthr / gs; // A groups (read) and B slots (write) a pass covers
    let swz = gs >= 32;
    // The swizzle XORs word columns with values below 32: a permutation of each aligned run
    // of 32 columns, so whole runs are needed; the write phase's row formula needs rows % k.
    assert!(!swz || (gs % 32 == 0 && rows % k == 0));
    let pw = if swz { gs } else { gs + 1 }; // shared pitch in words
    let m = gs / rows; // micro-blocks per thread
    let nw = tt / rows; // words per thread in the write phase
    let tile_bytes = tt * pw * 4;
    let (tab_a, tab_b) = (tile_bytes, tile_bytes + 8 * gs);
    let total = tab_b + 8 * tt;
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
    // The read phase's swizzle: B group mod 32.
    let bgm = g.reg(Class::B32);
    if swz {
        setup.line(format!("and.b32 {bgm}, {bg}, 31;"));
    }

    // The tables: A group `tid` (tid < gs), B slot `tid` (tid < tt).
    let ja = g.reg(Class::B32);
    setup.line(format!("mul.lo.u32 {ja}, {tid}, {k};"));
    let ea = slot(&mut g, &mut setup, (0, &ja), (SRC_STRIDES, sh));
    let eb = slot(&mut g, &mut setup, (1, &tid), (DST_STRIDES, sh));
    let (ea_packed, eb_packed) = (ea.packed(), eb.packed());
    let (pa, pb) = (g.reg(Class::Pred), g.reg(Class::Pred));
    setup.line(format!("setp.lt.u32 {pa}, {tid}, {gs};"));
    setup.line(format!("setp.lt.u32 {pb}, {tid}, {tt};"));
    let at = g.reg(Class::B32);
    setup.line(format!("mad.lo.u32 {at}, {tid}, 8, %tile;"));
    setup.line(format!(
        "@{pa} st.shared.v2.u32 [{at}+{tab_a}], {{{}, {}}};",
        ea_packed, ea.off
    ));
    setup.line(format!(
        "@{pb} st.shared.v2.u32 [{at}+{tab_b}], {{{}, {}}};",
        eb_packed, eb.off
    ));
    setup.line("bar.sync 0;");
    // Table rows of this thread's first A group and first B slot (both `ag0`).
    let (tta, ttb) = (g.reg(Class::B32), g.reg(Class::B32));
    setup.line(format!("mad.lo.u32 {tta}, {ag0}, 8, %tile;"));
    setup.line(format!("add.u32 {ttb}, {tta}, {tab_b};"));
    setup.line(format!("add.u32 {tta}, {tta}, {tab_a};"));

    // Shared tile. Read phase: row k bg + b, column ag0 + rows i; write phase: row
    // ag0 + rows i, column bg (both before the swizzle).
    setup.line(format!("mul.lo.u32 {tmp}, {bg}, {};", k * pw));
    if !swz {
        setup.line(format!("add.u32 {tmp}, {tmp}, {ag0};"));
    }
    setup.line(format!("mad.lo.u32 %tsw, {tmp}, 4, %tile;"));
    setup.line(format!("mul.lo.u32 {tmp}, {ag0}, {pw};"));
    if !swz {
        setup.line(format!("add.u32 {tmp}, {tmp}, {bg};"));
    }
    setup.line(format!("mad.lo.u32 %tsr, {tmp}, 4, %tile;"));
    // Swizzle of the write phase's rows: (ag0 + rows i) / k = ag0 / k + (rows / k) i.
    let agk = g.reg(Class::B32);
    setup.line(format!("shr.u32 {agk}, {ag0}, {};", log2(k)));

    let jb = g.reg(Class::B32);
    setup.line(format!("mul.lo.u32 {jb}, {bg}, {k};"));
    // The read side's B group and the write side's A group start at slot k * (tid % gs).
    let rb = slot(&mut g, &mut setup, (1, &jb), (SRC_STRIDES, sh));
    let wa = slot(&mut g, &mut setup, (0, &jb), (DST_STRIDES, sh));
    // The source's axis-0 stride in bytes: from a group's first word to its others.
    let s0 = g.reg(Class::B32);
    setup.line(format!("ld.param.u32 {s0}, [p_args+{SRC_STRIDES}];"));
    setup.line(format!("shl.b32 {s0}, {s0}, {sh};"));
    used_slots(&mut g, &mut setup, tt);

    // The next origin during the loads: for 2-byte elements (40 registers with it, 32
    // without), where it makes the packed kernels faster; not for 1-byte ones, where the
    // extra registers cost resident blocks (sm_90: 128-slot tiles 50 registers instead of 40,
    // 64-slot tiles 40 instead of 32) and the kernels slower.
    let ahead = e.size == 2;
    let origins = origins(&mut g, (sh, sh), ahead);
    let mut phases = Vec::new();
    for whole in [false, true] {
        // Read: m micro-blocks of k words each.
        let mut read = Code::default();
        let pb = (!whole).then(|| inside(&mut g, &mut read, 1, &rb));
        let base = g.reg(Class::B64);
        read.line(format!("mad.wide.s32 {base}, {}, 1, %sbase;", rb.off));
        let ra: Vec<Slot> = (0..m)
            .map(|i| table_entry(&mut g, &mut read, &tta, 8 * rows * i, whole))
            .collect();
        let mut words = Vec::new();
        for sa in &ra {
            // The group is inside the tile exactly when its first slot is.
            let pr = pb.as_ref().map(|pb| {
                let pa = inside(&mut g, &mut read, 0, sa);
                let pr = g.reg(Class::Pred);
                read.line(format!("and.pred {pr}, {pa}, {pb};"));
                pr
            });
            let at0 = g.reg(Class::B64);
            read.line(format!("mad.wide.s32 {at0}, {}, 1, {base};", sa.off));
            for r in 0..k {
                let at = if r == 0 {
                    at0.clone()
                } else {
                    let at = g.reg(Class::B64);
                    read.line(format!("mad.wide.s32 {at}, {s0}, {r}, {at0};"));
                    at
                };
                words.push(load_scalar(
                    &mut g,
                    &mut read,
                    w,
                    Space::GlobalNc,
                    &format!("[{at}]"),
                    pr.as_deref(),
                ));
            }
        }
        let mut rest = Code::default();
        let blocks: Vec<Vec<String>> = words
            .chunks(k as usize)
            .map(|block| transpose_words(&mut g, &mut rest, e.size, block))
            .collect();
        // Shared addresses of the micro-blocks (swizzled columns).
        let cols: Vec<(String, u64)> = (0..m)
            .map(|i| {
                if swz {
                    let a = g.reg(Class::B32);
                    rest.line(format!("add.u32 {a}, {ag0}, {};", rows * i));
                    rest.line(format!("xor.b32 {a}, {a}, {bgm};"));
                    rest.line(format!("mad.lo.u32 {a}, {a}, 4, %tsw;"));
                    (a, 0)
                } else {
                    ("%tsw".to_string(), 4 * rows * i)
                }
            })
            .collect();
        // The previous tile's write phase must be done with the shared tile.
        rest.line("bar.sync 0;");
        for (i, cols_i) in blocks.iter().enumerate() {
            let (a, off) = &cols[i];
            for (b, x) in cols_i.iter().enumerate() {
                let off = off + 4 * b as u64 * pw;
                store_scalar(&mut rest, w, Space::Shared, &addr(a, off), x, None);
            }
        }
        // Write: nw words.
        let mut write = Code::default();
        let pa = (!whole).then(|| inside(&mut g, &mut write, 0, &wa));
        let base = g.reg(Class::B64);
        write.line(format!("mad.wide.s32 {base}, {}, 1, %dbase;", wa.off));
        let wb: Vec<Slot> = (0..nw)
            .map(|i| table_entry(&mut g, &mut write, &ttb, 8 * rows * i, whole))
            .collect();
        let vals: Vec<String> = (0..nw)
            .map(|i| {
                let a = if swz {
                    let a = g.reg(Class::B32);
                    write.line(format!("add.u32 {a}, {agk}, {};", (rows / k) * i));
                    write.line(format!("and.b32 {a}, {a}, 31;"));
                    write.line(format!("xor.b32 {a}, {a}, {bg};"));
                    write.line(format!("mad.lo.u32 {a}, {a}, 4, %tsr;"));
                    a
                } else {
                    "%tsr".to_string()
                };
                let at = addr(&a, 4 * rows * i * pw);
                load_scalar(&mut g, &mut write, w, Space::Shared, &at, None)
            })
            .collect();
        store_words(
            &mut g,
            &mut write,
            (pa.as_deref(), "u32"),
            &base,
            &wb,
            &vals,
        );
        phases.push((read.text(), rest.text(), write.text()));
    }
    let whole = phases.pop().expect("two phases");
    let parts = Parts {
        geometry: (tt, by, pw, total),
        decls: g.decls(),
        setup: setup.text(),
        origins,
        phases: [phases.pop().expect("two phases"), whole],
    };
    let layout = if swz {
        format!("(pitch {pw} words, word columns XOR-swizzled by (row / {k}) mod 32)")
    } else {
        format!("(pitch {pw} words)")
    };
    let doc = format!(
        "// Any-permutation copy of {}-byte elements in 4-byte words (PermuteArgs with\n\
         // pack = {k}; see kernels/src/abi/permute.rs). Tiles of {tt} x {tt} slots, block\n\
         // (32, {by}); the block first writes tables of its A groups' source offsets and\n\
         // its B slots' destination offsets to shared memory (after the tile). A thread\n\
         // loads {k} words along the source's fastest axis per {k} x {k} block ({m} blocks),\n\
         // transposes each block in registers (prmt) and stores {k} words to shared memory at\n\
         // [B slot][A group] {layout}; the write phase stores {nw} words per thread along\n\
         // the destination's fastest axis. Origin, whole-tile path and grid as in\n\
         // copy_permute_bN{}.\n",
        e.size,
        if ahead {
            ""
        } else {
            ", except that whole tiles leave the next tile's origin to the\n\
             // start of the next tile"
        }
    );
    render(t, name, parts, Some(doc))
}

/// The vector variant of `copy_permute_b1` (`copy_permute_vec_b1`; same template and
/// arguments): every global access moves a 16-byte vector. Requires (checked by the planner,
/// see `PermuteArgs::vectorized`) that axis 0 has destination stride 1 and axis 2 source
/// stride 1, both with extents and chunks that are multiples of 16, that every other stride
/// of either operand is a multiple of 16, and that both base addresses are 16-byte aligned.
///
/// Tile of `tt` x `tt` slots (`tt` = 128), block (32, `by`) of 256 threads. A *4-group* is 4
/// consecutive A slots (one word of a shared row), a *16-group* 16 consecutive slots of a side
/// (one vector of an operand); a group lies inside one piece of its side's first axis, so
/// only its first slot is decomposed, and it is inside the tile exactly when that slot is.
///
/// Read phase: thread `tid` takes B 16-group `tid % 8` and A 4-group `tid / 8`: it loads the
/// four source vectors of the group's A slots (the first slot's row plus 0..3 axis-0 source
/// strides), transposes the four 4 x 4 byte blocks in registers (prmt) and stores 16 words,
/// one per B slot, to shared memory at `[B slot][A 4-group]`. Write phase: thread `tid` takes A
/// 16-group `tid % 8` and B slots `tid / 8 + 32 i` (`i < 4`): it loads 16 bytes of each row and
/// stores them as one destination vector. The B slots' destination offsets and coordinates
/// come from a table in shared memory that the block writes first. Rows are 32 words (no
/// padding); word column `c` of row `R` is stored at `c ^ 4 ((R / 16) mod 8)`, so that the
/// read phase's word stores (8 rows 16 apart, 4 columns per warp) and the write phase's
/// vector loads (whole rows per quarter warp) are free of bank conflicts.
pub(super) fn permute_vec_kernel(t: &mut Templates, name: &str, (tt, by): (u64, u64)) -> String {
    let nthr = 32 * by;
    // 8 vectors per row, 32 A 4-groups and 32 B slots per pass: one 16-group x 4-group block
    // per thread in the read phase, 4 vectors per thread in the write phase.
    assert!(tt == 128 && nthr == 256);
    let row = tt; // bytes per shared row: 32 words
    let tile_bytes = tt * row;
    let tab_b = tile_bytes;
    let total = tab_b + 8 * tt;
    let w = bits_ty(4);
    let mut g = Gen::default();
    let mut setup = Code::default();

    let (tid, lo, hi, tmp) = (
        g.reg(Class::B32),
        g.reg(Class::B32),
        g.reg(Class::B32),
        g.reg(Class::B32),
    );
    setup.line(format!("mad.lo.u32 {tid}, %ty, 32, %tx;"));
    // Read phase: B 16-group lo, A 4-group hi; write phase: A 16-group lo, B slot hi.
    setup.line(format!("and.b32 {lo}, {tid}, 7;"));
    setup.line(format!("shr.u32 {hi}, {tid}, 3;"));

    // The table: B slot `tid` (tid < tt), its packed coordinates and destination offset.
    let eb = slot(&mut g, &mut setup, (1, &tid), (DST_STRIDES, 0));
    let eb_packed = eb.packed();
    let pt = g.reg(Class::Pred);
    setup.line(format!("setp.lt.u32 {pt}, {tid}, {tt};"));
    let at = g.reg(Class::B32);
    setup.line(format!("mad.lo.u32 {at}, {tid}, 8, %tile;"));
    setup.line(format!(
        "@{pt} st.shared.v2.u32 [{at}+{tab_b}], {{{eb_packed}, {}}};",
        eb.off
    ));
    setup.line("bar.sync 0;");
    // Table row of this thread's first B slot (write phase).
    let ttb = g.reg(Class::B32);
    setup.line(format!("mad.lo.u32 {ttb}, {hi}, 8, %tile;"));

    // Read-phase stores: row 16 lo + (0..16), column hi ^ 4 lo.
    setup.line(format!("shl.b32 {tmp}, {lo}, 2;"));
    setup.line(format!("xor.b32 {tmp}, {tmp}, {hi};"));
    setup.line(format!("shl.b32 {tmp}, {tmp}, 2;"));
    setup.line(format!("mad.lo.u32 {tmp}, {lo}, {}, {tmp};", 16 * row));
    setup.line(format!("add.u32 %tsw, {tmp}, %tile;"));
    // Write-phase loads: row hi + 32 i, vector lo ^ (hi / 16 + 2 i) = (lo ^ hi / 16) ^ 2 i.
    let xq = g.reg(Class::B32);
    setup.line(format!("shr.u32 {tmp}, {hi}, 4;"));
    setup.line(format!("xor.b32 {xq}, {lo}, {tmp};"));
    setup.line(format!("mad.lo.u32 %tsr, {hi}, {row}, %tile;"));

    // Per-thread slots: the read phase's A 4-group and B 16-group (source strides), the
    // write phase's A 16-group (destination strides).
    let (ja, jb) = (g.reg(Class::B32), g.reg(Class::B32));
    setup.line(format!("shl.b32 {ja}, {hi}, 2;"));
    setup.line(format!("shl.b32 {jb}, {lo}, 4;"));
    let ra = slot(&mut g, &mut setup, (0, &ja), (SRC_STRIDES, 0));
    let rb = slot(&mut g, &mut setup, (1, &jb), (SRC_STRIDES, 0));
    let wa = slot(&mut g, &mut setup, (0, &jb), (DST_STRIDES, 0));
    // The source's axis-0 stride in bytes: from an A 4-group's first row to its others.
    let s0 = g.reg(Class::B32);
    setup.line(format!("ld.param.u32 {s0}, [p_args+{SRC_STRIDES}];"));
    used_slots(&mut g, &mut setup, tt);

    // The next tile's origin during a whole tile's loads (63 registers for sm_90, 4 resident
    // blocks, against 48 registers and 5 blocks without it; both run at the same speed).
    let origins = origins(&mut g, (0, 0), true);
    let mut phases = Vec::new();
    for whole in [false, true] {
        // Read: four vectors, rows of the A 4-group.
        let mut read = Code::default();
        let pr = (!whole).then(|| {
            let pa = inside(&mut g, &mut read, 0, &ra);
            let pb = inside(&mut g, &mut read, 1, &rb);
            let pr = g.reg(Class::Pred);
            read.line(format!("and.pred {pr}, {pa}, {pb};"));
            pr
        });
        let base = g.reg(Class::B64);
        read.line(format!("mad.wide.s32 {base}, {}, 1, %sbase;", rb.off));
        read.line(format!("mad.wide.s32 {base}, {}, 1, {base};", ra.off));
        let mut rows = Vec::new();
        for r in 0..4 {
            let at = if r == 0 {
                base.clone()
            } else {
                let at = g.reg(Class::B64);
                read.line(format!("mad.wide.s32 {at}, {s0}, {r}, {base};"));
                at
            };
            let v: Vec<String> = (0..4).map(|_| g.reg(Class::B32)).collect();
            read.line(format!(
                "{}ld.global.nc.v4.u32 {{{}}}, [{at}];",
                pfx(pr.as_deref()),
                v.join(", ")
            ));
            rows.push(v);
        }
        let mut rest = Code::default();
        // Word c of every row: a 4 x 4 block whose transpose holds B slots 4 c .. 4 c + 4.
        let cols: Vec<Vec<String>> = (0..4)
            .map(|c| {
                let block: Vec<String> = rows.iter().map(|v| v[c].clone()).collect();
                transpose_words(&mut g, &mut rest, 1, &block)
            })
            .collect();
        // The previous tile's write phase must be done with the shared tile.
        rest.line("bar.sync 0;");
        for (c, ws) in cols.iter().enumerate() {
            for (b, x) in ws.iter().enumerate() {
                let off = (4 * c + b) as u64 * row;
                store_scalar(&mut rest, w, Space::Shared, &addr("%tsw", off), x, None);
            }
        }
        // Write: four vectors, one per B slot hi + 32 i.
        let mut write = Code::default();
        let pa = (!whole).then(|| inside(&mut g, &mut write, 0, &wa));
        let base = g.reg(Class::B64);
        write.line(format!("mad.wide.s32 {base}, {}, 1, %dbase;", wa.off));
        let wb: Vec<Slot> = (0..4)
            .map(|i| table_entry(&mut g, &mut write, &ttb, tab_b + 8 * 32 * i, whole))
            .collect();
        let vals: Vec<Vec<String>> = (0..4u64)
            .map(|i| {
                let a = g.reg(Class::B32);
                if i == 0 {
                    write.line(format!("mad.lo.u32 {a}, {xq}, 16, %tsr;"));
                } else {
                    write.line(format!("xor.b32 {a}, {xq}, {};", 2 * i));
                    write.line(format!("mad.lo.u32 {a}, {a}, 16, %tsr;"));
                }
                let v: Vec<String> = (0..4).map(|_| g.reg(Class::B32)).collect();
                write.line(format!(
                    "ld.shared.v4.u32 {{{}}}, {};",
                    v.join(", "),
                    addr(&a, 32 * i * row)
                ));
                v
            })
            .collect();
        let vals: Vec<String> = vals
            .iter()
            .map(|v| format!("{{{}}}", v.join(", ")))
            .collect();
        store_words(
            &mut g,
            &mut write,
            (pa.as_deref(), "v4.u32"),
            &base,
            &wb,
            &vals,
        );
        phases.push((read.text(), rest.text(), write.text()));
    }
    let whole = phases.pop().expect("two phases");
    let parts = Parts {
        geometry: (tt, by, tt / 4, total),
        decls: g.decls(),
        setup: setup.text(),
        origins,
        phases: [phases.pop().expect("two phases"), whole],
    };
    let doc = format!(
        "// Any-permutation copy of 1-byte elements in 16-byte vectors (PermuteArgs with\n\
         // pack = 16; see kernels/src/abi/permute.rs). Tiles of {tt} x {tt} slots, block\n\
         // (32, {by}); the block first writes a table of its B slots' destination offsets to\n\
         // shared memory (after the tile). Read phase: a thread loads 4 source vectors (16\n\
         // B slots of 4 A slots), transposes them in registers (prmt) and stores 16 words at\n\
         // [B slot][A 4-group]; write phase: it loads 4 vectors of 16 A slots, one per B slot,\n\
         // and stores them along the destination's fastest axis. Rows of 32 words, word\n\
         // columns XOR-swizzled by 4 ((row / 16) mod 8). Origin, whole-tile path and grid as\n\
         // in copy_permute_bN.\n"
    );
    render(t, name, parts, Some(doc))
}

/// The wide kernel `copy_permute_wN` (`N = 16 v` bytes): a copy whose slots are runs of `v`
/// 16-byte vectors, contiguous and 16-byte aligned on both sides (`PermuteArgs` with
/// `wide = v`, strides in 16-byte units; see `PermuteArgs::wide`). Tiles of `tt` x `tt` slots,
/// block (32, `by`).
///
/// Read phase: lane `tx` takes vector `tx % v` of B slots `tx / v + (32 / v) i` and row `ty`
/// A slots `ty + by k`, so a warp reads `32 / v` whole runs along the source's fastest axis;
/// the vectors go to shared memory at `[A][B][vector]` (row pitch `v (tt + 1)` vectors). Write
/// phase: lane `tx` takes vector `tx % v` of A slots `tx / v + (32 / v) i` and row `ty` B slots
/// `ty + by k`. With a pitch of `v (tt + 1)` vectors, each quarter warp's eight 16-byte shared
/// accesses cover all 32 banks in both phases.
pub(super) fn permute_wide_kernel(
    t: &mut Templates,
    name: &str,
    v: u64,
    (tt, by): (u64, u64),
) -> String {
    assert!(v.is_power_of_two() && v <= 4 && (tt * v) % 32 == 0 && tt % by == 0);
    let p = v * (tt + 1); // pitch in vectors
    // Static shared memory is limited to 48 KiB.
    assert!(tt * p * 16 <= 48 << 10);
    let (nx, ny) = (tt * v / 32, tt / by);
    let mut g = Gen::default();
    let mut setup = Code::default();
    let (lq, lv, tmp) = (g.reg(Class::B32), g.reg(Class::B32), g.reg(Class::B32));
    setup.line(format!("shr.u32 {lq}, %tx, {};", log2(v)));
    setup.line(format!("and.b32 {lv}, %tx, {};", v - 1));
    // Each thread moves vector lv of its slots' runs.
    let lv16 = g.reg(Class::B64);
    setup.line(format!("mul.wide.u32 {lv16}, {lv}, 16;"));
    setup.line(format!("add.s64 %src, %src, {lv16};"));
    setup.line(format!("add.s64 %dst, %dst, {lv16};"));
    // Read-phase stores at [ty][tx] (vectors), write-phase loads at [lq][ty v + lv].
    setup.line(format!("mad.lo.u32 {tmp}, %ty, {p}, %tx;"));
    setup.line(format!("mad.lo.u32 %tsw, {tmp}, 16, %tile;"));
    setup.line(format!("mad.lo.u32 {tmp}, {lq}, {p}, {lv};"));
    setup.line(format!("mad.lo.u32 {tmp}, %ty, {v}, {tmp};"));
    setup.line(format!("mad.lo.u32 %tsr, {tmp}, 16, %tile;"));
    let [rb, ra, wa, wb] = thread_slots(
        &mut g,
        &mut setup,
        (&lq, 32 / v, nx),
        (by, ny),
        (4, 4),
        false,
    );
    used_slots(&mut g, &mut setup, tt);
    let origins = origins(&mut g, (4, 4), true);

    let mut phases = Vec::new();
    for whole in [false, true] {
        // Read: every load, the barrier, then every shared store.
        let mut read = Code::default();
        let pb = slot_bases(&mut g, &mut read, &rb, 1, "%sbase", whole);
        let pa = slot_preds(&mut g, &mut read, &ra, 0, whole);
        let mut loaded = Vec::new();
        for (k, sa) in ra.iter().enumerate() {
            for (i, (pbi, base)) in pb.iter().enumerate() {
                let pr = both(&mut g, &mut read, pa[k].as_deref(), pbi.as_deref());
                let at = g.reg(Class::B64);
                read.line(format!("mad.wide.s32 {at}, {}, 1, {base};", sa.off));
                let (x, y) = (g.reg(Class::B64), g.reg(Class::B64));
                read.line(format!(
                    "{}ld.global.nc.v2.u64 {{{x}, {y}}}, [{at}];",
                    pfx(pr.as_deref())
                ));
                let off = (by * k as u64 * p + 32 * i as u64) * 16;
                loaded.push((off, x, y));
            }
        }
        let mut rest = Code::default();
        rest.line("bar.sync 0;");
        for (off, x, y) in loaded {
            rest.line(format!(
                "st.shared.v2.u64 {}, {{{x}, {y}}};",
                addr("%tsw", off)
            ));
        }
        // Write: every shared load, then the global stores.
        let mut write = Code::default();
        let pw = slot_bases(&mut g, &mut write, &wa, 0, "%dbase", whole);
        let pbw = slot_preds(&mut g, &mut write, &wb, 1, whole);
        let mut vals = Vec::new();
        for k in 0..ny {
            for i in 0..nx {
                let (x, y) = (g.reg(Class::B64), g.reg(Class::B64));
                let off = (32 / v * i * p + by * k * v) * 16;
                write.line(format!(
                    "ld.shared.v2.u64 {{{x}, {y}}}, {};",
                    addr("%tsr", off)
                ));
                vals.push((k as usize, i as usize, x, y));
            }
        }
        for (k, i, x, y) in vals {
            let pr = both(&mut g, &mut write, pw[i].0.as_deref(), pbw[k].as_deref());
            let at = g.reg(Class::B64);
            write.line(format!("mad.wide.s32 {at}, {}, 1, {};", wb[k].off, pw[i].1));
            write.line(format!(
                "{}st.global.v2.u64 [{at}], {{{x}, {y}}};",
                pfx(pr.as_deref())
            ));
        }
        phases.push((read.text(), rest.text(), write.text()));
    }
    let whole = phases.pop().expect("two phases");
    let parts = Parts {
        geometry: (tt, by, p, tt * p * 16),
        decls: g.decls(),
        setup: setup.text(),
        origins,
        phases: [phases.pop().expect("two phases"), whole],
    };
    let doc = format!(
        "// Any-permutation copy of runs of {v} 16-byte vectors ({} bytes; PermuteArgs with\n\
         // wide = {v}, strides in 16-byte units; see kernels/src/abi/permute.rs). Tiles of\n\
         // {tt} x {tt} runs, block (32, {by}). Read phase: lane tx takes vector tx % {v} of\n\
         // B slots tx / {v} + {} i, row ty A slots ty + {by} k, so a warp reads {} whole runs\n\
         // along the source's fastest axis; vectors go to shared memory at [A][B][vector]\n\
         // (pitch {p} vectors). Write phase: lane tx takes vector tx % {v} of A slots\n\
         // tx / {v} + {} i, row ty B slots ty + {by} k. Origin, whole-tile path and grid as\n\
         // in copy_permute_bN.\n",
        16 * v,
        32 / v,
        32 / v,
        32 / v,
    );
    render(t, name, parts, Some(doc))
}

/// The generated parts of one permute kernel, for [`render`].
struct Parts {
    /// Slots per side, block rows, shared pitch (the template's `T`, `BY`, `PITCH`) and the
    /// bytes of shared memory.
    geometry: (u64, u64, u64, u64),
    decls: String,
    setup: String,
    /// The tile origin (see [`origins`]): after a partial tile (and for a block's first
    /// tile), and during a whole tile's loads.
    origins: [String; 2],
    /// The phases for partial tiles, then for whole ones: the read phase's loads, the rest of
    /// the read phase (conversions, the barrier and the shared stores), the write phase.
    phases: [(String, String, String); 2],
}

/// The tile origin, twice (with distinct labels): for the template's `ORIGIN`, computed after
/// a partial tile, and `ORIGIN_NEXT`, computed for the next tile while a whole tile's loads
/// are in flight. `ORIGIN_NEXT` leaves out the remaining extents: a partial tile after a
/// whole one starts again at `ORIGIN`.
///
/// Without `ahead`, `ORIGIN_NEXT` only marks the next tile as not known to be whole, so that
/// every tile's origin is computed at `ORIGIN`: for kernels whose registers would otherwise
/// cost a resident block per multiprocessor.
fn origins(g: &mut Gen, shifts: (u32, u32), ahead: bool) -> [String; 2] {
    let next = if ahead {
        origin(g, shifts, "_NEXT", false)
    } else {
        "\tmov.pred %pfull, 0;\n".to_string()
    };
    [origin(g, shifts, "", true), next]
}

/// Renders `permute.ptx` for kernel `name`; with `doc`, the template's comment (which
/// describes the element-wise kernels) is replaced by it.
fn render(t: &mut Templates, name: &str, parts: Parts, doc: Option<String>) -> String {
    let (tt, by, pitch, bytes) = parts.geometry;
    let [
        (read, read_rest, write),
        (read_whole, read_rest_whole, write_whole),
    ] = parts.phases;
    let [origin, origin_next] = parts.origins;
    let text = t.render(
        "permute.ptx",
        &[
            ("NAME", name.to_string()),
            ("T", tt.to_string()),
            ("BY", by.to_string()),
            ("PITCH", pitch.to_string()),
            ("TILE_BYTES", bytes.to_string()),
            ("DECLS", parts.decls),
            ("SETUP", parts.setup),
            ("ORIGIN", origin),
            ("ORIGIN_NEXT", origin_next),
            ("READ", read),
            ("READ_REST", read_rest),
            ("WRITE", write),
            ("READ_WHOLE", read_whole),
            ("READ_REST_WHOLE", read_rest_whole),
            ("WRITE_WHOLE", write_whole),
        ],
    );
    match doc {
        None => text,
        Some(doc) => {
            let body = text.find(".shared").map_or(text.as_str(), |at| &text[at..]);
            format!("{doc}{body}")
        }
    }
}

/// `x and y` as one predicate (`None` when neither is given: a whole tile).
fn both(g: &mut Gen, c: &mut Code, x: Option<&str>, y: Option<&str>) -> Option<String> {
    match (x, y) {
        (Some(x), Some(y)) => {
            let pr = g.reg(Class::Pred);
            c.line(format!("and.pred {pr}, {x}, {y};"));
            Some(pr)
        }
        (x, y) => x.or(y).map(str::to_string),
    }
}
