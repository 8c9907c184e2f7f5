//! Writes the launches of the tiled kernels for the `narrow` and `rank` cases of
//! `benches/bandwidth.rs` (and a few casts and f64 copies), or the PTX of every module, for
//! `harness.cu` to time on a GPU machine without a Rust toolchain. See `run` for the workflow.
//!
//! Each bench layout and each unlisted one also comes read backwards along some source axes
//! (named `neg ...`): the source's fastest axis and one other for the bench layouts, a seeded
//! half of the axes for the unlisted ones.
//!
//! `tiled-variants cases [MAX_VOLUME]`: one line per case on stdout,
//! `name|kernel|threads|tiles|elements|src size|dst size|untiled rests|params (hex)`, then
//! `|kernel|threads|tiles|params` for each part of the copy that no whole tile covers and that
//! the tiled kernels take too (the plan's rests, in the order it runs them; `untiled rests`
//! counts the parts left to other kernels, which the line leaves out), planned with the tiled
//! kernels preferred and tiles of at most MAX_VOLUME elements (0: the kernels' limit); the
//! parameter blocks' addresses are offsets from buffers at 0, which the harness adds. With
//! `TILED_VARIANTS_UNLISTED=COUNT,SEED` (decimal), the unlisted layouts are COUNT others drawn
//! from SEED (to weigh a planner change on layouts that the default 64 leave out), named with
//! ` sSEED` at the end, so that the cases of several draws (and of the default one) can be
//! concatenated into one file (the listed cases then appear once per draw, alike).
//! With `TILED_VARIANTS_CASTS` set, the unlisted layouts of 1-byte elements of at most 128 Mi
//! elements (512 MiB of f32) also come as casts from u8 and f16 to f32 (named `unlc ...`).
//! With `TILED_VARIANTS_NO_NARROW` set, each plan that a narrow kernel would run names the
//! tiled kernel that runs the same tiles otherwise (to time the two on the same plans).
//! `tiled-variants ptx DIR [MODULE...]`: the PTX of every module (or of those named) into DIR.

use std::fmt::Write;

use devspan::DType;
use devspan_kernels::abi::Kernel;

const GIB: usize = 1 << 30;

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
/// As `seeded_permutation` in benches/bandwidth.rs.
fn seeded_permutation(rank: usize, seed: u64) -> Vec<usize> {
    let mut state = seed;
    let mut p: Vec<usize> = (0..rank).collect();
    for i in (1..rank).rev() {
        let j = (splitmix64(&mut state) % (i as u64 + 1)) as usize;
        p.swap(i, j);
    }
    p
}
fn cstrides(shape: &[usize]) -> Vec<isize> {
    let mut s = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for i in (0..shape.len()).rev() {
        s[i] = acc;
        acc *= shape[i] as isize;
    }
    s
}

/// Appends the launch line of the copy of the contiguous `shape` permuted by `perm` into a
/// standard-layout destination (as `permute_one` in benches/bandwidth.rs), if it plans to the
/// tiled kernels.
fn emit(
    out: &mut String,
    name: &str,
    shape: &[usize],
    perm: &[usize],
    from: DType,
    to: DType,
    cap: u32,
) {
    emit_flipped(out, name, shape, perm, &[], from, to, cap);
}

/// [`emit`] with the source read backwards along the source axes in `flip` (indices into
/// `shape`): their strides negated, element zero at their far end.
#[allow(clippy::too_many_arguments)]
fn emit_flipped(
    out: &mut String,
    name: &str,
    shape: &[usize],
    perm: &[usize],
    flip: &[usize],
    from: DType,
    to: DType,
    cap: u32,
) {
    let mut cs = cstrides(shape);
    let mut src0 = 0u64;
    for &a in flip {
        src0 += ((shape[a] - 1) as isize * cs[a]) as u64 * from.size() as u64;
        cs[a] = -cs[a];
    }
    let dshape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let sstr: Vec<isize> = perm.iter().map(|&p| cs[p]).collect();
    let dstr = cstrides(&dshape);
    let n: usize = shape.iter().product();
    let grid = devspan::internals::GridOptions {
        no_narrow: std::env::var_os("TILED_VARIANTS_NO_NARROW").is_some(),
        ..Default::default()
    };
    let l =
        devspan::internals::tiled_launch_with(0, &dstr, to, src0, &sstr, from, &dshape, cap, grid)
            .unwrap();
    let Some(l) = l else {
        eprintln!("no tiled plan: {name}");
        return;
    };
    let hex = |p: &[u8]| -> String { p.iter().map(|b| format!("{b:02x}")).collect() };
    write!(
        out,
        "{name}|{}|{}|{}|{n}|{}|{}|{}|{}",
        l.kernel,
        l.threads,
        l.tiles,
        from.size(),
        to.size(),
        l.untiled_rests,
        hex(&l.params)
    )
    .unwrap();
    for r in &l.rests {
        write!(
            out,
            "|{}|{}|{}|{}",
            r.kernel,
            r.threads,
            r.tiles,
            hex(&r.params)
        )
        .unwrap();
    }
    writeln!(out).unwrap();
}

