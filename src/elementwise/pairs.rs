//! Code generation of the tiled variant with pairs ([`pairs_for`](super::source::pairs_for)):
//! square tiles of [`PAIR_TILE`] elements a side whose slots are pairs of neighbours, for
//! operands of 1- and 2-byte types.

use std::fmt::Write;

#[cfg(doc)]
use super::normalize::Normalized;
use super::source::{
    PAIR_THREADS, PAIR_TILE, PER_THREAD, Param, Variant, convert_in, convert_out, element,
    open_loop, storage_type, tile_origin,
};
use crate::element::DType;

/// Rows between the slots of one thread: a warp takes one row of [`PAIR_TILE`] / 2 pairs.
const ROW_STEP: usize = PAIR_THREADS / (PAIR_TILE / 2);

// One block iteration covers one tile; a warp's 32 threads take the 32 pairs of a row, and the
// swizzle of the staged tiles (`& 31`) names 32 pairs of columns.
const _: () = assert!(
    PAIR_THREADS * PER_THREAD * 2 == PAIR_TILE * PAIR_TILE
        && PAIR_TILE == 64
        && PAIR_THREADS % 32 == 0
);

/// The unsigned integer type of `bytes` bytes.
fn uint_type(bytes: usize) -> &'static str {
    match bytes {
        1 => "unsigned char",
        2 => "unsigned short",
        4 => "unsigned int",
        _ => "unsigned long long",
    }
}

/// The stored element of type `t` whose bits are the low bits of the integer `e`.
fn from_bits(t: DType, e: &str) -> String {
    match t {
        DType::F32 => format!("__uint_as_float((unsigned int)({e}))"),
        _ => format!("({})({})({e})", storage_type(t), uint_type(t.size())),
    }
}

