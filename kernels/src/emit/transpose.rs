//! The transpose kernels (`*_transpose_*`), with the packed path for equal 1- and 2-byte
//! types and the transposition of words in registers that the permute kernels share.

use super::code::{Class, Code, Gen, addr};
use super::convert::convert;
use super::layout::TRANSPOSE_BATCH;
use super::load_store::{Space, load_scalar, pack_word, store_scalar, unpack_word};
use super::templates::Templates;
use super::types::{Ty, log2};
use crate::abi::{TRANSPOSE_BLOCK, TRANSPOSE_TILE};

const TILE: u64 = TRANSPOSE_TILE as u64;
const TILE_PITCH: u64 = TILE + 1;
/// Rows of a transpose tile that a block moves per pass: its block's height.
const TILE_ROWS_PER_PASS: u64 = TRANSPOSE_BLOCK.1 as u64;

/// Splits `%bz` over the batch axes into `%boffd` / `%boffs` (labels get
/// `prefix`).
fn batch_offsets(g: &mut Gen, prefix: &str) -> String {
    let lay = &TRANSPOSE_BATCH;
    let mut batch = Code::default();
    let x = g.reg(Class::B64);
    batch.line(format!("mov.b64 {x}, %bz;"));
    let p = g.reg(Class::Pred);
    batch.line(format!("setp.eq.u32 {p}, %rank, 0;"));
    batch.line(format!("@{p} bra.uni ${prefix}BATCH_OFFSET_DONE;"));
    lay.decompose(
        g,
        &mut batch,
        "%rank",
        &[x],
        &["%boffd".to_string()],
        Some(&["%boffs".to_string()]),
        "%lds",
        Some("%lss"),
        &format!("${prefix}BATCH_FIN"),
    );
    batch.label(&format!("${prefix}BATCH_OFFSET_DONE"));
    batch.text()
}

/// Transposes the P x P block of elements held in `w` (word k holds P
/// elements of column k); returns words holding the rows.
pub(super) fn transpose_words(g: &mut Gen, c: &mut Code, size: u64, w: &[String]) -> Vec<String> {
    if size == 2 {
        let x0 = g.reg(Class::B32);
        let x1 = g.reg(Class::B32);
        c.line(format!("prmt.b32 {x0}, {}, {}, 0x5410;", w[0], w[1]));
        c.line(format!("prmt.b32 {x1}, {}, {}, 0x7632;", w[0], w[1]));
        return vec![x0, x1];
    }
    let t: Vec<String> = (0..4).map(|_| g.reg(Class::B32)).collect();
    c.line(format!("prmt.b32 {}, {}, {}, 0x5140;", t[0], w[0], w[1]));
    c.line(format!("prmt.b32 {}, {}, {}, 0x5140;", t[1], w[2], w[3]));
    c.line(format!("prmt.b32 {}, {}, {}, 0x7362;", t[2], w[0], w[1]));
    c.line(format!("prmt.b32 {}, {}, {}, 0x7362;", t[3], w[2], w[3]));
    let x: Vec<String> = (0..4).map(|_| g.reg(Class::B32)).collect();
    c.line(format!("prmt.b32 {}, {}, {}, 0x5410;", x[0], t[0], t[1]));
    c.line(format!("prmt.b32 {}, {}, {}, 0x7632;", x[1], t[0], t[1]));
    c.line(format!("prmt.b32 {}, {}, {}, 0x5410;", x[2], t[2], t[3]));
    c.line(format!("prmt.b32 {}, {}, {}, 0x7632;", x[3], t[2], t[3]));
    x
}

/// Registers used by the packed transpose path.
const PACKED_DECLS: &str =
    "\t.reg .b32 %ptrow;\n\t.reg .b64 %prt, %pct, %pscs, %pdrs, %prr, %pcc, %psp, %pdp;";

