//! The planner against a brute-force reference, through the plan interpreter.
//!
//! The property tests draw their cases with `cases::for_each_case` (tests/common/cases.rs): a
//! failure names the case, the seed and the whole input, `DEVSPAN_PROP_SEED` sets the seed
//! (decimal or `0x` hex; a fixed one by default), and failing inputs are not shrunk.

#[path = "../../tests/common/cases.rs"]
#[macro_use]
mod cases;

use ndarray::{IxDyn, Slice};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use cases::{for_each_case, pick, vec_of, weighted};

use super::interp::{HostMem, element, run, run_rows, run_rows_gather, run_rows_rev};
use super::{
    FILL_ROWS_MAX_SIZE, FILL_ROWS_MIN_BYTES, GATHER_SHIFTED_MIN_SIZE, MEMSET_2D_MIN_ROW_BYTES,
    Plan, PlanOptions, SCATTER_MIN_ROW_BYTES, SCATTER_MIN_SIZE, plan_copy, plan_fill,
    reversed_rows_shift,
};
use crate::element::DType;
use crate::layout::Layout;
use devspan_kernels::abi::{RowArgs, contig_group_elems, row_grid, row_head};

const POISON: u8 = 0xA5;

/// Set to `1` (CI does), the exhaustive tests below run every case through the interpreter;
/// otherwise every case is planned and its path counted, and one in [`SAMPLE`] is interpreted.
const FULL_VAR: &str = "DEVSPAN_FULL_PLAN_CHECKS";
const SAMPLE: usize = 7;

/// Whether the `k`-th case of an exhaustive test is run through the interpreter. The sample's
/// stride is prime to the loops' inner counts, so it rotates through variants and types.
fn interpret(k: usize) -> bool {
    full_checks() || k % SAMPLE == 0
}

/// Whether [`FULL_VAR`] asks for the full checks.
fn full_checks() -> bool {
    static FULL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FULL.get_or_init(|| std::env::var(FULL_VAR).is_ok_and(|v| v == "1"))
}

/// One operand's construction: a contiguous base, permuted, then sliced with steps.
#[derive(Clone, Debug)]
struct OperandSpec {
    perm_seed: Vec<usize>,
    steps: Vec<isize>,
    pads: Vec<usize>,
    starts: Vec<usize>,
    misalign: u64,
}

/// A contiguous operand in standard layout, neither sliced nor offset.
fn standard_spec(rank: usize) -> OperandSpec {
    OperandSpec {
        perm_seed: (0..rank).collect(),
        steps: vec![1; rank],
        pads: vec![0; rank],
        starts: vec![0; rank],
        misalign: 0,
    }
}

fn random_operand_spec(rng: &mut StdRng, rank: usize) -> OperandSpec {
    OperandSpec {
        perm_seed: vec_of(rng, rank..=rank, |r| r.random_range(0..64)),
        steps: vec_of(rng, rank..=rank, |r| pick(r, &[1, 2, 3, -1, -2])),
        pads: vec_of(rng, rank..=rank, |r| r.random_range(0..3)),
        starts: vec_of(rng, rank..=rank, |r| r.random_range(0..3)),
        misalign: rng.random_range(0..8),
    }
}

/// Builds a layout of exactly `shape` from `spec`; returns it and the base span length.
fn build(shape: &[usize], spec: &OperandSpec) -> (Layout<IxDyn>, usize) {
    let rank = shape.len();
    let lens: Vec<usize> = (0..rank)
        .map(|i| {
            let k = spec.steps[i].unsigned_abs();
            let start = spec.starts[i].min(spec.pads[i]);
            if shape[i] == 0 {
                spec.pads[i]
            } else {
                start + (shape[i] - 1) * k + 1 + (spec.pads[i] - start)
            }
        })
        .collect();
    // A permutation from the seeds: sort axis indices by seed.
    let mut perm: Vec<usize> = (0..rank).collect();
    perm.sort_by_key(|&i| (spec.perm_seed[i], i));
    let base_shape: Vec<usize> = perm.iter().map(|&i| lens[i]).collect();
    let base = Layout::contiguous(IxDyn(&base_shape));
    let span_len = base_shape.iter().product();
    // Axis i of the permuted layout is base axis inv[i].
    let mut inv = vec![0; rank];
    for (j, &i) in perm.iter().enumerate() {
        inv[i] = j;
    }
    let mut l = base.permuted_axes(IxDyn(&inv)).unwrap();
    for (i, &len) in shape.iter().enumerate() {
        let k = spec.steps[i];
        let start = spec.starts[i].min(spec.pads[i]);
        let end = if len == 0 {
            start
        } else {
            start + (len - 1) * k.unsigned_abs() + 1
        };
        l = l
            .slice_axis(
                ndarray::Axis(i),
                Slice::new(start as isize, Some(end as isize), k),
            )
            .unwrap();
        assert_eq!(l.shape()[i], shape[i]);
    }
    (l, span_len)
}

fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
    let mut out = vec![vec![]];
    for &n in shape {
        out = out
            .into_iter()
            .flat_map(|p| (0..n).map(move |i| [p.clone(), vec![i]].concat()))
            .collect();
    }
    out
}

fn random_dtype(rng: &mut StdRng) -> DType {
    pick(rng, &DType::ALL)
}

/// A shape, and whether the case is built as rows: the last axis then has step 1 and is the
/// innermost axis of both operands, and is longer than the others.
fn random_shape(rng: &mut StdRng) -> (Vec<usize>, bool) {
    let general = weighted(rng, &[3, 1]) == 0;
    // Drawn again until small enough.
    loop {
        let shape = if general {
            vec_of(rng, 0..=5, |r| match weighted(r, &[3, 1, 1, 1]) {
                0 => r.random_range(1..6),
                1 => 1,
                2 => r.random_range(6..12),
                _ => 0,
            })
        } else {
            let mut s = vec_of(rng, 1..=3, |r| match weighted(r, &[3, 1, 1]) {
                0 => r.random_range(1..6),
                1 => 1,
                _ => r.random_range(6..12),
            });
            s.push(match weighted(rng, &[1, 3]) {
                0 => rng.random_range(1..8),
                _ => rng.random_range(8..40),
            });
            s
        };
        let limit = if general { 600 } else { 1200 };
        if shape.iter().product::<usize>() <= limit {
            return (shape, !general);
        }
    }
}

#[derive(Debug)]
struct Case {
    shape: Vec<usize>,
    dst: OperandSpec,
    src: OperandSpec,
    bcast: Vec<bool>,
    from: DType,
    to: DType,
    seed: u64,
    opt: PlanOptions,
}

fn random_case(rng: &mut StdRng) -> Case {
    let (shape, rowish) = random_shape(rng);
    let r = shape.len();
    let mut dst = random_operand_spec(rng, r);
    let mut src = random_operand_spec(rng, r);
    let mut bcast = vec_of(rng, r..=r, |g| g.random_bool(0.2));
    let (from, to) = (random_dtype(rng), random_dtype(rng));
    let seed: u64 = rng.random();
    let (no_driver, force_64) = (rng.random(), rng.random());
    let no_rows = rng.random_bool(0.1);
    let no_transpose = rng.random_bool(0.3);
    let prefer_transpose = rng.random_bool(0.3);
    if rowish {
        let last = r - 1;
        for spec in [&mut dst, &mut src] {
            spec.steps[last] = 1;
            spec.perm_seed[last] = 64;
        }
        bcast[last] = false;
    }
    Case {
        shape,
        dst,
        src,
        bcast,
        from,
        to,
        seed,
        opt: PlanOptions {
            no_driver,
            force_64,
            no_rows,
            no_transpose,
            prefer_transpose,
            no_packed: seed % 4 == 0,
            no_packed128: seed % 8 == 1,
            no_wide: seed % 8 == 2,
            no_vec: seed % 8 == 3,
            no_tiled: seed % 8 == 4,
            prefer_tiled: seed % 8 == 5,
            prefer_gather: seed % 8 == 6,
            tiled_volume: if seed % 3 == 0 { 64 } else { 0 },
            short_rows: seed % 3 == 0,
            shifted_rows: seed % 2 == 0,
            prefer_scatter: seed % 11 == 3,
            any_memset_2d: seed % 5 == 2,
        },
    }
}

fn rand_bytes(n: usize, mut seed: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 24) as u8
        })
        .collect()
}

const DST_BASE: u64 = 0x7000_0000;
const SRC_BASE: u64 = 0x9000_0000;

/// The operands of a copy case: layouts, base-span lengths and base addresses.
struct Operands {
    dl: Layout<IxDyn>,
    dlen: usize,
    dbase: u64,
    sl: Layout<IxDyn>,
    slen: usize,
    sbase: u64,
}

fn operands(c: &Case) -> Operands {
    let (dl, dlen) = build(&c.shape, &c.dst);
    let src_shape: Vec<usize> = c
        .shape
        .iter()
        .zip(&c.bcast)
        .map(|(&n, &b)| if b { 1 } else { n })
        .collect();
    let (sl0, slen) = build(&src_shape, &c.src);
    let sl = sl0.broadcast(IxDyn(&c.shape)).unwrap();
    Operands {
        dl,
        dlen,
        dbase: DST_BASE + c.dst.misalign * c.to.size() as u64,
        sl,
        slen,
        sbase: SRC_BASE + c.src.misalign * c.from.size() as u64,
    }
}

fn case_plan(c: &Case, o: &Operands) -> crate::error::Result<Plan> {
    let (ds, ss) = (c.to.size(), c.from.size());
    plan_copy(
        o.dbase + (o.dl.offset() * ds) as u64,
        o.dl.strides(),
        c.to,
        o.sbase + (o.sl.offset() * ss) as u64,
        o.sl.strides(),
        c.from,
        &c.shape,
        c.opt,
    )
}

fn check_copy(c: &Case) -> Result<(), String> {
    let o = operands(c);
    let Operands {
        dl,
        dlen,
        dbase,
        sl,
        slen,
        sbase,
    } = &o;
    let (dlen, slen, dbase, sbase) = (*dlen, *slen, *dbase, *sbase);
    case_assert!(dl.is_unaliased());
    let (ds, ss) = (c.to.size(), c.from.size());
    let mut mem = HostMem::default();
    mem.add(dbase, vec![POISON; dlen * ds]);
    let src_bytes = rand_bytes(slen * ss, c.seed | 1);
    mem.add(sbase, src_bytes.clone());
    let plan = case_plan(c, &o).map_err(|e| e.to_string())?;
    run(&plan, &mut mem);
    let mut expect = vec![POISON; dlen * ds];
    for idx in indices(&c.shape) {
        let d = dl.offset_of(&idx).unwrap();
        let s = sl.offset_of(&idx).unwrap();
        let v = element(c.from, c.to, &src_bytes[s * ss..(s + 1) * ss]);
        expect[d * ds..(d + 1) * ds].copy_from_slice(&v);
    }
    let got = mem.region(dbase);
    if got != expect.as_slice() {
        let first = got.iter().zip(&expect).position(|(a, b)| a != b).unwrap();
        return Err(format!(
            "plan {} ({plan:?}) wrote byte {first} wrong: got {:#x}, expected {:#x}; dst {dl:?}, src {sl:?}",
            plan.path(),
            got[first],
            expect[first]
        ));
    }
    Ok(())
}

/// The fill of case `c`'s destination with its value's bits: the destination's layout and
/// length, its base address, the bits and the plan.
fn fill_plan(c: &Case) -> Result<(Layout<IxDyn>, usize, u64, u64, Plan), String> {
    let (dl, dlen) = build(&c.shape, &c.dst);
    let ds = c.to.size();
    let dbase = DST_BASE + c.dst.misalign * ds as u64;
    let bits = u64::from_le_bytes(rand_bytes(8, c.seed | 1).try_into().unwrap())
        & (u64::MAX >> (64 - 8 * ds));
    let plan = plan_fill(
        dbase + (dl.offset() * ds) as u64,
        dl.shape(),
        dl.strides(),
        ds,
        bits,
        c.opt,
    )
    .map_err(|e| e.to_string())?;
    Ok((dl, dlen, dbase, bits, plan))
}

fn check_fill(c: &Case) -> Result<(), String> {
    let (dl, dlen, dbase, bits, plan) = fill_plan(c)?;
    let ds = c.to.size();
    let mut mem = HostMem::default();
    mem.add(dbase, vec![POISON; dlen * ds]);
    run(&plan, &mut mem);
    let mut expect = vec![POISON; dlen * ds];
    for idx in indices(&c.shape) {
        let d = dl.offset_of(&idx).unwrap();
        expect[d * ds..(d + 1) * ds].copy_from_slice(&bits.to_le_bytes()[..ds]);
    }
    case_assert_eq!(
        mem.region(dbase),
        expect.as_slice(),
        "plan {:?} for {:?}",
        plan,
        dl
    );
    Ok(())
}

/// Cases of the two tests below; a handful under Miri (`.ci/miri`), which interprets every step.
const CASES: usize = if cfg!(miri) { 4 } else { 10_000 };

#[test]
fn copy_and_cast_plans_match_reference() {
    for_each_case(CASES, random_case, check_copy);
}

#[test]
fn fill_plans_match_reference() {
    for_each_case(CASES, random_case, check_fill);
}

/// Fills of wide rows at a pitch (rows reversed, a misaligned start) take the driver's 2-D
/// memset for elements of up to 4 bytes and write what ndarray's fill writes.
#[test]
#[cfg_attr(
    miri,
    ignore = "four fills of 41,000 elements through the interpreter, minutes under Miri; the planner and the interpreter have no unsafe code"
)]
fn fills_of_wide_rows_take_the_2d_memset() {
    for to in [DType::U8, DType::F16, DType::F32, DType::F64] {
        let c = Case {
            shape: vec![5, 8200],
            dst: OperandSpec {
                steps: vec![-1, 1],
                pads: vec![1, 40],
                starts: vec![0, 3],
                misalign: 1,
                ..standard_spec(2)
            },
            src: standard_spec(2),
            bcast: vec![false, false],
            from: to,
            to,
            seed: 7,
            opt: PlanOptions::default(),
        };
        let (dl, _) = build(&c.shape, &c.dst);
        let ds = to.size();
        let dst = DST_BASE + c.dst.misalign * ds as u64 + (dl.offset() * ds) as u64;
        let plan = plan_fill(dst, dl.shape(), dl.strides(), ds, 1, c.opt).unwrap();
        let want = if ds <= 4 {
            "memset2d"
        } else {
            "fill_strided32"
        };
        assert_eq!(plan.path(), want, "{to:?} {dl:?}");
        if let Err(e) = check_fill(&c) {
            panic!("{e}\ninput: {c:?}");
        }
    }
}

/// A minimal failing case of `copy_and_cast_plans_match_reference`, kept as a fixed test: a copy
/// of five `f16` from a source one element past its base, under every combination of the
/// options (none set first; under Miri only that one).
#[test]
fn pinned_copy_of_five_f16_from_a_misaligned_source() {
    let spec = |misalign| OperandSpec {
        misalign,
        ..standard_spec(1)
    };
    let combinations = if cfg!(miri) { 1 } else { 1 << 11 };
    for bits in 0u32..combinations {
        let on = |k: u32| bits >> k & 1 == 1;
        let c = Case {
            shape: vec![5],
            dst: spec(0),
            src: spec(1),
            bcast: vec![false],
            from: DType::F16,
            to: DType::F16,
            seed: 16031497321358857920,
            opt: PlanOptions {
                no_driver: on(0),
                force_64: on(1),
                no_rows: on(2),
                no_transpose: on(3),
                prefer_transpose: on(4),
                no_packed: on(5),
                no_packed128: on(6),
                no_vec: on(7),
                no_wide: on(8),
                no_tiled: on(9),
                prefer_tiled: on(10),
                prefer_gather: false,
                tiled_volume: 0,
                short_rows: false,
                shifted_rows: false,
                prefer_scatter: false,
                any_memset_2d: false,
            },
        };
        if let Err(e) = check_copy(&c).and_then(|()| check_fill(&c)) {
            panic!("{e}\ninput: {c:?}");
        }
    }
}

/// Permutations of ranks 2..=6 with axes around the tile sizes (primes, 1s, just over a
/// tile), the source permuted and sliced (steps of either sign), the destination contiguous or
/// also permuted and sliced, any pair of element types.
fn random_permute_case(rng: &mut StdRng) -> Case {
    // Drawn again until small enough for the interpreter.
    let shape = loop {
        let shape = vec_of(rng, 2..=6, |r| match weighted(r, &[3, 2, 1, 1]) {
            0 => pick(r, &[2, 3, 5, 7, 8, 9, 13]),
            1 => pick(r, &[16, 17, 31, 32, 33]),
            2 => pick(r, &[63, 64, 65, 70]),
            _ => 1,
        });
        if shape.iter().product::<usize>() <= 40_000 {
            break shape;
        }
    };
    let r = shape.len();
    let mut dst = random_operand_spec(rng, r);
    let src = random_operand_spec(rng, r);
    let dst_contiguous = rng.random_bool(0.6);
    let (from, to) = (random_dtype(rng), random_dtype(rng));
    let seed: u64 = rng.random();
    let same = rng.random_bool(0.5);
    if dst_contiguous {
        dst.perm_seed = (0..r).collect();
        dst.steps = vec![1; r];
        dst.pads = vec![0; r];
    }
    let to = if same { from } else { to };
    Case {
        bcast: vec![false; r],
        shape,
        dst,
        src,
        from,
        to,
        seed,
        opt: PlanOptions::default(),
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "tensors of up to 40,000 elements through the interpreter, minutes under Miri; the planner has no unsafe code and copy_and_cast_plans_match_reference interprets plans under Miri"
)]
fn permutations_match_reference() {
    // 400 cases with the full checks, 100 otherwise.
    let cases = if full_checks() { 400 } else { 100 };
    for_each_case(cases, random_permute_case, check_copy);
}

/// The seed of the tests that check statistics of the cases drawn (fixed: they test the
/// generators, not the planner).
const STATISTICS_SEED: u64 = 0x0057_a715_71c5;

#[test]
#[cfg_attr(
    miri,
    ignore = "path statistics over 400 plans; the property tests cover the planner under Miri"
)]
fn permutation_cases_take_the_permute_path() {
    let mut rng = StdRng::seed_from_u64(STATISTICS_SEED);
    let (mut permute, mut total) = (0, 0);
    for _ in 0..400 {
        let mut c = random_permute_case(&mut rng);
        c.opt = KERNEL_FAMILY_OPTIONS;
        let o = operands(&c);
        if let Ok(p) = case_plan(&c, &o) {
            total += 1;
            permute += usize::from(p.path() == "permute");
        }
    }
    assert!(
        permute * 3 >= total,
        "{permute} of {total} cases take the permute path"
    );
}

/// Images flipped: shapes `[outer..., W, C]` (ranks 2 to 4, C of 1 to 8 channels), the source
/// in standard layout read backwards along W, or along C (channels reversed), and now and then
/// along other axes too, sliced along W, padded along any axis but C by 0 to 2 elements, now
/// and then broadcast along an outer axis; the destination padded and read backwards along
/// its outer axes now and then; both operands at any element offset; mostly copies, some
/// casts.
fn random_flip_case(rng: &mut StdRng) -> Case {
    let rank = rng.random_range(2..=4);
    let mut shape: Vec<usize> = (0..rank - 2).map(|_| pick(rng, &[1, 2, 3])).collect();
    shape.push(pick(rng, &[1, 2, 5, 16, 17, 40, 100]));
    shape.push(pick(rng, &[1, 2, 3, 3, 3, 4, 6, 6, 8]));
    let mut src = standard_spec(rank);
    let flipped = if rng.random_bool(0.7) {
        rank - 2
    } else {
        rank - 1
    };
    src.steps[flipped] = -1;
    for k in 0..rank {
        if k != flipped && rng.random_bool(0.15) {
            src.steps[k] = -1;
        }
    }
    src.starts[rank - 2] = rng.random_range(0..3);
    let mut dst = standard_spec(rank);
    // Padding along any axis but the channels (rows apart; odd counts too).
    for k in 0..rank - 1 {
        if rng.random_bool(0.3) {
            src.pads[k] = rng.random_range(1..3);
        }
        if rng.random_bool(0.2) {
            dst.pads[k] = rng.random_range(1..3);
        }
        if k + 2 < rank && rng.random_bool(0.1) {
            dst.steps[k] = -1;
        }
    }
    src.pads[rank - 2] = src.pads[rank - 2].max(src.starts[rank - 2]);
    src.misalign = rng.random_range(0..8);
    dst.misalign = rng.random_range(0..8);
    let mut bcast = vec![false; rank];
    for b in bcast.iter_mut().take(rank - 2) {
        *b = rng.random_bool(0.1);
    }
    let from = random_dtype(rng);
    let to = if rng.random_bool(0.8) {
        from
    } else {
        random_dtype(rng)
    };
    Case {
        bcast,
        shape,
        dst,
        src,
        from,
        to,
        seed: rng.random(),
        opt: PlanOptions::default(),
    }
}

/// Images `[outer..., W, C]` whose operands have any strides a flat buffer gives them: the
/// channels innermost, W next, the outer axes in any order, each stride the product of the
/// inner extents plus now and then a few elements (rows that start anywhere, runs spaced
/// apart), read backwards along W, C or both and now and then along other axes on either side,
/// broadcast along outer axes now and then, both operands at any element offset, the
/// launcher's grid or a small forced one; every case that plans to a reversed row kernel runs
/// on it in the interpreter against the reference (which checks that every block it reads
/// stays in its row and every destination vector is aligned).
#[test]
#[cfg_attr(
    miri,
    ignore = "hundreds of plans through the interpreter, minutes under Miri; the planner has no unsafe code and copy_and_cast_plans_match_reference interprets plans under Miri"
)]
fn flips_of_any_strides_match_reference() {
    use DType::*;
    let cases = if full_checks() { 4000 } else { 400 };
    let mut rng = StdRng::seed_from_u64(0x0f11_95ed);
    let (mut reversed, mut gathered) = (0, 0);
    for case in 0..cases {
        let t = pick(&mut rng, &[U8, I16, F32, F64]);
        // Casts now and then: to a type of each size, converting or keeping every bit.
        let to = if rng.random_bool(0.3) {
            pick(&mut rng, &[I8, U8, F16, BF16, F32, U32, F64, I64])
        } else {
            t
        };
        let size = t.size();
        let rank = rng.random_range(2..=5usize);
        let c = pick(&mut rng, &[1, 2, 3, 3, 4, 4, 5, 6, 8, 12, 24]);
        let w = pick(&mut rng, &[1, 2, 3, 7, 8, 16, 17, 31, 33, 47, 64, 97]);
        let mut shape: Vec<usize> = (0..rank - 2).map(|_| pick(&mut rng, &[1, 2, 3])).collect();
        shape.extend([w, c]);
        let strides = |rng: &mut StdRng, padded: bool| -> Vec<isize> {
            let mut order: Vec<usize> = (0..rank - 2).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.random_range(0..=i));
            }
            let mut st = vec![1isize; rank];
            let mut acc = c as isize;
            if padded && rng.random_bool(0.1) {
                acc += rng.random_range(1..3i64) as isize;
            }
            st[rank - 2] = acc;
            acc *= w as isize;
            for &k in order.iter().rev() {
                if padded && rng.random_bool(0.4) {
                    acc += rng.random_range(1..6i64) as isize;
                }
                st[k] = acc;
                acc *= shape[k] as isize;
            }
            st
        };
        let padded = rng.random_bool(0.5);
        let mut ds = strides(&mut rng, padded);
        let mut ss = strides(&mut rng, true);
        match rng.random_range(0..4) {
            0 | 1 => ss[rank - 2] = -ss[rank - 2],
            2 => ss[rank - 1] = -1,
            _ => {
                ss[rank - 2] = -ss[rank - 2];
                ss[rank - 1] = -1;
            }
        }
        for k in 0..rank - 2 {
            if rng.random_bool(0.1) {
                ss[k] = -ss[k];
            }
            if rng.random_bool(0.1) {
                ds[k] = -ds[k];
            }
            if rng.random_bool(0.1) {
                ss[k] = 0;
            }
        }
        let doff = (rng.random_range(0..16usize) * to.size()) as u64;
        let soff = (rng.random_range(0..16usize) * size) as u64;
        let grid = match rng.random_range(0..4) {
            0 => Some((1, 1)),
            1 => Some((rng.random_range(1..4), rng.random_range(1..4))),
            _ => None,
        };
        let opt = PlanOptions::default();
        let what = format!(
            "case {case}: shape {shape:?} dst {ds:?} +{doff} src {ss:?} +{soff} {t} -> {to} \
             grid {grid:?}"
        );
        let run = std::panic::catch_unwind(|| {
            run_case_with(&shape, &ds, doff, to, &ss, soff, t, grid, opt)
        });
        let p = run.unwrap_or_else(|e| {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("{what}: {msg}")
        });
        reversed += usize::from(p.path().starts_with("rows_rev") || p.path() == "runs_rev");
        gathered += usize::from(p.path() == "rows_gather");
    }
    // Most drawn rows are short; those that are not whole vectors take the gathered rows, as do
    // long rows of 4- and 8-byte elements that the reversed row kernel would shift.
    assert!(
        reversed * 20 >= cases && gathered * 10 >= cases,
        "of {cases} cases {reversed} took the reversed row kernels, {gathered} the gathered rows"
    );
}

