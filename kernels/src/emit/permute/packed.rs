//! The packed permute kernels (`copy_permute_packed_bN`, `copy_permute_packed128_bN`): 1- and
//! 2-byte elements moved in 4-byte words.

use super::slots::{Slot, inside, slot, store_words, table_entry, used_slots};
use super::{DST_STRIDES, Parts, SRC_STRIDES, origins, render};
use crate::emit::code::{Class, Code, Gen, addr};
use crate::emit::load_store::{Space, load_scalar, store_scalar};
use crate::emit::templates::Templates;
use crate::emit::transpose::transpose_words;
use crate::emit::types::{Ty, bits_ty, log2};

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
pub(crate) fn permute_packed_kernel(
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
