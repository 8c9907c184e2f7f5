//! The wide permute kernels (`copy_permute_wN`): copies of runs of 16-byte vectors.

use super::slots::{slot_bases, slot_preds, thread_slots, used_slots};
use super::{Parts, both, origins, render};
use crate::emit::code::{Class, Code, Gen, addr, pfx};
use crate::emit::templates::Templates;
use crate::emit::types::log2;

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
pub(crate) fn permute_wide_kernel(
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
