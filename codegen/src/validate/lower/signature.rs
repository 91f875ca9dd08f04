//! Lowering an op's signature: its inputs (tensors, plain types, declared types) and its output.

use super::*;

impl Lowerer<'_, '_> {
    /// The inputs, or `None` when any of them is invalid (each problem is reported).
    pub(super) fn inputs(
        &mut self,
        spec: &OpSpec,
        path: &str,
        cx: &OpContext<'_>,
    ) -> Option<Vec<Input>> {
        let list = spec.inputs.as_ref()?;
        let mut inputs = Vec::new();
        let mut ok = true;
        let mut seen: BTreeMap<&str, ()> = BTreeMap::new();
        for (i, input) in list.value.iter().enumerate() {
            let key = format!("{path}.inputs[{i}]");
            let name = input
                .name
                .as_ref()
                .and_then(|n| self.name(n, NameKind::Input, &format!("{key}.name")));
            if let (Some(n), Some(sp)) = (&name, &input.name)
                && seen.insert(sp.value.as_str(), ()).is_some()
            {
                self.push(
                    Diagnostic::new(
                        sp.span.clone(),
                        format!("{key}.name"),
                        format!("duplicate input name `{n}`"),
                    )
                    .page(page::DUPLICATE_INPUT)
                    .help("give every input of an op a distinct name"),
                );
                ok = false;
            }
            let arg = input.ty.as_ref().and_then(|ty| self.arg(ty, &key));
            let shape = match &input.ty {
                Some(ArgSpec::Tensor(TensorSpec {
                    shape: Some(sp), ..
                })) => {
                    let rule = ShapeRule::from_key(&sp.value.rule.value)
                        .expect("the parser keeps known contract keys only");
                    Some(ShapeContract {
                        rule,
                        of: sp.value.of.value.clone(),
                        location: format!(
                            "{}:{}",
                            cx.manifest_name,
                            cx.lines.line(sp.value.rule.span.start)
                        ),
                    })
                }
                _ => None,
            };
            match (name, arg) {
                (Some(name), Some(arg)) => inputs.push(Input { name, arg, shape }),
                _ => ok = false,
            }
        }
        let devices: Vec<usize> = (0..inputs.len())
            .filter(|i| matches!(inputs[*i].arg, Arg::Device))
            .collect();
        if ok && devices.len() > 1 {
            self.push(
                Diagnostic::new(
                    list.value[devices[1]].span.clone(),
                    format!("{path}.inputs[{}]", devices[1]),
                    "more than one device input",
                )
                .page(page::DEVICE_TWICE)
                .help("keep one `device = true` input: an op runs on one device"),
            );
            ok = false;
        }
        ok.then_some(inputs)
    }

    /// Plain types, checked as they appear in every generated signature: in scope in the
    /// generated modules, sized, and with no lifetime or generic that a signature lacks.
    pub(super) fn plain_types(
        &mut self,
        spec: &OpSpec,
        path: &str,
        inputs: &[Input],
        output: &Output,
    ) -> bool {
        let mut ranks: Vec<String> = Vec::new();
        for (_, t) in inputs.iter().filter_map(|i| match &i.arg {
            Arg::Tensor(t) => Some((i, t)),
            _ => None,
        }) {
            if let Rank::Generic(g) = &t.rank {
                ranks.push(g.clone());
            }
        }
        output_ranks(output, &mut ranks);
        let mut ok = true;
        let specs = spec
            .inputs
            .as_ref()
            .map(|l| l.value.as_slice())
            .unwrap_or_default();
        for input in inputs {
            if let Arg::Declared { ranks: r, .. } = &input.arg {
                for g in r {
                    if !ranks.contains(g) {
                        ranks.push(g.clone());
                    }
                }
            }
        }
        for (i, spec_input) in specs.iter().enumerate() {
            if let Some(ArgSpec::Plain(ty)) = &spec_input.ty
                && self.declared.resolve(&ty.value).is_none()
            {
                ok &= self.plain_type(
                    ty,
                    &format!("{path}.inputs[{i}].type"),
                    Position::Input,
                    &ranks,
                );
            }
        }
        if let Some(out) = &spec.output {
            ok &= self.output_types(out, &format!("{path}.output"), &ranks);
        }
        ok
    }

    pub(super) fn output_types(&mut self, out: &OutputSpec, key: &str, ranks: &[String]) -> bool {
        match out {
            OutputSpec::Single {
                ty: ArgSpec::Plain(ty),
                ..
            } if self.declared.resolve(&ty.value).is_none() => {
                self.plain_type(ty, &format!("{key}.type"), Position::Output, ranks)
            }
            OutputSpec::Single { .. } => true,
            OutputSpec::Tuple { items, .. } => {
                items.iter().enumerate().fold(true, |ok, (i, item)| {
                    self.output_types(item, &format!("{key}[{i}]"), ranks) && ok
                })
            }
        }
    }