/// Casts of the layouts the reversed row kernels copy take the gathered rows, with the row and
/// its periods the layout gives; rows that the row kernel moves forwards, and rows shorter than
/// a vector group, do not.
#[test]
#[cfg_attr(
    miri,
    ignore = "tens of plans of thousands of elements through the interpreter, minutes under Miri; the planner has no unsafe code and copy_and_cast_plans_match_reference interprets plans under Miri"
)]
fn flipped_casts_take_the_gathered_rows() {
    use DType::*;
    let gather = |p: &Plan| match p {
        Plan::RowsGather { args, .. } => {
            let a = &args.row;
            (
                args.period,
                args.period_stride,
                args.period_step,
                a.row_len,
                a.rows,
            )
        }
        other => panic!("expected gathered rows, got {other:?}"),
    };
    // (shape, source strides, (period, stride, step, row length, rows)); destinations in
    // standard layout.
    type Gathered = (u64, i64, i64, u64, u64);
    let cases: [(&[usize], &[isize], Gathered); 7] = [
        // CHW flipped left-right: every row backwards, the image's rows one gathered row.
        (&[3, 8, 48], &[384, 48, -1], (48, -1, 48, 1152, 1)),
        // HWC, 3 channels, flipped left-right: pixels of 3 channels, right to left.
        (&[8, 40, 3], &[120, -3, 1], (3, 1, -3, 120, 8)),
        // Channels reversed (RGB -> BGR): the whole image one row.
        (&[8, 40, 3], &[120, 3, -1], (3, -1, 3, 960, 1)),
        // 4 channels flipped left-right, upside down too (the two axes merge).
        (&[8, 40, 4], &[-160, -4, 1], (4, 1, -4, 1280, 1)),
        // Pairs swapped.
        (&[500, 2], &[2, -1], (2, -1, 2, 1000, 1)),
        // A vector read backwards: periods of one element.
        (&[1000], &[-1], (1, 0, -1, 1000, 1)),
        // Rows read backwards, the destination contiguous across them: one row, in periods
        // of a source row.
        (&[4, 1000], &[1000, -1], (1000, -1, 1000, 4000, 1)),
    ];
    for (shape, ss, want) in cases {
        let ds = standard_strides_of(shape);
        for (from, to) in [(U8, F32), (F16, F32), (F32, BF16), (F64, U8), (I8, F64)] {
            let p = run_case(shape, &ds, 0, to, ss, 0, from, None);
            assert_eq!(gather(&p), want, "{shape:?} {ss:?} {from} -> {to}");
        }
        // Copies of the same layouts, the source's lowest byte aligned, keep the reversed row
        // kernels (or, bit for bit, their element type's).
        let low: isize = shape
            .iter()
            .zip(ss)
            .filter(|(_, st)| **st < 0)
            .map(|(&n, st)| (n as isize - 1) * -st)
            .sum();
        let p = plan_copy(
            DST_BASE,
            &ds,
            I8,
            SRC_BASE + low as u64,
            ss,
            U8,
            shape,
            KERNEL_FAMILY_OPTIONS,
        )
        .unwrap();
        assert_ne!(p.path(), "rows_gather", "{shape:?} {ss:?}");
    }
    // Copies of 1- and 2-byte elements in runs that the reversed row kernels do not take: 5
    // channels flipped left-right or reversed, 6 channels of f16 flipped left-right; and
    // copies of wider elements whose runs are short rows the row kernels would move an
    // element at a time (3 and 5 f32 channels, 3 f64 channels, flipped left-right: one
    // gathered row per image row).
    let copies: [(DType, &[usize], &[isize], Gathered); 6] = [
        (U8, &[8, 40, 5], &[200, -5, 1], (5, 1, -5, 200, 8)),
        (U8, &[8, 40, 5], &[200, 5, -1], (5, -1, 5, 1600, 1)),
        (F16, &[8, 40, 6], &[240, -6, 1], (6, 1, -6, 240, 8)),
        (F32, &[8, 40, 3], &[120, -3, 1], (3, 1, -3, 120, 8)),
        (F32, &[8, 40, 5], &[200, -5, 1], (5, 1, -5, 200, 8)),
        (F64, &[8, 40, 3], &[120, -3, 1], (3, 1, -3, 120, 8)),
    ];
    for (t, shape, ss, want) in copies {
        let ds = standard_strides_of(shape);
        let p = run_case(shape, &ds, 0, t, ss, 0, t, None);
        assert_eq!(gather(&p), want, "{shape:?} {ss:?} {t}");
    }
    // Runs of whole vectors (4 f32 channels) keep the row kernel, a run a row.
    let ds = standard_strides_of(&[8, 40, 4]);
    assert_eq!(
        contiguous_plan(F32, F32, &[8, 40, 4], &ds, &[160, -4, 1]).path(),
        "rows"
    );
    // A padded destination: rows apart, each its own (periods of 3 inside).
    let p = run_case(
        &[8, 40, 3],
        &[130, 3, 1],
        12,
        F32,
        &[120, -3, 1],
        0,
        U8,
        None,
    );
    assert_eq!(gather(&p), (3, 1, -3, 120, 8));
    // Flipped upside down only: whole rows forwards of 120 elements, not whole vector groups
    // (16) and shorter than `CAST_ROW_BYTES` on the wider side: the gathered rows; rows of
    // 1024 elements: the row kernel.
    assert_eq!(
        contiguous_plan(U8, F32, &[8, 40, 3], &[120, 3, 1], &[-120, 3, 1]).path(),
        "rows_gather"
    );
    assert_eq!(
        contiguous_plan(U8, F32, &[8, 1024], &[1024, 1], &[-1024, 1]).path(),
        "rows"
    );
    // Runs of a vector group or more, read in reverse order: the row kernel, a run a row.
    assert_eq!(
        contiguous_plan(U8, F32, &[8, 40, 16], &[640, 16, 1], &[640, -16, 1]).path(),
        "rows"
    );
    // Rows shorter than one vector group: the strided kernel.
    assert_eq!(
        contiguous_plan(U8, F32, &[5], &[1], &[-1]).path(),
        "strided32"
    );
    // A period longer than the kernels count is read as periods of one element.
    let n = (devspan_kernels::abi::ROW_GATHER_MAX_PERIOD + 1) as usize;
    let p = plan_copy(
        DST_BASE,
        &[n as isize, 1],
        F32,
        SRC_BASE + (n as u64 - 1),
        &[n as isize, -1],
        U8,
        &[2, n],
        KERNEL_FAMILY_OPTIONS,
    )
    .unwrap();
    assert_eq!(gather(&p), (1, 0, -1, n as u64, 2));
}

/// With `prefer_gather`, every cast whose destination's fastest axis has stride 1 takes the
/// gathered rows: CHW -> HWC (periods of the channels, each a plane apart), HWC -> CHW (the
/// whole image one row, read 3 elements apart), NCHW -> NHWC (a row per image), a strided row;
/// each against the reference, on the launcher's grid and on small forced ones.
#[test]
#[cfg_attr(
    miri,
    ignore = "casts of random bits through the interpreter, whose NaN results Miri gives arbitrary payloads; the planner has no unsafe code and copy_and_cast_plans_match_reference interprets plans under Miri"
)]
fn preferred_gathered_rows_take_every_cast_into_contiguous_rows() {
    use DType::*;
    let opt = PlanOptions {
        prefer_gather: true,
        ..KERNEL_FAMILY_OPTIONS
    };
    // (shape, destination strides, source strides, (period, stride, step, row length, rows))
    type Gathered = (u64, i64, i64, u64, u64);
    type Preferred<'a> = (&'a [usize], &'a [isize], &'a [isize], Gathered);
    let cases: [Preferred; 4] = [
        // CHW -> HWC, 3 channels of 8 x 20.
        (&[8, 20, 3], &[60, 3, 1], &[20, 1, 160], (3, 160, 1, 480, 1)),
        // HWC -> CHW.
        (&[3, 8, 20], &[160, 20, 1], &[1, 60, 3], (160, 3, 1, 480, 1)),
        // NCHW -> NHWC, 2 images of 4 channels of 6 x 7.
        (
            &[2, 6, 7, 4],
            &[168, 28, 4, 1],
            &[168, 7, 1, 42],
            (4, 42, 1, 168, 2),
        ),
        // Every other element of rows 90 apart: periods of a row.
        (&[5, 40], &[40, 1], &[90, 2], (40, 2, 90, 200, 1)),
    ];
    for (shape, ds, ss, want) in cases {
        for (from, to) in [(U8, F32), (F32, F16), (I16, F64)] {
            for grid in [None, Some((1, 1)), Some((2, 3))] {
                let p = run_case_with(shape, ds, 0, to, ss, 0, from, grid, opt);
                let Plan::RowsGather { args, .. } = p else {
                    panic!("{shape:?} {ss:?} {from} -> {to}: {p:?}");
                };
                let got = (
                    args.period,
                    args.period_stride,
                    args.period_step,
                    args.row.row_len,
                    args.row.rows,
                );
                assert_eq!(got, want, "{shape:?} {ss:?} {from} -> {to}");
            }
        }
        // Copies too, and not without the steering.
        for t in [U8, F32] {
            let p = run_case_with(shape, ds, 0, t, ss, 0, t, None, opt);
            assert_eq!(p.path(), "rows_gather", "{shape:?} {ss:?} {t}");
            let p = contiguous_plan(t, t, shape, ds, ss);
            assert_ne!(p.path(), "rows_gather", "{shape:?} {ss:?} {t}");
        }
    }
}

/// Gathered rows that interleave in the source run over grid x (`rows_first`), the outer axis
/// of least source stride first: planes split out of channels last, with the destination's
/// rows apart or planes of at least `GATHER_SPLIT_PERIOD` pixels (each a row of its own, not
/// a period of one row), a batch of such images, a transpose read down its columns. Rows that
/// do not interleave keep the rows over grid y. Each against the reference, on the launcher's
/// grid and on small forced ones.
#[test]
#[cfg_attr(
    miri,
    ignore = "a million elements through the interpreter; the planner has no unsafe code and copy_and_cast_plans_match_reference interprets plans under Miri"
)]
fn interleaved_gathered_rows_run_over_grid_x() {
    use DType::*;
    let opt = PlanOptions {
        prefer_gather: true,
        ..KERNEL_FAMILY_OPTIONS
    };
    let plane = 1 << 18;
    // (shape, destination strides, source strides, (period, row length, rows, first outer
    // extent, rows first))
    type Want = (u64, u64, u64, u64, bool);
    type Case = (Vec<usize>, Vec<isize>, Vec<isize>, Want);
    let cases: [Case; 7] = [
        // HWC -> CHW of a small image: one row, the planes its periods.
        (
            vec![3, 8, 20],
            vec![160, 20, 1],
            vec![1, 60, 3],
            (160, 480, 1, 1, false),
        ),
        // Planes of 2^18 pixels: a row each, the three over grid x.
        (
            vec![3, 512, 512],
            vec![plane, 512, 1],
            vec![1, 3 * 512, 3],
            (1, plane as u64, 3, 3, true),
        ),
        // Two such images: the channels first among the outer axes.
        (
            vec![2, 3, 512, 512],
            vec![3 * plane, plane, 512, 1],
            vec![3 * plane, 1, 3 * 512, 3],
            (1, plane as u64, 6, 3, true),
        ),
        // The destination's rows 104 apart: a row per image row, the channels moved first.
        (
            vec![3, 4, 100],
            vec![416, 104, 1],
            vec![1, 300, 3],
            (1, 100, 12, 3, true),
        ),
        // A transpose read down its columns, into rows 56 apart; into a contiguous destination
        // one row, the source's columns its periods.
        (
            vec![40, 50],
            vec![56, 1],
            vec![1, 40],
            (1, 50, 40, 40, true),
        ),
        (
            vec![40, 50],
            vec![50, 1],
            vec![1, 40],
            (50, 2000, 1, 1, false),
        ),
        // Rows read backwards into rows apart: apart in the source by more than their
        // elements.
        (vec![5, 40], vec![48, 1], vec![40, -1], (1, 40, 5, 5, false)),
    ];
    for (shape, ds, ss, want) in &cases {
        let big = shape.iter().product::<usize>() > 1 << 16;
        let pairs: &[(DType, DType)] = if big {
            &[(U8, F32)]
        } else {
            &[(U8, F32), (F32, F16), (I16, F64)]
        };
        let grids: &[Option<(u32, u32)>] = if big {
            &[None]
        } else {
            &[None, Some((1, 1)), Some((2, 3))]
        };
        for &(from, to) in pairs {
            for &grid in grids {
                let p = run_case_with(shape, ds, 0, to, ss, 0, from, grid, opt);
                let Plan::RowsGather { args, .. } = p else {
                    panic!("{shape:?} {ss:?} {from} -> {to}: {p:?}");
                };
                let got = (
                    args.period,
                    args.row.row_len,
                    args.row.rows,
                    args.row.shape[0],
                    args.rows_first != 0,
                );
                assert_eq!(got, *want, "{shape:?} {ss:?} {from} -> {to}");
                let (x, y) = devspan_kernels::abi::gather_grid(&args, from.size(), to.size());
                let (px, py) = row_grid(&args.row, from.size(), to.size());
                let swapped = if want.4 { (py, px) } else { (px, py) };
                assert_eq!((x, y), swapped, "{shape:?} {ss:?} {from} -> {to}");
                // The planes of 2^18 u8 -> f32 pixels: the three rows over x, each row's 2^16
                // units (16 bytes of f32) in 64 pieces over y of 1024 (256 lanes of 4).
                if shape[1..] == [512, 512] && shape[0] == 3 {
                    assert_eq!((x, y), (3, 64), "{shape:?}");
                }
            }
        }
    }
    // Seven batch axes that do not merge beside planes of 2^18 pixels: a row per plane would
    // leave eight outer axes, more than the kernels take, so the planes stay periods of one
    // row per image (and `prefer_gather` keeps the gathered rows).
    let mut array = vec![2usize; 7];
    array.extend([plane as usize, 3]);
    let (out, dst, src) = permuted_layout(&array, &[6, 5, 4, 3, 2, 1, 0, 8, 7]);
    let p = plan_copy(DST_BASE, &dst, F32, SRC_BASE, &src, U8, &out, opt).unwrap();
    let Plan::RowsGather { args, .. } = p else {
        panic!("{out:?} {src:?}: {p:?}");
    };
    assert_eq!(
        (args.period, args.row.outer_rank, args.rows_first),
        (plane as u64, 7, 0)
    );
}

/// Standard (C-order) strides of `shape`, in elements.
fn standard_strides_of(shape: &[usize]) -> Vec<isize> {
    let mut st = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for k in (0..shape.len()).rev() {
        st[k] = acc;
        acc *= shape[k] as isize;
    }
    st
}

#[test]
#[cfg_attr(
    miri,
    ignore = "hundreds of plans through the interpreter, minutes under Miri; the planner has no unsafe code and copy_and_cast_plans_match_reference interprets plans under Miri"
)]
fn flips_match_reference() {
    // 3000 cases with the full checks, 300 otherwise.
    let cases = if full_checks() { 3000 } else { 300 };
    for_each_case(cases, random_flip_case, check_copy);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "path statistics over 1000 plans; the property tests cover the planner under Miri"
)]
fn flip_cases_take_the_reversed_row_paths() {
    let mut rng = StdRng::seed_from_u64(STATISTICS_SEED);
    let (mut rev, mut rev3, mut runs, mut total) = (0, 0, 0, 0);
    for _ in 0..1000 {
        let c = random_flip_case(&mut rng);
        let o = operands(&c);
        if let Ok(p) = case_plan(&c, &o) {
            total += 1;
            rev += usize::from(p.path() == "rows_rev");
            rev3 += usize::from(p.path() == "rows_rev3");
            runs += usize::from(p.path() == "runs_rev");
        }
    }
    assert!(
        // Most drawn rows are short; those that are not whole vectors take the gathered rows.
        rev * 25 >= total && rev3 * 25 >= total && runs * 30 >= total,
        "of {total} cases {rev} take rows_rev, {rev3} rows_rev3 and {runs} runs_rev"
    );
}

/// Every permutation of `0..rank`.
fn permutations(rank: usize) -> Vec<Vec<usize>> {
    let mut out = vec![vec![]];
    for _ in 0..rank {
        out = out
            .into_iter()
            .flat_map(|p: Vec<usize>| {
                (0..rank)
                    .filter(|a| !p.contains(a))
                    .map(|a| [p.clone(), vec![a]].concat())
                    .collect::<Vec<_>>()
            })
            .collect();
    }
    out
}

/// A permuted copy of a contiguous source into a contiguous destination: the output shape,
/// the destination strides and the source strides.
pub(super) fn permuted_layout(
    shape: &[usize],
    perm: &[usize],
) -> (Vec<usize>, Vec<isize>, Vec<isize>) {
    let src = c_strides(shape);
    let out: Vec<usize> = perm.iter().map(|&a| shape[a]).collect();
    let dst = c_strides(&out);
    (out, dst, perm.iter().map(|&a| src[a]).collect())
}

/// The options of the tests that pin which kernel of the permute, transpose, row and strided
/// families a layout takes: the tiled kernels only where nothing else applies (the tests of
/// the tiled path are in `plan::tiled`, `narrow_axes_take_the_tiled_plans` and
/// `sources_read_backwards_along_their_runs_take_vector_tiles`).
const KERNEL_FAMILY_OPTIONS: PlanOptions = PlanOptions {
    no_driver: false,
    force_64: false,
    no_rows: false,
    no_transpose: false,
    prefer_transpose: false,
    no_packed: false,
    no_packed128: false,
    no_vec: false,
    no_wide: false,
    no_tiled: true,
    prefer_tiled: false,
    prefer_gather: false,
    tiled_volume: 0,
    short_rows: false,
    shifted_rows: false,
    prefer_scatter: false,
    any_memset_2d: false,
};

/// [`KERNEL_FAMILY_OPTIONS`] that keep rows on the row kernel wherever it applies, for the
/// tests of the row kernel itself (by default short rows that are not whole vectors, rows of
/// casts out of phase and copied rows off each other's alignment leave it).
const ROW_KERNEL_OPTIONS: PlanOptions = PlanOptions {
    short_rows: true,
    ..KERNEL_FAMILY_OPTIONS
};

