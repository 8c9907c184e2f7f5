//! Runs the reversed row kernels (`copy_rows_rev_bN`, `copy_rows_rev3_bN`, ...) through the PTX
//! interpreter (`tools/ptxsim_tiled.py` over `tools/ptxsim_wide.py`) on copies that devspan's
//! planner gives them: reversed vectors, images flipped left-right (every row reversed; with 4
//! channels last, runs of channels reversed as one element; with 3 or 6 channels last, runs of
//! 3 elements reversed, each in order), flipped both ways, pairs swapped and channels last
//! reversed (`copy_runs_revR_bN`: runs in order, each reversed), and rows read forwards from
//! a column slice, off the destination's alignment (`copy_rows_shifted_bN`), for every element size, with
//! operands whose rows line up as 16-byte vectors (from the first element, or after a head)
//! and operands a unit off (vectors shifted out of two aligned blocks), every block of the
//! launcher's grid (some of more than one block along rows, some over rows); some cases of
//! every element size must move vectors, and each kernel of groups of three vectors must move
//! rows through shared memory (teams of whole warps) both with its groups' source bytes on a
//! 16-byte boundary and off it. Each case's destination must equal a reference byte
//! for byte (poisoned first); every access must be aligned and inside the operands' regions,
//! which start and end where the operands do.
//!
//! The sample runs two cases; the full check runs all of them. Needs Python 3, like
//! [`crate::ptx_sim`].

use std::path::Path;

use crate::tiled_sim::{
    SimCase, bits_of_size, case_line, covered_regions, random_bytes, run_cases, standard,
    view_offsets, with_sim_dir, write_sim_case,
};
use crate::{Check, Out};

const SAMPLE: [&str; 2] = ["vec/320/b1/h", "chw_w/3x4x40/b2/s"];

pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "rows_sim::sample_in_a_ptx_interpreter",
            full: false,
            available: crate::ptx_sim::available,
            require_var: "DEVSPAN_REQUIRE_PTXSIM",
            run: |out| run(out, true),
        },
        Check {
            name: "rows_sim::reversed_rows_copy_every_element_in_a_ptx_interpreter",
            full: true,
            available: crate::ptx_sim::available,
            require_var: "DEVSPAN_REQUIRE_PTXSIM",
            run: |out| run(out, false),
        },
    ]
}

/// One copy: a standard-layout destination of `shape`, a source of `shape` read backwards
/// along `flip` from a standard-layout array of `shape` (or, with `pad` = `(axis, extra)`, one
/// `extra` elements longer along `axis`, so that the source's rows lie apart), elements of
/// `size` bytes; the destination's region starts `dst_mis` bytes past a 16-byte boundary and
/// the source's array ends `end_mis` bytes past one (a reversed row's vectors line up where
/// the two add up to a multiple of 16). Only the bytes of the source the view covers are
/// mapped: a load of a byte between two rows, or past either end, fails.
struct Layout {
    name: String,
    shape: Vec<usize>,
    flip: Vec<usize>,
    pad: Option<(usize, usize)>,
    size: usize,
    dst_mis: u64,
    end_mis: u64,
}

