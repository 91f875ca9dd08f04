//! Declared types (`[[type]]`) in the IR: their definitions, and the walks over their members
//! and tensor leaves that emitters share.

use super::*;

/// Whether declared type `name` is a struct whose every field is a tensor or such a struct.
pub fn tensors_only(types: &[TypeDef], name: &str) -> bool {
    fn visit(types: &[TypeDef], name: &str, depth: usize) -> bool {
        let Some(def) = types.iter().find(|t| t.name == name) else {
            return false;
        };
        match &def.body {
            TypeBody::Enum(_) => false,
            TypeBody::Struct(fields) => fields.iter().all(|m| match &m.ty {
                MemberType::Tensor(_) => true,
                MemberType::Plain(_) => false,
                MemberType::Declared(inner) => {
                    depth < types.len() && visit(types, inner, depth + 1)
                }
            }),
        }
    }
    visit(types, name, 0)
}

/// The tensors of declared type `name` among `types`, in declaration order (a nested type's in
/// place, every variant's in turn): what routing looks through and names in errors.
pub fn leaves(types: &[TypeDef], name: &str) -> Vec<Leaf> {
    members(types, name)
        .into_iter()
        .filter_map(|(path, m)| match m {
            MemberType::Tensor(t) => Some(Leaf {
                path,
                tensor: t.clone(),
            }),
            MemberType::Plain(_) | MemberType::Declared(_) => None,
        })
        .collect()
}

/// The tensor and plain members of declared type `name` among `types` with their paths, in
/// declaration order (a nested type's members in place of it, every variant's in turn).
pub fn members<'a>(types: &'a [TypeDef], name: &str) -> Vec<(Vec<Step>, &'a MemberType)> {
    let mut out = Vec::new();
    collect_members(types, name, &mut Vec::new(), &mut out);
    out
}

fn collect_members<'a>(
    types: &'a [TypeDef],
    name: &str,
    path: &mut Vec<Step>,
    out: &mut Vec<(Vec<Step>, &'a MemberType)>,
) {
    // Validation refuses recursive types; the depth bound only keeps a bug from looping.
    let Some(def) = types.iter().find(|t| t.name == name) else {
        return;
    };
    if path.len() > types.len() {
        return;
    }
    let mut member = |step: Step, m: &'a Member, path: &mut Vec<Step>| {
        path.push(step);
        match &m.ty {
            MemberType::Declared(inner) => collect_members(types, inner, path, out),
            ty => out.push((path.clone(), ty)),
        }
        path.pop();
    };
    match &def.body {
        TypeBody::Struct(fields) => {
            for m in fields {
                let field = m.name.clone().unwrap_or_default();
                let step = Step::Field {
                    ty: def.name.clone(),
                    field,
                };
                member(step, m, path);
            }
        }
        TypeBody::Enum(variants) => {
            for v in variants {
                for (i, m) in v.fields.iter().enumerate() {
                    let step = Step::Variant {
                        ty: def.name.clone(),
                        variant: v.name.clone(),
                        field: m.name.clone().unwrap_or_else(|| i.to_string()),
                        index: i,
                        named: v.kind == VariantKind::Struct,
                    };
                    member(step, m, path);
                }
            }
        }
    }
}

/// The variant of enum `name` that the generated op check builds: the first that holds a tensor
/// (through nested types), the one that routes the call. `None` if `name` is not an enum.
pub fn checked_variant<'a>(types: &'a [TypeDef], name: &str) -> Option<&'a Variant> {
    let def = types.iter().find(|t| t.name == name)?;
    let TypeBody::Enum(variants) = &def.body else {
        return None;
    };
    variants.iter().find(|v| {
        v.fields.iter().any(|m| match &m.ty {
            MemberType::Tensor(_) => true,
            MemberType::Declared(inner) => !leaves(types, inner).is_empty(),
            MemberType::Plain(_) => false,
        })
    })
}

/// A member's name below its input, as errors show it: `scores`, `pair.left`, `Dense.0`.
pub fn label(path: &[Step]) -> String {
    path.iter()
        .map(|step| match step {
            Step::Field { field, .. } => field.clone(),
            Step::Variant { variant, field, .. } => format!("{variant}.{field}"),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// A `[[type]]`: a struct or an enum holding tensors, generated at the backend level
/// (`NamePrimitive<B>`, which `Dispatch` instantiates) and at the `Tensor<D>` level (`Name`).
#[derive(Clone, Debug)]
pub struct TypeDef {
    /// The `Tensor<D>`-level name, as declared.
    pub name: String,
    /// Doc lines from the manifest.
    pub doc: Vec<String>,
    /// Fields or variants.
    pub body: TypeBody,
    /// The rank generics of its tensors (nested types' included), in order of first use: the
    /// `Tensor<D>`-level type's const parameters.
    pub ranks: Vec<String>,
    /// `manifest:LINE` of the declaration, for docs.
    pub location: String,
}

/// What a declared type is made of.
#[derive(Clone, Debug)]
pub enum TypeBody {
    /// A struct's named fields.
    Struct(Vec<Member>),
    /// An enum's variants.
    Enum(Vec<Variant>),
}

/// One variant of a declared enum.
#[derive(Clone, Debug)]
pub struct Variant {
    /// Its name.
    pub name: String,
    /// Doc lines.
    pub doc: Vec<String>,
    /// Unit, tuple or struct.
    pub kind: VariantKind,
    /// Its fields (named for a struct variant).
    pub fields: Vec<Member>,
}

/// The shape of an enum variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VariantKind {
    /// `Empty`.
    Unit,
    /// `Dense(..)`.
    Tuple,
    /// `Masked { .. }`.
    Struct,
}

/// A field of a declared struct or variant.
#[derive(Clone, Debug)]
pub struct Member {
    /// Its name; `None` in a tuple variant.
    pub name: Option<String>,
    /// Doc lines.
    pub doc: Vec<String>,
    /// What it holds.
    pub ty: MemberType,
}

/// What a field holds.
#[derive(Clone, Debug)]
pub enum MemberType {
    /// A tensor (or an `Option`/`Vec` of them).
    Tensor(TensorArg),
    /// A plain Rust type.
    Plain(String),
    /// Another declared type, by name.
    Declared(String),
}

/// One tensor of a declared type: where it sits, and what it is.
#[derive(Clone, Debug)]
pub struct Leaf {
    /// The steps from the value down to it.
    pub path: Vec<Step>,
    /// The tensor (its container included).
    pub tensor: TensorArg,
}

impl Leaf {
    /// Its name below the input, as errors show it: `scores`, `pair.left`, `Dense.0`.
    pub fn label(&self) -> String {
        label(&self.path)
    }

    /// Whether it exists only in some variant of an enum.
    pub fn refutable(&self) -> bool {
        self.path.iter().any(|s| matches!(s, Step::Variant { .. }))
    }
}

/// One step down a declared type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A struct's field.
    Field {
        /// The struct.
        ty: String,
        /// The field.
        field: String,
    },
    /// A field of an enum variant.
    Variant {
        /// The enum.
        ty: String,
        /// The variant.
        variant: String,
        /// The field's name, or its index in a tuple variant.
        field: String,
        /// Its index.
        index: usize,
        /// Whether the variant is a struct variant (fields by name).
        named: bool,
    },
}
