//! The narrow-axis kernels (`copy_split_cC_bN`, `copy_join_cC_bN` and their shifted kinds
//! `copy_split_shifted_cC_bN`, `copy_join_shifted_cC_bN`): `templates/narrow.ptx`.

use std::mem::{offset_of, size_of};

use super::code::{Class, Code, Gen};
use super::templates::Templates;
use super::tiled::origin;
use super::types::log2;
use crate::abi::{
    NARROW_THREADS, Narrow, TiledArgs, TiledReadAxis, TiledWriteAxis, narrow_padded, narrow_slot,
    narrow_smem_bytes, narrow_warp_bytes,
};

/// Byte `b` of the output block of one lane (`c` vectors of 16 bytes) as a byte of its input
/// block, for `c` channels of `s`-byte elements: a split turns `V` interleaved pixels of `c`
/// channels into `c` planes of `V` pixels, a join does the reverse.
fn source_byte(b: usize, c: usize, s: usize, join: bool) -> usize {
    let v = 16 / s;
    let (e, r) = (b / s, b % s);
    let ie = if join {
        // Output: pixel-major (p, ch); input: plane-major (ch, p).
        let (p, ch) = (e / c, e % c);
        ch * v + p
    } else {
        let (ch, p) = (e / v, e % v);
        p * c + ch
    };
    ie * s + r
}

/// The `prmt` selector that puts, at each byte `q` of the result, byte `sel[q]` (0 to 7) of
/// the pair `{b, a}` (`a` bytes 0 to 3).
fn selector(sel: [usize; 4]) -> u32 {
    sel.iter()
        .enumerate()
        .map(|(q, &x)| (x as u32) << (4 * q))
        .sum()
}

/// Emits output vector `k` (words `4 k` to `4 k + 3`) of one lane's block from its input
/// words `inw`: registers of the input for elements of at least 4 bytes (whole words move),
/// else `prmt`s.
fn shuffle(
    g: &mut Gen,
    code: &mut Code,
    inw: &[String],
    (c, s, join): (usize, usize, bool),
    k: usize,
) -> Vec<String> {
    (4 * k..4 * k + 4)
        .map(|w| {
            let src: Vec<(usize, usize)> = (0..4)
                .map(|q| {
                    let b = source_byte(4 * w + q, c, s, join);
                    (b / 4, b % 4)
                })
                .collect();
            if s >= 4 {
                debug_assert!(src.iter().all(|&(x, _)| x == src[0].0));
                return inw[src[0].0].clone();
            }
            let mut words: Vec<usize> = Vec::new();
            for &(x, _) in &src {
                if !words.contains(&x) {
                    words.push(x);
                }
            }
            // One prmt over two words: the bytes of `pair` at their places, others 0.
            let prmt = |g: &mut Gen, code: &mut Code, pair: &[usize]| {
                let mut sel = [0usize; 4];
                for (q, &(x, byte)) in src.iter().enumerate() {
                    if let Some(i) = pair.iter().position(|&p| p == x) {
                        sel[q] = 4 * i + byte;
                    }
                }
                let a = &inw[pair[0]];
                let b = &inw[*pair.get(1).unwrap_or(&pair[0])];
                let d = g.reg(Class::B32);
                code.line(format!("prmt.b32 {d}, {a}, {b}, {:#06x};", selector(sel)));
                d
            };
            if words.len() <= 2 {
                return prmt(g, code, &words);
            }
            let lo = prmt(g, code, &words[..2]);
            let hi = prmt(g, code, &words[2..]);
            let mut sel = [0usize; 4];
            for (q, &(x, _)) in src.iter().enumerate() {
                sel[q] = if words[..2].contains(&x) { q } else { 4 + q };
            }
            let d = g.reg(Class::B32);
            code.line(format!("prmt.b32 {d}, {lo}, {hi}, {:#06x};", selector(sel)));
            d
        })
        .collect()
}

fn vec4(r: &[String]) -> String {
    format!("{{{}, {}, {}, {}}}", r[0], r[1], r[2], r[3])
}