    pub(super) fn plain_type(
        &mut self,
        ty: &Sp<String>,
        key: &str,
        position: Position,
        ranks: &[String],
    ) -> bool {
        let Ok(parsed) = syn::parse_str::<syn::Type>(&ty.value) else {
            // Reported by `plain`.
            return true;
        };
        match types::check(&parsed, position, ranks) {
            Ok(()) => true,
            Err(problem) => {
                self.push(
                    Diagnostic::new(
                        ty.span.clone(),
                        key,
                        format!(
                            "plain type `{}` {}",
                            shown(ty.value.trim()),
                            problem.message
                        ),
                    )
                    .page(page::PLAIN_TYPE_SCOPE)
                    .help(problem.help),
                );
                false
            }
        }
    }

    pub(super) fn arg(&mut self, spec: &ArgSpec, key: &str) -> Option<Arg> {
        match spec {
            ArgSpec::Tensor(t) => self.tensor(t, key).map(Arg::Tensor),
            ArgSpec::Plain(ty) => {
                let key = format!("{key}.type");
                if let Some((name, borrowed)) = self.declared.resolve(&ty.value) {
                    let def = self.declared.get(name)?;
                    return Some(Arg::Declared {
                        name: name.to_owned(),
                        borrowed,
                        ranks: def.ranks.clone(),
                        leaves: crate::ir::leaves(&self.declared.defs, name),
                    });
                }
                if let Some(name) = self.declared.mentioned_in(&ty.value) {
                    let d = decl::nested_use(ty, &key, name);
                    self.push(d);
                    return None;
                }
                if let Some(d) = decl::misspelled(&self.declared, ty, &key) {
                    self.push(d);
                    return None;
                }
                self.plain(ty, &key).map(Arg::Plain)
            }
            ArgSpec::Device(_) => Some(Arg::Device),
        }
    }

    pub(super) fn plain(&mut self, ty: &Sp<String>, key: &str) -> Option<String> {
        if !self.shallow(ty, key, page::PLAIN_TYPE_SCOPE) {
            return None;
        }
        match syn::parse_str::<syn::Type>(&ty.value) {
            Ok(t) => Some(type_text(&t)),
            Err(err) => {
                self.push(
                    Diagnostic::new(
                        ty.span.clone(),
                        key,
                        format!("`{}` is not a Rust type: {err}", shown(&ty.value)),
                    )
                    .page(page::BAD_TYPE)
                    .help("write a Rust type such as \"f32\", \"usize\" or \"Option<u64>\""),
                );
                None
            }
        }
    }

    pub(super) fn tensor(&mut self, t: &TensorSpec, key: &str) -> Option<TensorArg> {
        let kind = match t.kind.value.as_str() {
            "float" => Some(TensorKind::Float),
            "int" => Some(TensorKind::Int),
            "bool" => Some(TensorKind::Bool),
            "quantized" => Some(TensorKind::Quantized),
            other => {
                let help = match did_you_mean(other, KINDS) {
                    Some(close) => {
                        format!("did you mean `{close}`? tensor kinds: float, int, bool, quantized")
                    }
                    None => "use one of: float, int, bool, quantized".to_owned(),
                };
                self.push(
                    Diagnostic::new(
                        t.kind.span.clone(),
                        format!("{key}.tensor"),
                        format!("unknown tensor kind `{}`", shown(other)),
                    )
                    .page(page::UNKNOWN_KIND)
                    .help(help),
                );
                None
            }
        };
        let rank = match &t.dims {
            None => Some(Rank::Generic(names::DEFAULT_RANK.to_owned())),
            Some(d) => match &d.value {
                Dims::Generic(name) => {
                    let sp = Sp::new(name.clone(), d.span.clone());
                    self.name(&sp, NameKind::Rank, &format!("{key}.dims"))
                        .map(Rank::Generic)
                }
                Dims::Fixed(n) if (1..=16).contains(n) => {
                    Some(Rank::Fixed(usize::try_from(*n).expect("in range")))
                }
                Dims::Fixed(n) => {
                    self.push(
                        Diagnostic::new(
                            d.span.clone(),
                            format!("{key}.dims"),
                            format!("rank {n} is out of range"),
                        )
                        .page(page::RANK_RANGE)
                        .help("use a rank from 1 to 16, or a const-generic name such as \"D\""),
                    );
                    None
                }
            },
        };
        let borrowed = t.borrowed.as_ref().is_some_and(|b| b.value);
        let container = match &t.container {
            None => Some(Container::One),
            Some(c) => match Container::from_key(&c.value) {
                Some(Container::Vec) if borrowed => {
                    self.push(
                        Diagnostic::new(
                            c.span.clone(),
                            format!("{key}.container"),
                            "a borrowed `vec` of tensors is not supported",
                        )
                        .page(page::BORROWED_VEC)
                        .help("pass the `Vec` by value (remove `borrowed`)"),
                    );
                    None
                }
                Some(container) => Some(container),
                None => {
                    let other = c.value.as_str();
                    let help = match did_you_mean(other, CONTAINERS) {
                        Some(close) => format!("did you mean `{close}`? containers: option, vec"),
                        None => "use \"option\" (`Option<tensor>`) or \"vec\" (`Vec<tensor>`)"
                            .to_owned(),
                    };
                    self.push(
                        Diagnostic::new(
                            c.span.clone(),
                            format!("{key}.container"),
                            format!("unknown container `{}`", shown(other)),
                        )
                        .page(page::UNKNOWN_CONTAINER)
                        .help(help),
                    );
                    None
                }
            },
        };
        Some(TensorArg {
            kind: kind?,
            borrowed,
            rank: rank?,
            container: container?,
            meta: OutputMeta::default(),
        })
    }

