//! Index decomposition for the strided and transpose kernels: the parameter layouts of the
//! argument blocks with per-axis arrays ([`Layout`]) and the code that splits linear indices
//! over their axes.

use std::mem::{offset_of, size_of};

use super::code::{Class, Code, Gen};
use crate::abi::{
    FastDiv64, MAX_BATCH_RANK, MAX_RANK, MAX_ROW_OUTER, RowArgs, StridedArgs32, StridedArgs64,
    TransposeArgs,
};

/// Parameter layout of one argument block with per-axis arrays.
pub(super) struct Layout {
    /// Index width in bits (32 or 64).
    pub(super) width: u32,
    /// Number of axes in the argument arrays.
    pub(super) axes: usize,
    pub(super) shape: fn(usize) -> u64,
    pub(super) magic: fn(usize) -> u64,
    pub(super) shift: fn(usize) -> u64,
    pub(super) dst_stride: fn(usize) -> u64,
    pub(super) src_stride: fn(usize) -> u64,
    /// Name of the `.param` holding the block.
    param: &'static str,
}

/// Byte offset of element `k` of an array of `T` at byte offset `base`.
const fn at<T>(base: usize, k: usize) -> u64 {
    (base + k * size_of::<T>()) as u64
}

/// Byte offset of the magic number of element `k` of an array of [`FastDiv64`] at `base`.
const fn magic_at(base: usize, k: usize) -> u64 {
    at::<FastDiv64>(base, k) + offset_of!(FastDiv64, magic) as u64
}

/// Byte offset of the shift of element `k` of an array of [`FastDiv64`] at `base`.
const fn shift_at(base: usize, k: usize) -> u64 {
    at::<FastDiv64>(base, k) + offset_of!(FastDiv64, shift) as u64
}

/// The axes of [`StridedArgs64`].
pub(super) const STRIDED64: Layout = Layout {
    width: 64,
    axes: MAX_RANK,
    shape: |k| at::<u64>(offset_of!(StridedArgs64, shape), k),
    magic: |k| magic_at(offset_of!(StridedArgs64, div), k),
    shift: |k| shift_at(offset_of!(StridedArgs64, div), k),
    dst_stride: |k| at::<i64>(offset_of!(StridedArgs64, dst_strides), k),
    src_stride: |k| at::<i64>(offset_of!(StridedArgs64, src_strides), k),
    param: "p_args",
};

/// The axes of [`StridedArgs32`].
pub(super) const STRIDED32: Layout = Layout {
    width: 32,
    axes: MAX_RANK,
    shape: |k| at::<u32>(offset_of!(StridedArgs32, shape), k),
    magic: |k| at::<u32>(offset_of!(StridedArgs32, magic), k),
    shift: |k| at::<u32>(offset_of!(StridedArgs32, shift), k),
    dst_stride: |k| at::<i32>(offset_of!(StridedArgs32, dst_strides), k),
    src_stride: |k| at::<i32>(offset_of!(StridedArgs32, src_strides), k),
    param: "p_args",
};

/// The first axis of [`StridedArgs32`] alone: the one-axis strided kernels.
pub(super) const STRIDED32_RANK1: Layout = Layout {
    axes: 1,
    ..STRIDED32
};

/// The batch axes of [`TransposeArgs`].
pub(super) const TRANSPOSE_BATCH: Layout = Layout {
    width: 64,
    axes: MAX_BATCH_RANK,
    shape: |k| at::<u64>(offset_of!(TransposeArgs, batch_shape), k),
    magic: |k| magic_at(offset_of!(TransposeArgs, batch_div), k),
    shift: |k| shift_at(offset_of!(TransposeArgs, batch_div), k),
    dst_stride: |k| at::<i64>(offset_of!(TransposeArgs, batch_dst_strides), k),
    src_stride: |k| at::<i64>(offset_of!(TransposeArgs, batch_src_strides), k),
    param: "p_args",
};

/// The outer axes of [`RowArgs`].
pub(super) const ROWS_OUTER: Layout = Layout {
    width: 64,
    axes: MAX_ROW_OUTER,
    shape: |k| at::<u64>(offset_of!(RowArgs, shape), k),
    magic: |k| magic_at(offset_of!(RowArgs, div), k),
    shift: |k| shift_at(offset_of!(RowArgs, div), k),
    dst_stride: |k| at::<i64>(offset_of!(RowArgs, dst_strides), k),
    src_stride: |k| at::<i64>(offset_of!(RowArgs, src_strides), k),
    param: "p_args",
};

impl Layout {
    pub(super) fn idx_class(&self) -> Class {
        if self.width == 64 {
            Class::B64
        } else {
            Class::B32
        }
    }

