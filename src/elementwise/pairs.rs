//! Code generation of the tiled variant with pairs ([`pairs_for`]): tiles of `TILE` x
//! `2 * TILE` elements whose slots are pairs of neighbours, for operands of 1- and 2-byte
//! types.

use std::fmt::Write;

#[cfg(doc)]
use super::source::{Normalized, pairs_for};
use super::source::{
    PER_THREAD, Param, THREADS, TILE, Variant, convert_in, convert_out, element, open_loop,
    storage_type, tile_origin,
};
use crate::element::DType;

// One block iteration of the tiled variant with pairs covers one tile of `TILE` x `2 * TILE`.
const _: () = assert!(THREADS * PER_THREAD * 2 == TILE * 2 * TILE && THREADS % TILE == 0);

/// The loop of the tiled variant with pairs ([`pairs_for`]): tiles of `TILE` rows (the
/// second-to-last axis) by `2 * TILE` columns (the last axis), one per block iteration. Each
/// slot is a pair of neighbours along the last axis (`THREADS / TILE` rows apart, each warp
/// one row of 64 elements), which a paired operand ([`Normalized::pairable`]) moves as one
/// access and the others as two; staged inputs are read into shared memory in pairs along
/// the second-to-last axis (a warp takes two columns of 32 rows).
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
    let cols = 2 * TILE;
    let (a, b) = (v.rank - 2, v.rank - 1);
    let arrays = types.len();
    let paired = |k: usize| v.paired.get(k).copied().unwrap_or(false);
    let stride = |k: usize, axis: usize| format!("({sidx})ds_a.strides[{k}][{axis}]");
    let ptr = |k: usize, c: &str| format!("(({c}{}*)ds_a.ptr[{k}])", storage_type(types[k]));
    // The statements loading the pair at `off` (its second element `step` further) into
    // `ds_l{k}[ds_u]` (zeroed), each element only where `ok(h)`: separate predicated loads,
    // which the compiler issues together before any of them is used.
    let load_pair = |k: usize, off: &str, step: &str, ok: &dyn Fn(usize) -> String| {
        let t = types[k];
        let st = storage_type(t);
        let src = ptr(k, "const ");
        let l = format!("ds_l{k}[ds_u]");
        let zero = format!("{l}.v[0] = ({st})0; {l}.v[1] = ({st})0;");
        if paired(k) {
            format!(
                "{zero}\n      if ({}) {l} = *(const ds_pair<{st}>*)({src} + {off});\n      if ({} && !{}) {l}.v[0] = {src}[{off}];",
                ok(1),
                ok(0),
                ok(1)
            )
        } else {
            format!(
                "{zero}\n      if ({}) {l}.v[0] = {src}[{off}];\n      if ({}) {l}.v[1] = {src}[{off} + {step}];",
                ok(0),
                ok(1)
            )
        }
    };
    open_loop(s, types, staged, (TILE, cols + 1), u, "[2]", (idx, sidx));
    // The tile's coordinates and the offsets of the other axes once; then each slot's row and
    // pair of columns, and for the staged inputs the transposed slot: a pair of rows
    // (`ds_q0`) and a column (`ds_c0`, `2 * THREADS / TILE` columns apart).
    tile_origin(s, v.rank, arrays, (TILE, cols), (idx, sidx));
    let _ = writeln!(
        s,
        "    const unsigned int ds_b0 = threadIdx.x % {TILE}, ds_a0 = threadIdx.x / {TILE};\n    const unsigned int ds_q0 = threadIdx.x % {}, ds_c0 = threadIdx.x / {};\n#pragma unroll\n    for (int ds_u = 0; ds_u < {u}; ++ds_u) {{\n      const {idx} ds_ca = ds_at * {TILE} + ds_a0 + ds_u * {}, ds_cb = ds_bt * {cols} + 2 * ds_b0;\n      ds_ok[ds_u][0] = ds_ca < ds_la && ds_cb < ds_lb;\n      ds_ok[ds_u][1] = ds_ca < ds_la && ds_cb + 1 < ds_lb;",
        TILE / 2,
        TILE / 2,
        THREADS / TILE
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
            "      const {idx} ds_ca2 = ds_at * {TILE} + 2 * ds_q0, ds_cb2 = ds_bt * {cols} + ds_c0 + ds_u * {};\n      ds_okp[ds_u][0] = ds_ca2 < ds_la && ds_cb2 < ds_lb;\n      ds_okp[ds_u][1] = ds_ca2 + 1 < ds_la && ds_cb2 < ds_lb;",
            2 * THREADS / TILE
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
    // Every array input's loads for all slots, before any store.
    for (k, &t) in types.iter().enumerate().skip(outputs.len()) {
        let (off, step, ok): (String, String, &dyn Fn(usize) -> String) = if staged.contains(&k) {
            (format!("ds_p{k}[ds_u]"), stride(k, a), &|h| {
                format!("ds_okp[ds_u][{h}]")
            })
        } else {
            (format!("ds_o{k}[ds_u]"), stride(k, b), &|h| {
                format!("ds_ok[ds_u][{h}]")
            })
        };
        let _ = writeln!(
            s,
            "    ds_pair<{}> ds_l{k}[{u}];\n#pragma unroll\n    for (int ds_u = 0; ds_u < {u}; ++ds_u) {{\n      {}\n    }}",
            storage_type(t),
            load_pair(k, &off, &step, ok)
        );
    }
    // Then the staged inputs' values into shared memory. A staged tile keeps column `c` at
    // `(c % 2) * (TILE + 1) + c / 2` of its row (of `2 * TILE + 1`): both the writes (two
    // columns of rows 2q and 2q + 1) and the reads (a row's even or odd columns) then hit 32
    // distinct banks for 4-byte body types.
    let col = format!(
        "(ds_c0 & 1) * {} + (ds_c0 >> 1) + ds_u * {}",
        TILE + 1,
        THREADS / TILE
    );
    for &k in staged {
        let t = types[k];
        let _ = writeln!(
            s,
            "#pragma unroll\n    for (int ds_u = 0; ds_u < {u}; ++ds_u) {{\n      ds_sm{k}[2 * ds_q0][{col}] = {};\n      ds_sm{k}[2 * ds_q0 + 1][{col}] = {};\n    }}",
            convert_in(t, &format!("ds_l{k}[ds_u].v[0]")),
            convert_in(t, &format!("ds_l{k}[ds_u].v[1]"))
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
                format!(
                    "ds_sm{k}[ds_a0 + ds_u * {}][ds_h * {} + ds_b0]",
                    THREADS / TILE,
                    TILE + 1
                )
            } else {
                convert_in(types[k], &format!("ds_l{k}[ds_u].v[ds_h]"))
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
    s.push_str("  }\n}\n");
}