    pub(super) fn output(&mut self, spec: &OutputSpec, key: &str) -> Option<Output> {
        match spec {
            OutputSpec::Single {
                ty: ArgSpec::Tensor(t),
                ..
            } => {
                let tensor = self.tensor(t, key);
                let meta = self.output_meta(t.meta.as_deref(), key);
                Some(Output::Tensor(TensorArg {
                    meta: meta?,
                    ..tensor?
                }))
            }
            OutputSpec::Single {
                ty: ArgSpec::Plain(ty),
                ..
            } => {
                if let Some((name, borrowed)) = self.declared.resolve(&ty.value) {
                    if borrowed {
                        self.push(
                            Diagnostic::new(
                                ty.span.clone(),
                                format!("{key}.type"),
                                format!("output borrows declared type `{name}`, but an output has nothing to borrow from"),
                            )
                            .page(crate::diag::page::DECLARED_TYPE)
                            .help(format!("return the value: `type = \"{name}\"`")),
                        );
                        return None;
                    }
                    let def = self.declared.get(name)?;
                    return Some(Output::Declared {
                        name: name.to_owned(),
                        ranks: def.ranks.clone(),
                        leaves: crate::ir::leaves(&self.declared.defs, name),
                        tensors_only: crate::ir::tensors_only(&self.declared.defs, name),
                    });
                }
                if let Some(name) = self.declared.mentioned_in(&ty.value) {
                    let d = decl::nested_use(ty, &format!("{key}.type"), name);
                    self.push(d);
                    return None;
                }
                if let Some(d) = decl::misspelled(&self.declared, ty, &format!("{key}.type")) {
                    self.push(d);
                    return None;
                }
                let plain = self.plain(ty, &format!("{key}.type"))?;
                // `-> ()` is what no output means; spelled out, clippy refuses it.
                if plain == "()" && !key.ends_with(']') {
                    self.push(
                        Diagnostic::new(
                            ty.span.clone(),
                            format!("{key}.type"),
                            "output type `()` is what an op without `output` returns",
                        )
                        .page(page::PLAIN_TYPE_SCOPE)
                        .help("remove `output` for an op that returns nothing"),
                    );
                    return None;
                }
                Some(Output::Plain(plain))
            }
            // Parsing reads `device` from inputs only.
            OutputSpec::Single {
                ty: ArgSpec::Device(_),
                ..
            } => None,
            OutputSpec::Tuple { span, items } => {
                let depth = key.matches('[').count() - key.matches("op[").count();
                if depth >= MAX_TUPLE_NESTING {
                    self.push(
                        Diagnostic::new(
                            span.clone(),
                            key,
                            format!("output tuples nest more than {MAX_TUPLE_NESTING} levels deep"),
                        )
                        .page(page::PLAIN_TYPE_SCOPE)
                        .help("flatten the output, or return a type of your own by its path"),
                    );
                    return None;
                }
                if items.is_empty() {
                    self.push(
                        Diagnostic::new(span.clone(), key, "empty output tuple")
                            .page(page::EMPTY_TUPLE)
                            .help("remove `output` for an op that returns nothing"),
                    );
                    return None;
                }
                let outs: Vec<Option<Output>> = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.output(item, &format!("{key}[{i}]")))
                    .collect();
                outs.into_iter()
                    .collect::<Option<Vec<_>>>()
                    .map(Output::Tuple)
            }
        }
    }
}