/// As `narrow_layouts` in benches/bandwidth.rs.
fn narrow_layouts(size: usize) -> Vec<(String, Vec<usize>, Vec<usize>)> {
    let mut out = Vec::new();
    for c in [2usize, 3, 4, 8] {
        let mut side = 8192;
        while c * side * side * size > GIB {
            side /= 2;
        }
        out.push((format!("CHW>HWC C={c}"), vec![c, side, side], vec![1, 2, 0]));
        out.push((format!("HWC>CHW C={c}"), vec![side, side, c], vec![2, 0, 1]));
    }
    let side = 8191;
    out.push(("CHW>HWC C=3 odd".into(), vec![3, side, side], vec![1, 2, 0]));
    out.push(("HWC>CHW C=3 odd".into(), vec![side, side, 3], vec![2, 0, 1]));
    for c in [3usize, 4] {
        let (h, w) = (256, 256);
        let n = (256 << 20) / (c * h * w * size);
        out.push((
            format!("NCHW>NHWC C={c}"),
            vec![n, c, h, w],
            vec![0, 2, 3, 1],
        ));
        out.push((
            format!("NHWC>NCHW C={c}"),
            vec![n, h, w, c],
            vec![0, 3, 1, 2],
        ));
    }
    out
}

/// As `RANK_SHAPES` in benches/bandwidth.rs.
const RANK_SHAPES: &[&[usize]] = &[
    &[128, 3, 4, 2, 4, 3, 4, 2, 512],
    &[4; 14],
    &[2, 3, 4, 2, 3, 4, 2, 3, 4, 2, 3, 4, 2, 3, 4, 2, 3, 4],
    &[2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3],
    &[2; 27],
    &[2; 28],
];

fn cases(cap: u32) {
    let mut out = String::new();
    let types = [
        ("u8", DType::U8),
        ("f16", DType::F16),
        ("f32", DType::F32),
        ("f64", DType::F64),
    ];
    for (tn, t) in types {
        for (name, shape, perm) in narrow_layouts(t.size()) {
            emit(
                &mut out,
                &format!("narrow {tn} {name}"),
                &shape,
                &perm,
                t,
                t,
                cap,
            );
        }
    }
    let m = 1usize << 27;
    for (name, shape) in [("split>inter", [2, m]), ("inter>split", [m, 2])] {
        let name = format!("narrow f32 {name}");
        emit(
            &mut out,
            &name,
            &shape,
            &[1, 0],
            DType::F32,
            DType::F32,
            cap,
        );
    }
    let casts = [
        ("u8>f32", DType::U8, DType::F32),
        ("f32>u8", DType::F32, DType::U8),
        ("f32>f16", DType::F32, DType::F16),
        ("f16>f32", DType::F16, DType::F32),
    ];
    for (tn, f, t) in casts {
        for (name, shape, perm) in narrow_layouts(f.size().max(t.size())) {
            if name.contains("C=3") {
                emit(
                    &mut out,
                    &format!("cast {tn} {name}"),
                    &shape,
                    &perm,
                    f,
                    t,
                    cap,
                );
            }
        }
    }
    for (tn, t) in types {
        let mut shapes: Vec<&[usize]> = RANK_SHAPES.to_vec();
        if t.size() == 1 {
            shapes.push(&[2; 30]);
        }
        for (index, shape) in shapes.into_iter().enumerate() {
            if shape.iter().product::<usize>() * t.size() > GIB {
                continue;
            }
            let rank = shape.len();
            let mut perms = vec![
                ("rev".to_string(), (0..rank).rev().collect::<Vec<_>>()),
                (
                    "cyc".to_string(),
                    (0..rank).map(|i| (i + 1) % rank).collect(),
                ),
            ];
            for k in 1..=2 {
                let seed = 1000 * index as u64 + k;
                perms.push((format!("rnd{seed}"), seeded_permutation(rank, seed)));
            }
            for (pn, perm) in perms {
                let name = format!("rank {tn} s{index} r{rank} {pn}");
                emit(&mut out, &name, shape, &perm, t, t, cap);
                // The same read backwards along the source's fastest axis and one other,
                // seeded by the rank.
                let other = (splitmix64(&mut (rank as u64)) % (rank as u64 - 1)) as usize;
                let name = format!("neg {tn} s{index} r{rank} {pn}");
                emit_flipped(&mut out, &name, shape, &perm, &[rank - 1, other], t, t, cap);
            }
        }
    }
    unlisted(&mut out, cap);
    print!("{out}");
}