fn contiguous_plan(
    from: DType,
    to: DType,
    shape: &[usize],
    dst_strides: &[isize],
    src_strides: &[isize],
) -> Plan {
    plan_copy(
        DST_BASE,
        dst_strides,
        to,
        SRC_BASE,
        src_strides,
        from,
        shape,
        KERNEL_FAMILY_OPTIONS,
    )
    .unwrap()
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a sweep of many plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn paths_are_chosen_as_documented() {
    use DType::*;
    // Contiguous, aligned: the vector kernel.
    assert_eq!(
        contiguous_plan(F32, F32, &[1 << 20], &[1], &[1]).path(),
        "contig"
    );
    assert_eq!(
        contiguous_plan(F32, F16, &[4, 256], &[256, 1], &[256, 1]).path(),
        "contig"
    );
    // Same type, misaligned by 4 bytes on one side only: driver memcpy.
    let p = plan_copy(
        DST_BASE + 4,
        &[1],
        F32,
        SRC_BASE,
        &[1],
        F32,
        &[1000],
        PlanOptions::default(),
    )
    .unwrap();
    assert_eq!(p.path(), "memcpy");
    // Rows of a wide slice: the row kernel (the driver's 2-D copy is slower for such rows).
    assert_eq!(
        contiguous_plan(F32, F32, &[100, 8000], &[8000, 1], &[16384, 1]).path(),
        "rows"
    );
    // The same without the row kernels: the strided kernel.
    let p = plan_copy(
        DST_BASE,
        &[8000, 1],
        F32,
        SRC_BASE,
        &[16384, 1],
        F32,
        &[100, 8000],
        PlanOptions {
            no_rows: true,
            ..PlanOptions::default()
        },
    )
    .unwrap();
    assert_eq!(p.path(), "strided32");
    // Transposes: the permute kernel unless the transpose kernel is preferred; 1-byte copies
    // keep the (packed) transpose kernel.
    let prefer = PlanOptions {
        prefer_transpose: true,
        ..PlanOptions::default()
    };
    for (from, to, shape, dst, src) in [
        (F32, F32, &[512, 256][..], &[256, 1][..], &[1, 512][..]),
        (F32, BF16, &[64, 64, 64], &[4096, 64, 1], &[1, 64, 4096]),
        (F16, F16, &[512, 256], &[256, 1], &[1, 512]),
        (F16, BF16, &[512, 256], &[256, 1], &[1, 512]),
        (F64, I8, &[512, 256], &[256, 1], &[1, 512]),
    ] {
        assert_eq!(contiguous_plan(from, to, shape, dst, src).path(), "permute");
        let p = plan_copy(DST_BASE, dst, to, SRC_BASE, src, from, shape, prefer).unwrap();
        assert_eq!(p.path(), "transpose", "{from} -> {to} {shape:?}");
    }
    // 1-byte copies: the vector permute kernel where 16-byte vectors line up, else the
    // transpose kernel, else (without it) the 128-slot packed permute kernel.
    let u8_transpose = |opt| {
        plan_copy(
            DST_BASE,
            &[256, 1],
            U8,
            SRC_BASE,
            &[1, 512],
            U8,
            &[512, 256],
            opt,
        )
        .unwrap()
        .kernel_path()
    };
    assert_eq!(u8_transpose(PlanOptions::default()), "permute_vec");
    let no_vec = PlanOptions {
        no_vec: true,
        ..PlanOptions::default()
    };
    assert_eq!(u8_transpose(no_vec), "transpose");
    assert_eq!(u8_transpose(prefer), "transpose");
    let no_transpose = PlanOptions {
        no_transpose: true,
        ..no_vec
    };
    assert_eq!(u8_transpose(no_transpose), "permute_packed128");
    // A source 4 bytes past a 16-byte boundary: words line up, vectors do not.
    let p = plan_copy(
        DST_BASE,
        &[256, 1],
        U8,
        SRC_BASE + 4,
        &[1, 512],
        U8,
        &[512, 256],
        PlanOptions::default(),
    )
    .unwrap();
    assert_eq!(p.kernel_path(), "transpose");
    // Permute: a tile axis shorter than the transpose tile (16), strided operands, a
    // transpose of the 16384^2 f32 matrix with the transpose kernels disabled.
    assert_eq!(
        contiguous_plan(F32, BF16, &[16, 64, 64], &[4096, 64, 1], &[1, 16, 1024]).path(),
        "permute"
    );
    assert_eq!(
        contiguous_plan(
            U8,
            U8,
            &[64, 64, 32, 32, 64],
            &[4194304, 65536, 2048, 64, 1],
            &[64, 1, 131072, 4096, 4194304]
        )
        .path(),
        "permute"
    );
    assert_eq!(
        contiguous_plan(F32, F32, &[512, 256], &[256, 1], &[2, 1024]).path(),
        "permute"
    );
    assert_eq!(
        contiguous_plan(F32, F32, &[512, 256], &[-512, 2], &[1, 512]).path(),
        "permute"
    );
    let p = plan_copy(
        DST_BASE,
        &[16384, 1],
        F32,
        SRC_BASE,
        &[1, 16384],
        F32,
        &[16384, 16384],
        PlanOptions {
            no_transpose: true,
            ..PlanOptions::default()
        },
    )
    .unwrap();
    assert_eq!(p.path(), "permute");
    // Every other column: general strided kernel with 32-bit indexing.
    assert_eq!(
        contiguous_plan(F32, F32, &[64, 64], &[64, 1], &[128, 2]).path(),
        "strided32"
    );
    // Broadcast of a row: rows (source outer stride 0).
    assert_eq!(
        contiguous_plan(F32, F64, &[64, 64], &[64, 1], &[0, 1]).path(),
        "rows"
    );
    // Negative strides on both sides are flipped into a plain contiguous copy.
    let p = plan_copy(
        DST_BASE + 4 * 99,
        &[-1],
        F32,
        SRC_BASE + 4 * 99,
        &[-1],
        F32,
        &[100],
        PlanOptions::default(),
    )
    .unwrap();
    assert_eq!(p.path(), "contig");
    // Fills.
    let f = |size, strides: &[isize], shape: &[usize]| {
        plan_fill(DST_BASE, shape, strides, size, 0, PlanOptions::default()).unwrap()
    };
    assert_eq!(f(4, &[1], &[1000]).path(), "memset");
    assert_eq!(f(8, &[1], &[1000]).path(), "fill_contig");
    assert_eq!(f(1, &[0], &[0]).path(), "nothing");
    // Rows of at least MEMSET_2D_MIN_ROW_BYTES at a pitch (either direction): the driver's
    // 2-D memset for elements of up to 4 bytes. Other rows of 1- and 2-byte elements of at
    // least FILL_ROWS_MIN_BYTES (shorter rows, more outer axes, rows that overlap or lie 2^31
    // bytes or more apart): the row kernel. Strided axes, short rows and the other rows of 4-
    // and 8-byte elements: the strided kernels.
    assert_eq!(MEMSET_2D_MIN_ROW_BYTES, 8192);
    assert_eq!((FILL_ROWS_MIN_BYTES, FILL_ROWS_MAX_SIZE), (64, 2));
    assert_eq!(f(4, &[2100, 1], &[10, 2048]).path(), "memset2d");
    assert_eq!(f(1, &[-9000, 1], &[10, 8192]).path(), "memset2d");
    assert_eq!(f(2, &[4100, 1], &[10, 4096]).path(), "memset2d");
    assert_eq!(f(2, &[4100, 1], &[10, 4095]).path(), "fill_rows");
    assert_eq!(f(1, &[-100, 1], &[10, 64]).path(), "fill_rows");
    assert_eq!(f(2, &[-40, 1], &[10, 32]).path(), "fill_rows");
    assert_eq!(f(1, &[100, 1], &[10, 63]).path(), "fill_strided32");
    assert_eq!(f(4, &[2100, 1], &[10, 2047]).path(), "fill_strided32");
    assert_eq!(f(2, &[20, 2], &[10, 10]).path(), "fill_strided32");
    assert_eq!(f(1, &[-3], &[1000]).path(), "fill_strided32");
    assert_eq!(f(8, &[2100, 1], &[10, 2048]).path(), "fill_strided32");
    assert_eq!(
        f(4, &[21000, 2100, 1], &[10, 5, 2048]).path(),
        "fill_strided32"
    );
    assert_eq!(f(1, &[21000, 2100, 1], &[10, 5, 2048]).path(), "fill_rows");
    assert_eq!(f(1, &[100, 1], &[10, 8192]).path(), "fill_rows");
    assert_eq!(f(4, &[100, 1], &[10, 8192]).path(), "fill_strided32");
    assert_eq!(f(1, &[i32::MAX as isize, 1], &[2, 8192]).path(), "memset2d");
    assert_eq!(f(1, &[1 << 31, 1], &[3, 8192]).path(), "fill_rows");
    assert_eq!(f(4, &[1 << 31, 1], &[3, 8192]).path(), "fill_strided64");
    // Rows of seven outer axes (every axis that the fixed-rank kernels take).
    let strides: Vec<isize> = (1..8)
        .rev()
        .map(|i| 200 * 3isize.pow(i))
        .chain([1])
        .collect();
    let f8 = f(1, &strides, &[2, 2, 2, 2, 2, 2, 2, 64]);
    assert_eq!(f8.path(), "fill_rows");
    let no_rows = PlanOptions {
        no_rows: true,
        ..PlanOptions::default()
    };
    let rows_off = plan_fill(DST_BASE, &[10, 4095], &[4100, 1], 2, 0, no_rows).unwrap();
    assert_eq!(rows_off.path(), "fill_strided32");
    // Narrow rows too when asked.
    let any = PlanOptions {
        any_memset_2d: true,
        ..PlanOptions::default()
    };
    let narrow = plan_fill(DST_BASE, &[10, 3], &[4, 1], 2, 0, any).unwrap();
    assert_eq!(narrow.path(), "memset2d");
    let kernels = PlanOptions {
        no_driver: true,
        ..PlanOptions::default()
    };
    let g = |size, strides: &[isize], shape: &[usize]| {
        plan_fill(DST_BASE, shape, strides, size, 0, kernels).unwrap()
    };
    assert_eq!(g(2, &[20, 2], &[10, 10]).path(), "fill_strided32");
    // Elements past 2^31: 64-bit indexing.
    let n = 3usize << 30;
    assert_eq!(g(1, &[2], &[n]).path(), "fill_strided64");
}

#[test]
fn fills_of_many_axes_take_the_rank_generic_kernel() {
    let shape = [2usize; 9];
    let strides: Vec<isize> = (0..9).map(|i| 3isize.pow(i as u32)).collect();
    let p = plan_fill(DST_BASE, &shape, &strides, 4, 0, PlanOptions::default()).unwrap();
    assert_eq!(p.path(), "fill_stridedn");
}

/// The row arguments of `p`, which must be a row plan.
fn rows_of(p: &Plan) -> RowArgs {
    match p {
        Plan::Rows { args, .. } => *args,
        other => panic!("expected a row plan, got {other:?}"),
    }
}

/// `head` of every row of a row plan, computed like the kernels do.
fn row_heads(args: &RowArgs, from: DType, to: DType) -> Vec<u64> {
    let (ss, ds) = (from.size(), to.size());
    (0..args.rows)
        .map(|q| {
            let (od, os) = args.row_offsets(q);
            let d = (args.dst as i64 + od * ds as i64) as u64;
            let s = (args.src as i64 + os * ss as i64) as u64;
            row_head(d, ds, s, ss, args.row_len)
        })
        .collect()
}

/// Plans (with [`KERNEL_FAMILY_OPTIONS`]) and runs `dst[i] = src[i] as to` for every index of
/// `shape` (strides in elements, element zero of each operand `*_off` bytes past its base),
/// optionally with the row kernel's `grid` instead of the launch grid, and compares with a
/// direct evaluation; checks that every destination element is written exactly once. Returns
/// the plan.
#[allow(clippy::too_many_arguments)]
fn run_case(
    shape: &[usize],
    dst_strides: &[isize],
    dst_off: u64,
    to: DType,
    src_strides: &[isize],
    src_off: u64,
    from: DType,
    grid: Option<(u32, u32)>,
) -> Plan {
    run_case_with(
        shape,
        dst_strides,
        dst_off,
        to,
        src_strides,
        src_off,
        from,
        grid,
        KERNEL_FAMILY_OPTIONS,
    )
}

/// [`run_case`] planned with `opt`.
#[allow(clippy::too_many_arguments)]
fn run_case_with(
    shape: &[usize],
    dst_strides: &[isize],
    dst_off: u64,
    to: DType,
    src_strides: &[isize],
    src_off: u64,
    from: DType,
    grid: Option<(u32, u32)>,
    opt: PlanOptions,
) -> Plan {
    let (ds, ss) = (to.size(), from.size());
    let span = |strides: &[isize]| -> (isize, isize) {
        let mut lo = 0;
        let mut hi = 0;
        for (&n, &st) in shape.iter().zip(strides) {
            let ext = (n as isize - 1) * st;
            if ext < 0 {
                lo += ext;
            } else {
                hi += ext;
            }
        }
        (lo, hi)
    };
    let (dlo, dhi) = span(dst_strides);
    let (slo, shi) = span(src_strides);
    // Element zero at `*_BASE + off`; each region starts at its lowest element.
    let d0 = DST_BASE + dst_off;
    let s0 = SRC_BASE + src_off;
    let dreg = (d0 as i64 + dlo as i64 * ds as i64) as u64;
    let sreg = (s0 as i64 + slo as i64 * ss as i64) as u64;
    let mut mem = HostMem::default();
    let dbytes = (dhi - dlo + 1) as usize * ds;
    let sbytes = (shi - slo + 1) as usize * ss;
    mem.add(dreg, vec![POISON; dbytes]);
    let src = rand_bytes(sbytes, 0x1234_5678_9abc_def1);
    mem.add(sreg, src.clone());
    mem.writes = Some(Vec::new());
    let plan = plan_copy(d0, dst_strides, to, s0, src_strides, from, shape, opt).unwrap();
    match (&plan, grid) {
        (Plan::Rows { args, from, to }, Some(g)) => run_rows(args, *from, *to, g, &mut mem),
        (Plan::RowsRev { args, elem, runs }, Some(g)) => {
            run_rows_rev(args, *elem, *runs, g, &mut mem)
        }
        (Plan::RowsGather { args, from, to }, Some(g)) => {
            run_rows_gather(args, *from, *to, false, g, &mut mem)
        }
        (Plan::RowsScatter { args, from, to }, Some(g)) => {
            run_rows_gather(args, *from, *to, true, g, &mut mem)
        }
        _ => run(&plan, &mut mem),
    }
    let mut expect = vec![POISON; dbytes];
    for idx in indices(shape) {
        let off = |strides: &[isize], lo: isize| -> usize {
            (idx.iter()
                .zip(strides)
                .map(|(&i, &st)| i as isize * st)
                .sum::<isize>()
                - lo) as usize
        };
        let (d, s) = (off(dst_strides, dlo), off(src_strides, slo));
        let v = element(from, to, &src[s * ss..(s + 1) * ss]);
        expect[d * ds..(d + 1) * ds].copy_from_slice(&v);
    }
    assert!(
        mem.region(dreg) == expect.as_slice(),
        "plan {} ({plan:?}) wrote wrong bytes",
        plan.path()
    );
    let mut writes = mem.writes.take().unwrap();
    let n = writes.len();
    writes.sort_unstable();
    writes.dedup();
    assert_eq!(
        writes.len(),
        n,
        "plan {} wrote some element twice",
        plan.path()
    );
    plan
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a sweep of many plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn central_block_and_sliced_batches_take_the_row_path() {
    use DType::*;
    // `a.slice(s![1000..9000, 1000..9000])` of a 16384^2 f32 matrix into a contiguous array.
    let src = SRC_BASE + 4 * (1000 * 16384 + 1000);
    let p = plan_copy(
        DST_BASE,
        &[8000, 1],
        F32,
        src,
        &[16384, 1],
        F32,
        &[8000, 8000],
        PlanOptions::default(),
    )
    .unwrap();
    let a = rows_of(&p);
    assert_eq!((a.row_len, a.rows, a.outer_rank), (8000, 8000, 1));
    assert_eq!((a.dst, a.src), (DST_BASE, src));
    assert_eq!((a.dst_strides[0], a.src_strides[0]), (8000, 16384));
    assert_eq!(a.team_shift, 8);
    assert_eq!(row_grid(&a, 4, 4), (4, 8000));
    assert!(row_heads(&a, F32, F32).iter().all(|&h| h == 0));
    // The same block cast to bf16 and to f64.
    for to in [BF16, F64] {
        let p = plan_copy(
            DST_BASE,
            &[8000, 1],
            to,
            src,
            &[16384, 1],
            F32,
            &[8000, 8000],
            PlanOptions::default(),
        )
        .unwrap();
        assert!(row_heads(&rows_of(&p), F32, to).iter().all(|&h| h == 0));
    }
    // `s![2..10, 4..60, 8..40]` of a 16 x 64 x 64 f32 array: two outer axes, every row aligned.
    let src = 4 * (2 * 4096 + 4 * 64 + 8);
    let p = run_case(
        &[8, 56, 32],
        &[1792, 32, 1],
        0,
        F32,
        &[4096, 64, 1],
        src,
        F32,
        None,
    );
    let a = rows_of(&p);
    assert_eq!((a.row_len, a.rows, a.outer_rank), (32, 448, 2));
    assert_eq!(&a.shape[..2], &[56, 8]);
    assert!(row_heads(&a, F32, F32).iter().all(|&h| h == 0));
    // The batch reversed on the source side (negative outer stride), cast to f16.
    let p = run_case(
        &[8, 56, 32],
        &[1792, 32, 1],
        0,
        F16,
        &[-4096, 64, 1],
        4 * (7 * 4096 + 8),
        F32,
        None,
    );
    assert_eq!(rows_of(&p).outer_rank, 2);
    // Short rows of 8 f32: two units per row, one lane per row.
    let p = run_case(&[50, 8], &[8, 1], 0, F32, &[12, 1], 0, F32, None);
    assert_eq!(rows_of(&p).team_shift, 0);
    // A transposed batch stays off the row path (source inner stride not 1).
    assert_eq!(
        contiguous_plan(F32, F32, &[4, 64, 64], &[4096, 64, 1], &[4096, 1, 64]).path(),
        "permute"
    );
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a sweep of many plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn misaligned_rows_fall_back_per_row_or_to_the_strided_kernel() {
    use DType::*;
    let row_case = |shape: &[usize], ds: &[isize], doff, to, ss: &[isize], soff, from| {
        run_case_with(
            shape,
            ds,
            doff,
            to,
            ss,
            soff,
            from,
            None,
            ROW_KERNEL_OPTIONS,
        )
    };
    // Source pitch 1001 f32 (4 mod 16 bytes), contiguous destination: only every fourth row
    // has both sides aligned; the others move element by element.
    let p = row_case(&[12, 100], &[100, 1], 0, F32, &[1001, 1], 0, F32);
    let a = rows_of(&p);
    let heads = row_heads(&a, F32, F32);
    for (q, &h) in heads.iter().enumerate() {
        assert_eq!(h, if q % 4 == 0 { 0 } else { 100 }, "row {q}");
    }
    // The same odd pitch on both sides: every row vectorised, with its own head.
    let p = row_case(&[12, 100], &[1001, 1], 20, F32, &[1001, 1], 4, F32);
    let heads = row_heads(&rows_of(&p), F32, F32);
    assert!(heads.iter().all(|&h| h < 4), "{heads:?}");
    assert!(heads.iter().any(|&h| h != heads[0]), "{heads:?}");
    // Misaligned against each other on every row: all scalar.
    let p = row_case(&[12, 100], &[128, 1], 4, F32, &[256, 1], 0, F32);
    assert!(row_heads(&rows_of(&p), F32, F32).iter().all(|&h| h == 100));
    // Odd pitch of a 1-byte type widened to f64 (groups of 16 elements).
    let p = row_case(&[9, 70], &[70, 1], 0, F64, &[73, 1], 3, U8);
    let heads = row_heads(&rows_of(&p), U8, F64);
    assert!(
        heads.iter().any(|&h| h < 16) && heads.contains(&70),
        "{heads:?}"
    );
    // By default the copies whose rows are off each other's alignment take the shifted row
    // kernel (4-byte elements into a contiguous destination the gathered rows), and the cast
    // the gathered rows.
    for (shape, ds, doff, ss, soff, t, want) in [
        ([12, 100], [100, 1], 0, [1001, 1], 0, F32, "rows_gather"),
        ([12, 400], [400, 1], 0, [4001, 1], 0, U8, "rows_shifted"),
        ([12, 100], [128, 1], 4, [256, 1], 0, F32, "rows_shifted"),
    ] {
        let p = run_case(&shape, &ds, doff, t, &ss, soff, t, None);
        assert_eq!(p.path(), want, "{shape:?} {ds:?} {ss:?} {t}");
    }
    let p = run_case(&[12, 100], &[1001, 1], 20, F32, &[1001, 1], 4, F32, None);
    assert_eq!(p.path(), "rows");
    let p = run_case(&[9, 70], &[70, 1], 0, F64, &[73, 1], 3, U8, None);
    assert_eq!(p.path(), "rows_gather");
    // Short rows of a copy that the row kernel would move element by element (shorter than
    // a vector group, or not whole vectors on both sides) into a contiguous destination: the
    // gathered rows, the destination one row in periods of a source row.
    for (t, shape, ss) in [
        (F32, [64, 3], [5, 1]),
        (U8, [64, 8], [9, 1]),
        (U8, [64, 16], [17, 1]),
    ] {
        let ds = standard_strides_of(&shape);
        let p = contiguous_plan(t, t, &shape, &ds, &ss);
        assert_eq!(p.path(), "rows_gather", "{t} {shape:?} {ss:?}");
    }
    // Into a padded destination: the strided kernel.
    assert_eq!(
        contiguous_plan(U8, U8, &[64, 16], &[17, 1], &[16, 1]).path(),
        "strided32"
    );
    // Reversed rows (source inner stride -1): the reversed row kernel for copies (for 4-byte
    // elements whose rows it would shift, the gathered rows), the gathered rows for casts.
    assert_eq!(
        contiguous_plan(U8, U8, &[64, 256], &[256, 1], &[256, -1]).path(),
        "rows_rev"
    );
    assert_eq!(
        contiguous_plan(F32, F32, &[64, 64], &[64, 1], &[64, -1]).path(),
        "rows_gather"
    );
    assert_eq!(
        contiguous_plan(F32, F16, &[64, 64], &[64, 1], &[64, -1]).path(),
        "rows_gather"
    );
}

/// Shape, destination strides, offset (bytes) and type, source strides, offset and type.
type RowCase<'a> = (
    &'a [usize],
    &'a [isize],
    u64,
    DType,
    &'a [isize],
    u64,
    DType,
);

#[test]
#[cfg_attr(
    miri,
    ignore = "a sweep of many plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn row_kernel_covers_every_element_once_with_any_grid() {
    use DType::*;
    let cases: &[RowCase] = &[
        (&[37, 70], &[70, 1], 0, F32, &[73, 1], 4, F32),
        (&[37, 70], &[72, 1], 2, F16, &[73, 1], 4, F32),
        (
            &[5, 7, 300],
            &[2100, 300, 1],
            1,
            U8,
            &[-4000, 400, 1],
            3 + 4 * 4000,
            U8,
        ),
        (&[6, 5, 40], &[200, 40, 1], 0, F64, &[0, 41, 1], 2, U8),
        (&[300, 8], &[8, 1], 0, F32, &[12, 1], 0, F32),
        (&[3, 2000], &[2000, 1], 8, I64, &[2048, 1], 16, I16),
        (
            &[2, 3, 2, 3, 2, 3, 2, 130],
            // Seven outer axes: padded rows of 133 in the destination, the outer axes in the
            // opposite order (rows of 136) in the source.
            &[28728, 9576, 4788, 1596, 798, 266, 133, 1],
            0,
            U16,
            &[136, 272, 816, 1632, 4896, 9792, 29376, 1],
            0,
            U16,
        ),
    ];
    for &(shape, dst, doff, to, src, soff, from) in cases {
        let p = plan_copy(
            DST_BASE + doff,
            dst,
            to,
            SRC_BASE + soff,
            src,
            from,
            shape,
            ROW_KERNEL_OPTIONS,
        )
        .unwrap();
        let a = rows_of(&p);
        let full = row_grid(&a, from.size(), to.size());
        for grid in [(1, 1), (2, 3), (3, 1), full, (full.0 + 3, full.1 + 2)] {
            let g = Some(grid);
            run_case_with(shape, dst, doff, to, src, soff, from, g, ROW_KERNEL_OPTIONS);
        }
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "path statistics over 4,000 plans; the property tests cover the planner under Miri"
)]
fn random_cases_reach_every_copy_path() {
    use std::collections::BTreeMap;
    let mut rng = StdRng::seed_from_u64(STATISTICS_SEED);
    let mut paths: BTreeMap<&'static str, usize> = BTreeMap::new();
    let (mut vector_rows, mut scalar_rows, mut head_rows) = (0, 0, 0);
    for _ in 0..4000 {
        let c = random_case(&mut rng);
        let o = operands(&c);
        let Ok(p) = case_plan(&c, &o) else { continue };
        *paths.entry(p.path()).or_default() += 1;
        if let Plan::Rows { args, from, to } = &p {
            let v = contig_group_elems(from.size(), to.size()) as u64;
            for h in row_heads(args, *from, *to) {
                if h == args.row_len {
                    scalar_rows += 1;
                } else if h > 0 && args.row_len - h >= v {
                    head_rows += 1;
                } else {
                    vector_rows += 1;
                }
            }
        }
    }
    // (The transpose path needs two axes of at least 8 elements; these cases rarely have them.)
    for path in ["contig", "memcpy", "strided32", "strided64", "rows"] {
        assert!(
            paths.get(path).copied().unwrap_or(0) >= 20,
            "{path}: {paths:?}"
        );
    }
    // Copied rows off each other's alignment (the shifted row kernel) are long or planned
    // with `shifted_rows` and `short_rows` (a sixth of the cases).
    assert!(
        paths.get("rows_shifted").copied().unwrap_or(0) >= 5,
        "rows_shifted: {paths:?}"
    );
    // The scattered rows, steered to (`prefer_scatter`, a case in 11).
    assert!(
        paths.get("rows_scatter").copied().unwrap_or(0) >= 5,
        "rows_scatter: {paths:?}"
    );
    // Rows of casts that are short and not whole groups leave the row kernel by default;
    // `short_rows` (a third of the cases) keeps them there.
    assert!(
        vector_rows >= 120 && scalar_rows >= 200 && head_rows >= 200,
        "aligned rows {vector_rows}, rows with a head {head_rows}, scalar rows {scalar_rows}; {paths:?}"
    );
}

#[test]
#[cfg_attr(
    miri,
    ignore = "path statistics over 4,000 plans; the property tests cover the planner under Miri"
)]
fn random_cases_reach_every_fill_path() {
    use std::collections::BTreeMap;
    let mut rng = StdRng::seed_from_u64(STATISTICS_SEED);
    let mut paths: BTreeMap<&'static str, usize> = BTreeMap::new();
    let (mut aligned_rows, mut head_rows) = (0, 0);
    for _ in 0..4000 {
        let c = random_case(&mut rng);
        let Ok((.., p)) = fill_plan(&c) else { continue };
        *paths.entry(p.path()).or_default() += 1;
        if let Plan::FillRows { args, size, .. } = &p {
            for q in 0..args.rows {
                let dr = args
                    .dst
                    .wrapping_add((args.row_offsets(q).0 * *size as i64) as u64);
                if row_head(dr, *size, dr, *size, args.row_len) == 0 {
                    aligned_rows += 1;
                } else {
                    head_rows += 1;
                }
            }
        }
    }
    for path in ["memset", "fill_contig", "fill_strided32", "fill_rows"] {
        assert!(
            paths.get(path).copied().unwrap_or(0) >= 20,
            "{path}: {paths:?}"
        );
    }
    assert!(
        aligned_rows >= 20 && head_rows >= 100,
        "filled rows aligned {aligned_rows}, with a head {head_rows}; {paths:?}"
    );
}

