//! The tables that describe values: `[[type]]` entries and their fields or variants, an op's
//! inputs and output, each argument (tensor, plain type, declared type, device), its shape
//! contract and its rank.

use super::*;

impl Parser<'_> {
    /// A `[[type]]` entry: `fields` (a struct) or `variants` (an enum); which one, and whether
    /// both, is validation's call.
    pub(super) fn type_spec(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        index: usize,
    ) -> Option<TypeSpec> {
        let path = format!("type[{index}]");
        let reported_before = self.diags.error_count();
        let table = self.as_table(value, &path, Table::Type)?;
        let name = self.string(table, &path, "name");
        let name = self.required(name, table, value.span(), &path, "name", "\"Detections\"");
        let doc = self.string(table, &path, "doc");
        let fields = table
            .own("fields")
            .and_then(|v| self.members(v, &join(&path, "fields")));
        let variants = table.own("variants").and_then(|v| {
            let variants_path = join(&path, "variants");
            let (array, span) = self.as_array(
                v,
                &variants_path,
                "an array of variants such as `[{ name = \"Dense\", fields = [{ tensor = \"float\" }] }, { name = \"Empty\" }]`",
            )?;
            // The names the variants already have, so that a name suggested for one that
            // lacks it is free (read from the TOML before each variant's table is parsed).
            let taken: Vec<String> = array
                .iter()
                .filter_map(|item| match item.get_ref() {
                    DeValue::Table(t) => match t.get("name").map(Spanned::get_ref) {
                        Some(DeValue::String(s)) => Some(s.to_string()),
                        _ => None,
                    },
                    _ => None,
                })
                .collect();
            let items = array
                .iter()
                .enumerate()
                .filter_map(|(i, item)| {
                    self.variant(item, &format!("{variants_path}[{i}]"), &taken)
                })
                .collect();
            Some(Sp::new(items, span))
        });
        Some(TypeSpec {
            index,
            span: value.span(),
            name,
            doc,
            fields,
            variants,
            reported: self.diags.error_count() > reported_before,
        })
    }

    pub(super) fn variant(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        path: &str,
        taken: &[String],
    ) -> Option<VariantSpec> {
        let table = self.as_table(value, path, Table::Variant)?;
        let name = self.string(table, path, "name");
        let example = ["Dense", "Sparse", "Empty", "Other"]
            .into_iter()
            .find(|n| !taken.iter().any(|t| t == n))
            .unwrap_or("Variant");
        let name = self.required(
            name,
            table,
            value.span(),
            path,
            "name",
            &format!("\"{example}\""),
        );
        let doc = self.string(table, path, "doc");
        let fields = table
            .own("fields")
            .and_then(|v| self.members(v, &join(path, "fields")));
        Some(VariantSpec {
            span: value.span(),
            name,
            doc,
            fields,
        })
    }

    /// A `fields` array of a type or a variant.
    pub(super) fn members(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        path: &str,
    ) -> Option<Sp<Vec<MemberSpec>>> {
        let (array, span) = self.as_array(
            value,
            path,
            "an array of fields such as `{ name = \"boxes\", tensor = \"float\" }`",
        )?;
        let items = array
            .iter()
            .enumerate()
            .filter_map(|(i, item)| {
                let item_path = format!("{path}[{i}]");
                let table = self.as_table(item, &item_path, Table::Field)?;
                let name = self.string(table, &item_path, "name");
                let doc = self.string(table, &item_path, "doc");
                let ty = self.arg(table, item.span(), &item_path, false);
                Some(MemberSpec {
                    span: item.span(),
                    name,
                    doc,
                    ty,
                })
            })
            .collect();
        Some(Sp::new(items, span))
    }

    pub(super) fn input(&mut self, value: &Spanned<DeValue<'_>>, path: &str) -> Option<InputSpec> {
        let table = self.as_table(value, path, Table::Input)?;
        let name = self.string(table, path, "name");
        let name = self.required(name, table, value.span(), path, "name", "\"x\"");
        let ty = self.arg(table, value.span(), path, true);
        Some(InputSpec {
            span: value.span(),
            name,
            ty,
        })
    }

    pub(super) fn output(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        path: &str,
    ) -> Option<OutputSpec> {
        match value.get_ref() {
            DeValue::Array(array) => {
                let items = array
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| self.output(item, &format!("{path}[{i}]")))
                    .collect();
                Some(OutputSpec::Tuple {
                    span: value.span(),
                    items,
                })
            }
            DeValue::Table(_) => {
                let table = self.as_table(value, path, Table::Output)?;
                let ty = self.arg(table, value.span(), path, false)?;
                Some(OutputSpec::Single {
                    span: value.span(),
                    ty,
                })
            }
            _ => {
                self.wrong_type(
                    value,
                    path,
                    "a table such as `{ tensor = \"float\" }` or `{ type = \"usize\" }`, or an array of them for a tuple",
                );
                None
            }
        }
    }

    /// Reads `tensor` / `type` / `device` (and the tensor-only keys) from an input or output
    /// table. Exactly one of the three must be present.
    pub(super) fn arg(
        &mut self,
        table: Keyed<'_, '_>,
        span: Range<usize>,
        path: &str,
        is_input: bool,
    ) -> Option<ArgSpec> {
        let tensor = self.string(table, path, "tensor");
        let plain = self.string(table, path, "type");
        let device = if is_input {
            self.boolean(table, path, "device")
        } else {
            None
        };
        let borrowed = if is_input {
            self.boolean(table, path, "borrowed")
        } else {
            None
        };
        let dims = table
            .own("dims")
            .and_then(|v| self.dims(v, &join(path, "dims")));
        let container = self.string(table, path, "container");
        let shape = if is_input {
            table
                .own("shape")
                .and_then(|v| self.shape(v, &join(path, "shape")))
                .map(Box::new)
        } else {
            None
        };
        let meta = if is_input {
            None
        } else {
            let meta = MetaSpec {
                shape: self.string(table, path, "shape"),
                dtype: self.string(table, path, "dtype"),
            };
            (meta.shape.is_some() || meta.dtype.is_some()).then(|| Box::new(meta))
        };
        // `device` outside an input is an unknown key, reported as such. (Which keys are present
        // is read from the TOML itself, for the diagnostics of conflicting or misplaced keys;
        // their values were read through the key table above.)
        let kinds: &[&str] = if is_input { ARG_KINDS } else { &ARG_KINDS[..2] };
        let present: Vec<&str> = kinds
            .iter()
            .copied()
            .filter(|k| table.toml.get(*k).is_some())
            .collect();
        if present.len() > 1 {
            let (key, _) = table.toml.get_key_value(present[1]).expect("present");
            let help = if is_input {
                "give exactly one of `tensor` (a tensor), `type` (a plain Rust value) or `device = true` (the device)"
            } else {
                "give exactly one of `tensor` (a tensor) or `type` (a plain Rust value)"
            };
            self.diags.push(
                Diagnostic::new(
                    key.span(),
                    join(path, present[1]),
                    format!("`{path}` has both `{}` and `{}`", present[0], present[1]),
                )
                .page(page::CONFLICTING_ARG_KINDS)
                .help(help),
            );
            return None;
        }
        if present.is_empty() {
            let what = if is_input {
                "`tensor`, `type` or `device = true`"
            } else {
                "`tensor` or `type`"
            };
            self.diags.push(
                Diagnostic::new(span, path, format!("`{path}` needs {what}"))
                    .page(page::MISSING_ARG_KIND)
                    .help("add `tensor = \"float\"` (or \"int\", \"bool\", \"quantized\") or `type = \"f32\"`"),
            );
            return None;
        }
        if tensor.is_none() {
            let output_only: &[&str] = if is_input { &[] } else { &["dtype"] };
            for key in ["borrowed", "dims", "container", "shape"]
                .iter()
                .chain(output_only)
                .copied()
            {
                if let Some((k, _)) = table.toml.get_key_value(key) {
                    let help = match &plain {
                        // A plain value is borrowed by its type.
                        Some(ty) if key == "borrowed" && !ty.value.starts_with('&') => format!(
                            "remove `borrowed`; to pass the value by reference, write it in its type: `type = \"&{}\"`",
                            ty.value
                        ),
                        _ => format!(
                            "remove `{key}`, or make the entry a tensor with `tensor = \"float\"`"
                        ),
                    };
                    self.diags.push(
                        Diagnostic::new(
                            k.span(),
                            join(path, key),
                            format!(
                                "`{key}` only applies to tensors, but `{path}` is not a tensor"
                            ),
                        )
                        .page(page::TENSOR_ONLY_KEY)
                        .help(help),
                    );
                }
            }
        }
        if let Some(kind) = tensor {
            return Some(ArgSpec::Tensor(TensorSpec {
                kind,
                borrowed,
                dims,
                container,
                shape,
                meta,
            }));
        }
        if let Some(ty) = plain {
            return Some(ArgSpec::Plain(ty));
        }
        let device = device?;
        if !device.value {
            self.diags.push(
                Diagnostic::new(
                    device.span.clone(),
                    join(path, "device"),
                    "`device = false` declares nothing",
                )
                .page(page::DEVICE_FALSE)
                .help("write `device = true` for the device argument, or remove the entry"),
            );
            return None;
        }
        Some(ArgSpec::Device(device))
    }

    /// An input's `shape` table: exactly one contract key, naming another input.
    pub(super) fn shape(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        path: &str,
    ) -> Option<Sp<ShapeSpec>> {
        const EXAMPLE: &str = "a table with one contract such as `{ same_as = \"x\" }`";
        let DeValue::Table(table) = value.get_ref() else {
            self.wrong_type(value, path, EXAMPLE);
            return None;
        };
        self.unknown_keys(table, path, Table::Shape);
        let keyed = Keyed {
            toml: table,
            of: Table::Shape,
        };
        let rules = Table::Shape.names();
        let given: Vec<&str> = rules
            .iter()
            .copied()
            .filter(|k| table.get(*k).is_some())
            .collect();
        match given.as_slice() {
            [] => {
                // An unknown key was reported above; an empty table gets its own message.
                if table.is_empty() {
                    self.diags.push(
                        Diagnostic::new(value.span(), path, format!("`{path}` is empty"))
                            .help(format!(
                                "give one contract: {} (each names another input), or remove `shape`",
                                rules.join(", ")
                            )),
                    );
                }
                None
            }
            [rule] => {
                let (key, _) = table.get_key_value(*rule).expect("present");
                let of = self.string(keyed, path, rule)?;
                Some(Sp::new(
                    ShapeSpec {
                        rule: Sp::new((*rule).to_owned(), key.span()),
                        of,
                    },
                    value.span(),
                ))
            }
            [first, second, ..] => {
                let (key, _) = table.get_key_value(*second).expect("present");
                self.diags.push(
                    Diagnostic::new(
                        key.span(),
                        join(path, second),
                        format!("`{path}` has both `{first}` and `{second}`"),
                    )
                    .help(format!("keep one contract (e.g. remove `{second}`); to relate another input too, give that input a `shape` of its own")),
                );
                None
            }
        }
    }

    pub(super) fn dims(&mut self, value: &Spanned<DeValue<'_>>, path: &str) -> Option<Sp<Dims>> {
        match value.get_ref() {
            DeValue::String(s) => Some(Sp::new(Dims::Generic(s.to_string()), value.span())),
            DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
                Ok(n) => Some(Sp::new(Dims::Fixed(n), value.span())),
                Err(_) => {
                    self.diags.push(
                        Diagnostic::new(
                            value.span(),
                            path,
                            format!("rank {} is out of range", i.as_str()),
                        )
                        .page(page::RANK_RANGE)
                        .help("use a rank from 1 to 16, or a const-generic name such as \"D\""),
                    );
                    None
                }
            },
            _ => {
                self.wrong_type(
                    value,
                    path,
                    "a const-generic name such as \"D\" or a rank such as 2",
                );
                None
            }
        }
    }
}
