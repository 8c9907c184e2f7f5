//! The vector permute kernel (`copy_permute_vec_b1`): 1-byte elements moved in 16-byte
//! vectors.

use super::slots::{Slot, inside, slot, store_words, table_entry, used_slots};
use super::{DST_STRIDES, Parts, SRC_STRIDES, origins, render};
use crate::emit::code::{Class, Code, Gen, addr, pfx};
use crate::emit::load_store::{Space, store_scalar};
use crate::emit::templates::Templates;
use crate::emit::transpose::transpose_words;
use crate::emit::types::bits_ty;

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
pub(crate) fn permute_vec_kernel(t: &mut Templates, name: &str, (tt, by): (u64, u64)) -> String {
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