/// The bandwidth sweep's shapes (`benches/bandwidth.rs`).
const SWEEP_SHAPES: &[&[usize]] = &[
    &[16384, 16384],
    &[1024, 1024, 256],
    &[128, 128, 128, 128],
    &[64, 64, 32, 32, 64],
    &[32, 32, 16, 16, 16, 32],
    &[4096, 4096, 16],
    &[16, 1024, 16, 1024],
];

/// Every permutation of the bandwidth sweep's shapes (2^28 elements) into a standard-layout
/// destination plans to a tiled path, a row path or a contiguous copy, never to the general
/// strided kernels.
#[test]
#[cfg_attr(
    miri,
    ignore = "a sweep of many plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn sweep_permutations_never_take_the_strided_kernels() {
    use std::collections::BTreeMap;
    let shapes = SWEEP_SHAPES;
    for (from, to) in [
        (DType::F32, DType::F32),
        (DType::F16, DType::F16),
        (DType::U8, DType::U8),
        (DType::F32, DType::F16),
    ] {
        let mut paths: BTreeMap<&str, usize> = BTreeMap::new();
        for shape in shapes {
            for p in permutations(shape.len()) {
                let (pshape, dst, pstrides) = permuted_layout(shape, &p);
                let plan = plan_copy(
                    DST_BASE,
                    &dst,
                    to,
                    SRC_BASE,
                    &pstrides,
                    from,
                    &pshape,
                    PlanOptions::default(),
                )
                .unwrap();
                *paths.entry(plan.kernel_path()).or_default() += 1;
                assert!(
                    !plan.path().starts_with("strided"),
                    "{from} -> {to} {shape:?} perm {p:?}: {}",
                    plan.path()
                );
            }
        }
        println!("{from} -> {to}: {paths:?}");
    }
}

/// Every permutation of ranks 2-6 of small awkward shapes, sources contiguous, sliced or
/// reversed, through the planner and the interpreter (the GPU tests' cases at host size).
#[test]
#[cfg_attr(
    miri,
    ignore = "a sweep of many plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn every_permutation_of_ranks_2_to_6_matches_reference() {
    let shapes: &[&[usize]] = &[
        &[33, 17],
        &[9, 1, 40],
        &[3, 17, 2, 33],
        &[2, 3, 16, 5, 9],
        &[3, 2, 5, 2, 7, 3],
    ];
    let (mut permute, mut small) = (0, 0);
    for (n, shape) in shapes.iter().enumerate() {
        let r = shape.len();
        let perms = permutations(r);
        for (i, p) in perms.iter().enumerate() {
            // The source: a contiguous base of the permuted shape, every other case reversed
            // on one axis and sliced with an offset on another.
            let seed: Vec<usize> = p.iter().map(|&a| r - a).collect();
            let steps: Vec<isize> = (0..r)
                .map(|k| if i % 2 == 1 && k == i % r { -1 } else { 1 })
                .collect();
            let starts: Vec<usize> = (0..r).map(|k| usize::from(k == (i + 1) % r)).collect();
            let src = OperandSpec {
                perm_seed: seed,
                steps,
                pads: vec![1; r],
                starts,
                misalign: (i % 3) as u64,
            };
            let dst = standard_spec(r);
            let (from, to) = [
                (DType::U8, DType::U8),
                (DType::F16, DType::F16),
                (DType::F32, DType::F32),
                (DType::F64, DType::F64),
                (DType::F32, DType::F16),
                (DType::U8, DType::F64),
            ][(i + n) % 6];
            let mut c = Case {
                shape: shape.to_vec(),
                dst,
                src,
                bcast: vec![false; r],
                from,
                to,
                seed: (i * 31 + n) as u64,
                opt: PlanOptions::default(),
            };
            // The planner's own choice (tiled kernels included), then the older kernels'.
            check_copy(&c).unwrap_or_else(|e| panic!("{shape:?} perm {p:?}: {e}"));
            c.opt = KERNEL_FAMILY_OPTIONS;
            let o = operands(&c);
            let plan = case_plan(&c, &o).unwrap();
            if plan.path() == "permute" {
                permute += 1;
                small += usize::from(plan.kernel_path() == "permute32");
            }
            check_copy(&c).unwrap_or_else(|e| panic!("{shape:?} perm {p:?} (no tiled): {e}"));
        }
    }
    assert!(permute >= 300, "{permute} cases took the permute path");
    // (These small shapes fill the small tiles better; `permute_tiles_follow_the_fill` runs
    // the large ones.)
    assert!(
        small * 2 >= permute,
        "{small} of {permute} permute cases took the small tiles"
    );
}

/// The tile size follows how well the tile axes fill the tiles: 64 x 64 where both sides
/// fill them, 32 x 32 where a side of the large tile would stay half empty and the small one
/// fills; every case is checked through the interpreter at a reduced size.
#[test]
#[cfg_attr(
    miri,
    ignore = "a sweep of many plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn permute_tiles_follow_the_fill() {
    use DType::*;
    // (shape, permutation, expected kernel path) for f32 copies of a contiguous source.
    let cases: &[(&[usize], &[usize], &str)] = &[
        (&[1024, 1024, 256], &[2, 0, 1], "permute"),
        (&[128, 128, 128, 128], &[0, 1, 3, 2], "permute"),
        // A 16 x 32 transpose in every 2 KiB block: the batch axis is split between the
        // sides (4 matrices on one, 2 on the other), so that the large tiles fill.
        (&[32, 32, 16, 16, 16, 32], &[0, 1, 2, 3, 5, 4], "permute"),
        // The first and last axes (32 each) swapped around a contiguous middle, which is
        // split the same way.
        (&[32, 32, 16, 16, 16, 32], &[5, 1, 2, 3, 4, 0], "permute"),
    ];
    for &(shape, perm, want) in cases {
        let (out, dst, src) = permuted_layout(shape, perm);
        let p = contiguous_plan(F32, F32, &out, &dst, &src);
        assert_eq!(p.kernel_path(), want, "{shape:?} perm {perm:?}");
    }
    // 1-byte copies: the vector kernel where both fastest axes hold whole 16-byte vectors;
    // else (and without it) 128-slot packed tiles where they fill (the GPU tests' cases),
    // 64-slot ones where a side has only 64 slots or a row of 16-byte runs.
    for (shape, perm, want, words) in [
        (
            &[36, 5, 32, 8][..],
            &[2, 1, 3, 0][..],
            "permute_packed128",
            "permute_packed128",
        ),
        (
            &[36, 5, 32, 8],
            &[3, 2, 0, 1],
            "permute_packed128",
            "permute_packed128",
        ),
        (
            &[64, 64, 32, 32, 64],
            &[0, 1, 3, 4, 2],
            "permute_vec",
            "permute_packed128",
        ),
        // The middle axis split between the sides: rows of 128 bytes in the destination.
        (
            &[32, 32, 16, 16, 16, 32],
            &[5, 1, 2, 3, 4, 0],
            "permute_vec",
            "permute_packed128",
        ),
        (
            &[32, 32, 16, 16, 16, 32],
            &[3, 0, 1, 2, 5, 4],
            "permute_vec",
            "permute_packed",
        ),
        (
            &[16, 1024, 16, 1024],
            &[1, 2, 3, 0],
            "permute_vec",
            "permute_packed",
        ),
    ] {
        let (out, dst, src) = permuted_layout(shape, perm);
        let p = contiguous_plan(U8, U8, &out, &dst, &src);
        assert_eq!(p.kernel_path(), want, "u8 {shape:?} perm {perm:?}");
        let no_vec = PlanOptions {
            no_vec: true,
            ..KERNEL_FAMILY_OPTIONS
        };
        let p = plan_copy(DST_BASE, &dst, U8, SRC_BASE, &src, U8, &out, no_vec).unwrap();
        assert_eq!(
            p.kernel_path(),
            words,
            "u8 {shape:?} perm {perm:?}, no vectors"
        );
    }
    // Layouts of both kinds at sizes the interpreter runs quickly; 2-byte destinations of the
    // large tiles store words where the destination's fastest axis has an even extent.
    for (shape, perm, want) in [
        // Batch and middle axes split between the sides (see above).
        (&[2, 2, 3, 16, 32][..], &[0, 1, 2, 4, 3][..], "permute"),
        (&[32, 3, 2, 32], &[3, 1, 2, 0], "permute"),
        // An odd middle axis cannot be split: the small tiles fill better.
        (&[32, 3, 3, 32], &[3, 1, 2, 0], "permute32"),
        (&[20, 40], &[1, 0], "permute32"),
        (&[70, 3, 130], &[2, 1, 0], "permute"),
        (&[2, 65, 3, 66], &[0, 3, 2, 1], "permute"),
        (&[3, 130, 69], &[0, 2, 1], "permute"),
    ] {
        let (out, dst, src) = permuted_layout(shape, perm);
        for (from, to) in [(F32, F32), (F64, F16), (U8, I32), (F32, BF16), (I8, U16)] {
            let p = run_case(&out, &dst, 0, to, &src, 0, from, None);
            let words = want == "permute" && to.size() == 2 && out[out.len() - 1] % 2 == 0;
            let want = if words { "permute_words" } else { want };
            assert_eq!(
                p.kernel_path(),
                want,
                "{shape:?} perm {perm:?} {from} -> {to}"
            );
        }
    }
    // A destination offset by one element: no word stores.
    let (out, dst, src) = permuted_layout(&[70, 3, 130], &[2, 1, 0]);
    let p = run_case(&out, &dst, 2, F16, &src, 0, F32, None);
    assert_eq!(p.kernel_path(), "permute");
}

/// Copies of 1- and 2-byte elements whose fastest axes hold whole words take the packed
/// permute kernels (64- and 128-slot tiles), and two-axis permutations with one short axis
/// split the long one so that tiles are full; every permutation (sources contiguous, sliced
/// with even and odd offsets or steps, reversed) through the planner and the interpreter
/// (sampled unless `DEVSPAN_FULL_PLAN_CHECKS=1`), which checks each word's alignment and
/// grouping.
#[test]
#[cfg_attr(
    miri,
    ignore = "a sweep of many plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn packed_and_split_permutations_match_reference() {
    let shapes: &[&[usize]] = &[
        &[16, 256],
        &[256, 8],
        &[12, 512],
        &[64, 8, 12],
        &[4, 68, 8, 2],
        &[16, 4, 16, 8],
        // Tiles of 128 slots (1-byte elements whose fastest axes are too short for the
        // transpose kernel), whole and partial.
        &[4, 32, 8, 36],
        &[3, 128, 136],
    ];
    let (mut packed, mut packed128, mut split, mut total, mut k) = (0, 0, 0, 0, 0);
    for (n, shape) in shapes.iter().enumerate() {
        let r = shape.len();
        let perms = permutations(r);
        for (i, p) in perms.iter().enumerate() {
            for variant in 0..4usize {
                let seed: Vec<usize> = p.iter().map(|&a| r - a).collect();
                // 0: contiguous; 1: offset by one element on one axis (misaligned words);
                // 2: reversed on one axis; 3: padded rows, offset by 4 elements.
                let steps: Vec<isize> = (0..r)
                    .map(|k| if variant == 2 && k == i % r { -1 } else { 1 })
                    .collect();
                let starts: Vec<usize> = (0..r)
                    .map(|k| match variant {
                        1 if k == (i + 1) % r => 1,
                        3 if k == (i + 1) % r => 4,
                        _ => 0,
                    })
                    .collect();
                let src = OperandSpec {
                    perm_seed: seed,
                    steps,
                    pads: vec![
                        if variant == 3 {
                            4
                        } else {
                            usize::from(variant == 1)
                        };
                        r
                    ],
                    starts,
                    misalign: 0,
                };
                let dst = standard_spec(r);
                for from in [DType::U8, DType::F16, DType::I16] {
                    let c = Case {
                        shape: shape.to_vec(),
                        dst: dst.clone(),
                        src: src.clone(),
                        bcast: vec![false; r],
                        from,
                        to: from,
                        seed: (i * 31 + n * 7 + variant) as u64,
                        opt: PlanOptions::default(),
                    };
                    let o = operands(&c);
                    if let Plan::Permute { args, .. } = case_plan(&c, &o).unwrap() {
                        total += 1;
                        packed += usize::from(args.pack != 0);
                        packed128 += usize::from(args.pack != 0 && args.tile == 128);
                        split += usize::from(r == 2 && args.chunk[1] * args.chunk[3] > 1);
                    }
                    k += 1;
                    if interpret(k) {
                        check_copy(&c).unwrap_or_else(|e| {
                            panic!("{shape:?} perm {p:?} variant {variant} {from:?}: {e}")
                        });
                    }
                }
            }
        }
    }
    assert!(packed >= 100, "{packed} of {total} permute cases packed");
    assert!(
        packed128 >= 12,
        "{packed128} of {packed} packed cases in 128-slot tiles"
    );
    assert!(packed128 < packed, "every packed case in 128-slot tiles");
    assert!(packed < total, "every permute case packed ({total})");
    assert!(split >= 6, "{split} two-axis cases split");
}

/// 1-byte copies whose fastest axes hold whole 16-byte vectors take the vector kernel: every
/// permutation (sources contiguous, reversed on one axis, padded by 16 and started 16 bytes
/// in, or padded by 4 and started 4 bytes in, where vectors no longer line up) through the
/// planner and the interpreter (sampled unless `DEVSPAN_FULL_PLAN_CHECKS=1`), which checks
/// every vector's alignment and that the write phase reads only what the read phase stored.
#[test]
#[cfg_attr(
    miri,
    ignore = "a sweep of many plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn vector_permutations_match_reference() {
    let shapes: &[&[usize]] = &[&[160, 144], &[48, 20, 144], &[16, 24, 16, 32]];
    let (mut vec, mut total, mut k) = ([0; 4], 0, 0);
    for (n, shape) in shapes.iter().enumerate() {
        let r = shape.len();
        let perms = permutations(r);
        for (i, p) in perms.iter().enumerate().step_by(if r > 3 { 3 } else { 1 }) {
            for variant in 0..4usize {
                let seed: Vec<usize> = p.iter().map(|&a| r - a).collect();
                // 0: contiguous; 1: reversed on one axis; 2: padded by 16, started 16 in on
                // one axis; 3: padded by 4, started 4 in (vectors misaligned).
                let steps: Vec<isize> = (0..r)
                    .map(|k| if variant == 1 && k == i % r { -1 } else { 1 })
                    .collect();
                let pad = [0, 0, 16, 4][variant];
                let starts: Vec<usize> = (0..r)
                    .map(|k| if k == (i + 1) % r { pad } else { 0 })
                    .collect();
                let src = OperandSpec {
                    perm_seed: seed,
                    steps,
                    pads: vec![pad; r],
                    starts,
                    misalign: 0,
                };
                let c = Case {
                    shape: shape.to_vec(),
                    dst: standard_spec(r),
                    src,
                    bcast: vec![false; r],
                    from: DType::U8,
                    to: DType::U8,
                    seed: (i * 31 + n * 7 + variant) as u64,
                    opt: PlanOptions::default(),
                };
                let o = operands(&c);
                if let Plan::Permute { args, .. } = case_plan(&c, &o).unwrap() {
                    total += 1;
                    vec[variant] += usize::from(args.pack == 16);
                    assert!(
                        variant != 3 || args.pack != 16,
                        "{shape:?} perm {p:?}: misaligned vectors in the vector kernel"
                    );
                }
                k += 1;
                if interpret(k) {
                    check_copy(&c)
                        .unwrap_or_else(|e| panic!("{shape:?} perm {p:?} variant {variant}: {e}"));
                }
            }
        }
    }
    // Contiguous, reversed and offset sources all reach the kernel; misaligned ones never.
    assert!(
        vec[..3].iter().all(|&n| n >= 3) && vec[3] == 0,
        "{vec:?} of {total} permute cases in the vector kernel, per source variant"
    );
}

/// The GPU test `more_than_2_pow_32_elements` widens a permuted 4.5 GiB u8 cube to u16: its
/// tile origins reach past 2^31 elements, so the permute kernel takes the 64-bit origin form
/// there (the u8 copy of the same view takes the transpose kernel).
#[test]
#[cfg_attr(
    miri,
    ignore = "a sweep of many plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn huge_permutations_keep_64_bit_origins() {
    let (d0, d1, d2) = (2048isize, 1024isize, 2304isize);
    // cube.permuted_axes([2, 1, 0]).slice(s![..;-1, 3.., ..;2]).
    let shape = [d2 as usize, (d1 - 3) as usize, (d0 / 2) as usize];
    let src = [-1, d2, 2 * d1 * d2];
    let dst = [(d1 - 3) * (d0 / 2), d0 / 2, 1];
    let base = SRC_BASE + (d2 - 1 + 3 * d2) as u64;
    let plan = |to| {
        plan_copy(
            DST_BASE,
            &dst,
            to,
            base,
            &src,
            DType::U8,
            &shape,
            PlanOptions::default(),
        )
        .unwrap()
    };
    assert_eq!(plan(DType::U8).path(), "transpose");
    match plan(DType::U16) {
        Plan::Permute { args, .. } => {
            assert_eq!(args.origin32, 0, "{args:?}");
            assert_eq!(args.words, 1, "the GPU test expects word stores");
        }
        p => panic!("not the permute path: {}", p.kernel_path()),
    }
}

/// Copies whose innermost axis is a contiguous run of 16, 32 or 64 bytes on both sides, and
/// whose other axes are permuted (sliced, reversed or broadcast), take the wide kernels when
/// every run is 16-byte aligned, and match the reference on every path (every case is planned;
/// the interpreter runs a sample of them unless `DEVSPAN_FULL_PLAN_CHECKS=1`).
#[test]
#[cfg_attr(
    miri,
    ignore = "a sweep of many plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn wide_permutations_match_reference() {
    use DType::*;
    let outers: &[&[usize]] = &[&[40, 36], &[9, 33, 5], &[3, 20, 17], &[70, 12]];
    let runs = [
        (U8, 16),
        (U8, 32),
        (U8, 64),
        (F16, 8),
        (F16, 16),
        (I16, 32),
        (F32, 4),
        (F64, 4),
        // Not wide: 48 bytes and 8 bytes.
        (U8, 48),
        (F64, 1),
    ];
    let mut wide = [0usize; 5];
    let (mut total, mut broadcast, mut k) = (0, 0, 0);
    for (from, run) in runs {
        for (n, outer) in outers.iter().enumerate() {
            let mut shape = outer.to_vec();
            shape.push(run);
            let r = shape.len();
            for (i, p) in permutations(r - 1).iter().enumerate() {
                for variant in 0..6usize {
                    // 0: contiguous; 1: reversed on one outer axis; 2: rows padded by 16 bytes
                    // and sliced from the second row; 3: rows padded by one element
                    // (misaligned runs, never wide); 4: the source base one element off
                    // (misaligned, never wide); 5: the source broadcast along one outer axis.
                    let mut seed: Vec<usize> = p.iter().map(|&a| r - a).collect();
                    seed.push(64);
                    let mut steps = vec![1isize; r];
                    let mut pads = vec![0; r];
                    let mut starts = vec![0; r];
                    match variant {
                        1 => steps[i % (r - 1)] = -1,
                        2 => {
                            pads[r - 1] = 16 / from.size();
                            pads[i % (r - 1)] = 1;
                            starts[i % (r - 1)] = 1;
                        }
                        3 => pads[r - 1] = 1,
                        _ => {}
                    }
                    let mut bcast = vec![false; r];
                    if variant == 5 {
                        bcast[i % (r - 1)] = true;
                    }
                    let src = OperandSpec {
                        perm_seed: seed,
                        steps,
                        pads,
                        starts,
                        misalign: u64::from(variant == 4),
                    };
                    let dst = standard_spec(r);
                    let c = Case {
                        shape: shape.clone(),
                        dst,
                        src,
                        bcast,
                        from,
                        to: from,
                        seed: (i * 31 + n * 7 + variant) as u64,
                        opt: PlanOptions::default(),
                    };
                    let o = operands(&c);
                    let bytes = run * from.size();
                    if let Plan::Permute { args, .. } = case_plan(&c, &o).unwrap()
                        && args.wide != 0
                    {
                        assert!(
                            !matches!(variant, 3 | 4) && matches!(bytes, 16 | 32 | 64),
                            "{shape:?} perm {p:?} variant {variant} {from:?} took a wide kernel"
                        );
                        assert_eq!(16 * args.wide as usize, bytes);
                        wide[args.wide as usize] += 1;
                        broadcast += usize::from(variant == 5);
                    }
                    total += 1;
                    k += 1;
                    if interpret(k) {
                        check_copy(&c).unwrap_or_else(|e| {
                            panic!("{shape:?} perm {p:?} variant {variant} {from:?}: {e}")
                        });
                    }
                }
            }
        }
    }
    // Per element type and run: 4 shapes, 2 or 6 permutations (one of them the identity; some
    // leave a 3-element axis alone on a tile side, some fill less than half a tile), 4 aligned
    // variants. Runs of 16 and 32 bytes: 3 types each (13 cases per type); of 64: 2 (32).
    assert!(
        wide[1] >= 39 && wide[2] >= 39 && wide[4] >= 64,
        "wide cases by vectors per run: {wide:?} of {total}"
    );
    assert!(
        broadcast >= 10,
        "{broadcast} broadcast sources took a wide kernel"
    );
}

/// The wide kernels take a copy only when its tile axes fill at least half of their tiles:
/// 9 x 9 transposes of 16-byte runs fill 27 x 27 of 32 x 32 slots when the batch axis can give
/// both sides 3 pieces (a multiple of 9), 27 x 18 with 6 matrices, 27 x 9 when it cannot be
/// split; the last two go to the row kernel.
#[test]
#[cfg_attr(
    miri,
    ignore = "a sweep of many plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn wide_kernels_need_half_filled_tiles() {
    use DType::*;
    for (batch, want) in [
        (30, "permute_w16"),
        (31, "rows"),
        (9, "permute_w16"),
        (6, "rows"),
    ] {
        let (out, dst, src) = permuted_layout(&[batch, 9, 9, 16], &[0, 2, 1, 3]);
        let p = run_case(&out, &dst, 0, U8, &src, 0, U8, None);
        assert_eq!(p.kernel_path(), want, "batch {batch}");
        // 32-byte runs of f16: the same tiles.
        let p = run_case(&out, &dst, 0, F16, &src, 0, F16, None);
        assert_eq!(
            p.kernel_path(),
            want.replace("w16", "w32"),
            "f16 batch {batch}"
        );
    }
}