/// The narrow kernel `name` for elements of `s` bytes.
pub(super) fn narrow_kernel(t: &mut Templates, name: &str, s: usize, n: Narrow) -> String {
    let c = n.channels as usize;
    let v = 16 / s;
    let mut g = Gen::default();
    let words = |g: &mut Gen| -> Vec<String> { (0..4 * c).map(|_| g.reg(Class::B32)).collect() };
    let (mut p1, mut p2) = (Code::default(), Code::default());
    let padded = narrow_padded(n.channels);
    // The shared-memory addresses of the lane's group's interleaved vectors `lane * C + k`
    // ([`narrow_slot`]).
    let lane_vectors = |g: &mut Gen, code: &mut Code| -> Vec<String> {
        code.line(format!("mul.lo.u32 %x, %lane, {c};"));
        (0..c)
            .map(|k| {
                let a = g.reg(Class::B32);
                if padded {
                    code.line(format!("add.u32 {a}, %x, {k};"));
                    code.line(format!("shr.u32 %k, {a}, 3;"));
                    code.line(format!("add.u32 {a}, {a}, %k;"));
                    code.line(format!("mad.lo.u32 {a}, {a}, 16, %wb;"));
                } else {
                    code.line(format!("mad.lo.u32 {a}, %x, 16, %wb;"));
                    code.line(format!("add.u32 {a}, {a}, {};", 16 * k));
                }
                a
            })
            .collect()
    };
    // `%sa`: the address of the chunk's interleaved vector `lane`; vector `lane + 32 k` lies
    // `chunk_step * k` bytes further.
    let chunk_step = 16 * narrow_slot(32, n.channels) as usize;
    let chunk_vectors = |code: &mut Code| {
        if padded {
            code.line("shr.u32 %k, %lane, 3;");
            code.line("add.u32 %k, %k, %lane;");
            code.line("mad.lo.u32 %sa, %k, 16, %wb;");
        } else {
            code.line("mad.lo.u32 %sa, %lane, 16, %wb;");
        }
    };
    // `%ga`: byte address of element `base + chunk * per_chunk` of `op`, plus 16 per lane.
    let chunk_base = |code: &mut Code, reg: &str, base: &str, op: &str, per_chunk: usize| {
        code.line(format!("mul.wide.u32 %cw, %chunk, {per_chunk};"));
        code.line(format!("add.s64 %cw, %cw, {base};"));
        code.line(format!("mad.lo.s64 {reg}, %cw, {s}, {op};"));
        code.line("mul.wide.u32 %cw, %lane, 16;");
        code.line(format!("add.s64 {reg}, {reg}, %cw;"));
    };
    // Interleaved vector `lane + 32 k` of the chunk exists when it is below `%gc`.
    let vector_pred = |g: &mut Gen, code: &mut Code, k: usize| -> String {
        let p = g.reg(Class::Pred);
        code.line(format!("add.u32 %k, %lane, {};", 32 * k));
        code.line(format!("setp.lt.u32 {p}, %k, %gc;"));
        p
    };
    if n.join {
        // Phase 1: the lane's C plane vectors, joined, into shared memory.
        chunk_base(&mut p1, "%ga", "%os", "%src", 32 * v);
        p1.line("setp.lt.u32 %p0, %lane, %g;");
        p1.line("@!%p0 bra $P1_SKIP;");
        let inw = if n.shifted {
            shifted_loads(&mut g, &mut p1, c)
        } else {
            let inw = words(&mut g);
            for ch in 0..c {
                if ch > 0 {
                    p1.line("add.s64 %ga, %ga, %pb;");
                }
                p1.line(format!(
                    "ld.global.nc.v4.u32 {}, [%ga];",
                    vec4(&inw[4 * ch..])
                ));
            }
            inw
        };
        let at = lane_vectors(&mut g, &mut p1);
        for (k, at) in at.iter().enumerate() {
            // Each vector goes out as soon as it is made, so that its registers die.
            let out = shuffle(&mut g, &mut p1, &inw, (c, s, true), k);
            p1.line(format!("st.shared.v4.u32 [{at}], {};", vec4(&out)));
        }
        p1.label("$P1_SKIP");
        chunk_base(&mut p1, "%gb", "%od", "%dst", 32 * v * c);
        // Phase 2: consecutive vectors per lane, out to the interleaved destination.
        chunk_vectors(&mut p2);
        for k in 0..c {
            let p = vector_pred(&mut g, &mut p2, k);
            let r = words(&mut g);
            let r = &r[..4];
            p2.line(format!(
                "@{p} ld.shared.v4.u32 {}, [%sa+{}];",
                vec4(r),
                chunk_step * k
            ));
            p2.line(format!(
                "@{p} st.global.v4.u32 [%gb+{}], {};",
                512 * k,
                vec4(r)
            ));
        }
    } else {
        // Phase 1: consecutive vectors per lane, in from the interleaved source.
        chunk_base(&mut p1, "%ga", "%os", "%src", 32 * v * c);
        chunk_vectors(&mut p1);
        for k in 0..c {
            let p = vector_pred(&mut g, &mut p1, k);
            let r = words(&mut g);
            let r = &r[..4];
            p1.line(format!(
                "@{p} ld.global.nc.v4.u32 {}, [%ga+{}];",
                vec4(r),
                512 * k
            ));
            p1.line(format!(
                "@{p} st.shared.v4.u32 [%sa+{}], {};",
                chunk_step * k,
                vec4(r)
            ));
        }
        chunk_base(&mut p1, "%gb", "%od", "%dst", 32 * v);
        // Phase 2: the lane's C interleaved vectors, split, out to the planes. The shifted
        // splits' lanes all take part (their stores exchange vectors); those past the
        // chunk's groups load and store nothing.
        p2.line("setp.lt.u32 %p0, %lane, %g;");
        if !n.shifted {
            p2.line("@!%p0 bra $P2_SKIP;");
        }
        let at = lane_vectors(&mut g, &mut p2);
        let inw = words(&mut g);
        let pred = if n.shifted { "@%p0 " } else { "" };
        for (k, at) in at.iter().enumerate() {
            p2.line(format!(
                "{pred}ld.shared.v4.u32 {}, [{at}];",
                vec4(&inw[4 * k..])
            ));
        }
        for ch in 0..c {
            if ch > 0 {
                p2.line("add.s64 %gb, %gb, %pb;");
            }
            let out = shuffle(&mut g, &mut p2, &inw, (c, s, false), ch);
            if n.shifted {
                shifted_stores(&mut g, &mut p2, &out);
            } else {
                p2.line(format!("st.global.v4.u32 [%gb], {};", vec4(&out)));
            }
        }
        if !n.shifted {
            p2.label("$P2_SKIP");
        }
    }
    let (piece, plane) = if n.join {
        (
            read_field(0, offset_of!(TiledReadAxis, len)),
            read_field(1, offset_of!(TiledReadAxis, src)),
        )
    } else {
        (
            read_field(1, offset_of!(TiledReadAxis, len)),
            offset_of!(TiledArgs, write)
                + size_of::<TiledWriteAxis>()
                + offset_of!(TiledWriteAxis, dst),
        )
    };
    t.render(
        "narrow.ptx",
        &[
            ("NAME", name.to_string()),
            (
                "DIR",
                match (n.join, n.shifted) {
                    (false, false) => "interleaved split",
                    (false, true) => "interleaved split into planes at any alignment",
                    (true, false) => "planes joined",
                    (true, true) => "planes at any alignment joined",
                }
                .to_string(),
            ),
            ("C", c.to_string()),
            ("S", s.to_string()),
            ("V", v.to_string()),
            ("LOG_V", log2(v as u64).to_string()),
            ("THREADS", NARROW_THREADS.to_string()),
            ("SMEM_BYTES", narrow_smem_bytes(n.channels).to_string()),
            ("WARP_BYTES", narrow_warp_bytes(n.channels).to_string()),
            ("MIN_BLOCKS", narrow_min_blocks(n).to_string()),
            ("PIECE", piece.to_string()),
            ("PLANE", plane.to_string()),
            ("DECLS", g.decls()),
            ("ORIGIN", origin("BAX", "%tile").text()),
            ("PHASE1", p1.text()),
            ("PHASE2", p2.text()),
        ],
    )
}

