//! Kernel argument blocks, fast division and launch geometry.
//!
//! Every structure here is `#[repr(C)]` and is passed to a kernel by value
//! as one `.param` block; field offsets are part of the kernel ABI and are
//! checked by the tests below. Extents and strides count elements; addresses
//! are byte addresses; axis 0 is the innermost axis (fastest varying in the
//! destination's iteration order). Every address must be aligned to its
//! element size.
//!
//! # Contiguous kernels
//!
//! `fill_contig_bN(dst: u64, n: u64, head: u64, value_bits: u64)`,
//! `copy_contig_bN(dst: u64, src: u64, n: u64, head: u64)` and
//! `cast_contig_S_D(dst: u64, src: u64, n: u64, head: u64)` move elements in
//! groups of `V =` [`contig_group_elems`] (fill: [`fill_group_elems`])
//! elements with 16-byte vector accesses. Elements `[0, head)` are moved one
//! at a time, then whole groups starting at element `head`, then one at a
//! time the `(n - head) % V` remaining elements. `head` must make
//! `src + head * size(S)` **and** `dst + head * size(D)` multiples of 16
//! ([`CONTIG_ALIGN`]); use [`contig_head`] / [`fill_head`], and fall back to a
//! strided kernel of rank 1 when they return `None`. A `head` larger than `n`
//! is treated as `n` (pass `head < V`). The block must be [`CONTIG_BLOCK`]
//! threads; the grid is [`contig_grid`] / [`fill_grid`] (any grid of at least
//! one block is correct; `n == 0` does nothing). `value_bits` holds the fill
//! value's bit pattern in its low `8 * N` bits. Casts to a wider type use up
//! to 32 KiB of static shared memory; these kernels need no dynamic shared memory (the
//! tiled `cp.async` kernels do: [`tiled_async_smem_bytes`](super::tiled_async_smem_bytes)).
//!
//! # Strided kernels
//!
//! `fill_strided32_bN(args: StridedArgs32, value_bits: u64)`,
//! `fill_strided64_bN(args: StridedArgs64, value_bits: u64)`,
//! `copy_strided{32,64}_bN(args)` and `cast_strided{32,64}_S_D(args)`: block
//! [`STRIDED_BLOCK`] threads, grid [`strided_grid`] (at most
//! [`STRIDED_MAX_GRID`] blocks, which the 32-bit kernels rely on).
//!
//! # Transpose kernels
//!
//! `copy_transpose_bN(args: TransposeArgs)` and
//! `cast_transpose_S_D(args: TransposeArgs)`: block [`TRANSPOSE_BLOCK`], grid
//! [`transpose_grid_sized`] (tiles of [`transpose_tile`] elements; any grid is
//! correct). Up to 16 KiB of static shared memory.
//!
//! # Permute kernels
//!
//! `copy_permute_bN(args: PermuteArgs)` and `cast_permute_S_D(args: PermuteArgs)`: see
//! [`super::permute`].
//!
//! # Row kernels
//!
//! `copy_rows_bN(args: RowArgs)` and `cast_rows_S_D(args: RowArgs)` copy
//! `rows` rows of `row_len` elements that are contiguous on both sides: block
//! [`ROW_BLOCK`] threads, split into teams of `2^team_shift` lanes (one row
//! per team at a time); grid [`row_grid`] (any grid is correct). In each row
//! the kernel computes the row's `head` with [`row_head`] from the row's two
//! start addresses, so every row whose two sides share their misalignment
//! moves whole groups of [`contig_group_elems`] elements with 16-byte vector
//! accesses on the wider side; the other rows move one element at a time.
//! Each lane moves [`row_units_per_lane`] vector units per iteration (all
//! loads before the stores) and [`ROW_SCALAR_UNROLL`] scalar elements per
//! iteration. Rows must hold at least one group for the kernels to pay off
//! (the planner's rule), but any `row_len`, including 0, is correct.
//!
//! `fill_rows_bN(args: RowArgs, value_bits: u64)` (N = 1 or 2,
//! [`FILL_ROWS_MAX_SIZE`](crate::abi::FILL_ROWS_MAX_SIZE)) stores the low N bytes of
//! `value_bits` into the same rows of the destination, with the same block, teams and grid:
//! each row's `head` from its destination alone, whole groups as aligned 16-byte stores,
//! the others one element at a time. The source fields (`src`, `src_strides`) are unused.

mod contig;
mod fast_div;
mod rows;
mod strided;
mod transpose;