/// The packed path of a transpose between equal 1- or 2-byte types (full
/// tiles only, so no bounds checks).
fn packed_transpose(t: &mut Templates, g: &mut Gen, s: Ty, d: Ty) -> String {
    let size = s.size;
    let p = 4 / size;
    let tile = TILE * p;
    let lay = &TRANSPOSE_BATCH;

    let mut chk = Code::default();
    let a = g.reg(Class::B64);
    let m = g.reg(Class::B64);
    chk.line(format!("or.b64 {a}, %dst, %src;"));
    chk.line(format!("and.b64 {a}, {a}, 3;"));
    chk.line(format!("or.b64 {m}, %scs, %drs;"));
    for k in 0..lay.axes {
        for off in [(lay.dst_stride)(k), (lay.src_stride)(k)] {
            let x = g.reg(Class::B64);
            chk.line(format!("ld.param.s64 {x}, [p_args+{off}];"));
            chk.line(format!("or.b64 {m}, {m}, {x};"));
        }
    }
    chk.line(format!("and.b64 {m}, {m}, {};", p - 1));
    chk.line(format!("or.b64 {a}, {a}, {m};"));
    let pc = g.reg(Class::Pred);
    chk.line(format!("setp.ne.u64 {pc}, {a}, 0;"));
    chk.line(format!("@{pc} bra.uni $SCALAR_PATH;"));

    // Read phase: word (i, k) holds rows prr..prr+P of column
    // c0 + P*(ty + 8i) + k, at %psp + (8Pi + k) * %pscs. Passes are issued
    // in chunks (loads of a chunk before its shared stores).
    let mut rd = Code::default();
    let passes = TILE / TILE_ROWS_PER_PASS;
    let chunk = if p == 4 { 2 } else { passes };
    for h in 0..passes / chunk {
        let mut words = Vec::new();
        for i in h * chunk..(h + 1) * chunk {
            let row: Vec<String> = (0..p)
                .map(|k| {
                    let at = g.reg(Class::B64);
                    let w = g.reg(Class::B32);
                    rd.line(format!(
                        "mad.lo.s64 {at}, %pscs, {}, %psp;",
                        TILE_ROWS_PER_PASS * p * i + k
                    ));
                    rd.line(format!("ld.global.nc.u32 {w}, [{at}];"));
                    w
                })
                .collect();
            words.push((i, row));
        }
        for (i, row) in words {
            let conv: Vec<String> = row
                .iter()
                .map(|w| {
                    if s == d {
                        w.clone()
                    } else {
                        let e = unpack_word(g, &mut rd, s, w);
                        let y: Vec<String> =
                            e.iter().map(|x| convert(g, &mut rd, s, d, x)).collect();
                        pack_word(g, &mut rd, d, &y)
                    }
                })
                .collect();
            let x = transpose_words(g, &mut rd, size, &conv);
            let col = g.reg(Class::B32);
            let sa = g.reg(Class::B32);
            rd.line(format!("add.u32 {col}, %ty, {};", TILE_ROWS_PER_PASS * i));
            rd.line(format!("xor.b32 {col}, {col}, %tx;"));
            rd.line(format!("mad.lo.u32 {sa}, {col}, 4, %ptrow;"));
            for (q, xq) in x.iter().enumerate() {
                rd.line(format!(
                    "st.shared.u32 {}, {xq};",
                    addr(&sa, q as u64 * 128)
                ));
            }
        }
    }

    // Write phase: T / 8 rows per thread, one word each: row r0 + ty + 8i,
    // columns pcc..pcc+P, at %pdp + 8i * %pdrs.
    let mut wr = Code::default();
    for i in 0..tile / TILE_ROWS_PER_PASS {
        let y = g.reg(Class::B32);
        let z = g.reg(Class::B32);
        let sa = g.reg(Class::B32);
        let v = g.reg(Class::B32);
        let at = g.reg(Class::B64);
        wr.line(format!("add.u32 {y}, %ty, {};", TILE_ROWS_PER_PASS * i));
        wr.line(format!("shr.u32 {z}, {y}, {};", log2(p)));
        wr.line(format!("xor.b32 {z}, {z}, %tx;"));
        wr.line(format!("mad.lo.u32 {y}, {y}, 32, {z};"));
        wr.line(format!("mad.lo.u32 {sa}, {y}, 4, %u32tile;"));
        wr.line(format!("ld.shared.u32 {v}, [{sa}];"));
        wr.line(format!(
            "mad.lo.s64 {at}, %pdrs, {}, %pdp;",
            TILE_ROWS_PER_PASS * i
        ));
        wr.line(format!("st.global.u32 [{at}], {v};"));
    }

    let batch = batch_offsets(g, "P_");
    t.render(
        "transpose_packed.ptx",
        &[
            ("T", tile.to_string()),
            ("P", p.to_string()),
            ("CHECK", chk.text()),
            ("LOG2_T", log2(tile).to_string()),
            ("SIZE_SHIFT", log2(size).to_string()),
            ("ROW_BYTES_PER_TX", (p * 128).to_string()),
            ("BATCH_OFFSETS", batch),
            ("READ", rd.text()),
            ("WRITE", wr.text()),
        ],
    )
}

