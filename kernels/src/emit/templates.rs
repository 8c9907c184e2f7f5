//! The templates of `templates/`, embedded with the argument block of each, and their
//! expansion ([`Templates`]).

use std::fmt::Write as _;
use std::mem::size_of;

use crate::abi::{self, ParamBlock, RowArgs, StridedArgs32, StridedArgs64, TransposeArgs};

/// An argument block as templates see it: its fields and its size in bytes.
type Block = (&'static [abi::Field], usize);

const fn block<T: ParamBlock>() -> Option<Block> {
    Some((T::FIELDS, size_of::<T>()))
}

/// Every template: its file name in `templates/`, its text and the argument block its
/// `{{args.FIELD}}` keys refer to.
pub(super) const TEMPLATES: [(&str, &str, Option<Block>); 16] = [
    (
        "header.ptx",
        include_str!("../../templates/header.ptx"),
        None,
    ),
    (
        "contig.ptx",
        include_str!("../../templates/contig.ptx"),
        None,
    ),
    (
        "contig_widen.ptx",
        include_str!("../../templates/contig_widen.ptx"),
        None,
    ),
    (
        "fill_contig.ptx",
        include_str!("../../templates/fill_contig.ptx"),
        None,
    ),
    (
        "strided32.ptx",
        include_str!("../../templates/strided32.ptx"),
        block::<StridedArgs32>(),
    ),
    (
        "strided64.ptx",
        include_str!("../../templates/strided64.ptx"),
        block::<StridedArgs64>(),
    ),
    (
        "transpose.ptx",
        include_str!("../../templates/transpose.ptx"),
        block::<TransposeArgs>(),
    ),
    (
        "transpose_packed.ptx",
        include_str!("../../templates/transpose_packed.ptx"),
        None,
    ),
    (
        "rows.ptx",
        include_str!("../../templates/rows.ptx"),
        block::<RowArgs>(),
    ),
    (
        "rows_rev.ptx",
        include_str!("../../templates/rows_rev.ptx"),
        block::<RowArgs>(),
    ),
    (
        "rows_gather.ptx",
        include_str!("../../templates/rows_gather.ptx"),
        block::<abi::RowGatherArgs>(),
    ),
    (
        "permute.ptx",
        include_str!("../../templates/permute.ptx"),
        block::<abi::PermuteArgs>(),
    ),
    (
        "tiled.ptx",
        include_str!("../../templates/tiled.ptx"),
        block::<abi::TiledArgs>(),
    ),
    (
        "tiled_async.ptx",
        include_str!("../../templates/tiled_async.ptx"),
        block::<abi::TiledArgs>(),
    ),
    (
        "narrow.ptx",
        include_str!("../../templates/narrow.ptx"),
        block::<abi::TiledArgs>(),
    ),
    (
        "stridedn.ptx",
        include_str!("../../templates/stridedn.ptx"),
        block::<abi::StridedArgsN>(),
    ),
];

/// The templates, expanded on request.
pub(super) struct Templates;

impl Templates {
    /// Template `name` with its `{{args.FIELD}}` and `{{args.SIZE}}` keys replaced.
    pub(super) fn get(&self, name: &str) -> String {
        let &(_, text, _) = TEMPLATES
            .iter()
            .find(|t| t.0 == name)
            .unwrap_or_else(|| panic!("no template {name}"));
        self.render_text(name, text)
    }

    /// `text` of template `name` with its `{{args.FIELD}}` and `{{args.SIZE}}` keys replaced.
    pub(super) fn render_text(&self, name: &str, text: &str) -> String {
        let &(_, _, block) = TEMPLATES
            .iter()
            .find(|t| t.0 == name)
            .unwrap_or_else(|| panic!("no template {name}"));
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(pos) = rest.find("{{args.") {
            out.push_str(&rest[..pos]);
            let after = &rest[pos + "{{args.".len()..];
            let end = after
                .find("}}")
                .unwrap_or_else(|| panic!("template {name}: unclosed {{{{args."));
            let key = &after[..end];
            let (fields, size) =
                block.unwrap_or_else(|| panic!("template {name} has no argument block"));
            let value = if key == "SIZE" {
                size
            } else {
                fields
                    .iter()
                    .find(|f| f.name == key)
                    .unwrap_or_else(|| panic!("template {name}: no field {key}"))
                    .offset
            };
            write!(out, "{value}").unwrap();
            rest = &after[end + 2..];
        }
        out.push_str(rest);
        out
    }

    pub(super) fn render(&mut self, name: &str, vars: &[(&str, String)]) -> String {
        let mut text = self.get(name);
        for (k, v) in vars {
            let key = format!("{{{{{k}}}}}");
            assert!(
                text.contains(&key),
                "template {name} does not use {{{{{k}}}}}"
            );
            text = text.replace(&key, v);
        }
        if let Some(pos) = text.find("{{") {
            let end = text[pos..].find("}}").map_or(text.len(), |e| pos + e + 2);
            panic!("template {name}: no value for {}", &text[pos..end]);
        }
        text
    }
}
