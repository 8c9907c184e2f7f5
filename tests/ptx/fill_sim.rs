//! Runs the row fill kernels (`fill_rows_bN`) through the PTX interpreter
//! (`tools/ptxsim_tiled.py` over `tools/ptxsim_wide.py`) on fills that devspan's planner gives
//! them: rows of a matrix at a pitch (rows in order and in reverse order), boxes of a 3-D array
//! (two outer axes, one of them reversed), rows just long enough for the kernel and rows of
//! several thousand elements, for both element sizes (1 and 2 bytes). Each case's array starts
//! on a 16-byte boundary and one and three elements past one; the view starts inside it, on
//! some rows at a 16-byte boundary (whole vectors from the row's first element) and on others
//! after a head that the kernel stores one element at a time. Some cases run grids of more than one block
//! along rows, some over rows. The whole array behind the view is poisoned and mapped: each
//! case's array must equal a reference byte for byte (the value at the view's elements, the
//! poison between its rows), every store must be aligned and inside the array, and the kernel
//! may load nothing from global memory (nothing else is mapped).
//!
//! The sample runs two cases; the full check runs all of them. Needs Python 3, like
//! [`crate::ptx_sim`].

use std::path::Path;

use crate::tiled_sim::{
    case_line, random_bytes, run_cases, standard, with_sim_dir, write_launch_case,
};
use crate::{Check, Out};

const SAMPLE: [&str; 2] = ["pitch/7x70+0+9/b1/m1", "box/3x4x40+0+2+5/b2/m0"];

pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "fill_sim::sample_in_a_ptx_interpreter",
            full: false,
            available: crate::ptx_sim::available,
            require_var: "DEVSPAN_REQUIRE_PTXSIM",
            run: |out| run(out, true),
        },
        Check {
            name: "fill_sim::row_fills_write_every_element_in_a_ptx_interpreter",
            full: true,
            available: crate::ptx_sim::available,
            require_var: "DEVSPAN_REQUIRE_PTXSIM",
            run: |out| run(out, false),
        },
    ]
}

/// One fill: a view of `shape` (taking every `step`-th element along the last axis) into a
/// standard-layout array of `shape` (the last axis `step` times longer) plus `pad` elements
/// along each axis (the view starts at element `start` of each padded axis), read backwards
/// along `flip`, of `size`-byte elements, the array starting `mis` elements past a 16-byte
/// boundary.
struct Layout {
    name: String,
    shape: Vec<usize>,
    pad: Vec<usize>,
    start: usize,
    step: usize,
    flip: Vec<usize>,
    size: usize,
    mis: u64,
}

fn layouts() -> Vec<Layout> {
    type Shape = (
        &'static str,
        &'static [usize],
        &'static [usize],
        usize,
        &'static [usize],
    );
    let shapes: [Shape; 9] = [
        ("pitch", &[7, 70], &[0, 9], 1, &[]),
        ("pitch", &[5, 129], &[1, 3], 1, &[0]),
        // Many short rows (grids of more than one block over rows).
        ("pitch", &[300, 64], &[0, 1], 1, &[]),
        // Long rows (grids of more than one block along rows; two outer axes, so that the
        // driver's 2-D memset does not take them).
        ("box", &[2, 2, 9000], &[0, 1, 5], 1, &[0]),
        ("box", &[3, 4, 40], &[0, 2, 5], 1, &[]),
        ("box", &[2, 3, 100], &[1, 1, 3], 1, &[1]),
        ("box", &[3, 2, 33], &[0, 0, 1], 1, &[0, 1]),
        // Rows of 64 and 96 bytes (1-byte elements) at a pitch of 128 bytes from the array's
        // first element: whole vectors on every row where the array is aligned.
        ("rows", &[40, 64], &[0, 64], 0, &[]),
        ("rows", &[9, 96], &[0, 32], 0, &[0]),
    ];
    // One strided axis (the one-axis strided kernel), for every element size: every second,
    // third and fifth element, also read backwards, and a column of a matrix (its other axis
    // of one element merges away). (name, shape, pad, start, flip, step)
    type Strided = (
        &'static str,
        &'static [usize],
        &'static [usize],
        usize,
        &'static [usize],
        usize,
    );
    let strided: [Strided; 5] = [
        ("step", &[1000], &[3], 1, &[], 2),
        ("step", &[701], &[0], 0, &[], 3),
        ("step", &[4000], &[1], 1, &[0], 2),
        ("step", &[333], &[2], 2, &[0], 5),
        ("column", &[300, 1], &[0, 6], 2, &[], 1),
    ];
    let rows = shapes
        .iter()
        .map(|&(n, s, p, st, f)| (n, s, p, st, f, 1, &[1usize, 2][..]));
    let steps = strided
        .iter()
        .map(|&(n, s, p, st, f, k)| (n, s, p, st, f, k, &[1usize, 2, 4, 8][..]));
    let mut all = Vec::new();
    for (name, shape, pad, start, flip, step, sizes) in rows.chain(steps) {
        for &size in sizes {
            // Rows of the row layouts shorter than 64 bytes go to the strided kernel.
            let row_layout = sizes.len() == 2;
            if row_layout && shape[shape.len() - 1] * size < 64 {
                continue;
            }
            for mis in [0u64, 1, 3] {
                let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
                let pads: Vec<String> = pad.iter().map(|p| p.to_string()).collect();
                all.push(Layout {
                    name: format!(
                        "{name}/{}+{}/b{size}/m{mis}",
                        dims.join("x"),
                        pads.join("+")
                    ),
                    shape: shape.to_vec(),
                    pad: pad.to_vec(),
                    start,
                    step,
                    flip: flip.to_vec(),
                    size,
                    mis,
                });
            }
        }
    }
    all
}