    pub(super) fn u(&self) -> String {
        format!("u{}", self.width)
    }

    fn s(&self) -> String {
        format!("s{}", self.width)
    }

    pub(super) fn b(&self) -> String {
        format!("b{}", self.width)
    }

    /// Selects the strides of the outermost axis (`rank - 1`) into the
    /// registers `last_d` (and `last_s`).
    pub(super) fn last_axis(
        &self,
        g: &mut Gen,
        c: &mut Code,
        rank: &str,
        last_d: &str,
        last_s: Option<&str>,
    ) {
        let cls = self.idx_class();
        let (s, b, param) = (self.s(), self.b(), self.param);
        c.line(format!(
            "ld.param.{s} {last_d}, [{param}+{}];",
            (self.dst_stride)(0)
        ));
        if let Some(ls) = last_s {
            c.line(format!(
                "ld.param.{s} {ls}, [{param}+{}];",
                (self.src_stride)(0)
            ));
        }
        for k in 1..self.axes {
            let p = g.reg(Class::Pred);
            c.line(format!("setp.eq.u32 {p}, {rank}, {};", k + 1));
            let t = g.reg(cls);
            c.line(format!(
                "ld.param.{s} {t}, [{param}+{}];",
                (self.dst_stride)(k)
            ));
            c.line(format!("selp.{b} {last_d}, {t}, {last_d}, {p};"));
            if let Some(ls) = last_s {
                let t = g.reg(cls);
                c.line(format!(
                    "ld.param.{s} {t}, [{param}+{}];",
                    (self.src_stride)(k)
                ));
                c.line(format!("selp.{b} {ls}, {t}, {ls}, {p};"));
            }
        }
    }

    /// Decomposes the linear indices `xs` over the axes (axis 0 fastest) and
    /// accumulates element offsets into `doffs` (and `soffs`), which must be
    /// initialised. `xs` are clobbered. Branches on the uniform `rank`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn decompose(
        &self,
        g: &mut Gen,
        c: &mut Code,
        rank: &str,
        xs: &[String],
        doffs: &[String],
        soffs: Option<&[String]>,
        last_d: &str,
        last_s: Option<&str>,
        fin: &str,
    ) {
        let cls = self.idx_class();
        let (u, s, param) = (self.u(), self.s(), self.param);
        let p = g.reg(Class::Pred);
        for k in 0..self.axes - 1 {
            c.line(format!("setp.eq.u32 {p}, {rank}, {};", k + 1));
            c.line(format!("@{p} bra.uni {fin};"));
            let shape = g.reg(cls);
            let magic = g.reg(cls);
            let shift = g.reg(Class::B32);
            let ds = g.reg(cls);
            c.line(format!(
                "ld.param.{u} {shape}, [{param}+{}];",
                (self.shape)(k)
            ));
            c.line(format!(
                "ld.param.{u} {magic}, [{param}+{}];",
                (self.magic)(k)
            ));
            c.line(format!(
                "ld.param.u32 {shift}, [{param}+{}];",
                (self.shift)(k)
            ));
            c.line(format!(
                "ld.param.{s} {ds}, [{param}+{}];",
                (self.dst_stride)(k)
            ));
            let ss = soffs.map(|_| {
                let ss = g.reg(cls);
                c.line(format!(
                    "ld.param.{s} {ss}, [{param}+{}];",
                    (self.src_stride)(k)
                ));
                ss
            });
            for (j, x) in xs.iter().enumerate() {
                let t = g.reg(cls);
                let q = g.reg(cls);
                let cc = g.reg(cls);
                c.line(format!("mul.hi.{u} {t}, {x}, {magic};"));
                c.line(format!("add.{u} {t}, {t}, {x};"));
                c.line(format!("shr.{u} {q}, {t}, {shift};"));
                c.line(format!("mul.lo.{u} {t}, {q}, {shape};"));
                c.line(format!("sub.{u} {cc}, {x}, {t};"));
                c.line(format!("mad.lo.{s} {0}, {cc}, {ds}, {0};", doffs[j]));
                if let (Some(so), Some(ss)) = (soffs, ss.as_ref()) {
                    c.line(format!("mad.lo.{s} {0}, {cc}, {ss}, {0};", so[j]));
                }
                c.line(format!("mov.{} {x}, {q};", self.b()));
            }
        }
        c.label(fin);
        for (j, x) in xs.iter().enumerate() {
            c.line(format!("mad.lo.{s} {0}, {x}, {last_d}, {0};", doffs[j]));
            if let (Some(so), Some(ls)) = (soffs, last_s) {
                c.line(format!("mad.lo.{s} {0}, {x}, {ls}, {0};", so[j]));
            }
        }
    }
}
