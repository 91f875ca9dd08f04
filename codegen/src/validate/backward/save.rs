//! What a backward pass keeps (`save`, `checkpoint`): checked against what it reads, turned
//! into the fields of the generated derivative.

use super::*;

impl<'a> Check<'a, '_> {
    pub(super) fn checkpoint(&mut self) -> Option<bool> {
        let Some(c) = &self.spec.checkpoint else {
            return Some(false);
        };
        match c.value.as_str() {
            "keep" => Some(false),
            "recompute" => Some(true),
            other => {
                let help = match did_you_mean(other, crate::keys::CHECKPOINT) {
                    Some(s) => format!("did you mean \"{s}\"? write \"keep\" (the default: the backward pass keeps what it reads) or \"recompute\" (memory-bound: under gradient checkpointing the output is recomputed)"),
                    None => "write \"keep\" (the default: the backward pass keeps what it reads) or \"recompute\" (memory-bound: under gradient checkpointing the output is recomputed)".to_owned(),
                };
                self.push(
                    Diagnostic::new(
                        c.span.clone(),
                        self.key("checkpoint"),
                        format!("unknown checkpoint mode \"{other}\""),
                    )
                    .help(help),
                );
                None
            }
        }
    }

    /// `save`, resolved: `Ok(None)` when absent.
    pub(super) fn save(&mut self, output_path: &[usize]) -> Option<Option<Vec<SavedValue>>> {
        let Some(save) = &self.spec.save else {
            return Some(None);
        };
        let mut out = Vec::new();
        let mut ok = true;
        for (i, entry) in save.value.iter().enumerate() {
            let key = format!("{}.save[{i}]", self.path);
            let text = entry.value.trim();
            let names_output =
                text == formula::OUTPUT || text.starts_with(&format!("{}.", formula::OUTPUT));
            // Formulas refuse such an input outright (it would read as their variable).
            let function = matches!(self.spec.backward, Some(BackwardSpec::Function(_)));
            if function && names_output && self.op.inputs.iter().any(|i| i.name == formula::OUTPUT)
            {
                self.push(
                    Diagnostic::new(
                        entry.span.clone(),
                        key,
                        format!(
                            "`save` lists `{text}`, but op `{}` has an input named `{}`: the entry would name the op's output, not the input",
                            self.op.name,
                            formula::OUTPUT
                        ),
                    )
                    .help(format!(
                        "rename the input: in `save`, `{0}` and `{0}.N` are the op's output",
                        formula::OUTPUT
                    )),
                );
                ok = false;
                continue;
            }
            let value = if text == formula::OUTPUT {
                Some(SavedValue::Output)
            } else if let Some(rest) = text.strip_prefix("output.") {
                self.output_entry(entry, &key, rest, output_path)
            } else if let Some(member) = self.member(text) {
                match member {
                    Ok(Member::Slot(i)) => Some(SavedValue::Float(i)),
                    Ok(Member::Plain(_)) => Some(SavedValue::Field(text.to_owned())),
                    Ok(Member::Other(what)) => {
                        self.push(
                            Diagnostic::new(entry.span.clone(), key, format!("`save` lists `{text}`: {what}, which a backward pass cannot keep"))
                                .help("save float tensor fields and plain fields of a declared struct"),
                        );
                        None
                    }
                    Err(problem) => {
                        self.push(
                            Diagnostic::new(entry.span.clone(), key, format!("`save` lists `{text}`: {problem}"))
                                .help("a dotted entry names a field of a declared struct input, `p.scale`"),
                        );
                        None
                    }
                }
            } else if let Some(input) = self.op.inputs.iter().find(|i| i.name == text) {
                match &input.arg {
                    Arg::Device => {
                        self.push(
                            Diagnostic::new(
                                entry.span.clone(),
                                key,
                                format!("`save` lists the device input `{text}`"),
                            )
                            .help("remove it: the backward pass gets the device from its tensors"),
                        );
                        None
                    }
                    Arg::Tensor(t)
                        if t.kind == TensorKind::Float && t.container != Container::Vec =>
                    {
                        Backward::slot(self.op, text).map(SavedValue::Float)
                    }
                    Arg::Declared { .. } => {
                        self.push(
                            Diagnostic::new(entry.span.clone(), key, format!("`save` lists `{text}`, a declared struct: a backward pass keeps its fields one by one"))
                                .help(format!("list the fields the backward function needs, e.g. \"{text}.field\"")),
                        );
                        None
                    }
                    _ => Some(SavedValue::Field(text.to_owned())),
                }
            } else {
                let mut names: Vec<&str> = self.op.inputs.iter().map(|i| i.name.as_str()).collect();
                names.push(formula::OUTPUT);
                let help = match did_you_mean(text, &names) {
                    Some(s) => format!(
                        "did you mean `{s}`? `save` lists the op's inputs, `output` and `output.N` (an element of a tuple output)"
                    ),
                    None => format!(
                        "`save` lists the op's inputs ({}), `output` and `output.N` (an element of a tuple output)",
                        names[..names.len() - 1].join(", ")
                    ),
                };
                self.push(
                    Diagnostic::new(entry.span.clone(), key, format!("`save` names `{text}`, which is neither an input of op `{}` nor its output", self.op.name))
                        .help(help),
                );
                None
            };
            match value {
                Some(v) if out.contains(&v) => {
                    self.push(
                        Diagnostic::new(
                            entry.span.clone(),
                            format!("{}.save[{i}]", self.path),
                            format!("`save` lists `{text}` twice"),
                        )
                        .help("list each value once"),
                    );
                    ok = false;
                }
                Some(v) => out.push(v),
                None => ok = false,
            }
        }
        ok.then_some(Some(out))
    }

    /// `output.1.0`: an element of a tuple output.
    pub(super) fn output_entry(
        &mut self,
        entry: &Sp<String>,
        key: &str,
        rest: &str,
        output_path: &[usize],
    ) -> Option<SavedValue> {
        if !self.members.is_empty() {
            if self.members.iter().any(|m| m.join(".") == rest) {
                return Some(SavedValue::Field(entry.value.trim().to_owned()));
            }
            let fields: Vec<String> = self
                .members
                .iter()
                .map(|m| format!("`output.{}`", m.join(".")))
                .collect();
            self.push(
                Diagnostic::new(
                    entry.span.clone(),
                    key,
                    format!(
                        "`{}` is not a float tensor field of op `{}`'s output",
                        entry.value.trim(),
                        self.op.name
                    ),
                )
                .help(format!(
                    "list the float fields of the output the formulas read, by path ({})",
                    fields.join(", ")
                )),
            );
            return None;
        }
        let path: Option<Vec<usize>> = rest.split('.').map(|p| p.parse().ok()).collect();
        let leaf = path.as_ref().and_then(|p| self.op.output.leaf_at(p));
        match (path, leaf) {
            (Some(_), Some(Output::Tuple(_))) => {
                self.push(
                    Diagnostic::new(
                        entry.span.clone(),
                        key,
                        format!(
                            "`{}` of op `{}` is a tuple, not one value",
                            entry.value.trim(),
                            self.op.name
                        ),
                    )
                    .help("save its elements one by one: `output.N.0`, `output.N.1`, ..."),
                );
                None
            }
            (Some(path), Some(_)) if path == output_path => Some(SavedValue::Output),
            (Some(path), Some(_)) => Some(SavedValue::Field(crate::names::output_field(&path))),
            _ => {
                self.push(
                    Diagnostic::new(entry.span.clone(), key, format!("`{}` is not an element of op `{}`'s output", entry.value.trim(), self.op.name))
                        .help("write `output` for the float output, or `output.N` for element N (from 0) of a tuple output, `output.N.M` inside a nested one"),
                );
                None
            }
        }
    }

    /// With formulas, `save` lists exactly what they read.
    pub(super) fn save_matches_reads(
        &mut self,
        save: &[SavedValue],
        reads: &[String],
    ) -> Option<()> {
        let named = |v: &SavedValue| match v {
            SavedValue::Float(i) => self.op.float_slots().nth(*i).map(|slot| slot.name),
            SavedValue::Output => Some(formula::OUTPUT.to_owned()),
            SavedValue::Field(f) => Some(f.clone()),
        };
        let saved: Vec<String> = save.iter().filter_map(named).collect();
        let spec_save = self.spec.save.as_ref()?;
        let mut ok = true;
        for read in reads {
            if !saved.contains(read) {
                self.push(
                    Diagnostic::new(spec_save.span.clone(), self.key("save"), format!("the formulas of op `{}` read `{read}`, which `save` does not list", self.op.name))
                        .help(format!("add \"{read}\" to `save`, or remove `save` (it is inferred from the formulas)")),
                );
                ok = false;
            }
        }
        for (i, s) in saved.iter().enumerate() {
            if !reads.contains(s) {
                let span = spec_save
                    .value
                    .get(i)
                    .map_or(spec_save.span.clone(), |e| e.span.clone());
                self.push(
                    Diagnostic::new(span, format!("{}.save[{i}]", self.path), format!("`save` lists `{s}`, which no formula of op `{}` reads", self.op.name))
                        .help("remove it: keeping it would hold its memory until the backward pass for nothing"),
                );
                ok = false;
            }
        }
        ok.then_some(())
    }

    /// What a function-form pass gets without `save`: every input but the device, in order.
    pub(super) fn default_save(&self) -> Vec<SavedValue> {
        let mut out = Vec::new();
        for input in &self.op.inputs {
            match &input.arg {
                Arg::Device => {}
                Arg::Tensor(t) if t.kind == TensorKind::Float => {
                    out.extend(Backward::slot(self.op, &input.name).map(SavedValue::Float));
                }
                Arg::Declared { name: ty, .. } => self.declared_saves(&input.name, ty, &mut out),
                _ => out.push(SavedValue::Field(input.name.clone())),
            }
        }
        out
    }

    pub(super) fn field(&self, name: &str, _output_path: &[usize]) -> Field {
        if !self.members.is_empty()
            && let Some(rest) = name.strip_prefix("output.")
        {
            return Field {
                name: name.to_owned(),
                source: FieldSource::OutputMember(rest.split('.').map(str::to_owned).collect()),
            };
        }
        if let Some(Ok(Member::Plain(ty))) = self.member(name) {
            let mut parts = name.split('.');
            let input = parts.next().unwrap_or_default().to_owned();
            return Field {
                name: name.to_owned(),
                source: FieldSource::Member {
                    input,
                    fields: parts.map(str::to_owned).collect(),
                    ty: ty.to_owned(),
                },
            };
        }
        match name.strip_prefix(crate::names::OUTPUT_FIELD) {
            Some(rest) if !self.op.inputs.iter().any(|i| i.name == name) => Field {
                name: name.to_owned(),
                source: FieldSource::Output(
                    rest.split('_').filter_map(|p| p.parse().ok()).collect(),
                ),
            },
            _ => Field {
                name: name.to_owned(),
                source: FieldSource::Input(name.to_owned()),
            },
        }
    }

    pub(super) fn fields_are_owned(&mut self, fields: &[Field], recompute: bool) -> Option<()> {
        let mut ok = true;
        for field in fields {
            let FieldSource::Input(name) = &field.source else {
                continue;
            };
            let Some((i, input)) = self
                .op
                .inputs
                .iter()
                .enumerate()
                .find(|(_, i)| &i.name == name)
            else {
                continue;
            };
            let Arg::Plain(ty) = &input.arg else { continue };
            if !(ty.contains('&') || ty.replace("'static", "").contains('\'')) {
                continue;
            }
            let span = self
                .spec
                .inputs
                .as_ref()
                .and_then(|l| l.value.get(i))
                .map_or(self.spec.span.clone(), |s| s.span.clone());
            let why = if recompute {
                "the op is `checkpoint = \"recompute\"`, whose backward pass keeps every argument to run the op again"
            } else {
                "the backward pass keeps it until it runs"
            };
            self.push(
                Diagnostic::new(
                    span,
                    format!("{}.inputs[{i}].type", self.path),
                    format!(
                        "`{name}` of op `{}` borrows (`{ty}`), but {why}",
                        self.op.name
                    ),
                )
                .help("pass an owned type (e.g. `Vec<usize>` for `&[usize]`)"),
            );
            ok = false;
        }
        ok.then_some(())
    }
}