/// Emits the loads of a lane's `c` plane vectors for the shifted joins and returns their
/// words (4 each): plane `ch`'s vector starts at `%ga` plus `ch` plane strides (`%pb`
/// bytes), at any alignment. Each comes from the aligned 16-byte block that holds its first
/// byte and the next block (all loads are issued first; with `m` = 0 the second is not
/// used), shifted right by its misalignment `m` (the same for every lane of the warp, whose
/// vectors lie 16 bytes apart) by [`shift_right`].
fn shifted_loads(g: &mut Gen, code: &mut Code, c: usize) -> Vec<String> {
    let mut blocks = Vec::with_capacity(c);
    for ch in 0..c {
        if ch > 0 {
            code.line("add.s64 %ga, %ga, %pb;");
        }
        let base = g.reg(Class::B64);
        let m = g.reg(Class::B32);
        let w: Vec<String> = (0..8).map(|_| g.reg(Class::B32)).collect();
        code.line(format!("and.b64 {base}, %ga, -16;"));
        code.line(format!("cvt.u32.u64 {m}, %ga;"));
        code.line(format!("and.b32 {m}, {m}, 15;"));
        code.line(format!("ld.global.nc.v4.u32 {}, [{base}];", vec4(&w[..4])));
        code.line(format!(
            "ld.global.nc.v4.u32 {}, [{base}+16];",
            vec4(&w[4..])
        ));
        blocks.push((m, w));
    }
    blocks
        .iter()
        .flat_map(|(m, w)| shift_right(g, code, w, m, false))
        .collect()
}