/// A `u8` source whose inner axis has stride 2^62 (a valid view over 2^62 + 2 bytes): planning
/// an assign from it compares `stride * len` (2^63) with the outer stride without overflowing,
/// on every path the options allow, and the plan reaches the layout's offsets.
#[test]
fn assign_from_a_layout_reaching_past_2_61_elements_plans_without_overflow() {
    let shape = [2usize, 2];
    let src = Layout::new_strided(IxDyn(&shape), &[1, 1 << 62], 0, (1 << 62) + 2).unwrap();
    let dst = Layout::contiguous(IxDyn(&shape));
    let opts = [
        PlanOptions::default(),
        PlanOptions {
            force_64: true,
            no_driver: true,
            ..PlanOptions::default()
        },
        PlanOptions {
            no_rows: true,
            no_transpose: true,
            no_wide: true,
            no_packed: true,
            ..PlanOptions::default()
        },
    ];
    for opt in opts {
        for to in [DType::U8, DType::F32] {
            let p = plan_copy(
                DST_BASE,
                dst.strides(),
                to,
                SRC_BASE,
                src.strides(),
                DType::U8,
                &shape,
                opt,
            )
            .unwrap();
            let expect = |index: &[usize]| {
                (
                    dst.offset_of(index).unwrap() as i64,
                    src.offset_of(index).unwrap() as i64,
                )
            };
            match p {
                Plan::Strided64 { args, .. } => {
                    for (i, index) in indices(&shape).iter().enumerate() {
                        let e = expect(index);
                        assert_eq!(args.offsets(i as u64), e, "{to:?} {opt:?} {index:?}");
                    }
                }
                // The tiled kernels (which take narrow axes by default) hold the far axis
                // outside their tiles, as a batch axis of 64-bit strides: every element's
                // offsets as the kernels compute them.
                Plan::Tiled { args, rest, .. } if rest.is_empty() => {
                    let mut got = Vec::new();
                    for t in 0..args.tiles {
                        let (od, os) = args.tile_origin(t);
                        for w in 0..args.volume {
                            let (d, r) = args.write_offset(w);
                            let s = args.read_offset(r);
                            let d0 = (args.dst - DST_BASE) as i64 / to.size() as i64;
                            let s0 = (args.src - SRC_BASE) as i64;
                            got.push((d0 + od + i64::from(d), s0 + os + i64::from(s)));
                        }
                    }
                    let mut want: Vec<(i64, i64)> =
                        indices(&shape).iter().map(|i| expect(i)).collect();
                    got.sort_unstable();
                    want.sort_unstable();
                    assert_eq!(got, want, "{to:?} {opt:?}");
                }
                p => panic!("{to:?} {opt:?}: {}", p.path()),
            }
        }
    }
    // The same layout as a fill destination.
    let p = plan_fill(
        DST_BASE,
        &shape,
        src.strides(),
        1,
        7,
        PlanOptions::default(),
    )
    .unwrap();
    assert_eq!(p.path(), "fill_strided64");
}

/// A contiguous copy of 2^62 elements of 8 bytes (a layout that `Layout::new_strided` accepts
/// with its 1-byte bound) from a base that the vector kernel cannot align: the memcpy's byte
/// count overflows and planning returns `Err(Overflow)`.
#[test]
fn memcpy_byte_count_overflow_is_an_error() {
    let shape = [1usize << 62];
    let l = Layout::new_strided(IxDyn(&shape), &[1], 0, 1 << 62).unwrap();
    let e = plan_copy(
        DST_BASE + 8,
        l.strides(),
        DType::F64,
        SRC_BASE,
        l.strides(),
        DType::F64,
        &shape,
        PlanOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), &crate::ErrorKind::Overflow, "{e}");
}

/// Random valid layouts with strides and lengths of every magnitude (each reachable offset in
/// `0..=isize::MAX`, the bound every layout keeps), planned as copies, casts and fills of
/// 1- to 8-byte elements with random options: planning returns a plan or an error, and never
/// panics on arithmetic overflow.
#[test]
fn planning_layouts_with_huge_strides_never_panics() {
    let mut seed = 0x1234_5678_9abc_def0u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let lens = [
        1usize,
        2,
        3,
        8,
        16,
        17,
        64,
        256,
        1 << 20,
        1 << 31,
        1 << 40,
        1 << 61,
    ];
    let sizes = [DType::U8, DType::U16, DType::F32, DType::F64];
    let valid = |shape: &[usize], strides: &[isize]| match crate::layout::reach(shape, strides) {
        Ok(Some((lo, _))) => {
            Layout::new_strided(IxDyn(shape), strides, lo.unsigned_abs(), usize::MAX).is_ok()
        }
        _ => false,
    };
    let rounds = if cfg!(miri) { 300 } else { 50_000 };
    let mut planned = 0;
    for _ in 0..rounds {
        let r = 1 + (rnd() % 5) as usize;
        let shape: Vec<usize> = (0..r)
            .map(|_| lens[(rnd() % lens.len() as u64) as usize])
            .collect();
        let mut stride = || {
            let m: isize = match rnd() % 5 {
                0 => 1,
                1 => (rnd() % 64) as isize,
                2 => 1 << (rnd() % 63),
                3 => (rnd() >> 1) as isize,
                _ => (1 << 62) / (1 + (rnd() % 8) as isize),
            };
            if rnd() % 3 == 0 { -m } else { m }
        };
        let mut dst: Vec<isize> = (0..r).map(|_| stride()).collect();
        let mut src: Vec<isize> = (0..r).map(|_| stride()).collect();
        // Half of the cases have unit strides on both sides (rows, transposes, permutations).
        if r >= 2 && rnd() % 2 == 0 {
            dst[r - 1] = 1;
            src[(rnd() % r as u64) as usize] = 1;
            if rnd() % 2 == 0 {
                dst[r - 2] = shape[r - 1] as isize;
            }
        }
        if rnd() % 5 == 0 {
            src[(rnd() % r as u64) as usize] = 0;
        }
        if !valid(&shape, &dst) || !valid(&shape, &src) {
            continue;
        }
        planned += 1;
        let to = sizes[(rnd() % 4) as usize];
        let from = if rnd() % 2 == 0 {
            to
        } else {
            sizes[(rnd() % 4) as usize]
        };
        let bits = rnd();
        let opt = PlanOptions {
            no_driver: bits & 1 != 0,
            force_64: bits & 2 != 0,
            no_rows: bits & 4 != 0,
            no_transpose: bits & 8 != 0,
            prefer_transpose: bits & 16 != 0,
            no_packed: bits & 32 != 0,
            no_packed128: bits & 64 != 0,
            no_vec: bits & 128 != 0,
            no_wide: bits & 256 != 0,
            no_tiled: bits & 512 != 0,
            prefer_tiled: bits & 1024 != 0,
            prefer_gather: bits & 2048 != 0,
            tiled_volume: 0,
            short_rows: bits & 4096 != 0,
            shifted_rows: bits & 8192 != 0,
            prefer_scatter: bits & 16384 != 0,
            any_memset_2d: bits & 32768 != 0,
        };
        let base = (rnd() % 64) * 16;
        let case = format!("shape {shape:?} dst {dst:?} src {src:?} {from:?} -> {to:?} {opt:?}");
        let copy =
            std::panic::catch_unwind(|| plan_copy(base, &dst, to, base, &src, from, &shape, opt));
        assert!(copy.is_ok(), "plan_copy panicked: {case}");
        let fill = std::panic::catch_unwind(|| plan_fill(base, &shape, &dst, to.size(), 0, opt));
        assert!(fill.is_ok(), "plan_fill panicked: {case}");
    }
    assert!(planned * 5 > rounds, "only {planned} valid cases");
}

/// The strides of standard layout for `shape`, with the strides of axes of length 1 drawn at
/// random (they take no part in the layout).
fn standard_strides(rng: &mut StdRng, shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut s = 1isize;
    for (i, &len) in shape.iter().enumerate().rev() {
        strides[i] = if len == 1 {
            rng.random_range(-9i64..9) as isize
        } else {
            s
        };
        s *= len as isize;
    }
    strides
}

/// `normalize`'s shortcut for dense operands gives what the general path gives, on layouts
/// that take it (standard destination, standard or broadcast-scalar source) and on layouts
/// one stride away from them (which must not take it).
#[test]
fn dense_normalisation_matches_the_general_path() {
    let draw = |rng: &mut StdRng| {
        let shape = vec_of(rng, 0..=5, |r| pick(r, &[0usize, 1, 1, 2, 3, 7, 64]));
        let dst = standard_strides(rng, &shape);
        let src = match weighted(rng, &[4, 2, 1]) {
            0 => standard_strides(rng, &shape),
            1 => shape.iter().map(|&l| if l == 1 { 5 } else { 0 }).collect(),
            _ => vec_of(rng, shape.len()..=shape.len(), |r| {
                r.random_range(-70i64..70) as isize
            }),
        };
        // One stride of either side changed, sometimes.
        let (mut dst, mut src) = (dst, src);
        if !shape.is_empty() && rng.random_bool(0.3) {
            let i = rng.random_range(0..shape.len());
            let side = if rng.random_bool(0.5) {
                &mut dst
            } else {
                &mut src
            };
            side[i] = rng.random_range(-70i64..70) as isize;
        }
        (shape, dst, src)
    };
    let mut dense = 0usize;
    for_each_case(CASES, draw, |(shape, dst, src)| {
        let n = shape.iter().product();
        let general = super::normalize_general(shape, dst, src, n);
        let got = super::normalize(shape, dst, src);
        dense += usize::from(n != 0 && super::normalize_dense(shape, dst, src, n).is_some());
        if got == general {
            Ok(())
        } else {
            Err(format!(
                "normalize gives {got:?}, the general path {general:?}"
            ))
        }
    });
    // The shortcut was taken in a good share of the cases, so the comparison covered it (not
    // asked of Miri's few cases).
    assert!(
        cfg!(miri) || dense > CASES / 5,
        "the dense shortcut was taken in {dense} of {CASES} cases"
    );
}

/// Copies of 9 to 14 axes of extents 1 to 3 that stay many axes after merging: the source
/// permuted, a few axes stepped or reversed, sometimes broadcast along one, the destination
/// contiguous or permuted, either base misaligned, any pair of element types.
fn random_high_rank_case(rng: &mut StdRng) -> Case {
    let shape = loop {
        let shape = vec_of(rng, 9..=14, |r| pick(r, &[1, 2, 2, 2, 3]));
        if shape.iter().product::<usize>() <= 6000 {
            break shape;
        }
    };
    let r = shape.len();
    let spec = |rng: &mut StdRng, plain: bool| {
        let mut steps = vec![1isize; r];
        if !plain {
            for _ in 0..2 {
                let k = rng.random_range(0..r);
                steps[k] = pick(rng, &[-1, 2, -2]);
            }
        }
        OperandSpec {
            perm_seed: vec_of(rng, r..=r, |g| g.random_range(0..64)),
            steps,
            pads: vec![0; r],
            starts: vec![0; r],
            misalign: pick(rng, &[0, 0, 0, 1, 3]),
        }
    };
    let dst_plain = rng.random_bool(0.5);
    let mut dst = spec(rng, true);
    if dst_plain {
        dst = standard_spec(r);
    }
    let src = spec(rng, false);
    let mut bcast = vec![false; r];
    if rng.random_bool(0.3) {
        bcast[rng.random_range(0..r)] = true;
    }
    let (from, to) = (random_dtype(rng), random_dtype(rng));
    let same = rng.random_bool(0.6);
    let seed: u64 = rng.random();
    Case {
        shape,
        dst,
        src,
        bcast,
        from,
        to: if same { from } else { to },
        seed,
        opt: PlanOptions {
            tiled_volume: pick(rng, &[0, 0, 64, 256]),
            ..PlanOptions::default()
        },
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "copies of thousands of elements through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn high_rank_copies_and_fills_match_reference() {
    let cases = if full_checks() { 600 } else { 150 };
    for_each_case(cases, random_high_rank_case, |c| {
        check_copy(c)?;
        check_fill(c)
    });
    // Which paths they take.
    let mut rng = StdRng::seed_from_u64(STATISTICS_SEED);
    let mut paths = std::collections::BTreeMap::<&str, usize>::new();
    for _ in 0..300 {
        let c = random_high_rank_case(&mut rng);
        let o = operands(&c);
        let p = case_plan(&c, &o).expect("every layout plans");
        *paths.entry(p.kernel_path()).or_default() += 1;
    }
    let tiled: usize = paths
        .iter()
        .filter(|(k, _)| k.starts_with("tiled"))
        .map(|(_, n)| n)
        .sum();
    eprintln!("paths of high-rank copies: {paths:?}");
    assert!(tiled * 2 >= 300, "paths of high-rank copies: {paths:?}");
    assert!(
        paths.contains_key("tiled") && paths.contains_key("tiled_e"),
        "{paths:?}"
    );
}

/// Casts from 1-, 2- and 4-byte elements into planes at and off their 16-byte alignment
/// (interleaved channels split into planes, HWC -> CHW and NHWC -> NCHW with odd images or a
/// misaligned destination, sources aligned or not) take the tiled plans, element-wise where
/// the planes or the source break the vectors, and match the reference; planes of 1024 pixels
/// or more of 2 to 4 channels take the gathered rows from 2- to 4-byte elements, and from 1-
/// to 4-byte elements where the tiled plan is element-wise (`splits_planes`).
#[test]
#[cfg_attr(
    miri,
    ignore = "a sweep of plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn casts_into_planes_off_their_alignment() {
    use DType::*;
    let mut element_wise = 0;
    let mut n = 0;
    let mut split = 0;
    for c in [2usize, 3, 4, 5, 8] {
        for (h, w) in [(7, 13), (31, 33), (16, 17), (64, 63), (8, 1)] {
            for (shape, perm) in [
                (vec![h, w, c], vec![2, 0, 1]),
                (vec![3, h, w, c], vec![0, 3, 1, 2]),
            ] {
                let (out, dst, src) = permuted_layout(&shape, &perm);
                for (from, to) in [
                    (U8, F32),
                    (I8, F64),
                    (U8, F16),
                    (F16, F32),
                    (BF16, F64),
                    (U16, I32),
                    (F32, F64),
                    (F32, F16),
                ] {
                    // `n` counts the casts: a destination off its alignment two times in
                    // three, a source one time in four.
                    let doff = if n % 3 == 0 { 0 } else { to.size() as u64 };
                    let soff = if n % 4 == 3 { from.size() as u64 } else { 0 };
                    let opt = PlanOptions::default();
                    let p = run_case_with(&out, &dst, doff, to, &src, soff, from, None, opt);
                    let path = p.kernel_path();
                    let what = format!("{shape:?} {perm:?} {from}->{to} +{doff}/+{soff}: {path}");
                    n += 1;
                    let tiled = PlanOptions {
                        prefer_tiled: true,
                        ..opt
                    };
                    let gathered = (2..=4).contains(&c)
                        && h * w >= 1024
                        && match (from.size(), to.size()) {
                            (2, 4) => true,
                            (1, 4) => plan_copy(
                                DST_BASE + doff,
                                &dst,
                                to,
                                SRC_BASE + soff,
                                &src,
                                from,
                                &out,
                                tiled,
                            )
                            .unwrap()
                            .kernel_path()
                            .starts_with("tiled_e"),
                            _ => false,
                        };
                    assert_eq!(path == "rows_gather", gathered, "{what}");
                    if gathered {
                        split += 1;
                        continue;
                    }
                    assert!(path.starts_with("tiled"), "{what}");
                    // A source off its alignment breaks the vector loads.
                    if soff != 0 {
                        assert!(path.starts_with("tiled_e"), "{what}");
                    }
                    element_wise += usize::from(path.starts_with("tiled_e"));
                }
            }
        }
    }
    assert_eq!(n, 400);
    // f16 -> f32 and u16 -> i32 on both layouts of 64 x 63 pixels, 2 to 4 channels, and u8 ->
    // f32 where the tiled plan is element-wise.
    assert!((12..24).contains(&split), "{split} gathered splits");
    // Vector tiles take the casts whose planes and source line up.
    assert!(
        (150..n).contains(&element_wise),
        "{element_wise} of {n} plans element-wise"
    );
}

/// Images of 16 to 64 channels between planes and channels last: the permute kernels' small
/// tiles give way to the tiled kernels from 1 MiB; into channels last, the gathered rows take
/// 4-byte copies of 16 to 48 channels, casts 4 to 2 bytes of up to 32, 2 to 4 bytes of up to
/// 16, and layouts of 16 to 48 channels of any sizes that the tiled kernels would move element
/// by element (planes off their alignment); out of channels last they never do. Small images
/// keep the small tiles. A few of each, reduced, against the reference.
#[test]
#[cfg_attr(
    miri,
    ignore = "plans of large images and a few through the interpreter; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn images_of_many_channels_take_the_tiled_kernels_or_the_gathered_rows() {
    use DType::*;
    let pairs = [
        (U8, U8),
        (F16, F16),
        (F32, F32),
        (U8, F32),
        (F16, F32),
        (F32, F16),
    ];
    let mut paths: std::collections::BTreeMap<&str, usize> = Default::default();
    let mut element_wise_joins = 0;
    for c in [16usize, 24, 32, 48, 64] {
        // Aligned planes, odd-sized planes, a batch of 56 x 56 images.
        for (shape, perm) in [
            (vec![c, 512, 256], [1, 2, 0, 3]),
            (vec![c, 511, 257], [1, 2, 0, 3]),
            (vec![8, c, 56, 56], [0, 2, 3, 1]),
        ] {
            let perm = &perm[..shape.len()];
            let back: Vec<usize> = (0..shape.len())
                .map(|a| perm.iter().position(|&p| p == a).unwrap())
                .collect();
            for (join, (out, dst, src)) in [
                (true, permuted_layout(&shape, perm)),
                (false, {
                    let moved: Vec<usize> = perm.iter().map(|&a| shape[a]).collect();
                    permuted_layout(&moved, &back)
                }),
            ] {
                for (from, to) in pairs {
                    let path_with = |opt| {
                        plan_copy(DST_BASE, &dst, to, SRC_BASE, &src, from, &out, opt)
                            .unwrap()
                            .kernel_path()
                    };
                    let path = path_with(PlanOptions::default());
                    let what = format!("{out:?} {src:?} {from} -> {to}: {path}");
                    *paths.entry(path).or_default() += 1;
                    assert_ne!(path, "permute32", "{what}");
                    let element_wise = path_with(PlanOptions {
                        prefer_tiled: true,
                        ..PlanOptions::default()
                    })
                    .starts_with("tiled_e");
                    let by_sizes = match (from.size(), to.size()) {
                        (4, 4) => (16..=48).contains(&c),
                        (4, 2) => c <= 32,
                        (2, 4) => c <= 16,
                        _ => false,
                    };
                    // Element-wise tiles where the small tiles would have been.
                    let was_small = path_with(PlanOptions {
                        no_tiled: true,
                        ..PlanOptions::default()
                    }) == "permute32";
                    let gathered = join && (by_sizes || (c <= 48 && element_wise && was_small));
                    assert_eq!(path == "rows_gather", gathered, "{what}");
                    element_wise_joins += usize::from(gathered && !by_sizes);
                }
            }
        }
    }
    for k in ["rows_gather", "tiled", "tiled_e"] {
        assert!(paths.contains_key(k), "{paths:?}");
    }
    assert!(
        element_wise_joins >= 6,
        "{element_wise_joins} element-wise joins gathered"
    );
    // Sizes not measured keep the small tiles: 8-byte copies, casts from and to 8 bytes.
    for (from, to) in [(F64, F64), (F64, U8), (I16, F64)] {
        let (out, dst, src) = permuted_layout(&[24, 511, 257], &[1, 2, 0]);
        let p = plan_copy(
            DST_BASE,
            &dst,
            to,
            SRC_BASE,
            &src,
            from,
            &out,
            Default::default(),
        );
        assert_eq!(p.unwrap().kernel_path(), "permute32", "{from} -> {to}");
    }
    // Reduced images (2^20 bytes and more on the wider side) through the interpreter.
    for (from, to, shape) in [
        (U8, U8, [24usize, 211, 213]),
        (F16, F32, [48, 73, 75]),
        (F32, F32, [32, 91, 93]),
        (F32, F16, [48, 79, 71]),
    ] {
        for (out, dst, src) in [
            permuted_layout(&shape, &[1, 2, 0]),
            permuted_layout(&[shape[1], shape[2], shape[0]], &[2, 0, 1]),
        ] {
            let p = run_case_with(&out, &dst, 0, to, &src, 0, from, None, Default::default());
            assert_ne!(
                p.kernel_path(),
                "permute32",
                "{out:?} {src:?} {from} -> {to}"
            );
        }
    }
}

/// Narrow axes moved to and from the innermost position (CHW <-> HWC, split <-> interleaved
/// pairs, NCHW <-> NHWC) take the tiled plans, with 16-byte vectors where the planes are
/// whole vectors (copies of 1-, 4- and 8-byte elements then run on the narrow kernels, the
/// others on the tiled ones), copies between planes off their alignment and an aligned
/// interleaved side the shifted joins and splits where they pay (1-byte elements always,
/// `shifted_pays`), and match the reference for
/// every element size, fused casts, odd sizes that leave a rest, and misaligned bases. Casts
/// into and out of channels last that the gathered rows move faster (`joins_planes`,
/// `splits_planes`) take them instead.
#[test]
#[cfg_attr(
    miri,
    ignore = "a sweep of many plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn narrow_axes_take_the_tiled_plans() {
    use DType::*;
    let mut n = 0;
    let mut shifted_joins = 0;
    let mut shifted_splits = 0;
    let mut gathered_joins = 0;
    let mut gathered_splits = 0;
    for c in [1usize, 2, 3, 4, 5, 8, 15] {
        for (h, w) in [(16, 16), (7, 13), (32, 64)] {
            for (shape, perm) in [
                (vec![c, h, w], vec![1, 2, 0]),
                (vec![h, w, c], vec![2, 0, 1]),
                (vec![2, c, h, w], vec![0, 2, 3, 1]),
                (vec![2, h, w, c], vec![0, 3, 1, 2]),
            ] {
                let (out, dst, src) = permuted_layout(&shape, &perm);
                for (k, (from, to)) in [
                    (U8, U8),
                    (F16, F16),
                    (F32, F32),
                    (F64, F64),
                    (U8, F32),
                    (F32, F16),
                ]
                .into_iter()
                .enumerate()
                {
                    let doff = if (n + k) % 5 == 4 {
                        to.size() as u64
                    } else {
                        0
                    };
                    // Sources that start off their 16-byte alignment, now and then.
                    let soff = if (n + k) % 3 == 1 {
                        from.size() as u64
                    } else {
                        0
                    };
                    let opt = PlanOptions::default();
                    let p = run_case_with(&out, &dst, doff, to, &src, soff, from, None, opt);
                    let path = p.kernel_path();
                    // Copies from planes that are not aligned into an aligned interleaved
                    // destination: vector tiles where the source lines up as a whole, else
                    // the shifted joins where they pay (1-byte elements always), which the
                    // interpreter checks read no block past the end of the source.
                    let join = perm == [1, 2, 0] || perm == [0, 2, 3, 1];
                    let size = from.size();
                    let shifted = (h * w * size) % 16 != 0 || soff % 16 != 0;
                    // The destination's images start aligned (or there is one).
                    let images = shape.len() == 3 || (c * h * w * size) % 16 == 0;
                    if join
                        && images
                        && from == to
                        && doff == 0
                        && shifted
                        && (2..=16).contains(&c)
                        && h * w >= 32 / size
                    {
                        // 1-byte copies always (`shifted_pays`); wider ones where their runs
                        // of pixels make the shifted kernels pay, else element-wise tiles.
                        let what = format!("{shape:?} {perm:?} {from}: {path}");
                        assert!(!path.starts_with("tiled_e") || size > 1, "{what}");
                        shifted_as_they_pay(&p, true, c, size, &what);
                        shifted_joins += usize::from(path == "narrow_shifted+rest");
                    }
                    // The reverse, from an aligned interleaved source into planes off their
                    // alignment: the shifted splits where they pay, or vector tiles.
                    let split = perm == [2, 0, 1] || perm == [0, 3, 1, 2];
                    let planes = (h * w * size) % 16 != 0 || doff % 16 != 0;
                    if split
                        && images
                        && from == to
                        && soff == 0
                        && planes
                        && (2..=16).contains(&c)
                        && h * w >= 16 / size
                    {
                        let what = format!("{shape:?} {perm:?} {from}: {path}");
                        assert!(!path.starts_with("tiled_e") || size > 1, "{what}");
                        shifted_splits +=
                            usize::from(shifted_as_they_pay(&p, false, c, size, &what));
                    }
                    // Casts of 2- to 4-byte, 4- to 2-byte and 8- to 4-byte elements into
                    // channels last, planes of 1024 pixels or more: the gathered rows
                    // (`joins_planes`).
                    let gathered = join
                        && matches!((size, to.size()), (2, 4) | (4, 2) | (8, 4))
                        && (2..=16).contains(&c)
                        && h * w >= 1024;
                    // Casts of 1- to 4-byte elements out of 2 to 4 channels last whose tiled
                    // plan is element-wise: the gathered rows too (`splits_planes`).
                    let tiled = PlanOptions {
                        prefer_tiled: true,
                        ..PlanOptions::default()
                    };
                    let (d0, s0) = (DST_BASE + doff, SRC_BASE + soff);
                    let gathered_split = split
                        && (size, to.size()) == (1, 4)
                        && (2..=4).contains(&c)
                        && h * w >= 1024
                        && plan_copy(d0, &dst, to, s0, &src, from, &out, tiled)
                            .unwrap()
                            .kernel_path()
                            .starts_with("tiled_e");
                    assert_eq!(
                        path == "rows_gather",
                        gathered || gathered_split,
                        "{shape:?} {perm:?} {from}->{to}: {path}"
                    );
                    gathered_joins += usize::from(gathered);
                    gathered_splits += usize::from(gathered_split);
                    if c == 1 {
                        assert!(!path.starts_with("tiled"), "{shape:?} {perm:?}: {path}");
                    } else if c < 16 && !gathered && !gathered_split {
                        assert!(
                            path.starts_with("tiled") || path.starts_with("narrow"),
                            "{shape:?} {perm:?} {from}->{to}: {path}"
                        );
                        // Planes of whole vectors, aligned: the vector kernels, and for
                        // copies the narrow kernels.
                        let planes = h * w * from.size().max(to.size());
                        if planes % 16 == 0 && doff == 0 && soff == 0 && (h * w) % 16 == 0 {
                            assert!(
                                !path.starts_with("tiled_e"),
                                "{shape:?} {perm:?} {from}->{to}: {path}"
                            );
                            assert_eq!(
                                path.starts_with("narrow"),
                                from == to && from.size() != 2,
                                "{shape:?} {perm:?} {from}->{to}: {path}"
                            );
                        }
                    }
                    n += 1;
                }
            }
        }
    }
    assert!(n > 400);
    assert!(shifted_joins >= 8, "{shifted_joins} shifted joins");
    assert!(shifted_splits >= 15, "{shifted_splits} shifted splits");
    assert_eq!(gathered_joins, 12);
    assert!(gathered_splits >= 1, "{gathered_splits} gathered splits");
}