/// Whether the transpose kernel for `s -> d` has the packed path.
fn transpose_packed(s: Ty, d: Ty) -> bool {
    s.size == d.size && s.size <= 2
}

pub(super) fn transpose_kernel(t: &mut Templates, name: &str, s: Ty, d: Ty) -> String {
    let lay = &TRANSPOSE_BATCH;
    let mut g = Gen::default();
    let mut prologue = Code::default();
    lay.last_axis(&mut g, &mut prologue, "%rank", "%lds", Some("%lss"));

    let batch = batch_offsets(&mut g, "");

    let rows = (TILE / TILE_ROWS_PER_PASS) as usize;
    let mut read = Code::default();
    let loaded: Vec<String> = (0..rows)
        .map(|j| {
            load_scalar(
                &mut g,
                &mut read,
                s,
                Space::GlobalNc,
                &format!("[%sp{j}]"),
                Some(&format!("%pr{j}")),
            )
        })
        .collect();
    for (j, x) in loaded.iter().enumerate() {
        let y = convert(&mut g, &mut read, s, d, x);
        let off = j as u64 * TILE_ROWS_PER_PASS * TILE_PITCH * d.size;
        store_scalar(&mut read, d, Space::Shared, &addr("%tsw", off), &y, None);
    }

    let mut write = Code::default();
    let vals: Vec<String> = (0..rows)
        .map(|j| {
            let off = j as u64 * TILE_ROWS_PER_PASS * d.size;
            load_scalar(
                &mut g,
                &mut write,
                d,
                Space::Shared,
                &addr("%tsr", off),
                None,
            )
        })
        .collect();
    for (j, v) in vals.iter().enumerate() {
        store_scalar(
            &mut write,
            d,
            Space::Global,
            &format!("[%dp{j}]"),
            v,
            Some(&format!("%pw{j}")),
        );
    }

    let mut tile_bytes = TILE * TILE_PITCH * d.size;
    let (packed_decls, packed) = if transpose_packed(s, d) {
        let p = 4 / s.size;
        tile_bytes = tile_bytes.max(TILE * p * 32 * 4);
        (PACKED_DECLS.to_string(), packed_transpose(t, &mut g, s, d))
    } else {
        (String::new(), String::new())
    };

    t.render(
        "transpose.ptx",
        &[
            ("NAME", name.to_string()),
            ("TILE_BYTES", tile_bytes.to_string()),
            ("PACKED_DECLS", packed_decls),
            ("DECLS", g.decls()),
            ("PROLOGUE", prologue.text()),
            ("DSIZE", d.size.to_string()),
            ("SRC_SHIFT", log2(s.size).to_string()),
            ("DST_SHIFT", log2(d.size).to_string()),
            (
                "SRC_STEP_SHIFT",
                (log2(s.size) + log2(TILE_ROWS_PER_PASS)).to_string(),
            ),
            (
                "DST_STEP_SHIFT",
                (log2(d.size) + log2(TILE_ROWS_PER_PASS)).to_string(),
            ),
            ("PACKED_PATH", packed),
            ("BATCH_OFFSETS", batch),
            ("READ", read.text()),
            ("WRITE", write.text()),
        ],
    )
}