/// Emits the 4 words of bytes `n` to `n + 15` of the 8 words `x` (32 bytes, `x[0]` lowest),
/// `n` in the register `by` (0 to 15, or with `sixteen` 1 to 16): whole words by `n & 16`
/// (with `sixteen`), `n & 8` and `n & 4` (`selp`), then bytes by `n & 3` (`shf.r.clamp`, a
/// shift of 0 keeping the low word).
pub(super) fn shift_right(
    g: &mut Gen,
    code: &mut Code,
    x: &[String],
    by: &str,
    sixteen: bool,
) -> Vec<String> {
    // Moves words down by `k` where bit `bit` of `by` is set; keeps `keep` words (those past
    // the end stay as they are, unused when the bit is set).
    let down = |g: &mut Gen, code: &mut Code, x: &[String], k: usize, bit: u32, keep: usize| {
        let t = g.reg(Class::B32);
        let p = g.reg(Class::Pred);
        code.line(format!("and.b32 {t}, {by}, {bit};"));
        code.line(format!("setp.ne.u32 {p}, {t}, 0;"));
        (0..keep)
            .map(|j| {
                if j + k >= x.len() {
                    return x[j].clone();
                }
                let d = g.reg(Class::B32);
                code.line(format!("selp.b32 {d}, {}, {}, {p};", x[j + k], x[j]));
                d
            })
            .collect::<Vec<String>>()
    };
    let x = if sixteen {
        down(g, code, x, 4, 16, 8)
    } else {
        x.to_vec()
    };
    let b = down(g, code, &x, 2, 8, 6);
    let c = down(g, code, &b, 1, 4, 5);
    let sh = g.reg(Class::B32);
    code.line(format!("and.b32 {sh}, {by}, 3;"));
    code.line(format!("shl.b32 {sh}, {sh}, 3;"));
    (0..4)
        .map(|j| {
            let d = g.reg(Class::B32);
            code.line(format!(
                "shf.r.clamp.b32 {d}, {}, {}, {sh};",
                c[j],
                c[j + 1]
            ));
            d
        })
        .collect()
}