/// Layouts that no bench lists: 64 seeded shapes (or as `TILED_VARIANTS_UNLISTED` says) of
/// rank 4 to 24 whose extents are mostly 1 to 5, with a few of 16 to 512, of 64 to 512 MiB,
/// under seeded permutations, for every element size. Named `unl <type> r<rank> #<case>`
/// (then ` s<SEED>` where `TILED_VARIANTS_UNLISTED` names the seed).
fn unlisted(out: &mut String, cap: u32) {
    let types = [
        ("u8", DType::U8),
        ("f16", DType::F16),
        ("f32", DType::F32),
        ("f64", DType::F64),
    ];
    // `TILED_VARIANTS_UNLISTED=COUNT,SEED` draws COUNT layouts from another seed.
    // Their names end with ` sSEED`, so that the cases of several draws can be put together.
    let (count, seed, drawn) = match std::env::var("TILED_VARIANTS_UNLISTED") {
        Ok(v) => {
            let (a, b) = v
                .split_once(',')
                .expect("TILED_VARIANTS_UNLISTED=COUNT,SEED");
            let seed: u64 = b.parse().expect("SEED (decimal)");
            (a.parse().expect("COUNT"), seed, format!(" s{seed}"))
        }
        Err(_) => (64usize, 0x5eed_u64, String::new()),
    };
    let mut state = seed;
    for case in 0..count {
        let (tn, t) = types[case % 4];
        let max = (512usize << 20) / t.size();
        let min = (64usize << 20) / t.size();
        let rank = 4 + (splitmix64(&mut state) % 21) as usize;
        let mut shape = Vec::new();
        let mut n = 1usize;
        for _ in 0..rank {
            let r = splitmix64(&mut state);
            let e = if r.is_multiple_of(6) {
                16 + (r >> 8) as usize % 497
            } else {
                1 + (r >> 8) as usize % 5
            };
            let e = e.min(max / n).max(1);
            shape.push(e);
            n *= e;
        }
        if n < min {
            // Grow the largest extent until the copy is large enough to time.
            let i = (0..rank).max_by_key(|&i| shape[i]).unwrap();
            shape[i] = (shape[i] * min).div_ceil(n);
        }
        let perm = seeded_permutation(rank, 9000 + case as u64);
        let name = format!("unl {tn} r{rank} #{case}{drawn}");
        emit(out, &name, &shape, &perm, t, t, cap);
        // The same read backwards along a seeded half of the axes (a seed of its own, so that
        // the unlisted layouts stay as they were).
        let mut flips = 0xf11e_u64 + case as u64;
        let flip: Vec<usize> = (0..rank)
            .filter(|_| splitmix64(&mut flips).is_multiple_of(2))
            .collect();
        let name = format!("neg {tn} r{rank} #{case}{drawn}");
        emit_flipped(out, &name, &shape, &perm, &flip, t, t, cap);
        // With `TILED_VARIANTS_CASTS` set, the layout also as casts from u8 and f16 to f32
        // (the same shape, sized for 1-byte elements up to 512 MiB of f32).
        if std::env::var_os("TILED_VARIANTS_CASTS").is_some() && t.size() == 1 {
            let n: usize = shape.iter().product();
            if n * 4 <= 512 << 20 {
                for (cn, f) in [("u8>f32", DType::U8), ("f16>f32", DType::F16)] {
                    let name = format!("unlc {cn} r{rank} #{case}{drawn}");
                    emit(out, &name, &shape, &perm, f, DType::F32, cap);
                }
            }
        }
    }
}

fn ptx(dir: &str, names: &[String]) {
    std::fs::create_dir_all(dir).unwrap();
    if names.is_empty() {
        for (name, text) in devspan_kernels::emit::modules() {
            std::fs::write(format!("{dir}/{name}.ptx"), text).unwrap();
        }
        return;
    }
    for name in names {
        let k = Kernel::from_module_name(name).unwrap_or_else(|| panic!("no module {name}"));
        std::fs::write(
            format!("{dir}/{name}.ptx"),
            devspan_kernels::emit::module_ptx(k),
        )
        .unwrap();
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("cases") => cases(args.get(1).map_or(0, |s| s.parse().expect("MAX_VOLUME"))),
        Some("ptx") if args.len() >= 2 => ptx(&args[1], &args[2..]),
        _ => {
            eprintln!(
                "usage: tiled-variants cases [MAX_VOLUME] | tiled-variants ptx DIR [MODULE...]"
            );
            std::process::exit(2);
        }
    }
}
