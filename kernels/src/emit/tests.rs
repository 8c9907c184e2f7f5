use super::layout::{ROWS_OUTER, TRANSPOSE_BATCH};
use super::templates::TEMPLATES;
use super::*;
use crate::abi::{PermuteArgs, RowArgs, StridedArgs32, StridedArgs64, TransposeArgs};
use std::collections::BTreeSet;
use std::mem::offset_of;
use std::sync::OnceLock;

fn all() -> &'static [(String, String)] {
    static ALL: OnceLock<Vec<(String, String)>> = OnceLock::new();
    ALL.get_or_init(modules)
}

/// The size of the argument block of kernel `k`, if it takes one.
fn block_size(k: Kernel) -> Option<usize> {
    match k.kind() {
        Kind::Contig => None,
        Kind::Strided32 | Kind::Strided1 => Some(size_of::<StridedArgs32>()),
        Kind::Strided64 => Some(size_of::<StridedArgs64>()),
        Kind::Transpose => Some(size_of::<TransposeArgs>()),
        Kind::Rows
        | Kind::RowsRev
        | Kind::RowsRev3
        | Kind::RunsRev2
        | Kind::RunsRev3
        | Kind::RunsRev4
        | Kind::RowsShifted => Some(size_of::<RowArgs>()),
        Kind::RowsGather | Kind::RowsScatter => Some(size_of::<crate::abi::RowGatherArgs>()),
        Kind::Tiled | Kind::TiledE | Kind::TiledEW | Kind::TiledA | Kind::Narrow => {
            Some(size_of::<crate::abi::TiledArgs>())
        }
        Kind::StridedN => Some(size_of::<crate::abi::StridedArgsN>()),
        _ => Some(size_of::<PermuteArgs>()),
    }
}

#[test]
fn one_module_per_kernel_sorted_by_name() {
    let names: Vec<&str> = all().iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), Kernel::all().len());
    assert!(names.windows(2).all(|w| w[0] < w[1]));
    let kernels: BTreeSet<String> = Kernel::all().iter().map(Kernel::module_name).collect();
    assert_eq!(
        names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>(),
        kernels
    );
}

#[test]
fn every_module_is_one_kernel_with_its_abi() {
    for (name, text) in all() {
        let k = Kernel::from_module_name(name).unwrap();
        // The cp.async kernels target sm_80, every other sm_52.
        let target = if k.kind() == Kind::TiledA {
            "sm_80"
        } else {
            "sm_52"
        };
        assert!(
            text.starts_with(&format!(
                ".version 7.0\n.target {target}\n.address_size 64\n"
            )),
            "{name}"
        );
        assert_eq!(text.matches(".entry ").count(), 1, "{name}");
        assert!(
            text.contains(&format!(".visible .entry {name}(\n")),
            "{name}"
        );
        assert!(!text.contains("{{") && !text.contains("}}"), "{name}");
        let (bx, by, bz) = k.block();
        let directive = if matches!(
            k.kind(),
            Kind::Tiled | Kind::TiledE | Kind::TiledEW | Kind::TiledA | Kind::Narrow
        ) {
            "maxntid"
        } else {
            "reqntid"
        };
        assert!(
            text.contains(&format!(".{directive} {bx}, {by}, {bz}\n")),
            "{name}"
        );
        match block_size(k) {
            Some(size) => {
                let decl = format!(".param .align 8 .b8 p_args[{size}]");
                assert!(text.contains(&decl), "{name}: no {decl}");
                // Every parameter read lies inside the block.
                for read in text.split("[p_args+").skip(1) {
                    let off: usize = read[..read.find(']').unwrap()].parse().unwrap();
                    assert!(off + 4 <= size, "{name}: p_args+{off}");
                }
            }
            None => assert!(!text.contains("p_args"), "{name}"),
        }
        let fill_value = matches!(k, Kernel::Fill { .. });
        assert_eq!(text.contains(".param .u64 p_value"), fill_value, "{name}");
    }
}

#[test]
fn every_template_is_used() {
    // Kernels of each template: fill_contig, contig, contig_widen, strided32, strided64,
    // transpose (with and without the packed path), rows, permute (every variant).
    for name in [
        "fill_contig_b1",
        "copy_contig_b4",
        "cast_contig_u8_f32",
        "fill_strided32_b2",
        "cast_strided64_f64_bf16",
        "copy_transpose_b1",
        "cast_transpose_f32_f16",
        "copy_rows_b8",
        "cast_rows_gather_u8_f32",
        "copy_permute_packed128_b1",
        "copy_permute_vec_b1",
        "copy_permute_w64",
        "cast_permute32_i16_f64",
        "copy_tiled_b2",
        "cast_tiled_e_u8_f64",
        "fill_stridedn_b8",
        "cast_stridedn_f16_i32",
    ] {
        let k = Kernel::from_module_name(name).unwrap();
        assert_eq!(
            &module_ptx(k),
            &all().iter().find(|m| m.0 == name).unwrap().1
        );
    }
    let texts: Vec<&str> = all().iter().map(|(_, t)| t.as_str()).collect();
    for (file, text, _) in TEMPLATES {
        // The template's first line of code (its comments may be replaced) appears somewhere.
        let line = text
            .lines()
            .find(|l| !l.starts_with("//") && !l.trim().is_empty() && !l.contains("{{"))
            .unwrap();
        assert!(texts.iter().any(|t| t.contains(line)), "{file}: {line}");
    }
}

#[test]
fn argument_offsets_come_from_the_blocks() {
    let t = Templates;
    let rows = t.get("rows.ptx");
    assert!(rows.contains(&format!("p_args[{}]", size_of::<RowArgs>())));
    assert!(rows.contains(&format!(
        "%tshift, [p_args+{}]",
        offset_of!(RowArgs, team_shift)
    )));
    assert_eq!((STRIDED64.magic)(1), 96 + 16);
    assert_eq!((STRIDED64.shift)(0), 104);
    assert_eq!((STRIDED32.src_stride)(7), 152 + 28);
    assert_eq!((TRANSPOSE_BATCH.dst_stride)(0), 208);
    assert_eq!((ROWS_OUTER.shape)(6), 40 + 48);
}

#[test]
#[should_panic(expected = "no field nonesuch")]
fn unknown_fields_are_refused() {
    Templates.render_text("strided32.ptx", "[p_args+{{args.nonesuch}}]");
}
