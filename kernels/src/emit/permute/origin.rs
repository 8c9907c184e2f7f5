//! The tile origin: the tile index split over the pieces into the tile's offsets, whether the
//! tile is whole and its remaining extents, in 64- or 32-bit arithmetic.

use super::{AXES, CHUNK, DST_STEPS, LEN, MAGIC32, NCHUNKS, ORIGIN32, RANK, SHIFT32, SRC_STEPS};
use crate::emit::code::{Class, Code, Gen};

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
pub(super) fn origin(g: &mut Gen, (ssh, dsh): (u32, u32), tag: &str, rem: bool) -> String {
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