fn layouts() -> Vec<Layout> {
    let mut all = Vec::new();
    type Pad = Option<(usize, usize)>;
    let shapes: [(&str, &[usize], &[usize], Pad); 28] = [
        ("vec", &[300], &[0], None),
        ("vec", &[320], &[0], None),
        // Grids of more than one block: along a row (x), over rows (y).
        ("vec", &[9000], &[0], None),
        ("rows_w", &[300, 16], &[1], None),
        ("chw_w", &[3, 4, 40], &[2], None),
        ("chw_w", &[2, 3, 64], &[2], None),
        ("chw_hw", &[2, 3, 24], &[1, 2], None),
        ("nchw_nw", &[2, 2, 3, 32], &[0, 3], None),
        ("hwc4_w", &[3, 20, 4], &[1], None),
        // Runs of 3 elements (and of 3 pairs of bytes, moved as 2-byte elements).
        ("hwc3_w", &[3, 100, 3], &[1], None),
        ("hwc3_w", &[2, 9000, 3], &[1], None),
        ("hwc3_hw", &[4, 30, 3], &[0, 1], None),
        ("hwc6_w", &[2, 70, 6], &[1], None),
        // Runs in order, each reversed: pairs swapped, channels reversed (RGB <-> BGR, RGBA
        // <-> ABGR), also upside down.
        ("swap", &[400, 2], &[1], None),
        ("hwc3_c", &[3, 100, 3], &[2], None),
        ("hwc3_c", &[2, 9000, 3], &[2], None),
        ("hwc3_hc", &[4, 30, 3], &[0, 2], None),
        ("hwc4_c", &[3, 40, 4], &[2], None),
        // Rows that lie apart in the source (its array longer along the row's axis): a load
        // past a row's end or below its start reads unmapped bytes.
        ("rows_w_pad", &[30, 16], &[1], Some((1, 5))),
        ("chw_w_pad", &[3, 4, 40], &[2], Some((2, 3))),
        ("hwc4_w_pad", &[3, 20, 4], &[1], Some((1, 1))),
        ("hwc3_w_pad", &[3, 40, 3], &[1], Some((1, 2))),
        ("hwc6_w_pad", &[2, 70, 6], &[1], Some((1, 2))),
        ("hwc3_c_pad", &[3, 40, 3], &[2], Some((1, 1))),
        ("swap_pad", &[4, 100, 2], &[2], Some((1, 3))),
        // Rows read forwards from a column slice (rows 1 or 3 elements apart, off the
        // destination's alignment on every row): the shifted row kernel.
        ("cols_pad", &[12, 100], &[], Some((1, 3))),
        ("cols_pad", &[3, 5, 40], &[], Some((2, 1))),
        ("cols_pad", &[2, 9000], &[], Some((1, 1))),
    ];
    for (name, shape, flip, pad) in shapes {
        for size in [1usize, 2, 4, 8] {
            // Channels last: runs of 4 channels move as one element, runs of 6 as 3 pairs, up
            // to 8 bytes, and need both operands aligned to them.
            let unit = match name.trim_end_matches("_pad") {
                "hwc4_w" => 4 * size,
                "hwc6_w" => 2 * size,
                _ => size,
            };
            // Runs of 3 (3 or 6 channels) have kernels for 1- and 2-byte units only.
            let run3 = shape[shape.len() - 1] % 3 == 0 && name.starts_with("hwc");
            if unit > 8 || run3 && unit > 2 {
                continue;
            }
            let u = unit as u64;
            let c = shape[shape.len() - 1] as u64;
            let kinds = if runs_reversed(name) {
                // Runs each reversed: of at most 16 bytes, but for runs of 3; the destination
                // on the alignment of runs of 2 and 4.
                if c != 3 && c * u > 16 {
                    continue;
                }
                let mut kinds = vec![("a", 0, 0), ("s", 0, u), ("t", 0, 3 * u % 16)];
                if c == 3 {
                    kinds.push(("d", u, 0));
                    kinds.push(("x", 3 * u % 16, 5 * u % 16));
                } else {
                    kinds.push(("r", c * u % 16, 7 * u % 16));
                }
                kinds
            } else {
                // Aligned; a destination off by a unit and a source that ends as far before a
                // boundary (vectors after a head); a source that ends a unit past one (vectors
                // shifted out of aligned blocks). Runs of 3 units: more pairs of offsets,
                // since their head depends on the destination's offset times 3's inverse.
                let mut kinds = vec![("a", 0, 0), ("h", u, (16 - u) % 16)];
                if unit == size || c % 3 == 0 {
                    kinds.push(("s", 0, u));
                }
                if c % 3 == 0 {
                    kinds.push(("d", u, 0));
                    kinds.push(("x", 3 * u % 16, 5 * u % 16));
                    kinds.push(("y", 7 * u % 16, 11 * u % 16));
                }
                kinds
            };
            for (kind, dst_mis, end_mis) in kinds {
                let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
                all.push(Layout {
                    name: format!("{name}/{}/b{size}/{kind}", dims.join("x")),
                    shape: shape.to_vec(),
                    flip: flip.to_vec(),
                    pad,
                    size,
                    dst_mis,
                    end_mis,
                });
            }
        }
    }
    all
}