/// The loop of the tiled variant with pairs ([`pairs_for`](super::source::pairs_for)): tiles
/// of [`PAIR_TILE`] rows (the second-to-last axis) by as many columns (the last axis), one per
/// block iteration. Each slot is a pair of neighbours along the last axis (`ROW_STEP` rows apart, each warp one row),
/// which a paired operand ([`Normalized::pairable`]) moves as one access and the others as two;
/// staged inputs are read in pairs along the second-to-last axis (a warp takes one column)
/// into shared memory, in their storage type. A tile wholly inside the extents (decided per
/// block iteration, so the barriers stay uniform) takes a copy of the iteration whose bounds
/// checks are constants, which the compiler folds away.
#[allow(clippy::too_many_arguments)]
pub(super) fn tiled_pairs(
    s: &mut String,
    inputs: &[Param],
    outputs: &[Param],
    body: &str,
    v: &Variant,
    types: &[DType],
    staged: &[usize],
    (idx, sidx): (&str, &str),
) {
    let u = PER_THREAD;
    let side = PAIR_TILE;
    let (a, b) = (v.rank - 2, v.rank - 1);
    let arrays = types.len();
    let paired = |k: usize| v.paired.get(k);
    let stride = |k: usize, axis: usize| format!("({sidx})ds_a.strides[{k}][{axis}]");
    let ptr = |k: usize, c: &str| format!("(({c}{}*)ds_a.ptr[{k}])", storage_type(types[k]));
    // Element `h` (0, 1 or `ds_h`) of input `k`'s pair in slot `ds_u`: a paired input holds
    // the pair as one integer (`ds_l{k}`, element 0 in the low bits), the others each element
    // apart.
    let elem = |k: usize, h: &str| {
        let t = types[k];
        if paired(k) {
            from_bits(t, &format!("ds_l{k}[ds_u] >> ({} * {h})", 8 * t.size()))
        } else {
            format!("ds_l{k}[ds_u][{h}]")
        }
    };
    // A staged tile holds `side` rows of `side` elements of its storage type, in pairs of
    // columns: pair `j` of row `r` at pair `j ^ (r / 2 % 32)`. Rows 2q and 2q + 1 share the
    // swizzle, so that the writes (one column of 32 pairs of rows per warp) and the reads (one
    // row of 32 pairs of columns per warp) each land in distinct banks for 1- and 2-byte types.
    for &k in staged {
        let t = types[k];
        let _ = writeln!(
            s,
            "  __shared__ __align__({}) {} ds_sm{k}[{side}][{side}];",
            2 * t.size(),
            storage_type(t)
        );
    }
    open_loop(s, arrays, staged, (PAIR_THREADS, u), "[2]", (idx, sidx));
    // The tile's coordinates and the offsets of the other axes once; then each slot's row and
    // pair of columns, and for the staged inputs the transposed slot: a pair of rows and a
    // column.
    tile_origin(s, (v.rank, arrays), (side, side), PAIR_THREADS, (idx, sidx));
    // A tile wholly inside the extents (the same for the whole block) takes a copy of the
    // iteration whose bounds checks are constants.
    let _ = writeln!(
        s,
        "    if (ds_la - ds_at * {side} >= {side} && ds_lb - ds_bt * {side} >= {side}) {{"
    );
    let emit = |s: &mut String, full: bool| {
        let _ = writeln!(
            s,
            "    const unsigned int ds_b0 = threadIdx.x % {}, ds_a0 = threadIdx.x / {};\n#pragma unroll\n    for (int ds_u = 0; ds_u < {u}; ++ds_u) {{\n      const {idx} ds_ca = ds_at * {side} + ds_a0 + ds_u * {ROW_STEP}, ds_cb = ds_bt * {side} + 2 * ds_b0;\n{}",
            side / 2,
            side / 2,
            if full {
                "      ds_ok[ds_u][0] = true; ds_ok[ds_u][1] = true;"
            } else {
                "      ds_ok[ds_u][0] = ds_ca < ds_la && ds_cb < ds_lb;\n      ds_ok[ds_u][1] = ds_ca < ds_la && ds_cb + 1 < ds_lb;"
            }
        );
        for k in 0..arrays {
            let _ = writeln!(
                s,
                "      ds_o{k}[ds_u] = ds_t{k} + ({sidx})ds_ca * {} + ({sidx})ds_cb * {};",
                stride(k, a),
                stride(k, b)
            );
        }
        if !staged.is_empty() {
            let _ = writeln!(
                s,
                "      const {idx} ds_ca2 = ds_at * {side} + 2 * ds_b0, ds_cb2 = ds_bt * {side} + ds_a0 + ds_u * {ROW_STEP};{}",
                if full {
                    "\n      ds_okp[ds_u][0] = true; ds_okp[ds_u][1] = true;"
                } else {
                    "\n      ds_okp[ds_u][0] = ds_ca2 < ds_la && ds_cb2 < ds_lb;\n      ds_okp[ds_u][1] = ds_ca2 + 1 < ds_la && ds_cb2 < ds_lb;"
                }
            );
            for &k in staged {
                let _ = writeln!(
                    s,
                    "      ds_p{k}[ds_u] = ds_t{k} + ({sidx})ds_ca2 * {} + ({sidx})ds_cb2 * {};",
                    stride(k, a),
                    stride(k, b)
                );
            }
        }
        let _ = writeln!(s, "    }}");
        // Every array input's loads for all slots, before any store. Each load has a variable of
        // its own, zeroed first: a paired input's pair in one integer, whose first element alone
        // (where the second is past the extent) is loaded into the same integer; an unpaired
        // input's two elements apart. No load then waits for another to complete.
        for (k, &t) in types.iter().enumerate().skip(outputs.len()) {
            let (off, step, ok) = if staged.contains(&k) {
                (format!("ds_p{k}[ds_u]"), stride(k, a), "ds_okp")
            } else {
                (format!("ds_o{k}[ds_u]"), stride(k, b), "ds_ok")
            };
            let st = storage_type(t);
            let src = ptr(k, "const ");
            let load = if paired(k) {
                let (word, one) = (uint_type(2 * t.size()), uint_type(t.size()));
                format!(
                    "    {word} ds_l{k}[{u}];\n#pragma unroll\n    for (int ds_u = 0; ds_u < {u}; ++ds_u) {{\n      ds_l{k}[ds_u] = 0;\n      if ({ok}[ds_u][1]) ds_l{k}[ds_u] = *(const {word}*)({src} + {off});\n      if ({ok}[ds_u][0] && !{ok}[ds_u][1]) ds_l{k}[ds_u] = *(const {one}*)({src} + {off});\n    }}"
                )
            } else {
                format!(
                    "    {st} ds_l{k}[{u}][2];\n#pragma unroll\n    for (int ds_u = 0; ds_u < {u}; ++ds_u) {{\n      ds_l{k}[ds_u][0] = ({st})0; ds_l{k}[ds_u][1] = ({st})0;\n      if ({ok}[ds_u][0]) ds_l{k}[ds_u][0] = {src}[{off}];\n      if ({ok}[ds_u][1]) ds_l{k}[ds_u][1] = {src}[{off} + {step}];\n    }}"
                )
            };
            let _ = writeln!(s, "{load}");
        }
        // Then the staged inputs' pairs of rows into shared memory, column `ds_a0 + ds_u *
        // ROW_STEP` of rows `2 * ds_b0` and `2 * ds_b0 + 1`.
        for &k in staged {
            let _ = writeln!(
                s,
                "#pragma unroll\n    for (int ds_u = 0; ds_u < {u}; ++ds_u) {{\n      const unsigned int ds_c = ds_a0 + ds_u * {ROW_STEP}, ds_j = (((ds_c >> 1) ^ ds_b0) << 1) | (ds_c & 1);\n      ds_sm{k}[2 * ds_b0][ds_j] = {};\n      ds_sm{k}[2 * ds_b0 + 1][ds_j] = {};\n    }}",
                elem(k, "0"),
                elem(k, "1")
            );
        }
        if !staged.is_empty() {
            s.push_str("    __syncthreads();\n");
        }
        let _ = writeln!(
            s,
            "#pragma unroll\n    for (int ds_u = 0; ds_u < {u}; ++ds_u) {{"
        );
        for (k, &t) in types.iter().enumerate().take(outputs.len()) {
            let _ = writeln!(s, "      {} ds_y{k}[2] = {{0, 0}};", storage_type(t));
        }
        if !staged.is_empty() {
            // This slot's row and the place of its pair of columns in that row.
            let _ = writeln!(
                s,
                "      const unsigned int ds_row = ds_a0 + ds_u * {ROW_STEP}, ds_j = (ds_b0 ^ ((ds_row >> 1) & 31)) << 1;"
            );
        }
        for &k in staged {
            let st = storage_type(types[k]);
            let _ = writeln!(
                s,
                "      const ds_pair<{st}> ds_s{k} = *(const ds_pair<{st}>*)&ds_sm{k}[ds_row][ds_j];"
            );
        }
        let _ = writeln!(
            s,
            "#pragma unroll\n      for (int ds_h = 0; ds_h < 2; ++ds_h) {{\n        if (!ds_ok[ds_u][ds_h]) continue;"
        );
        s.push_str(&element(
            inputs,
            outputs,
            body,
            v,
            "        ",
            &|k| {
                if staged.contains(&k) {
                    convert_in(types[k], &format!("ds_s{k}.v[ds_h]"))
                } else {
                    convert_in(types[k], &elem(k, "ds_h"))
                }
            },
            &|k, p| format!("ds_y{k}[ds_h] = {};", convert_out(p.dtype, &p.name)),
        ));
        s.push_str("      }\n");
        for (k, &t) in types.iter().enumerate().take(outputs.len()) {
            let st = storage_type(t);
            let out = ptr(k, "");
            if paired(k) {
                let _ = writeln!(
                    s,
                    "      if (ds_ok[ds_u][1]) {{ ds_pair<{st}> ds_w; ds_w.v[0] = ds_y{k}[0]; ds_w.v[1] = ds_y{k}[1]; *(ds_pair<{st}>*)({out} + ds_o{k}[ds_u]) = ds_w; }}\n      if (ds_ok[ds_u][0] && !ds_ok[ds_u][1]) {out}[ds_o{k}[ds_u]] = ds_y{k}[0];"
                );
            } else {
                let _ = writeln!(
                    s,
                    "      if (ds_ok[ds_u][0]) {out}[ds_o{k}[ds_u]] = ds_y{k}[0];\n      if (ds_ok[ds_u][1]) {out}[ds_o{k}[ds_u] + {}] = ds_y{k}[1];",
                    stride(k, b)
                );
            }
        }
        s.push_str("    }\n");
        if !staged.is_empty() {
            s.push_str("    __syncthreads();\n");
        }
    };
    emit(s, true);
    s.push_str("    } else {\n");
    emit(s, false);
    s.push_str("    }\n  }\n}\n");
}