/// Checks a plan of a copy between planes off their alignment and `channels` interleaved
/// channels of `size`-byte elements against [`super::tiled::shifted_pays`]: a plan on the
/// shifted narrow kernels has a run of pixels (the source's for a join, the destination's for
/// a split) on which they pay, and copies of 4- or 8-byte elements of fewer than 5 channels
/// never take them. Returns whether the plan takes them.
fn shifted_as_they_pay(p: &Plan, join: bool, channels: usize, size: usize, what: &str) -> bool {
    let shifted = p.kernel_path().starts_with("narrow_shifted");
    if let (true, Plan::Tiled { args, .. }) = (shifted, p) {
        let [read, write] = super::tiled::side_runs(args, size, size);
        let pixels = if join { read } else { write };
        assert!(
            super::tiled::shifted_pays(size, channels as u32, pixels),
            "{what}: pixel runs of {pixels} bytes"
        );
    }
    assert!(!shifted || size <= 2 || channels >= 5, "{what}");
    shifted
}

/// The layouts of the GPU test `shifted_narrow_kernels_of_planes_off_their_alignment`
/// (tests/gpu/any_layout.rs), through the interpreter: copies between planes off their
/// 16-byte alignment and an aligned interleaved side, both directions, from sources that start
/// a plane, a row or a pixel into their array and end where it does, with channels read
/// forwards or backwards, for 1-, 2-, 4- and 8-byte elements. Where the planes are off their
/// alignment and the images start aligned on the interleaved side, 1-byte copies take vector
/// tiles, mostly the shifted narrow kernels, never the element-wise tiles; wider ones take the
/// shifted kernels where those pay (`shifted_pays`), else element-wise tiles.
#[test]
#[cfg_attr(
    miri,
    ignore = "a sweep of plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn shifted_narrow_plans_of_odd_planes() {
    use DType::*;
    let mut shifted = [0usize; 2];
    let mut by_size = std::collections::BTreeMap::new();
    for c in [2usize, 3, 4, 5, 8, 13, 16] {
        for (n, h, w, skip, first) in [
            (1, 97, 101, 0, 0),
            (1, 93, 181, 1, 0),
            (1, 24, 40, 0, 1),
            (3, 36, 37, 0, 0),
        ] {
            for join in [true, false] {
                let reverse = (c + h) % 3 == 0;
                // The base array, the view's shape and strides over its axes, element zero.
                let (base, axes, perm, off) = if join {
                    let base = [n, c + skip, h, w + first];
                    let cs = c_strides(&base);
                    let ch = if reverse { skip + c - 1 } else { skip };
                    let s1 = if reverse { -cs[1] } else { cs[1] };
                    let off = ch as isize * cs[1] + first as isize * cs[3];
                    (base, [cs[0], s1, cs[2], cs[3]], [0, 2, 3, 1], off)
                } else {
                    let base = [n, h + skip, w + first, c];
                    let cs = c_strides(&base);
                    let s3 = if reverse { -cs[3] } else { cs[3] };
                    let ch = if reverse { c - 1 } else { 0 };
                    let off = skip as isize * cs[1] + first as isize * cs[2] + ch as isize;
                    (base, [cs[0], cs[1], cs[2], s3], [0, 3, 1, 2], off)
                };
                let view = if join { [n, c, h, w] } else { [n, h, w, c] };
                let shape: Vec<usize> = perm.iter().map(|&a| view[a]).collect();
                let src: Vec<isize> = perm.iter().map(|&a| axes[a]).collect();
                let dst = c_strides(&shape);
                for t in [U8, F16, F32, F64] {
                    let size = t.size();
                    let soff = (off * size as isize) as u64;
                    let opt = PlanOptions::default();
                    let p = run_case_with(&shape, &dst, 0, t, &src, soff, t, None, opt);
                    let path = p.kernel_path();
                    let what = format!("{base:?} {t} join {join}: {path}");
                    if shifted_as_they_pay(&p, join, c, size, &what) {
                        shifted[usize::from(join)] += 1;
                        *by_size.entry((join, size)).or_insert(0) += 1;
                    }
                    let planes = h * w * size % 16 != 0;
                    let images = n == 1 || c * h * w * size % 16 == 0;
                    if first == 0 && planes && images && (join || skip == 0) {
                        // 1-byte copies never take element-wise tiles; wider ones do where
                        // their runs of pixels leave the shifted kernels behind
                        // (`shifted_pays`).
                        assert!(!path.starts_with("tiled_e") || size > 1, "{what}");
                    }
                }
            }
        }
    }
    assert!(
        shifted.iter().all(|&n| n >= 20),
        "splits, joins: {shifted:?}"
    );
    // Both directions take them with every element size (4 and 8 bytes on 5 channels or
    // more).
    assert_eq!(by_size.len(), 8, "{by_size:?}");
}

/// Permuted copies of [2]^12 and [4]^6 whose source is read backwards along its fastest axis
/// and along a second axis of its run take vector tiles (every axis read backwards that runs
/// faster in the source than in the destination is flipped), and match the reference for
/// every element size.
#[test]
#[cfg_attr(
    miri,
    ignore = "a sweep of plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn sources_read_backwards_along_their_runs_take_vector_tiles() {
    use DType::*;
    let opt = PlanOptions {
        prefer_tiled: true,
        ..PlanOptions::default()
    };
    for shape in [vec![2usize; 12], vec![4; 6]] {
        let rank = shape.len();
        // Reversed, and cycled by half the rank: the axes read backwards land in the middle
        // of the destination, away from its fastest axes.
        let perms: [Vec<usize>; 2] = [
            (0..rank).rev().collect(),
            (0..rank).map(|i| (i + rank / 2) % rank).collect(),
        ];
        for perm in perms {
            let (out, dst, src) = permuted_layout(&shape, &perm);
            // The source axes of strides 1 and `d` (the last two of `shape`, `d` elements
            // each) read backwards: element zero at their far end.
            let d = shape[rank - 1];
            let mut off = 0;
            let src: Vec<isize> = src
                .iter()
                .map(|&s| {
                    if s.unsigned_abs() < d * d {
                        off += (d as isize - 1) * s;
                        -s
                    } else {
                        s
                    }
                })
                .collect();
            for t in [U8, F16, F32, F64] {
                let p = run_case_with(
                    &out,
                    &dst,
                    0,
                    t,
                    &src,
                    off as u64 * t.size() as u64,
                    t,
                    None,
                    opt,
                );
                let path = p.kernel_path();
                assert!(
                    path.starts_with("tiled") && !path.starts_with("tiled_e"),
                    "{shape:?} {perm:?} {t}: {path}"
                );
            }
        }
    }
}

/// The permutation sweep's layouts (every permutation of the bench's seven shapes, extents of
/// 16 and more, contiguous source) plan exactly as they do with the tiled kernels turned off:
/// the narrow-axis rule leaves them to the permute, packed, vector, wide and transpose kernels.
#[test]
#[cfg_attr(
    miri,
    ignore = "planning thousands of layouts; no unsafe code involved"
)]
fn sweep_layouts_plan_as_without_the_tiled_kernels() {
    let shapes = SWEEP_SHAPES;
    let off = PlanOptions {
        no_tiled: true,
        ..PlanOptions::default()
    };
    let mut n = 0;
    for shape in shapes {
        for perm in permutations(shape.len()) {
            let (out, dst, src) = permuted_layout(shape, &perm);
            for t in [DType::F32, DType::F16, DType::U8] {
                let plan =
                    |opt| plan_copy(DST_BASE, &dst, t, SRC_BASE, &src, t, &out, opt).unwrap();
                let (a, b) = (plan(PlanOptions::default()), plan(off));
                assert_eq!(
                    format!("{a:?}"),
                    format!("{b:?}"),
                    "{t} {shape:?} perm {perm:?}"
                );
                n += 1;
            }
        }
    }
    assert_eq!(n, 902 * 3);
}

/// The boxes that tiled plans leave, when small, take one launch each (no tiled plan of
/// their own with rests again): the plans of odd planes (shifted narrow ones, element-wise
/// tiles for 4- and 8-byte elements of few channels) take two launches in all, and match the
/// reference.
#[test]
#[cfg_attr(
    miri,
    ignore = "plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn small_rests_take_one_launch() {
    use DType::*;
    for (shape, perm) in [
        (vec![3usize, 8191, 8191], vec![1usize, 2, 0]),
        (vec![8191, 8191, 3], vec![2, 0, 1]),
        (vec![5, 4095, 4093], vec![1, 2, 0]),
        // Planes 6 elements past a multiple of 16, images on one (not for f64).
        (vec![2, 1022, 1021, 8], vec![0, 3, 1, 2]),
        (vec![3, 97, 101], vec![1, 2, 0]),
        (vec![97, 101, 3], vec![2, 0, 1]),
    ] {
        let (out, dst, src) = permuted_layout(&shape, &perm);
        for t in [U8, F16, F32, F64] {
            if shape[0] == 2 && t == F64 {
                continue;
            }
            let opt = PlanOptions::default();
            let p = if shape.iter().product::<usize>() < 1 << 16 {
                run_case_with(&out, &dst, 0, t, &src, 0, t, None, opt)
            } else {
                plan_copy(DST_BASE, &dst, t, SRC_BASE, &src, t, &out, opt).unwrap()
            };
            let what = format!("{shape:?} {perm:?} {t}: {}", p.kernel_path());
            // 4- and 8-byte copies of fewer than 5 channels take element-wise tiles
            // (`shifted_pays`), with the same one rest.
            let channels = if perm[0] == 1 {
                shape[0]
            } else {
                shape[shape.len() - 1]
            };
            if t.size() <= 2 || channels >= 5 {
                assert!(p.kernel_path().starts_with("narrow_shifted"), "{what}");
            } else {
                assert!(p.kernel_path().starts_with("tiled_e"), "{what}");
            }
            assert!(p.kernel_path().ends_with("+rest"), "{what}");
            assert_eq!(p.launches(), 2, "{what}");
        }
    }
}

/// Casts between integer types of one size keep every bit (`as`): they take the copy paths
/// (the contiguous copy kernel, the narrow kernels, shifted ones too, the vector tiles, the
/// element-wise tiles), and match
/// the reference; casts that change bits between types of one size (f16 -> bf16, f32 -> i32)
/// stay casts.
#[test]
#[cfg_attr(
    miri,
    ignore = "plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn integer_casts_of_one_size_take_the_copy_paths() {
    use DType::*;
    let opt = PlanOptions::default();
    let pairs = [
        (U8, I8),
        (I8, U8),
        (U16, I16),
        (I32, U32),
        (U64, I64),
        (I64, U64),
    ];
    for (from, to) in pairs {
        // Contiguous: the contiguous copy kernel.
        let p = run_case_with(&[1000], &[1], 0, to, &[1], 0, from, None, opt);
        assert!(
            matches!(p, Plan::Contig { from: f, to: t, .. } if f == from && t == from),
            "{from} -> {to}: {p:?}"
        );
        // CHW -> HWC with aligned planes, and with odd planes (1-byte elements on the shifted
        // narrow kernels; wider ones, whose runs of pixels are short here, as their copies).
        for (h, w, want) in [(16, 64, "narrow"), (7, 13, "narrow_shifted")] {
            let (out, dst, src) = permuted_layout(&[3, h, w], &[1, 2, 0]);
            let p = run_case_with(&out, &dst, 0, to, &src, 0, from, None, opt);
            let path = p.kernel_path();
            let copy = run_case_with(&out, &dst, 0, from, &src, 0, from, None, opt);
            assert_eq!(path, copy.kernel_path(), "{from} -> {to} {h}x{w}");
            if from.size() == 2 && want == "narrow" {
                // Aligned 2-byte planes: the vector tiles, as for copies.
                assert_eq!(path, "tiled", "{from} -> {to}");
            } else if from.size() == 1 || want == "narrow" {
                assert!(path.starts_with(want), "{from} -> {to} {h}x{w}: {path}");
            }
            match &p {
                Plan::Tiled { from: f, to: t, .. } => assert_eq!((*f, *t), (from, from)),
                p => panic!("{from} -> {to}: {p:?}"),
            }
        }
    }
    for (from, to) in [(F16, BF16), (F32, I32), (I32, F32), (U64, F64)] {
        let p = run_case_with(&[1000], &[1], 0, to, &[1], 0, from, None, opt);
        assert!(
            matches!(p, Plan::Contig { from: f, to: t, .. } if f == from && t == to),
            "{from} -> {to}: {p:?}"
        );
        let (out, dst, src) = permuted_layout(&[3, 16, 64], &[1, 2, 0]);
        let p = run_case_with(&out, &dst, 0, to, &src, 0, from, None, opt);
        assert!(!p.kernel_path().starts_with("narrow"), "{from} -> {to}");
    }
}

/// The strides of a contiguous array of `shape` in standard (row-major) order.
fn c_strides(shape: &[usize]) -> Vec<isize> {
    let mut st = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for i in (0..shape.len()).rev() {
        st[i] = acc;
        acc *= shape[i] as isize;
    }
    st
}

/// [`run_case_with`] of a copy of `t` into a contiguous destination `dst_off` bytes into its
/// array, from a source of `src` strides `src_off` bytes into its array, with the launcher's
/// grid and the default options.
fn same_type_case(shape: &[usize], dst_off: u64, src: &[isize], src_off: u64, t: DType) -> Plan {
    let dst = c_strides(shape);
    let opt = PlanOptions::default();
    run_case_with(shape, &dst, dst_off, t, src, src_off, t, None, opt)
}

/// The element type a copy plan moves (the source's), if it moves elements.
fn moved_type(p: &Plan) -> Option<DType> {
    match *p {
        Plan::Contig { from, .. }
        | Plan::Strided32 { from, .. }
        | Plan::Strided64 { from, .. }
        | Plan::Transpose { from, .. }
        | Plan::Rows { from, .. }
        | Plan::Permute { from, .. }
        | Plan::Tiled { from, .. }
        | Plan::RowsGather { from, .. }
        | Plan::RowsScatter { from, .. }
        | Plan::StridedN { from, .. } => Some(from),
        Plan::RowsRev { elem, .. } => Some(elem),
        _ => None,
    }
}

/// Copies of runs of 2, 4 or 8 bytes contiguous on both sides (complex numbers as pairs of
/// f32 or f16, pixels of 2 or 4 u8 channels), permuted, transposed, sliced or read backwards
/// along the other axes, move the runs as elements of their size when both operands are
/// aligned to them (a transposed matrix of complex numbers is a transpose of 8-byte elements,
/// not a gather of 4-byte ones), and match the reference; runs of 3 or 16 bytes, operands off
/// the run's alignment and casts keep their element types.
#[test]
#[cfg_attr(
    miri,
    ignore = "plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn runs_of_two_to_eight_bytes_move_as_wider_elements() {
    use DType::*;
    let mut n = 0;
    // (array, permutation of its axes, slice step per view axis; the last axis is the run)
    let layouts: [(&[usize], &[usize], &[isize]); 6] = [
        (&[64, 96, 2], &[1, 0, 2], &[1, 1, 1]),
        (&[33, 70, 4], &[1, 0, 2], &[1, 1, 1]),
        (&[5, 17, 9, 2], &[2, 0, 1, 3], &[1, 1, 1, 1]),
        (&[40, 50, 2], &[1, 0, 2], &[-1, 2, 1]),
        (&[40, 50, 4], &[0, 1, 2], &[3, -1, 1]),
        (&[40, 50, 3], &[1, 0, 2], &[1, 1, 1]),
    ];
    for (base, perm, steps) in layouts {
        for t in [U8, F16, F32, F64] {
            for (off, cast) in [(0usize, false), (1, false), (0, true)] {
                let size = t.size();
                let bst = c_strides(base);
                // The view: the array's axes permuted, then sliced with `steps` (a negative
                // step starts at the far end).
                let shape: Vec<usize> = perm
                    .iter()
                    .zip(steps)
                    .map(|(&a, &k)| base[a].div_ceil(k.unsigned_abs()))
                    .collect();
                let src: Vec<isize> = perm.iter().zip(steps).map(|(&a, &k)| bst[a] * k).collect();
                let to = if cast { F64 } else { t };
                let dst = c_strides(&shape);
                let opt = PlanOptions::default();
                let soff = (off * size) as u64;
                let p = run_case_with(&shape, &dst, 0, to, &src, soff, t, None, opt);
                let c = base[base.len() - 1];
                let wide = c * size;
                let grouped = !cast && off * size % wide == 0 && [2, 4, 8].contains(&wide);
                let what = format!(
                    "{base:?} perm {perm:?} steps {steps:?} {t} off {off} cast {cast}: {} {:?}",
                    p.kernel_path(),
                    moved_type(&p)
                );
                let moved = moved_type(&p).map(|m| m.size());
                if grouped {
                    assert_eq!(moved, Some(wide), "{what}");
                } else if !cast {
                    assert_ne!(moved, Some(wide), "{what}");
                }
                n += 1;
            }
        }
    }
    assert_eq!(n, 6 * 4 * 3);
}

/// Copies and casts that move pixels of a few channels whole (a run of less than 16 bytes
/// contiguous on both sides that is not 2, 4 or 8 bytes, or is off that alignment; or whose
/// channels are read backwards) to other places (transposed images of 3 channels, batches of
/// them, sliced) take the tiled kernels, not the strided gather, and match the reference; runs
/// of 16 bytes or more keep the wide and row kernels.
#[test]
#[cfg_attr(
    miri,
    ignore = "plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn moved_pixels_of_a_few_channels_take_the_tiled_kernels() {
    use DType::*;
    // (array, permutation; the last axis, the channels, stays last)
    let layouts: [(&[usize], &[usize]); 5] = [
        (&[48, 64, 3], &[1, 0, 2]),
        (&[37, 41, 3], &[1, 0, 2]),
        (&[3, 20, 24, 3], &[0, 2, 1, 3]),
        (&[32, 48, 5], &[1, 0, 2]),
        (&[32, 48, 2], &[1, 0, 2]),
    ];
    for (base, perm) in layouts {
        for (from, to) in [(U8, U8), (F16, F16), (F32, F32), (F64, F64), (U8, F32)] {
            for (off, reversed) in [(0usize, false), (1, false), (0, true)] {
                let bst = c_strides(base);
                let shape: Vec<usize> = perm.iter().map(|&a| base[a]).collect();
                let mut src: Vec<isize> = perm.iter().map(|&a| bst[a]).collect();
                let c = base[base.len() - 1];
                // The channels read backwards: the source's element zero is its pixel's last.
                let mut soff = (off * from.size()) as u64;
                if reversed {
                    let last = src.len() - 1;
                    src[last] = -1;
                    soff += ((c - 1) * from.size()) as u64;
                }
                let dst = c_strides(&shape);
                let opt = PlanOptions::default();
                let p = run_case_with(&shape, &dst, 0, to, &src, soff, from, None, opt);
                let run = c * from.size().max(to.size());
                let grouped = from == to && off == 0 && !reversed && [2, 4, 8].contains(&run);
                let what = format!("{base:?} perm {perm:?} {from} -> {to} off {off} {reversed}");
                let path = p.kernel_path();
                if run >= 16 || grouped {
                    assert!(!path.starts_with("tiled"), "{what}: {path}");
                } else {
                    assert!(path.starts_with("tiled"), "{what}: {path}");
                }
            }
        }
    }
}

/// Views whose runs of 2 to 4 elements are each read backwards, the runs in order (pairs
/// swapped, images with their 3 or 4 channels reversed, RGB <-> BGR, also flipped upside
/// down) take the kernels of reversed runs and match the reference, for every element size,
/// destinations at any element offset (runs of 2 and 4 whose destination rows do not start
/// on the run's alignment take the reversed rows instead), sources at any offset (vectors
/// shifted out of aligned blocks); runs of more than 16 bytes, runs of 3 of 4- and 8-byte
/// elements and runs spaced apart stay on the other kernels.
#[test]
#[cfg_attr(
    miri,
    ignore = "plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn reversed_runs_take_the_kernels_of_reversed_runs() {
    use DType::*;
    let mut n = 0;
    // (shape, axes read backwards, source strides multiplied per axis)
    let layouts: [(&[usize], &[usize], &[isize]); 8] = [
        (&[300, 2], &[1], &[1, 1]),
        (&[9, 40, 3], &[2], &[1, 1, 1]),
        (&[9, 40, 4], &[2], &[1, 1, 1]),
        (&[2, 3, 33, 3], &[3], &[1, 1, 1, 1]),
        (&[9, 40, 3], &[0, 2], &[1, 1, 1]),
        (&[5, 70, 2], &[2], &[1, 1, 1]),
        // Runs spaced apart (every other pixel): not runs in order.
        (&[9, 40, 3], &[2], &[1, 2, 1]),
        // Runs of 5: not reversed runs.
        (&[9, 40, 5], &[2], &[1, 1, 1]),
    ];
    for (shape, flip, spaced) in layouts {
        let c = shape[shape.len() - 1];
        for t in [U8, F16, F32, F64] {
            let size = t.size();
            for off in [0usize, 1, 2] {
                // The source's array: the view's, wider where spaced.
                let mut base: Vec<usize> = shape.to_vec();
                for (b, &k) in base.iter_mut().zip(spaced) {
                    *b *= k as usize;
                }
                let bst = c_strides(&base);
                let mut src: Vec<isize> = bst.iter().zip(spaced).map(|(s, k)| s * k).collect();
                for &a in flip {
                    src[a] = -src[a];
                }
                let soff = ((n % 3) * size) as u64;
                let p = same_type_case(shape, (off * size) as u64, &src, soff, t);
                let what = format!("{shape:?} flip {flip:?} {t} off {off}: {}", p.kernel_path());
                let run_bytes = c * size;
                let fits = (c == 3 && size <= 2
                    || c != 3 && (2..=4).contains(&c) && run_bytes <= 16)
                    && spaced.iter().all(|&k| k == 1);
                // Runs that divide 16 need the destination's rows on their alignment.
                let aligned = c == 3 || (off * size) % run_bytes == 0;
                if fits && aligned {
                    match &p {
                        Plan::RowsRev { elem, runs, .. } => {
                            assert_eq!(elem.size(), size, "{what}");
                            assert_eq!((runs.run, runs.backwards), (c, false), "{what}");
                        }
                        _ => panic!("{what}"),
                    }
                } else {
                    assert_ne!(p.kernel_path(), "runs_rev", "{what}");
                }
                n += 1;
            }
        }
    }
}