/// Whether the layout named `name` reads runs in order, each backwards (its last axis, the
/// channels, read backwards), rather than rows backwards.
fn runs_reversed(name: &str) -> bool {
    let name = name.trim_end_matches("_pad");
    name == "swap" || name.ends_with("_c") || name.ends_with("_hc")
}

/// A written case: its file, the launcher's grid, its kernel, and which of its rows the
/// kernel moves through shared memory ([`staged_rows`]).
type Written = (String, (u32, u32), String, Staged);

/// The rows of a case that a kernel of groups of three vectors moves through shared memory (a
/// team of whole warps): whether some have their groups' source bytes on a 16-byte boundary,
/// and whether some have them off it (shifted out of one block more).
#[derive(Clone, Copy, Debug, Default)]
struct Staged {
    aligned: bool,
    shifted: bool,
}

/// [`Staged`] of a launch, computing each row's start and the misalignment of its groups'
/// source bytes as the kernel does.
fn staged_rows(l: &devspan::internals::RowsRevLaunch) -> Staged {
    use devspan_kernels::abi::{ROW_MAX_TEAM_SHIFT, row_rev_head};
    let mut st = Staged::default();
    let a = &l.args;
    let size = l.elem_size;
    if l.runs.group_bytes(size) != 48 || a.team_shift.min(ROW_MAX_TEAM_SHIFT) < 5 {
        return st;
    }
    for q in 0..a.rows {
        let (d, s) = a.row_offsets(q);
        let dr = a.dst.wrapping_add((d * size as i64) as u64);
        let sr = a.src.wrapping_add((s * size as i64) as u64);
        let (head, m) = row_rev_head(dr, sr, size, l.runs, a.row_len);
        // Rows with a whole warp's groups after the head.
        if (a.row_len - head) * l.runs.run_bytes(size) >= 32 * 48 {
            if m == 0 {
                st.aligned = true;
            } else {
                st.shifted = true;
            }
        }
    }
    st
}

/// Writes the case file of `l` (and its module's PTX) into `dir`: `Some((file, grid))`, or
/// `None` if the planner gives it to another kernel.
fn write_case(dir: &Path, l: &Layout, seed: u64) -> Result<Option<Written>, String> {
    const DST: u64 = 0x10_0000;
    const SRC: u64 = 0x80_0000;
    let dtype = bits_of_size(l.size);
    let size = l.size as isize;
    let n: usize = l.shape.iter().product();
    let dst = standard(&l.shape);
    let mut array = l.shape.clone();
    if let Some((axis, extra)) = l.pad {
        array[axis] += extra;
    }
    let mut src = standard(&array);
    let mut s_off = 0isize;
    for &a in &l.flip {
        s_off += (l.shape[a] as isize - 1) * src[a];
        src[a] = -src[a];
    }
    let bytes = n * l.size;
    let sbytes = array.iter().product::<usize>() * l.size;
    let dbase = DST + l.dst_mis;
    // The source's array ends `end_mis` bytes past a 16-byte boundary.
    let sbase = SRC + (l.end_mis + 16 * sbytes as u64 - sbytes as u64) % 16;
    let s0 = sbase + (s_off * size) as u64;
    let launch = devspan::internals::rows_rev_launch(dbase, &dst, s0, &src, dtype, &l.shape)
        .map_err(|e| format!("{}: {e}", l.name))?;
    let Some(launch) = launch else {
        return Ok(None);
    };
    let source = random_bytes(seed, sbytes);
    let mut expect = vec![0xA5u8; bytes];
    let mut covered = vec![false; sbytes];
    for (d, s) in view_offsets(&l.shape, &dst, &src, 0, s_off) {
        let (d, s) = ((d * size) as usize, (s * size) as usize);
        expect[d..d + l.size].copy_from_slice(&source[s..s + l.size]);
        covered[s..s + l.size].fill(true);
    }
    // The source's regions: the runs of bytes the view covers.
    let regions = covered_regions(sbase, &source, &covered);
    let staged = staged_rows(&launch);
    let (gx, gy) = (launch.grid.0.max(1), launch.grid.1.max(1));
    let file = write_sim_case(
        dir,
        &SimCase {
            name: &l.name,
            kernel: &launch.kernel,
            params: &launch.params,
            threads: launch.threads,
            grid: format!("[{gx}, {gy}]"),
            dyn_smem: 0,
            src: &regions,
            dst: dbase,
            expect: &expect,
        },
    )?;
    Ok(Some((file, launch.grid, launch.kernel, staged)))
}