/// A written case: its file and the launcher's grid.
type Written = (String, (u32, u32));

/// Writes the case file of `l` (and its module's PTX) into `dir`: `Some((file, grid))`, or
/// `None` if the planner gives it to another path.
fn write_case(dir: &Path, l: &Layout, seed: u64) -> Result<Option<Written>, String> {
    const DST: u64 = 0x10_0000;
    let size = l.size;
    let last = l.shape.len() - 1;
    let mut array: Vec<usize> = l.shape.iter().zip(&l.pad).map(|(s, p)| s + p).collect();
    array[last] = l.shape[last] * l.step + l.pad[last];
    // The array's strides (for where the view starts) and the view's steps through it.
    let element = standard(&array);
    let mut astrides = element.clone();
    astrides[last] *= l.step as isize;
    // Element offsets in the array: the view starts at `l.start` along padded axes, and along
    // a flipped axis at its last element, stepping backwards.
    let mut strides = astrides.clone();
    let mut off = 0isize;
    for k in 0..l.shape.len() {
        let start = if l.pad[k] > 0 { l.start as isize } else { 0 };
        off += start * element[k];
        if l.flip.contains(&k) {
            off += (l.shape[k] as isize - 1) * astrides[k];
            strides[k] = -astrides[k];
        }
    }
    let base = DST + l.mis * size as u64;
    // A value none of whose bytes is the poison (0xA5).
    let value: Vec<u8> = random_bytes(seed, 8)
        .into_iter()
        .map(|b| if b == 0xA5 { 0x5A } else { b })
        .collect();
    let bits =
        u64::from_le_bytes(value.clone().try_into().unwrap()) & (u64::MAX >> (64 - 8 * size));
    let e0 = base + (off * size as isize) as u64;
    let launch = devspan::internals::fill_launch(e0, &strides, size, &l.shape, bits)
        .map_err(|e| format!("{}: {e}", l.name))?;
    let Some(launch) = launch else {
        return Ok(None);
    };
    let bytes = array.iter().product::<usize>() * size;
    let mut expect = vec![0xA5u8; bytes];
    let n: usize = l.shape.iter().product();
    for i in 0..n {
        let mut rest = i;
        let mut e = off;
        for k in (0..l.shape.len()).rev() {
            e += (rest % l.shape[k]) as isize * strides[k];
            rest /= l.shape[k];
        }
        let at = e as usize * size;
        expect[at..at + size].copy_from_slice(&value[..size]);
    }
    let file = write_launch_case(dir, &l.name, &launch, &[], base, &expect)?;
    Ok(Some((file, launch.grid)))
}

fn run(out: &Out, sample: bool) -> Result<(), String> {
    with_sim_dir("fill", |dir| run_in(out, dir, sample))
}

fn run_in(out: &Out, dir: &Path, sample: bool) -> Result<(), String> {
    let mut files = Vec::new();
    let mut grids = Vec::new();
    let mut other = Vec::new();
    let all = layouts();
    for (i, l) in all.iter().enumerate() {
        if sample && !SAMPLE.contains(&l.name.as_str()) {
            continue;
        }
        match write_case(dir, l, 0xf111 + i as u64)? {
            Some((f, g)) => {
                files.push(f);
                grids.push(g);
            }
            None => other.push(l.name.clone()),
        }
    }
    if !other.is_empty() {
        return Err(format!(
            "not planned to the row or one-axis strided fill kernels: {other:?}"
        ));
    }
    if sample && files.len() != SAMPLE.len() {
        return Err(format!("sample cases found: {}", files.len()));
    }
    let both = grids.iter().any(|g| g.0 > 1) && grids.iter().any(|g| g.1 > 1);
    if !sample && !both {
        return Err(format!(
            "grids {grids:?}: none of more than one block along rows, or over rows"
        ));
    }
    let lines = run_cases(dir, &files)?;
    // Cases of the row kernels whose stores are fewer than their elements stored 16-byte
    // vectors: some of each element size must. The one-axis strided kernel takes the strided
    // cases of every element size.
    let mut vectors = [0usize; 2];
    let mut strided = [0usize; 4];
    for line in &lines {
        out.detail(line);
        let (name, kernel, stores) = case_line(line);
        if let Some(size) = kernel.strip_prefix("fill_strided1_b") {
            let size: usize = size.parse().map_err(|_| format!("kernel {kernel}"))?;
            strided[size.trailing_zeros() as usize] += 1;
            continue;
        }
        let size: Option<usize> = kernel.rsplit("_b").next().and_then(|x| x.parse().ok());
        if let (Some(l), Some(stores), Some(size)) =
            (all.iter().find(|l| l.name == name), stores, size)
            && stores < l.shape.iter().product::<usize>()
        {
            vectors[size.trailing_zeros() as usize] += 1;
        }
    }
    if !sample && (vectors.contains(&0) || strided.contains(&0)) {
        return Err(format!(
            "row cases that stored vectors, by element size 1 and 2: {vectors:?}; one-axis \
             strided cases by element size 1, 2, 4 and 8: {strided:?}"
        ));
    }
    out.summary(&format!(
        "ptx_sim: {} row-fill and one-axis strided fill interpreter cases passed{}",
        lines.len(),
        if sample { " (sample)" } else { "" }
    ));
    Ok(())
}
