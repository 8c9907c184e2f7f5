//! The element-wise permute kernels (`*_permute_*`, `*_permute32_*`): one element per slot,
//! fused with a conversion, with a write phase in 4-byte words for 2-byte destinations.

use super::slots::{
    Slot, inside, slot, slot_bases, slot_preds, store_words, thread_slots, used_slots,
};
use super::{DST_STRIDES, Parts, WORDS, both, origins, render};
use crate::emit::code::{Class, Code, Gen, addr};
use crate::emit::convert::convert;
use crate::emit::load_store::{Space, load_scalar, pack_word, store_scalar};
use crate::emit::templates::Templates;
use crate::emit::types::{Ty, log2};

/// Pitch of the shared tile in elements of `d`: T plus enough padding that rows start in
/// different banks (pitch in bytes an odd multiple of 4, or of 8 for 8-byte elements).
fn pitch(t: u64, d: Ty) -> u64 {
    t + (4 / d.size).max(1)
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

/// The element-wise kernel `name` for `s -> d` with tiles of `tt` x `tt` slots and blocks of
/// (32, `by`) threads. With 2-byte destinations and 64-slot tiles, the kernel also has a
/// write phase in 4-byte words, taken when `PermuteArgs::words` is set.
pub(crate) fn permute_kernel(
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
