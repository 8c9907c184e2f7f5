//! Register classes, the straight-line emitter with its virtual register allocator
//! ([`Gen`]), generated code fragments ([`Code`]), and the predicate and address operands.

use std::fmt::Write as _;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Class {
    Pred,
    B16,
    B32,
    B64,
    F32,
    F64,
}

const CLASSES: [Class; 6] = [
    Class::Pred,
    Class::B16,
    Class::B32,
    Class::B64,
    Class::F32,
    Class::F64,
];

impl Class {
    fn decl(self) -> &'static str {
        match self {
            Class::Pred => ".pred",
            Class::B16 => ".b16",
            Class::B32 => ".b32",
            Class::B64 => ".b64",
            Class::F32 => ".f32",
            Class::F64 => ".f64",
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            Class::Pred => "%vp",
            Class::B16 => "%vh",
            Class::B32 => "%vr",
            Class::B64 => "%vd",
            Class::F32 => "%vf",
            Class::F64 => "%vg",
        }
    }
}

/// Straight-line PTX emitter with a virtual register allocator.
#[derive(Default)]
pub(super) struct Gen {
    next: [u32; 6],
}

/// One generated code fragment.
#[derive(Default)]
pub(super) struct Code(pub(super) String);

impl Code {
    pub(super) fn line(&mut self, s: impl AsRef<str>) {
        self.0.push('\t');
        self.0.push_str(s.as_ref());
        self.0.push('\n');
    }

    pub(super) fn label(&mut self, s: &str) {
        self.0.push_str(s);
        self.0.push_str(":\n");
    }

    pub(super) fn text(self) -> String {
        self.0.trim_end_matches('\n').to_string()
    }
}

impl Gen {
    pub(super) fn reg(&mut self, c: Class) -> String {
        let i = CLASSES.iter().position(|&x| x == c).unwrap();
        let n = self.next[i];
        self.next[i] += 1;
        format!("{}{}", c.prefix(), n)
    }

    pub(super) fn decls(&self) -> String {
        let mut s = String::new();
        for (i, c) in CLASSES.iter().enumerate() {
            if self.next[i] > 0 {
                writeln!(s, "\t.reg {} {}<{}>;", c.decl(), c.prefix(), self.next[i]).unwrap();
            }
        }
        s.trim_end_matches('\n').to_string()
    }
}

pub(super) fn pfx(pred: Option<&str>) -> String {
    pred.map(|p| format!("@{p} ")).unwrap_or_default()
}

pub(super) fn addr(base: &str, off: u64) -> String {
    if off == 0 {
        format!("[{base}]")
    } else {
        format!("[{base}+{off}]")
    }
}