pub use contig::*;
pub use fast_div::*;
pub use rows::*;
pub use strided::*;
pub use transpose::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::ParamBlock;
    use core::mem::{align_of, offset_of, size_of};

    #[test]
    fn layouts_match_the_kernels() {
        assert_eq!(size_of::<FastDiv64>(), 16);
        assert_eq!(size_of::<StridedArgs64>(), 352);
        assert_eq!(align_of::<StridedArgs64>(), 8);
        assert_eq!(offset_of!(StridedArgs64, n), 16);
        assert_eq!(offset_of!(StridedArgs64, rank), 24);
        assert_eq!(offset_of!(StridedArgs64, shape), 32);
        assert_eq!(offset_of!(StridedArgs64, div), 96);
        assert_eq!(offset_of!(StridedArgs64, dst_strides), 224);
        assert_eq!(offset_of!(StridedArgs64, src_strides), 288);

        assert_eq!(size_of::<StridedArgs32>(), 184);
        assert_eq!(align_of::<StridedArgs32>(), 8);
        assert_eq!(offset_of!(StridedArgs32, n), 16);
        assert_eq!(offset_of!(StridedArgs32, rank), 20);
        assert_eq!(offset_of!(StridedArgs32, shape), 24);
        assert_eq!(offset_of!(StridedArgs32, magic), 56);
        assert_eq!(offset_of!(StridedArgs32, shift), 88);
        assert_eq!(offset_of!(StridedArgs32, dst_strides), 120);
        assert_eq!(offset_of!(StridedArgs32, src_strides), 152);

        assert_eq!(size_of::<TransposeArgs>(), 304);
        assert_eq!(align_of::<TransposeArgs>(), 8);
        assert_eq!(offset_of!(TransposeArgs, rows), 16);
        assert_eq!(offset_of!(TransposeArgs, cols), 24);
        assert_eq!(offset_of!(TransposeArgs, dst_row_stride), 32);
        assert_eq!(offset_of!(TransposeArgs, src_col_stride), 40);
        assert_eq!(offset_of!(TransposeArgs, batch), 48);
        assert_eq!(offset_of!(TransposeArgs, batch_rank), 56);
        assert_eq!(offset_of!(TransposeArgs, batch_shape), 64);
        assert_eq!(offset_of!(TransposeArgs, batch_div), 112);
        assert_eq!(offset_of!(TransposeArgs, batch_dst_strides), 208);
        assert_eq!(offset_of!(TransposeArgs, batch_src_strides), 256);

        assert_eq!(size_of::<RowArgs>(), 320);
        assert_eq!(align_of::<RowArgs>(), 8);
        assert_eq!(offset_of!(RowArgs, row_len), 16);
        assert_eq!(offset_of!(RowArgs, rows), 24);
        assert_eq!(offset_of!(RowArgs, outer_rank), 32);
        assert_eq!(offset_of!(RowArgs, team_shift), 36);
        assert_eq!(offset_of!(RowArgs, shape), 40);
        assert_eq!(offset_of!(RowArgs, div), 96);
        assert_eq!(offset_of!(RowArgs, dst_strides), 208);
        assert_eq!(offset_of!(RowArgs, src_strides), 264);

        // The row's fields lie where they lie in `RowArgs`, so that the row kernels' frame
        // reads both blocks alike.
        assert_eq!(size_of::<RowGatherArgs>(), 368);
        assert_eq!(offset_of!(RowGatherArgs, row), 0);
        assert_eq!(offset_of!(RowGatherArgs, period), 320);
        assert_eq!(offset_of!(RowGatherArgs, period_div), 328);
        assert_eq!(offset_of!(RowGatherArgs, period_stride), 344);
        assert_eq!(offset_of!(RowGatherArgs, period_step), 352);
        assert_eq!(offset_of!(RowGatherArgs, rows_first), 360);
        for f in RowArgs::FIELDS {
            assert_eq!(RowGatherArgs::offset(f.name), f.offset, "{}", f.name);
        }
    }

    #[test]
    fn row_gather_offsets() {
        let row = RowArgs::new(0, 0, 12, &[2], &[12], &[12], 1, 4).unwrap();
        // Pixels of 3 channels read right to left: channel k of pixel p from -3 p + k.
        let a = RowGatherArgs::new(row, 3, 1, -3).unwrap();
        let got: Vec<i64> = (0..12).map(|i| a.element_offset(i)).collect();
        assert_eq!(got, [0, 1, 2, -3, -2, -1, -6, -5, -4, -9, -8, -7]);
        // Channels reversed: channel k of pixel p from 3 p - k.
        let b = RowGatherArgs::new(row, 3, -1, 3).unwrap();
        let got: Vec<i64> = (0..6).map(|i| b.element_offset(i)).collect();
        assert_eq!(got, [0, -1, -2, 3, 2, 1]);
        // A row read backwards: periods of one element.
        let c = RowGatherArgs::new(row, 1, 0, -1).unwrap();
        let got: Vec<i64> = (0..4).map(|i| c.element_offset(i)).collect();
        assert_eq!(got, [0, -1, -2, -3]);
        assert!(RowGatherArgs::new(row, 0, 1, 1).is_none());
        assert!(RowGatherArgs::new(row, ROW_GATHER_MAX_PERIOD + 1, 1, 1).is_none());
        assert!(RowGatherArgs::new(row, ROW_GATHER_MAX_PERIOD, 1, 1).is_some());
    }

    #[test]
    fn row_heads_align_both_sides() {
        for s in [1usize, 2, 4, 8] {
            for d in [1usize, 2, 4, 8] {
                let v = contig_group_elems(s, d) as u64;
                for sa in (0..64u64).filter(|a| a % s as u64 == 0) {
                    for da in (0..64u64).filter(|a| a % d as u64 == 0) {
                        let (src, dst) = (1 << 20 | sa, 1 << 30 | da);
                        let h = row_head(dst, d, src, s, 1000);
                        // The same head as the contiguous kernels, or the whole row.
                        assert_eq!(h, contig_head(src, s, dst, d).unwrap_or(1000));
                        assert!(h < v || h == 1000);
                        assert_eq!(row_head(dst, d, src, s, 3), h.min(3));
                    }
                }
            }
        }
    }

    #[test]
    fn row_offsets_and_geometry() {
        let a = RowArgs::new(0, 0, 10, &[3, 5, 2], &[10, 30, 150], &[64, -7, 0], 4, 4).unwrap();
        assert_eq!(a.rows, 30);
        let mut q = 0;
        for k in 0..2i64 {
            for j in 0..5i64 {
                for i in 0..3i64 {
                    assert_eq!(
                        a.row_offsets(q),
                        (10 * i + 30 * j + 150 * k, 64 * i - 7 * j)
                    );
                    q += 1;
                }
            }
        }
        assert!(RowArgs::new(0, 0, 1, &[], &[], &[], 4, 4).is_none());
        assert!(RowArgs::new(0, 0, 1, &[2; 8], &[1; 8], &[1; 8], 4, 4).is_none());
        assert!(RowArgs::new(0, 0, 1, &[1 << 62, 4], &[1, 1], &[1, 1], 4, 4).is_none());
        // Units per lane and iteration: 2, or one group of a 4x or 8x cast.
        assert_eq!(row_units_per_lane(4, 4), 2);
        assert_eq!(row_units_per_lane(4, 2), 2);
        assert_eq!(row_units_per_lane(1, 4), 4);
        assert_eq!(row_units_per_lane(1, 8), 8);
        assert_eq!(row_units_per_lane(8, 1), 8);
        // Team sizes: one pass of the team covers a row's units, 1..=256 lanes.
        assert_eq!(row_team_shift(8, 4, 4), 0);
        assert_eq!(row_team_shift(1, 4, 4), 0);
        assert_eq!(row_team_shift(100, 4, 4), 4);
        assert_eq!(row_team_shift(8000, 4, 4), 8);
        assert_eq!(row_team_shift(1 << 40, 1, 8), 8);
        assert_eq!(row_team_shift(32, 1, 8), 1);
        assert_eq!(row_team_shift(64, 4, 2), 3);
        // Grid: the 8000 x 8000 f32 block, 2000 units per row, 256 lanes of 2 units.
        let b = RowArgs::new(0, 0, 8000, &[8000], &[8000], &[16384], 4, 4).unwrap();
        assert_eq!(row_grid(&b, 4, 4), (4, 8000));
        // Short rows: one lane per row, 256 rows per block.
        let c = RowArgs::new(0, 0, 8, &[1000], &[8], &[8], 4, 4).unwrap();
        assert_eq!(c.team_shift, 0);
        assert_eq!(row_grid(&c, 4, 4), (1, 4));
        let e = RowArgs::new(0, 0, 8, &[1 << 40], &[8], &[8], 4, 4).unwrap();
        assert_eq!(row_grid(&e, 4, 4), (1, 65535));
        let z = RowArgs::new(0, 0, 0, &[4], &[8], &[8], 4, 4).unwrap();
        assert_eq!(row_grid(&z, 4, 4), (0, 0));
        // Gathered rows: rows over y, or over x with rows_first (pieces then over y, clamped).
        let g = RowGatherArgs::new(b, 1, 0, 3).unwrap();
        assert_eq!(gather_grid(&g, 4, 4), (4, 8000));
        assert_eq!(gather_grid(&g.with_rows_first(true), 4, 4), (8000, 4));
        let long = RowArgs::new(0, 0, 1 << 40, &[3], &[1 << 40], &[1], 1, 4).unwrap();
        let g = RowGatherArgs::new(long, 1, 0, 3).unwrap();
        assert_eq!(gather_grid(&g, 1, 4), (1 << 28, 3));
        assert_eq!(gather_grid(&g.with_rows_first(true), 1, 4), (3, 65535));
        let g = RowGatherArgs::new(c, 1, 0, 3)
            .unwrap()
            .with_rows_first(true);
        assert_eq!(gather_grid(&g, 4, 4), (4, 1));
        let g = RowGatherArgs::new(z, 1, 0, 3)
            .unwrap()
            .with_rows_first(true);
        assert_eq!(gather_grid(&g, 4, 4), (0, 0));
    }

    fn check64(d: u64, n: u64) {
        let f = FastDiv64::new(d);
        assert_eq!(f.div(n), n / d.max(1), "{n} / {d}");
    }

    #[test]
    fn fast_div64_is_exact() {
        let mut divisors: Vec<u64> = (1..=1100).collect();
        for s in 1..64 {
            let p = 1u64 << s;
            divisors.extend([p - 1, p, p + 1, p / 3 + 1]);
        }
        divisors.extend([
            (1 << 63) - 1,
            1 << 63,
            u64::MAX,
            u64::MAX - 1,
            1_000_000_007,
            6_700_417,
        ]);
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for &d in &divisors {
            for n in [
                0,
                1,
                2,
                d - 1,
                d,
                d.wrapping_add(1),
                d.wrapping_mul(2).wrapping_sub(1),
                d.wrapping_mul(2),
                (1 << 63) - 1,
                (1 << 63) - 2,
            ] {
                if n < 1 << 63 {
                    check64(d, n);
                }
            }
            for _ in 0..200 {
                let n = rnd() >> 1;
                check64(d, n);
                check64(d, n >> (rnd() % 63));
                let m = (n / d).wrapping_mul(d);
                if m < 1 << 63 {
                    check64(d, m);
                    check64(d, m.wrapping_sub(1) & ((1 << 63) - 1));
                }
            }
        }
        assert_eq!(
            FastDiv64::new(1),
            FastDiv64 {
                magic: 0,
                shift: 0,
                _pad: 0
            }
        );
        assert_eq!(FastDiv64::new(0), FastDiv64::new(1));
    }

    #[test]
    fn fast_div32_is_exact() {
        let mut state = 0x2545_F491u32;
        let mut rnd = move || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state
        };
        let mut divisors: Vec<u32> = (1..=3000).collect();
        for s in 1..32 {
            let p = 1u32 << s;
            divisors.extend([p - 1, p, p + 1]);
            // A power of two: no division, as the general formula gives.
            let general = ((1u64 << 32) * ((1u64 << s) - u64::from(p)) / u64::from(p) + 1) as u32;
            assert_eq!(fast_div32(p), (general, s), "{p}");
        }
        divisors.extend([u32::MAX, (1 << 31) + 1, 1 << 31]);
        for &d in &divisors {
            let (m, s) = fast_div32(d);
            let mut ns = vec![0, 1, d - 1, d, d.wrapping_add(1), (1 << 31) - 1];
            ns.extend((0..300).map(|_| rnd() >> 1));
            for n in ns {
                if n < 1 << 31 {
                    assert_eq!(fast_div32_apply(n, m, s), n / d, "{n} / {d}");
                }
            }
        }
        // Exhaustive over n for a few awkward divisors.
        for d in [3u32, 7, 641, 6_700_417, 2_147_483_647] {
            let (m, s) = fast_div32(d);
            let mut n = 0u32;
            while n < 1 << 31 {
                assert_eq!(fast_div32_apply(n, m, s), n / d, "{n} / {d}");
                n += 4099;
            }
        }
        assert_eq!(fast_div32(1), (0, 0));
    }

    #[test]
    fn heads_align_both_sides() {
        for s in [1usize, 2, 4, 8] {
            for d in [1usize, 2, 4, 8] {
                let v = contig_group_elems(s, d) as u64;
                assert_eq!(v * s.min(d) as u64, 16);
                for sa in (0..64u64).filter(|a| a % s as u64 == 0) {
                    for da in (0..64u64).filter(|a| a % d as u64 == 0) {
                        match contig_head(1 << 20 | sa, s, 1 << 30 | da, d) {
                            Some(h) => {
                                assert!(h < v);
                                assert_eq!((sa + h * s as u64) % 16, 0);
                                assert_eq!((da + h * d as u64) % 16, 0);
                            }
                            None => {
                                assert!((0..64).all(|h| (sa + h * s as u64) % 16 != 0
                                    || (da + h * d as u64) % 16 != 0));
                            }
                        }
                    }
                }
            }
            for a in (0..64u64).filter(|a| a % s as u64 == 0) {
                let h = fill_head(a, s).unwrap();
                assert_eq!((a + h * s as u64) % 16, 0);
            }
        }
        assert_eq!(fill_head(3, 2), None);
    }

    #[test]
    fn geometry() {
        assert_eq!(contig_groups_per_thread(4, 4), 1);
        assert_eq!(contig_groups_per_thread(1, 8), 1);
        assert_eq!(contig_grid(0, 0, 4, 4), 0);
        assert_eq!(contig_grid(3, 2, 4, 4), 1);
        // 2^40 elements of 4 bytes: 2^38 groups, 256 per block.
        assert_eq!(contig_grid(1 << 40, 0, 4, 4), 1 << 30);
        assert_eq!(contig_grid(4 * 256 + 1, 0, 4, 4), 1);
        assert_eq!(contig_grid(4 * 256 * 4 + 4, 0, 4, 4), 5);
        assert_eq!(contig_grid(1 << 20, 0, 1, 8), 256);
        assert_eq!(fill_grid(1 << 20, 0, 4), 256);
        assert_eq!(fill_grid(17, 1, 1), 1);
        assert_eq!(strided_grid(0), 0);
        assert_eq!(strided_grid(1025), 2);
        assert_eq!(strided_grid(u64::MAX >> 1), STRIDED_MAX_GRID);
        assert_eq!(transpose_grid(33, 65, 3), (3, 2, 3));
        assert_eq!(transpose_grid(0, 65, 3), (0, 0, 0));
        assert_eq!(transpose_grid_sized(300, 129, 1, 1, 1), (2, 3, 1));
        assert_eq!(transpose_grid_sized(300, 129, 1, 2, 2), (3, 5, 1));
        assert_eq!(transpose_grid_sized(300, 129, 1, 1, 2), (5, 10, 1));
        assert_eq!(transpose_tile(4, 4), 32);
    }

    #[test]
    fn strided_offsets_agree() {
        let a = StridedArgs64::new(0, 0, &[3, 5, 7, 2], &[70, 14, 2, 1], &[1, -3, 15, 0]).unwrap();
        let b = StridedArgs32::from_args64(&a).unwrap();
        let mut i = 0u64;
        for l in 0..2i64 {
            for k in 0..7i64 {
                for j in 0..5i64 {
                    for m in 0..3i64 {
                        let want = (m * 70 + j * 14 + k * 2 + l, m - 3 * j + 15 * k);
                        assert_eq!(a.offsets(i), want);
                        assert_eq!(b.offsets(i as u32), (want.0 as i32, want.1 as i32));
                        i += 1;
                    }
                }
            }
        }
        assert_eq!(a.n, i);
        let big =
            StridedArgs64::new(0, 0, &[1 << 20, 1 << 12], &[1, 1 << 20], &[1 << 12, 1]).unwrap();
        assert!(StridedArgs32::from_args64(&big).is_none());
        let neg = StridedArgs64::new(
            0,
            0,
            &[1 << 16, (1 << 15) - 1],
            &[-1, -(1 << 16)],
            &[1, 1 << 16],
        )
        .unwrap();
        assert!(StridedArgs32::from_args64(&neg).is_some());
        assert!(StridedArgs64::new(0, 0, &[], &[], &[]).is_none());
        assert!(StridedArgs64::new(0, 0, &[1 << 62, 4], &[1, 1], &[1, 1]).is_none());
    }
}