/// Views read backwards along the destination's fastest axis (a reversed vector, images
/// flipped left-right, channels first, every row reversed; with channels last, runs of 2 to 8
/// bytes reversed as one element, runs of 3 or 6 channels as runs of 3 elements of 1 to 8
/// bytes) take the reversed row kernels and match the reference, for every element size, rows
/// of whole vectors or not, operands at any element offset (vectors that do not line up are
/// shifted out of aligned blocks), outer axes read either way.
#[test]
#[cfg_attr(
    miri,
    ignore = "plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn reversed_rows_take_the_reversed_row_kernel() {
    use DType::*;
    let mut n = 0;
    // (shape, axes read backwards, the reversed row kernel's element size and run per element
    // size: size 0 where another kernel takes it)
    type Wide = fn(usize) -> (usize, usize);
    let layouts: [(&[usize], &[usize], Wide); 13] = [
        // Rows of at least `SHORT_ROW_BYTES` (shorter ones that are not whole vectors go to
        // the gathered rows: `short_copied_rows_leave_the_row_kernels`).
        (&[1000], &[0], |s| (s, 1)),
        (&[256], &[0], |s| (s, 1)),
        (&[3, 5, 260], &[2], |s| (s, 1)),
        (&[3, 5, 256], &[1, 2], |s| (s, 1)),
        (&[2, 3, 7, 272], &[0, 3], |s| (s, 1)),
        (&[9, 80, 4], &[1], |s| {
            if 4 * s <= 8 { (4 * s, 1) } else { (0, 0) }
        }),
        (&[9, 160, 2], &[1], |s| {
            if 2 * s <= 8 { (2 * s, 1) } else { (0, 0) }
        }),
        // Runs of 3 of 1- and 2-byte units only (wider ones stay on the gather).
        (&[9, 40, 3], &[1], |s| if s <= 2 { (s, 3) } else { (0, 0) }),
        (&[9, 40, 6], &[1], |s| if s == 1 { (2, 3) } else { (0, 0) }),
        (
            &[2, 6, 20, 3],
            &[2],
            |s| if s <= 2 { (s, 3) } else { (0, 0) },
        ),
        (
            &[5, 33, 3],
            &[0, 1],
            |s| if s <= 2 { (s, 3) } else { (0, 0) },
        ),
        (
            &[4, 9, 5, 3],
            &[1, 2],
            |s| if s <= 2 { (s, 3) } else { (0, 0) },
        ),
        // Rows of fewer runs than a group (16 / size) stay on the other kernels.
        (&[4, 12, 3], &[1], |s| if s == 2 { (s, 3) } else { (0, 0) }),
    ];
    for (shape, flip, want) in layouts {
        for t in [U8, F16, F32, F64] {
            let size = t.size();
            for off in [0usize, 1, 3] {
                let mut src = c_strides(shape);
                for &a in flip {
                    src[a] = -src[a];
                }
                // The source one element further into its array now and then, the destination
                // off by `off` elements.
                let soff = ((n % 2) * size) as u64;
                let p = same_type_case(shape, (off * size) as u64, &src, soff, t);
                let what = format!("{shape:?} flip {flip:?} {t} off {off}: {}", p.kernel_path());
                // Runs that move as one element need both operands aligned to them.
                let (w, run) = want(size);
                let (wb, db) = (w as u64, (off * size) as u64);
                let w = if w != 0 && w != size && (db % wb != 0 || soff % wb != 0) {
                    0
                } else {
                    w
                };
                if w == 0 {
                    assert!(!p.kernel_path().starts_with("rows_rev"), "{what}");
                } else {
                    match &p {
                        Plan::RowsRev { elem, runs, .. } => {
                            assert_eq!((elem.size(), runs.run), (w, run), "{what}");
                            assert!(runs.backwards, "{what}");
                        }
                        // Wide elements whose rows the reversed row kernel would shift take
                        // the gathered rows (the destination is contiguous).
                        Plan::RowsGather { .. } if run == 1 && w >= GATHER_SHIFTED_MIN_SIZE => {
                            let dst = c_strides(shape);
                            let keep = PlanOptions {
                                short_rows: true,
                                ..PlanOptions::default()
                            };
                            let d0 = DST_BASE + (off * size) as u64;
                            let s0 = SRC_BASE + soff;
                            let q = plan_copy(d0, &dst, t, s0, &src, t, shape, keep).unwrap();
                            let Plan::RowsRev { args, .. } = q else {
                                panic!("{what}: {q:?} kept")
                            };
                            assert!(reversed_rows_shift(&args, w), "{what}");
                        }
                        _ => panic!("{what}"),
                    }
                }
                n += 1;
            }
        }
    }
    // A run of 4 u8 channels of a source off the run's alignment: no wide elements.
    let st = c_strides(&[9, 40, 4]);
    let src = [st[0], -st[1], st[2]];
    let p = same_type_case(&[9, 40, 4], 0, &src, 1, U8);
    assert_ne!(p.kernel_path(), "rows_rev");
    // Rows of fewer bytes than a vector stay on the other kernels.
    let p = same_type_case(&[7], 0, &[-1], 0, U8);
    assert_ne!(p.kernel_path(), "rows_rev");
}

/// Permutations of [2]^n state vectors of 2 to 16 GiB (n = 29 to 31, 2- to 8-byte elements):
/// their tiles span more than 2^31 bytes of the other operand (the destination's fastest axes
/// are the source's slowest), but fewer than 2^31 elements, which is what the tiled kernels'
/// 32-bit offsets count. They take the tiled and narrow kernels, not the general gathers, and
/// every tile stays within 2^31 elements of its first.
#[test]
fn state_vectors_of_many_gib_take_the_tiled_kernels() {
    for (ty, n) in [
        (DType::F16, 31),
        (DType::F32, 30),
        (DType::F32, 31),
        (DType::F64, 29),
        (DType::F64, 31),
    ] {
        let shape = vec![2usize; n];
        let cyclic: Vec<usize> = (0..n).map(|i| (i + 1) % n).collect();
        let mut swapped: Vec<usize> = (0..n).collect();
        swapped.swap(0, n - 1);
        swapped.swap(3, n - 4);
        for (name, perm) in [
            ("reversed", (0..n).rev().collect::<Vec<_>>()),
            ("cyclic", cyclic),
            ("swapped", swapped),
        ] {
            let (out, dst, src) = permuted_layout(&shape, &perm);
            let opt = PlanOptions::default();
            let p = plan_copy(DST_BASE, &dst, ty, SRC_BASE, &src, ty, &out, opt).unwrap();
            let what = format!("{ty:?} [2]^{n} {name}");
            let path = p.kernel_path();
            assert!(path == "tiled" || path == "narrow", "{what}: path {path}");
            let Plan::Tiled { args, rest, .. } = &p else {
                panic!("{what}: not a tiled plan");
            };
            assert!(rest.is_empty(), "{what}: {rest:?}");
            let r = args.tile_rank as usize;
            let reach = |s: &mut dyn Iterator<Item = (u32, i64)>| -> u64 {
                s.map(|(len, st)| u64::from(len - 1) * st.unsigned_abs())
                    .sum()
            };
            let rd = reach(&mut args.read[..r].iter().map(|a| (a.len, i64::from(a.src))));
            let wd = reach(&mut args.write[..r].iter().map(|a| (a.len, i64::from(a.dst))));
            assert!(rd <= i32::MAX as u64 && wd <= i32::MAX as u64, "{what}");
            // The tile reaches past 2^31 bytes on one side at least, where the axes cross.
            if name != "swapped" {
                let bytes = rd.max(wd) * ty.size() as u64;
                assert!(bytes > i32::MAX as u64, "{what}: {bytes} bytes");
            }
            assert_eq!(
                u64::from(args.tiles) * u64::from(args.volume),
                1u64 << n,
                "{what}"
            );
        }
    }
}

/// Permutations of tensors of 1 to 16 GiB (ranks 2 to 11, extents from 1 to 3000, every
/// element size; 3000 drawn from a fixed seed) never fall to the general gathers
/// (`strided32`, `strided64`, `stridedn`): where the destination's fastest axes lie too far
/// apart in the source for a tile to take them whole, the tiles take pieces of them.
#[test]
#[cfg_attr(
    miri,
    ignore = "3000 plans, minutes under Miri; the planner has no unsafe code"
)]
fn permutations_of_many_gib_never_take_the_general_gathers() {
    let mut rng = StdRng::seed_from_u64(0x9a7e);
    let mut paths: std::collections::BTreeMap<&'static str, usize> = Default::default();
    let mut planned = 0;
    while planned < 3000 {
        let ty = [DType::U8, DType::F16, DType::F32, DType::F64][rng.random_range(0..4)];
        let rank = rng.random_range(2..12);
        let mut shape: Vec<usize> = (0..rank)
            .map(|_| match rng.random_range(0..4) {
                0 => rng.random_range(1..5),
                1 => rng.random_range(5..40),
                2 => 1 << rng.random_range(1..8),
                _ => rng.random_range(40..3000),
            })
            .collect();
        let target: usize = 1 << rng.random_range(30..35);
        let bytes = |shape: &[usize]| {
            shape
                .iter()
                .fold(ty.size(), |acc, &n| acc.saturating_mul(n))
        };
        while bytes(&shape) > target {
            let k = (0..rank).max_by_key(|&k| shape[k]).unwrap();
            shape[k] = (shape[k] / 2).max(1);
        }
        if bytes(&shape) < target / 4 {
            continue;
        }
        let mut perm: Vec<usize> = (0..rank).collect();
        for i in (1..rank).rev() {
            perm.swap(i, rng.random_range(0..=i));
        }
        let (out, dst, src) = permuted_layout(&shape, &perm);
        let opt = PlanOptions::default();
        let p = plan_copy(DST_BASE, &dst, ty, SRC_BASE, &src, ty, &out, opt).unwrap();
        let path = p.kernel_path();
        assert!(
            !path.starts_with("strided"),
            "{ty:?} {} bytes, shape {out:?}, source strides {src:?}: {path}",
            bytes(&shape)
        );
        *paths.entry(path).or_default() += 1;
        planned += 1;
    }
    // The layouts reach the tiled and permute kernels alike.
    for want in ["tiled", "tiled_e", "permute", "rows"] {
        assert!(paths.get(want).is_some_and(|&n| n > 50), "{paths:?}");
    }
}

/// An axis whose step is 2^31 elements or more on one side cannot be in a tile. Where the
/// tiles cannot grow without it (here the source's fastest axis, 4 channels, whose planes lie
/// 3.3e9 bytes apart in a 13 GB destination, beside a destination axis of 21 whose steps are
/// 6.3e8 bytes apart in the source), the tiled plan takes it apart: one launch per index, each
/// tiled.
#[test]
fn axes_2_pow_31_elements_apart_are_copied_one_index_at_a_time() {
    let plan = |channels: usize| {
        let shape = [channels, 1, 16, 32, 32, 6, 800, 21, 2];
        let src = [1isize, 1, 39321600, 1228800, 4, 256, 1536, 629145600, 128];
        let dst = c_strides(&shape);
        plan_copy(
            DST_BASE,
            &dst,
            DType::U8,
            SRC_BASE,
            &src,
            DType::U8,
            &shape,
            PlanOptions::default(),
        )
        .unwrap()
    };
    let p = plan(4);
    let Plan::Tiled { args, rest, .. } = &p else {
        panic!("not a tiled plan: {}", p.kernel_path());
    };
    let plane = 16 * 32 * 32 * 6 * 800 * 21 * 2;
    assert_eq!(u64::from(args.tiles) * u64::from(args.volume), plane);
    assert_eq!(rest.len(), 3);
    for (i, r) in rest.iter().enumerate() {
        let Plan::Tiled {
            args: ra, rest: rr, ..
        } = r
        else {
            panic!("rest {i}: {}", r.kernel_path());
        };
        assert!(rr.is_empty());
        assert_eq!(u64::from(ra.tiles) * u64::from(ra.volume), plane);
        assert_eq!(ra.src, SRC_BASE + i as u64 + 1, "rest {i}");
        assert_eq!(ra.dst, DST_BASE + (i as u64 + 1) * plane, "rest {i}");
    }
    // An axis of more than 64 such elements is not taken apart.
    assert!(plan(65).kernel_path().starts_with("strided"));
    // Each operand's fastest axis far apart in the other, as the GPU test
    // `axes_2_pow_31_elements_apart_on_both_sides` copies them.
    let far = (1isize << 31) + 64;
    let m = 1usize << 20;
    let p = plan_copy(
        DST_BASE,
        &[far, 1, 2],
        DType::U8,
        SRC_BASE,
        &[1, far, 2],
        DType::U8,
        &[2, 2, m],
        PlanOptions::default(),
    )
    .unwrap();
    let Plan::Tiled { rest, .. } = &p else {
        panic!("not a tiled plan: {}", p.kernel_path());
    };
    assert_eq!(
        p.kernel_path()
            .strip_suffix("+rest")
            .map(|x| x.starts_with("tiled")),
        Some(true)
    );
    // Elements that a tiled plan and its rests cover, every rest tiled too.
    fn covered(p: &Plan) -> u64 {
        let Plan::Tiled { args, rest, .. } = p else {
            panic!("{}", p.kernel_path());
        };
        u64::from(args.tiles) * u64::from(args.volume) + rest.iter().map(covered).sum::<u64>()
    }
    for r in rest {
        let Plan::Tiled { rest: rr, .. } = r else {
            panic!("{}", r.kernel_path());
        };
        assert!(rr.len() <= 1);
    }
    assert_eq!(covered(&p), 4 * m as u64);
}

/// Axes far apart are taken apart one index at a time, again in each part, while all of them
/// together make at most 4096 launches, and a tiled plan with its rests makes at most 4096;
/// layouts of more (operands larger than any device's memory, which only a foreign pointer can
/// claim) take other paths, planned in bounded time and memory (taken apart, the first one
/// made millions of plans).
#[test]
fn axes_far_apart_make_a_bounded_number_of_launches() {
    // u32 elements, a source of 3.1e15 of them: the axes from index 18 on are 2^31 elements
    // or more apart in the source, and those before 14 in the destination.
    let shape = [
        1, 1, 3, 1, 1, 217, 1, 1, 1, 1, 1, 1, 1, 1, 946526, 2, 1, 2, 24, 1, 4, 1, 3, 2, 1, 22, 2,
        5, 1, 10, 1,
    ];
    let src: [isize; 31] = [
        1,
        1,
        1,
        3,
        3,
        3,
        651,
        651,
        651,
        651,
        651,
        651,
        651,
        651,
        651,
        616188426,
        1232376852,
        1232376852,
        -2464753704,
        59154088896,
        59154088896,
        236616355584,
        -236616355584,
        709849066752,
        1419698133504,
        1419698133504,
        31233358937088,
        62466717874176,
        312333589370880,
        312333589370880,
        3123335893708800,
    ];
    // The axes from `end` on of extent 1.
    let plan = |end: usize| {
        let mut shape = shape;
        shape[end..].fill(1);
        plan_copy(
            DST_BASE,
            &c_strides(&shape),
            DType::U32,
            SRC_BASE + 4 * 4_000_000_000_000_000,
            &src,
            DType::U32,
            &shape,
            PlanOptions::default(),
        )
        .unwrap()
    };
    // Two axes far apart in the source (24 and 4): tiled plans in parts.
    let p = plan(21);
    assert!(p.kernel_path().starts_with("tiled"), "{}", p.kernel_path());
    assert!((2..=4096).contains(&p.launches()), "{}", p.launches());
    // All of them, and two far apart in the destination: one launch.
    let p = plan(shape.len());
    assert_eq!(p.kernel_path(), "stridedn");
    // 1.1e14 u32 elements whose tiled plan, taken apart along the two axes far apart in the
    // source (2 and 40 indices), would leave rests in every part: 12,800 launches. Any
    // plan of at most 4096 is taken. (Thousands of plans made: minutes under Miri.)
    if cfg!(miri) {
        return;
    }
    let shape = [1281962, 5, 2, 2742, 40, 2, 1, 40, 1];
    let p = plan_copy(
        DST_BASE,
        &[263232000, 52646400, 26323200, 9600, 240, 120, 120, 3, 3],
        DType::U32,
        SRC_BASE,
        &[
            1,
            1281962,
            6409810,
            12819620,
            35151398040,
            -1406055921600,
            8436335529600,
            8436335529600,
            337453421184000,
        ],
        DType::U32,
        &shape,
        PlanOptions::default(),
    )
    .unwrap();
    assert!(
        p.launches() <= 4096,
        "{}: {}",
        p.kernel_path(),
        p.launches()
    );
}

/// Short rows of a copy (shorter than `SHORT_ROW_BYTES`) take the row kernels only where they
/// are whole 16-byte vectors on both sides; the others take the gathered rows into a contiguous
/// destination (runs of c elements in reversed order or each reversed, a column slice
/// `x[.., ..c]` read) and the strided kernel into a sliced one (`x[.., ..c]` written); rows of
/// `SHORT_ROW_BYTES` or more keep the row kernels, the shifted one where the two sides are off
/// each other's alignment. Every plan is checked against the reference, on the launcher's grid
/// and a forced small one.
#[test]
#[cfg_attr(
    miri,
    ignore = "plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn short_copied_rows_leave_the_row_kernels() {
    use DType::*;
    let rows = 64usize;
    // (type, c, whether rows of c elements are whole vectors)
    let cases = [
        (U8, 17, false),
        (U8, 40, false),
        (U8, 48, true),
        (U8, 100, false),
        (F16, 9, false),
        (F16, 24, true),
        (F16, 66, false),
        (F32, 3, false),
        (F32, 5, false),
        (F32, 7, false),
        (F32, 12, true),
        (F32, 20, true),
        (F32, 33, false),
        (F64, 3, false),
        (F64, 6, true),
        (F64, 15, false),
        // Rows of 256 bytes or more keep the row kernels.
        (U8, 300, false),
        (F32, 65, false),
        (U8, 512, true),
        (F32, 64, true),
    ];
    for (t, c, whole) in cases {
        let size = t.size();
        let long = c * size >= 256;
        let ci = c as isize;
        let dense = [ci, 1];
        let last = (rows as u64 - 1) * (c * size) as u64;
        let end = ((c - 1) * size) as u64;
        // Long rows off each other's alignment (a pitch of c + 1, or rows of c elements that
        // are not whole vectors in reverse order) take the shifted row kernel.
        // Those of 4- and 8-byte elements into a contiguous destination take the gathered rows.
        let shifted = if size >= GATHER_SHIFTED_MIN_SIZE {
            "rows_gather"
        } else {
            "rows_shifted"
        };
        // Rows written into a column slice that the row kernels would shift or move element
        // by element: the scattered rows for 4- and 8-byte elements in rows of 24 bytes or
        // more, else the shifted row kernel (long rows) or the strided kernel.
        let scatter = size >= SCATTER_MIN_SIZE && (c * size) as u64 >= SCATTER_MIN_ROW_BYTES;
        let into_long = if scatter {
            "rows_scatter"
        } else {
            "rows_shifted"
        };
        let into_short = if scatter { "rows_scatter" } else { "strided32" };
        let (rr, er, read, into) = match (long, whole) {
            (true, true) => ("rows", "rows_rev", shifted, into_long),
            (true, false) if size >= GATHER_SHIFTED_MIN_SIZE => {
                (shifted, shifted, shifted, into_long)
            }
            (true, false) => (shifted, "rows_rev", shifted, into_long),
            (false, true) => ("rows", "rows_rev", "rows_gather", into_short),
            (false, false) => ("rows_gather", "rows_gather", "rows_gather", into_short),
        };
        // What, destination strides, source strides, source element zero's offset, path.
        type Layout<'a> = (&'a str, [isize; 2], [isize; 2], u64, &'a str);
        let layouts: [Layout; 4] = [
            ("runs reversed", dense, [-ci, 1], last, rr),
            ("each run reversed", dense, [ci, -1], end, er),
            ("read from [.., ..c]", dense, [ci + 1, 1], 0, read),
            ("written into [.., ..c]", [ci + 1, 1], dense, 0, into),
        ];
        for (what, ds, ss, soff, want) in layouts {
            for grid in [None, Some((2, 3))] {
                let p = run_case(&[rows, c], &ds, 0, t, &ss, soff, t, grid);
                assert_eq!(p.path(), want, "{t} [{rows}, {c}] {what}");
            }
        }
    }
}

/// Casts whose rows the row kernel would move element by element leave it: rows out of phase
/// (a column slice `x[.., ..c]` read or written, rows of a length that is not a multiple of
/// the wider side's elements per vector in reverse order), and rows shorter than
/// `CAST_ROW_BYTES` on the wider side that are not whole vector groups. They take the gathered
/// rows into a contiguous destination and the strided kernel into a padded one; rows in phase
/// and long, or whole groups, keep the row kernel. Every plan is checked against the
/// reference.
#[test]
#[cfg_attr(
    miri,
    ignore = "plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn casts_of_rows_out_of_phase_leave_the_row_kernel() {
    use DType::*;
    let rows = 24usize;
    for (from, to) in [(U8, F32), (F16, F32), (F32, F16), (U8, F64)] {
        let (fs, ts) = (from.size(), to.size());
        let wide = fs.max(ts);
        let group = contig_group_elems(fs, ts);
        for c in [17usize, 48, 100, 255, 1000, 1024] {
            let ci = c as isize;
            let dense = [ci, 1];
            // Rows in reverse order (source row q at element (rows - 1 - q) * c, destination
            // row q at q * c): in phase where 2c and the last row's offset are multiples of the
            // wider side's elements per vector; kept where whole groups or long enough.
            let per = 16 / wide;
            let in_phase = (2 * c) % per == 0 && ((rows - 1) * c) % per == 0;
            let whole = c % group == 0;
            let long = c * wide >= 1024;
            let rev = if in_phase && (whole || long) {
                "rows"
            } else {
                "rows_gather"
            };
            let last = ((rows - 1) * c * fs) as u64;
            type Layout<'a> = (&'a str, [isize; 2], [isize; 2], u64, &'a str);
            let layouts: [Layout; 3] = [
                ("runs reversed", dense, [-ci, 1], last, rev),
                ("read from [.., ..c]", dense, [ci + 1, 1], 0, "rows_gather"),
                ("written into [.., ..c]", [ci + 1, 1], dense, 0, "strided32"),
            ];
            for (what, ds, ss, soff, want) in layouts {
                let p = run_case(&[rows, c], &ds, 0, to, &ss, soff, from, None);
                assert_eq!(p.path(), want, "{from} -> {to} [{rows}, {c}] {what}");
            }
        }
    }
}