fn run(out: &Out, sample: bool) -> Result<(), String> {
    with_sim_dir("rows", |dir| run_in(out, dir, sample))
}

fn run_in(out: &Out, dir: &Path, sample: bool) -> Result<(), String> {
    let mut files = Vec::new();
    let mut grids = Vec::new();
    let mut other = Vec::new();
    // Per kernel of groups of three vectors, whether cases move rows through shared memory
    // with their groups' source bytes aligned, and shifted.
    let mut staged: std::collections::BTreeMap<String, Staged> = Default::default();
    let all = layouts();
    for (i, l) in all.iter().enumerate() {
        if sample && !SAMPLE.contains(&l.name.as_str()) {
            continue;
        }
        match write_case(dir, l, 0x7e5 + i as u64)? {
            Some((f, g, kernel, st)) => {
                files.push(f);
                grids.push(g);
                if kernel.contains("_rev3_") {
                    let e = staged.entry(kernel).or_default();
                    e.aligned |= st.aligned;
                    e.shifted |= st.shifted;
                }
            }
            None => other.push(l.name.clone()),
        }
    }
    if !other.is_empty() {
        return Err(format!(
            "not planned to the reversed row kernels: {other:?}"
        ));
    }
    // Some cases run grids of more than one block on each axis.
    let wide = grids.iter().any(|g| g.0 > 1);
    let tall = grids.iter().any(|g| g.1 > 1);
    let both = wide && tall;
    if !sample && !both {
        return Err(format!(
            "grids {grids:?}: none of more than one block on each axis"
        ));
    }
    // Every kernel of groups of three vectors moves rows through shared memory, with their
    // groups' source bytes aligned and shifted.
    let unstaged: Vec<_> = staged
        .iter()
        .filter(|(_, st)| !(st.aligned && st.shifted))
        .collect();
    if !sample && (staged.len() != 4 || !unstaged.is_empty()) {
        return Err(format!(
            "kernels of groups of three vectors and their staged rows: {staged:?}"
        ));
    }
    let lines = run_cases(dir, &files)?;
    // Cases whose stores are fewer than their elements moved 16-byte vectors: some of every
    // element size must.
    let mut vectors = [0usize; 4];
    for line in &lines {
        out.detail(line);
        let (name, kernel, stores) = case_line(line);
        let size: Option<usize> = kernel.rsplit("_b").next().and_then(|x| x.parse().ok());
        if let (Some(l), Some(stores), Some(size)) =
            (all.iter().find(|l| l.name == name), stores, size)
            && stores * size < l.shape.iter().product::<usize>() * l.size
        {
            vectors[size.trailing_zeros() as usize] += 1;
        }
    }
    if !sample && vectors.contains(&0) {
        return Err(format!(
            "cases that moved vectors, by element size 1, 2, 4, 8: {vectors:?}"
        ));
    }
    out.summary(&format!(
        "ptx_sim: {} reversed-row interpreter cases passed{}",
        lines.len(),
        if sample { " (sample)" } else { "" }
    ));
    Ok(())
}
