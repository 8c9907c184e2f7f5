//! A thread's slots of a tile (coordinates and offset of each) and the tables of them in
//! shared memory, with the predicates, addresses and stores derived from them.

use super::{CHUNK, DST_STRIDES, SRC_STRIDES};
use crate::emit::code::{Class, Code, Gen, pfx};

/// A slot's per-thread constants: where its local coordinates come from (for partial tiles)
/// and the byte offset of its element from the tile's origin, in 32 bits (the planner keeps
/// every offset inside a tile within `i32`; the low 32 bits of the strides give the exact
/// product then).
pub(super) struct Slot {
    coords: Coords,
    pub(super) off: String,
}

impl Slot {
    /// The register of the slot's coordinates, packed one slot per register (as `slot` makes
    /// them; only `pair_coords` pairs them up).
    pub(super) fn packed(&self) -> String {
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
pub(super) fn slot(
    g: &mut Gen,
    c: &mut Code,
    (side, j): (u64, &str),
    (strides, shift): (u64, u32),
) -> Slot {
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
pub(super) fn thread_slots(
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
pub(super) fn used_slots(g: &mut Gen, setup: &mut Code, tt: u64) {
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
pub(super) fn inside(g: &mut Gen, c: &mut Code, side: u64, s: &Slot) -> String {
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

/// For each slot of `side`: its inside-the-tile predicate (partial tiles only) and the
/// address `base` plus the slot's offset.
pub(super) fn slot_bases(
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
pub(super) fn slot_preds(
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

/// Stores `words[k]` (`st.global.{ty}`: a 4-byte word `u32`, or a vector `v4.u32` given as
/// `{a, b, c, d}`) at `base` plus the destination offset of B slot `wb[k]`, predicated (when
/// `pa` is given: a partial tile) on `pa` and on the B slot lying inside the tile.
pub(super) fn store_words(
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

/// Loads the entry of a slot table in shared memory at `base + off` (8 bytes: packed
/// coordinates, then offset): for whole tiles only the offset (`inside` is not called for
/// them), else both.
pub(super) fn table_entry(g: &mut Gen, c: &mut Code, base: &str, off: u64, whole: bool) -> Slot {
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