/// The capture test's (`tests/gpu/capture.rs`) column slices of u8: rows of 300 bytes out of
/// 316 line up with a contiguous destination (the row kernel); out of 301 they do not (the
/// shifted row kernel).
#[test]
fn column_slices_in_and_off_phase() {
    use DType::*;
    for (pitch, want) in [(316isize, "rows"), (301, "rows_shifted")] {
        let p = contiguous_plan(U8, U8, &[64, 300], &[300, 1], &[pitch, 1]);
        assert_eq!(p.path(), want, "pitch {pitch}");
    }
}

/// Steered to them (`prefer_scatter`), copies from a contiguous source into a column slice
/// `x[.., a..a + c]` (rows apart in the destination, one row of periods where the source joins
/// them), also with the destination upside down, take the scattered rows for every element
/// size; every plan is checked against the reference on the launcher's grid and forced small
/// ones. By default only 4- and 8-byte elements in rows of 24 bytes or more do, where the
/// source joins the rows.
#[test]
#[cfg_attr(
    miri,
    ignore = "plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn scattered_rows_write_column_slices_when_steered() {
    use DType::*;
    let scatter = PlanOptions {
        prefer_scatter: true,
        ..PlanOptions::default()
    };
    for t in [U8, F16, F32, F64] {
        for (rows, c, pad, start, flip) in [
            (40usize, 17usize, 1isize, 0isize, false),
            (64, 3, 1, 1, false),
            (12, 100, 3, 2, false),
            (300, 20, 1, 0, true),
        ] {
            let pitch = c as isize + pad;
            let ds: [isize; 2] = if flip { [-pitch, 1] } else { [pitch, 1] };
            let doff = if flip {
                ((rows as isize - 1) * pitch + start) as u64 * t.size() as u64
            } else {
                start as u64 * t.size() as u64
            };
            let ss = [c as isize, 1];
            for grid in [None, Some((1, 1)), Some((2, 3))] {
                let p = run_case_with(&[rows, c], &ds, doff, t, &ss, 0, t, grid, scatter);
                assert_eq!(p.path(), "rows_scatter", "{t} [{rows}, {c}] pitch {ds:?}");
            }
            // By default, only 4- and 8-byte elements in rows of 24 bytes or more, where the
            // source joins the rows (not into an upside-down destination, whose rows run
            // backwards against the source's).
            let p = run_case(&[rows, c], &ds, doff, t, &ss, 0, t, None);
            let by_default = !flip
                && t.size() >= SCATTER_MIN_SIZE
                && (c * t.size()) as u64 >= SCATTER_MIN_ROW_BYTES;
            assert_eq!(
                p.path() == "rows_scatter",
                by_default,
                "{t} [{rows}, {c}] pitch {ds:?}: {}",
                p.path()
            );
        }
    }
}

/// `rows_in_phase` and `reversed_rows_shift` agree with the kernels' own per-row heads
/// (`row_head`, `row_rev_head`) on every row of random row arguments (outer ranks 1 to 3 of
/// extents 2 to 5, strides and addresses of every element size, casts among them): rows in
/// phase are exactly those whose every row moves vectors after its head, and reversed rows
/// shift exactly where some row's groups start off a 16-byte boundary.
#[test]
fn phase_predicates_agree_with_the_kernels_heads() {
    use devspan_kernels::abi::{RowRuns, row_rev_head};
    let mut rng = StdRng::seed_from_u64(0x9a5e);
    let sizes = [1usize, 2, 4, 8];
    // Fewer under Miri (the planner has no unsafe code).
    let cases = if cfg!(miri) { 300 } else { 20_000 };
    let (mut in_phase, mut shifted, mut copies) = (0, 0, 0);
    for case in 0..cases {
        let ss = sizes[rng.random_range(0..4)];
        let ds = if case % 2 == 0 {
            ss
        } else {
            sizes[rng.random_range(0..4)]
        };
        let rank = rng.random_range(1..=3usize);
        let shape: Vec<u64> = (0..rank).map(|_| rng.random_range(2..=5)).collect();
        let stride = |rng: &mut StdRng| rng.random_range(-70i64..=70);
        let dst_strides: Vec<i64> = (0..rank).map(|_| stride(&mut rng)).collect();
        let src_strides: Vec<i64> = (0..rank).map(|_| stride(&mut rng)).collect();
        let dst = (1u64 << 20) + ds as u64 * rng.random_range(0..64u64);
        let src = (1u64 << 30) + ss as u64 * rng.random_range(0..64u64);
        // Rows long enough that a row in phase has whole groups after its head.
        let row_len = 200;
        let args = RowArgs::new(
            dst,
            src,
            row_len,
            &shape,
            &dst_strides,
            &src_strides,
            ss,
            ds,
        )
        .unwrap();
        let rows = |f: &mut dyn FnMut(u64, u64)| {
            for q in 0..args.rows {
                let (od, os) = args.row_offsets(q);
                let d = dst.wrapping_add_signed(od * ds as i64);
                let s = src.wrapping_add_signed(os * ss as i64);
                f(d, s);
            }
        };
        let mut every = true;
        rows(&mut |d, s| every &= row_head(d, ds, s, ss, row_len) < row_len);
        assert_eq!(
            super::rows_in_phase(&args, ss, ds),
            every,
            "{args:?} {ss} -> {ds}"
        );
        in_phase += usize::from(every);
        if ss == ds {
            let mut any = false;
            rows(&mut |d, s| any |= row_rev_head(d, s, ss, RowRuns::new(1, true), row_len).1 != 0);
            assert_eq!(reversed_rows_shift(&args, ss), any, "{args:?} {ss}");
            shifted += usize::from(any);
            copies += 1;
        }
    }
    // Both answers of each predicate are drawn often.
    let some = cases / 100;
    assert!(
        in_phase > some && in_phase + some < cases,
        "{in_phase} of {cases} in phase"
    );
    assert!(
        shifted > some && shifted + some < copies,
        "{shifted} of {copies} shifted"
    );
}

/// Casts whose rows are in phase but short and not whole vector groups stay on the row kernel
/// where the destination does not join the rows (a padded destination), and go to the gathered
/// rows where it does.
#[test]
#[cfg_attr(
    miri,
    ignore = "plans through the interpreter, minutes under Miri; the planner has no unsafe code and the sampled property tests interpret plans under Miri"
)]
fn short_cast_rows_in_phase_stay_on_the_row_kernel_into_a_padded_destination() {
    use DType::*;
    for (from, to, c, pitch) in [
        (U8, F32, 100usize, 104isize),
        (F16, F32, 100, 104),
        (F32, F16, 250, 256),
    ] {
        let shape = [64, c];
        let padded = contiguous_plan(from, to, &shape, &[pitch, 1], &[pitch, 1]);
        assert_eq!(
            padded.path(),
            "rows",
            "{from} -> {to} [64, {c}] pitch {pitch}"
        );
        let ds = standard_strides_of(&shape);
        let p = run_case(
            &shape,
            &ds,
            0,
            to,
            &[-(c as isize), 1],
            ((63 * c) * from.size()) as u64,
            from,
            None,
        );
        assert_eq!(p.path(), "rows_gather", "{from} -> {to} [64, {c}] reversed");
    }
}

/// Element-wise copy tiles of 1-, 2- and 4-byte elements take up to 8192 elements (blocks of up
/// to 1024 threads, `copy_tiled_ew_bN`) where that lengthens short runs: `[2, 3^11]` permuted
/// (axes of 3, whose runs never make whole vectors) reads or writes runs of 81 elements or
/// more on one side where tiles of 4096 had 27 and 54. Casts keep tiles of at most 4096. Every
/// plan covers the copy. The rule ([`super::tiled::wide_tile_wins`]) on tiles of given runs.
#[test]
fn element_wise_tiles_of_copies_grow_past_4096() {
    use devspan_kernels::abi::{
        Kind, TiledArgs, TiledAxis, tiled_ew_max_volume, tiled_launch_kind, tiled_threads,
    };
    let mut shape = vec![2usize];
    shape.extend([3usize; 11]);
    let n = shape.len();
    let total: u64 = shape.iter().map(|&x| x as u64).product();
    let reversed: Vec<usize> = (0..n).rev().collect();
    let (out, dst, src) = permuted_layout(&shape, &reversed);
    for (from, to) in [
        (DType::U8, DType::U8),
        (DType::F16, DType::F16),
        (DType::F32, DType::F32),
        (DType::F32, DType::I32),
        (DType::U16, DType::F16),
    ] {
        let opt = PlanOptions::default();
        let p = plan_copy(DST_BASE, &dst, to, SRC_BASE, &src, from, &out, opt).unwrap();
        let what = format!("{from:?} -> {to:?} [2, 3^11] reversed");
        assert_eq!(p.kernel_path(), "tiled_e", "{what}");
        let Plan::Tiled { args, rest, .. } = &p else {
            panic!("{what}: not a tiled plan");
        };
        assert!(rest.is_empty(), "{what}: {rest:?}");
        assert_eq!(
            u64::from(args.tiles) * u64::from(args.volume),
            total,
            "{what}"
        );
        let (ss, ds) = (from.size(), to.size());
        let [read, write] = super::tiled::side_runs(args, ss, ds);
        let threads = tiled_threads(u64::from(args.volume), false, ss, ds);
        let kind = tiled_launch_kind(args, from, to, threads, 9);
        if from.same_bits(to) {
            assert!(args.volume > 4096, "{what}: {}", args.volume);
            assert!(u64::from(args.volume) <= tiled_ew_max_volume(ss), "{what}");
            assert!(
                read.max(write) >= 81 * ss as u64,
                "{what}: runs {read} and {write}"
            );
            assert_eq!(kind, Kind::TiledEW, "{what}");
        } else {
            assert!(args.volume <= 4096, "{what}: {}", args.volume);
            assert_eq!(kind, Kind::TiledE, "{what}");
        }
    }
    // u8 `[2, 3^17]`: reversed (runs of 27 and 54 bytes) in a larger tile, whose write run
    // is 162 bytes; under the bench's first random permutation (runs of 243 and 81 bytes) in a
    // tile of at most 4096.
    let mut big = vec![2usize];
    big.extend([3usize; 17]);
    let random = [2, 8, 1, 13, 0, 7, 11, 9, 15, 4, 12, 5, 16, 6, 17, 10, 14, 3];
    let reversed: Vec<usize> = (0..18).rev().collect();
    for (perm, wide) in [(&reversed[..], true), (&random[..], false)] {
        let (out, dst, src) = permuted_layout(&big, perm);
        let opt = PlanOptions::default();
        let p = plan_copy(
            DST_BASE,
            &dst,
            DType::U8,
            SRC_BASE,
            &src,
            DType::U8,
            &out,
            opt,
        );
        let what = format!("u8 [2, 3^17] permuted by {perm:?}");
        let Ok(Plan::Tiled { args, .. }) = &p else {
            panic!("{what}: {p:?}");
        };
        let runs = super::tiled::side_runs(args, 1, 1);
        let threads = tiled_threads(u64::from(args.volume), false, 1, 1);
        let kind = tiled_launch_kind(args, DType::U8, DType::U8, threads, 9);
        if wide {
            assert_eq!(runs, [27, 162], "{what}");
            assert_eq!(kind, Kind::TiledEW, "{what}");
        } else {
            assert_eq!(runs, [243, 81], "{what}");
            assert!(args.volume <= 4096, "{what}: {}", args.volume);
            assert_eq!(kind, Kind::TiledE, "{what}");
        }
    }
    // The rule, on tiles of two axes with the given runs (bytes of f16, read and write; the
    // other axis of each side two runs apart): a
    // larger tile is taken where it at least doubles a run under 256 bytes, the smaller
    // tile's runs both under 1 KiB and one under 256 bytes (64 bytes for 1-byte elements).
    let tile_of = |read: u64, write: u64, size: usize| {
        let (r, w) = (read / size as u64, write / size as u64);
        let axes = [
            TiledAxis {
                len: r,
                dst: 2 * w as i64,
                src: 1,
            },
            TiledAxis {
                len: w,
                dst: 1,
                src: 2 * r as i64,
            },
        ];
        let batch = [TiledAxis {
            len: 4,
            dst: (4 * r * w) as i64,
            src: (4 * r * w) as i64,
        }];
        TiledArgs::new(
            DST_BASE,
            SRC_BASE,
            &axes,
            &[1, 0],
            &batch,
            false,
            size,
            size,
        )
        .unwrap()
    };
    let tile = |read: u64, write: u64| tile_of(read, write, 2);
    let wins = |n: (u64, u64), w: (u64, u64)| {
        let n = tile(n.0, n.1);
        let pieces = super::tiled::side_runs(&n, 2, 2);
        super::tiled::wide_tile_wins(&n, pieces, &tile(w.0, w.1), (2, 2))
    };
    let wins_b1 = |n: (u64, u64), w: (u64, u64)| {
        let n = tile_of(n.0, n.1, 1);
        let pieces = super::tiled::side_runs(&n, 1, 1);
        super::tiled::wide_tile_wins(&n, pieces, &tile_of(w.0, w.1, 1), (1, 1))
    };
    assert_eq!(super::tiled::side_runs(&tile_of(27, 54, 1), 1, 1), [27, 54]);
    assert!(wins_b1((27, 54), (27, 162)));
    assert!(wins_b1((6, 179), (42, 179)));
    assert!(
        wins_b1((125, 15), (375, 15)),
        "the other run, under 256 bytes, tripled"
    );
    assert!(wins_b1((63, 64), (126, 64)));
    assert!(
        !wins_b1((64, 64), (128, 64)),
        "the shorter run 64 bytes or more"
    );
    assert!(!wins_b1((81, 96), (81, 96)), "nothing grows");
    assert!(
        wins((128, 128), (256, 128)),
        "2-byte elements: under 256 bytes"
    );
    assert_eq!(super::tiled::side_runs(&tile(54, 108), 2, 2), [54, 108]);
    assert!(wins((54, 108), (54, 324)));
    assert!(wins((162, 100), (162, 200)));
    assert!(wins((24, 238), (120, 238)));
    assert!(!wins((96, 170), (168, 170)), "less than doubled");
    assert!(!wins((112, 138), (152, 138)), "less than doubled");
    assert!(!wins((12, 1030), (24, 1030)), "a run of 1 KiB or more");
    assert!(!wins((54, 108), (54, 108)), "nothing grows");
    // One axis, a run of 600 bytes on both sides, doubled: both runs 256 bytes or more.
    let one = |run: u64| {
        let axes = [TiledAxis {
            len: run / 2,
            dst: 1,
            src: 1,
        }];
        TiledArgs::new(DST_BASE, SRC_BASE, &axes, &[0], &[], false, 2, 2).unwrap()
    };
    let wins_one = |n: u64, w: u64| {
        let n = one(n);
        super::tiled::wide_tile_wins(&n, super::tiled::side_runs(&n, 2, 2), &one(w), (2, 2))
    };
    assert!(!wins_one(600, 1200));
    assert!(wins_one(200, 400));
    // Runs of the smaller tile's pieces short enough: a tile that took an axis whole on one
    // side, past 1 KiB, still gives way to a larger tile that doubles its short run.
    let (n, w) = (tile_of(1200, 40, 4), tile_of(1200, 80, 4));
    assert!(super::tiled::wide_tile_wins(&n, [256, 40], &w, (4, 4)));
    assert!(!super::tiled::wide_tile_wins(&n, [1200, 40], &w, (4, 4)));
}

/// A tiled launch lists its rests that the tiled kernels take: f16 `[5, 7, 11, 13, 17, 19]`
/// written in the order `[5, 3, 1, 4, 2, 0]` takes pieces of axes of prime extents and leaves
/// one tiled rest; the two launches cover every element. A contiguous copy takes no tiled
/// kernel.
#[cfg(feature = "internals")]
#[test]
fn tiled_launches_list_their_tiled_rests() {
    let shape = [5usize, 7, 11, 13, 17, 19];
    let (out, dst, src) = permuted_layout(&shape, &[5, 3, 1, 4, 2, 0]);
    let f16 = DType::F16;
    let l = crate::internals::tiled_launch(0, &dst, f16, 1 << 40, &src, f16, &out, 0)
        .unwrap()
        .expect("a tiled plan");
    assert!(l.has_rest() && l.untiled_rests == 0, "{l:?}");
    assert_eq!(l.rests.len(), 1);
    let covered = |x: &crate::internals::TiledLaunch| u64::from(x.tiles) * u64::from(x.args.volume);
    let n: usize = shape.iter().product();
    assert_eq!(covered(&l) + covered(&l.rests[0]), n as u64);
    assert!(l.rests[0].rests.is_empty() && !l.rests[0].has_rest());
    let (n, c, _) = permuted_layout(&[64, 64], &[0, 1]);
    let none = crate::internals::tiled_launch(0, &c, f16, 1 << 40, &c, f16, &n, 0);
    assert!(
        none.unwrap().is_none(),
        "a contiguous copy takes no tiled kernel"
    );
}

/// An element-wise tile of elements of 2 bytes or more takes a whole axis where a piece of it
/// would leave a rest whose runs are shorter than a line: `[2, 3^17]` under the `rank` bench's
/// second random permutation merges two axes of 3 into one of 9, which a piece of 8 would cut
/// (its ninth to a rest of runs of 9 elements); f16 and f32 tile all of it in one launch of
/// runs no shorter. u8 keeps the piece and the rest (its whole-axis tile ran slower).
#[cfg(feature = "internals")]
#[test]
fn element_wise_tiles_take_an_axis_whole_rather_than_leave_a_rest() {
    let mut shape = vec![2usize];
    shape.extend([3usize; 17]);
    let perm = [9, 6, 16, 3, 1, 14, 15, 17, 13, 5, 8, 2, 4, 12, 0, 10, 11, 7];
    let (out, dst, src) = permuted_layout(&shape, &perm);
    for t in [DType::U8, DType::F16, DType::F32] {
        let l = crate::internals::tiled_launch(0, &dst, t, 1 << 40, &src, t, &out, 0)
            .unwrap()
            .expect("a tiled plan");
        assert!(l.kernel.starts_with("copy_tiled_e"), "{t:?}: {}", l.kernel);
        let r = l.args.tile_rank as usize;
        let lens: Vec<u32> = l.args.read[..r].iter().map(|a| a.len).collect();
        let covered = u64::from(l.tiles) * u64::from(l.args.volume);
        if t == DType::U8 {
            assert!(l.has_rest() && lens.contains(&8), "{t:?}: {lens:?}");
            continue;
        }
        assert!(!l.has_rest(), "{t:?}: {} rests", l.rests.len());
        assert_eq!(covered, 2 * 3u64.pow(17), "{t:?}");
        // Every tile axis is whole: its extent is one of the merged axes' (3, 9 or 2).
        assert!(
            lens.iter().all(|n| [2, 3, 9].contains(n)),
            "{t:?}: {lens:?}"
        );
    }
}

/// The copy of a contiguous `[rows, c]` of `t` into the column slice `[.., ..c]` of a
/// `[rows, c + 1]` destination, planned with `opt`.
fn column_slice_case(rows: usize, c: usize, t: DType, opt: PlanOptions) -> Case {
    let mut dst = standard_spec(2);
    dst.pads = vec![0, 1];
    Case {
        shape: vec![rows, c],
        dst,
        src: standard_spec(2),
        bcast: vec![false; 2],
        from: t,
        to: t,
        seed: 0x511ce ^ (rows * c) as u64,
        opt,
    }
}

/// Rows copied into a column slice beside an axis that no tile holds whole (the tiled
/// planner's `small_tiles_take_a_piece_of_an_axis_that_no_tile_holds`), steered to the tiled
/// kernels: tiles of a piece of the rows (f64 rows of 33 elements, both runs complete with the
/// row alone; u8 rows of 100 elements, a prime count of rows, a rest), through the interpreter.
#[test]
#[cfg_attr(
    miri,
    ignore = "copies of 135,000 and 821,000 elements through the interpreter, minutes under Miri; the planner has no unsafe code and copy_and_cast_plans_match_reference interprets plans under Miri"
)]
fn rows_beside_an_axis_that_no_tile_holds_take_pieces_of_it() {
    for (rows, c, t) in [(4099usize, 33usize, DType::F64), (8209, 100, DType::U8)] {
        let opt = PlanOptions {
            prefer_tiled: true,
            ..PlanOptions::default()
        };
        let case = column_slice_case(rows, c, t, opt);
        let o = operands(&case);
        let p = case_plan(&case, &o).unwrap();
        let Plan::Tiled { args, .. } = &p else {
            panic!("{t} rows of {c}: {}", p.path());
        };
        assert_eq!(args.tile_rank, 2, "{t} rows of {c}: {p:?}");
        assert!(args.volume as usize >= 20 * c, "{t} rows of {c}: {p:?}");
        check_copy(&case).unwrap();
    }
}

/// Contiguous rows of 1- and 2-byte elements written into a column slice `x[.., ..c]`
/// (`TILED_SLICE_ROW_BYTES`): rows of 24 to 255 bytes, in copies of 1 MiB or more, take the
/// tiled kernels; shorter rows, smaller copies and wider elements keep their paths. The tiled
/// plans copy right through the interpreter.
#[test]
#[cfg_attr(
    miri,
    ignore = "five copies of 1 MiB through the interpreter, minutes under Miri; the planner has no unsafe code and copy_and_cast_plans_match_reference interprets plans under Miri"
)]
fn short_rows_written_into_a_column_slice_take_the_tiled_kernels() {
    let case = |rows, c, t| column_slice_case(rows, c, t, PlanOptions::default());
    let path = |c: &Case| case_plan(c, &operands(c)).unwrap().kernel_path();
    let mib: usize = 1 << 20;
    for (c, t) in [
        (24, DType::U8),
        (100, DType::U8),
        (255, DType::U8),
        (12, DType::F16),
        (48, DType::U16),
    ] {
        let k = case(mib.div_ceil(c * t.size()) + 3, c, t);
        assert!(
            path(&k).starts_with("tiled_e"),
            "{t} rows of {c}: {}",
            path(&k)
        );
        check_copy(&k).unwrap();
    }
    for (c, t, want) in [
        (20, DType::U8, "strided32"),
        (9, DType::F16, "strided32"),
        (20, DType::F32, "rows_scatter"),
    ] {
        let k = case(mib.div_ceil(c * t.size()) + 3, c, t);
        assert_eq!(path(&k), want, "{t} rows of {c}");
    }
    // Under 1 MiB: the strided kernel.
    assert_eq!(path(&case(1000, 100, DType::U8)), "strided32");
    // A slice of three axes, rows of 100 beside a prime count of them (8209, more than a
    // tile holds) and 300 of those: tiles of a piece of the 8209 (planned only: 246 M
    // elements).
    let mut k = case(8209, 100, DType::U8);
    k.shape = vec![300, 8209, 100];
    k.dst = standard_spec(3);
    k.dst.pads = vec![0, 1, 1];
    k.src = standard_spec(3);
    k.bcast = vec![false; 3];
    let p = case_plan(&k, &operands(&k)).unwrap();
    let Plan::Tiled { args, .. } = &p else {
        panic!("three axes: {}", p.path());
    };
    assert!(args.volume >= 2000, "three axes: {p:?}");
    // Tiles of a single row (4093 rows, which a tile could hold whole but not beside the
    // row), and of the row and an axis of 3 (a narrow tile): the strided kernel.
    for shape in [vec![300, 4093, 100], vec![3, 8209, 100]] {
        k.shape = shape;
        assert_eq!(path(&k), "strided32", "{:?}", k.shape);
    }
    // A source that does not join the rows (read from a column slice too): not this rule's.
    let mut k = case(mib.div_ceil(100) + 3, 100, DType::U8);
    k.src.pads = vec![0, 1];
    assert!(!path(&k).starts_with("tiled"), "{}", path(&k));
}