/// Emits the stores of a lane's vector `out` (4 words) of a plane that starts `%gb` bytes
/// in (any alignment, the same modulo 16 for every lane: lane `l`'s vector at `%gb`, the
/// warp's first at `%gb - 16 l`) for the shifted splits; `%g` lanes hold vectors, every lane
/// of the warp runs this. Lane `l` stores the aligned block that ends inside its vector:
/// the last `m` bytes of lane `l - 1`'s vector (`shfl.sync.up`) and the first `16 - m` of
/// its own, where `m` is the misalignment, when both lanes hold vectors (and lane 0 when `m`
/// is 0: the blocks are the vectors). The `16 - m` bytes before the first such block (lane
/// 0's) and the `m` after the last (lane `g - 1`'s) go out one byte per lane, from lanes 0
/// to 15 (`shfl.sync.idx`).
fn shifted_stores(g: &mut Gen, code: &mut Code, out: &[String]) {
    let m = g.reg(Class::B32);
    let n = g.reg(Class::B32);
    let al = g.reg(Class::B64);
    code.line(format!("cvt.u32.u64 {m}, %gb;"));
    code.line(format!("and.b32 {m}, {m}, 15;"));
    code.line(format!("sub.u32 {n}, 16, {m};"));
    code.line(format!("and.b64 {al}, %gb, -16;"));
    // Each word of `out` from another lane: `shfl.sync.{mode}` with lane operand `lane` and
    // clamp `clamp`.
    let shuffled = |g: &mut Gen, code: &mut Code, mode: &str, lane: &str, clamp: u32| {
        out.iter()
            .map(|o| {
                let q = g.reg(Class::B32);
                code.line(format!(
                    "shfl.sync.{mode}.b32 {q}, {o}, {lane}, {clamp}, 0xffffffff;"
                ));
                q
            })
            .collect::<Vec<String>>()
    };
    let prev = shuffled(g, code, "up", "1", 0);
    let x: Vec<String> = prev.iter().chain(out).cloned().collect();
    let blk = shift_right(g, code, &x, &n, true);
    // Whole blocks: lanes 1 to g - 1, and lane 0 when m is 0.
    let (pf, pz) = (g.reg(Class::Pred), g.reg(Class::Pred));
    code.line(format!("setp.eq.u32 {pz}, {m}, 0;"));
    code.line(format!("setp.ne.or.u32 {pf}, %lane, 0, {pz};"));
    code.line(format!("setp.lt.and.u32 {pf}, %lane, %g, {pf};"));
    code.line(format!("@{pf} st.global.v4.u32 [{al}], {};", vec4(&blk)));
    // The bytes at the ends: lane j < 16 takes byte j of lane 0's vector (j < 16 - m) or of
    // lane g - 1's (the others), when m is not 0.
    let (src, t) = (g.reg(Class::B32), g.reg(Class::B32));
    let ph = g.reg(Class::Pred);
    code.line(format!("setp.lt.u32 {ph}, %lane, {n};"));
    code.line(format!("sub.u32 {src}, %g, 1;"));
    code.line(format!("selp.b32 {src}, 0, {src}, {ph};"));
    let r = shuffled(g, code, "idx", &src, 31);
    // Word lane / 4 of those four, then its byte lane % 4.
    let (p1, p2) = (g.reg(Class::Pred), g.reg(Class::Pred));
    code.line(format!("and.b32 {t}, %lane, 4;"));
    code.line(format!("setp.ne.u32 {p1}, {t}, 0;"));
    code.line(format!("and.b32 {t}, %lane, 8;"));
    code.line(format!("setp.ne.u32 {p2}, {t}, 0;"));
    let (lo, hi, w) = (g.reg(Class::B32), g.reg(Class::B32), g.reg(Class::B32));
    code.line(format!("selp.b32 {lo}, {}, {}, {p1};", r[1], r[0]));
    code.line(format!("selp.b32 {hi}, {}, {}, {p1};", r[3], r[2]));
    code.line(format!("selp.b32 {w}, {hi}, {lo}, {p2};"));
    code.line(format!("and.b32 {t}, %lane, 3;"));
    code.line(format!("shl.b32 {t}, {t}, 3;"));
    code.line(format!("shr.b32 {w}, {w}, {t};"));
    // Its address: the warp's first vector, plus 16 per lane of the source, plus the byte.
    let a = g.reg(Class::B64);
    code.line(format!("sub.u32 {t}, {src}, %lane;"));
    code.line(format!("shl.b32 {t}, {t}, 4;"));
    code.line(format!("add.u32 {t}, {t}, %lane;"));
    code.line(format!("cvt.s64.s32 {a}, {t};"));
    code.line(format!("add.s64 {a}, {a}, %gb;"));
    let pb = g.reg(Class::Pred);
    code.line(format!("setp.lt.u32 {pb}, %lane, 16;"));
    code.line(format!("setp.ne.and.u32 {pb}, {m}, 0, {pb};"));
    code.line(format!("@{pb} st.global.u8 [{a}], {w};"));
}

/// The blocks per multiprocessor that the kernel of `channels` channels asks `ptxas` to fit
/// (`.minnctapersm`, which bounds its registers): room for about `8 C + 32` registers per
/// thread, what the kernel holds (its group's `C` input vectors, an output vector and
/// addresses) without spilling; `12 C + 32` for the shifted kernels, whose loads take two
/// blocks per vector (joins) or whose stores exchange vectors between lanes (splits).
fn narrow_min_blocks(n: Narrow) -> u32 {
    let per_channel = if n.shifted { 12 } else { 8 };
    (65536 / NARROW_THREADS / (per_channel * n.channels + 32)).clamp(1, 16)
}

/// Offset of field `f` of read axis `k` in [`TiledArgs`].
fn read_field(k: usize, f: usize) -> usize {
    offset_of!(TiledArgs, read) + k * size_of::<TiledReadAxis>() + f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_bytes_split_and_join() {
        // u8, 3 channels: output plane 1, pixel 2 comes from interleaved byte 2 * 3 + 1.
        assert_eq!(source_byte(16 + 2, 3, 1, false), 7);
        // Join: output pixel 2, channel 1 (byte 7) comes from plane 1, pixel 2 (byte 18).
        assert_eq!(source_byte(7, 3, 1, true), 18);
        // f32, 2 channels: output plane 1 word 1 = interleaved element 1 * 2 + 1.
        assert_eq!(source_byte(16 + 4, 2, 4, false), 12);
        // The two directions invert each other.
        for (c, s) in [(3, 1), (5, 2), (16, 1), (7, 8)] {
            for b in 0..16 * c {
                assert_eq!(source_byte(source_byte(b, c, s, true), c, s, false), b);
            }
        }
    }

    #[test]
    fn selectors() {
        assert_eq!(selector([0, 1, 2, 3]), 0x3210);
        assert_eq!(selector([4, 0, 7, 1]), 0x1704);
    }
}
