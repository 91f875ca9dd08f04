//! Backend lists and cfg predicates: `routing.backends` and an op's `backends`, each backend
//! known, listed once, with the cfg that compiles its routing in (one per backend across the
//! manifest).

use super::*;

impl Lowerer<'_, '_> {
    pub(super) fn cfg(&mut self, cfg: &Sp<String>, key: &str) -> Option<String> {
        if !self.shallow(cfg, key, page::MANIFEST) {
            return None;
        }
        // Text that does not parse as a `#[cfg(...)]` predicate, or parses but is not one
        // rustc accepts, are two sections of the error reference.
        match syn::parse_str::<syn::Meta>(&cfg.value)
            .map_err(|err| (err, page::BAD_CFG))
            .and_then(|meta| {
                check_cfg_shape(&meta).map_err(|err| (err, page::CFG_SHAPE))?;
                Ok(meta)
            }) {
            Ok(meta) => Some(cfg_text(&meta)),
            Err((err, page)) => {
                self.push(
                    Diagnostic::new(
                        cfg.span.clone(),
                        key,
                        format!("`{}` is not a cfg predicate: {err}", shown(&cfg.value)),
                    )
                    .page(page)
                    .help(cfg_help(&err.to_string())),
                );
                None
            }
        }
    }

    /// A backend list. `inherit` is the manifest's default list: an op's entry naming one of
    /// its backends takes that backend's cfg.
    pub(super) fn backends(
        &mut self,
        list: &Sp<Vec<BackendSpec>>,
        key: &str,
        inherit: &[Backend],
    ) -> Vec<Backend> {
        let names: Vec<&str> = BackendId::ALL.iter().map(|b| b.key()).collect();
        // An entry the parser already refused (a table without `name`) leaves the list empty
        // too; only a list written empty is reported here.
        let written_empty = self
            .source
            .get(list.span.clone())
            .is_none_or(|text| !text.contains(['{', '"', '\'']));
        if list.value.is_empty() && written_empty {
            self.push(
                Diagnostic::new(
                    list.span.clone(),
                    key,
                    "empty backend list: no op could run anywhere",
                )
                .page(page::EMPTY_BACKENDS)
                .help("list at least one backend, e.g. `backends = [\"Flex\"]`"),
            );
        }
        let mut out: Vec<Backend> = Vec::new();
        for (i, spec) in list.value.iter().enumerate() {
            let key = format!("{key}[{i}]");
            let Some(name) = BackendId::from_key(&spec.name.value) else {
                let help = match did_you_mean(&spec.name.value, &names) {
                    Some(close) => format!(
                        "did you mean `{close}`? known backends: {}",
                        names.join(", ")
                    ),
                    None => format!("use one of: {}", names.join(", ")),
                };
                self.push(
                    Diagnostic::new(
                        spec.name.span.clone(),
                        key,
                        format!("unknown backend `{}`", shown(&spec.name.value)),
                    )
                    .page(page::UNKNOWN_BACKEND)
                    .help(help),
                );
                continue;
            };
            if out.iter().any(|b| b.name == name) {
                self.push(
                    Diagnostic::new(
                        spec.span.clone(),
                        key,
                        format!("backend `{}` is listed twice", name.key()),
                    )
                    .page(page::BACKEND_TWICE)
                    .help("remove the second entry"),
                );
                continue;
            }
            let inherited = inherit.iter().find(|b| b.name == name);
            let cfg = match (&spec.cfg, inherited) {
                (Some(c), Some(b)) => {
                    self.push(
                        Diagnostic::new(
                            c.span.clone(),
                            format!("{key}.cfg"),
                            format!(
                                "backend `{}` already has its cfg in `routing.backends`",
                                name.key()
                            ),
                        )
                        .page(page::BACKEND_CFG_INHERITED)
                        .help(format!(
                            "remove `cfg` here: the op uses the `routing.backends` entry for `{}`",
                            name.key()
                        )),
                    );
                    // As the help says: the rest of validation sees the inherited entry, so
                    // this error brings no other (a trait group without the backend).
                    b.cfg.clone()
                }
                // The user's cfg, and burn-route having the backend at all.
                (Some(c), None) => match self.cfg(c, &format!("{key}.cfg")) {
                    Some(meta) => Some(match names::backend_cfg(name) {
                        Some(runtime) => format!("all({meta}, {runtime})"),
                        None => meta,
                    }),
                    None => continue,
                },
                (None, Some(b)) => b.cfg.clone(),
                // A backend only some builds of burn-route have is compiled in with it.
                (None, None) => names::backend_cfg(name).map(str::to_owned),
            };
            let cfg_text = cfg.clone().unwrap_or_default();
            match self.backend_cfgs.get(&name) {
                Some(first) if *first != cfg_text => {
                    self.push(
                        Diagnostic::new(spec.span.clone(), key, format!("backend `{}` has a different cfg here than where it was first listed", name.key()))
                            .page(page::BACKEND_CFG_CONFLICT)
                            .help("give a backend the same cfg everywhere (or list it once in `routing.backends`)"),
                    );
                    continue;
                }
                Some(_) => {}
                None => {
                    self.backend_cfgs.insert(name, cfg_text);
                }
            }
            out.push(Backend { name, cfg });
        }
        out
    }
}

/// The fix for a cfg predicate rustc would refuse, from what is wrong with it: the suggested
/// value, parentheses, a Cargo feature in place of an unstable cfg, or what a predicate is.
pub(super) fn cfg_help(problem: &str) -> String {
    if let Some(start) = problem.find("did you mean `") {
        let start = start + "did you mean `".len();
        if let Some(len) = problem[start..].find('`') {
            return format!("write `{}` in its place", &problem[start..start + len]);
        }
    }
    if let Some(start) = problem.find("takes no value: write `") {
        let start = start + "takes no value: write `".len();
        if let Some(len) = problem[start..].find('`') {
            return format!("write `{}` alone", &problem[start..start + len]);
        }
    }
    if let Some(start) = problem.find("the value contains U+") {
        let code = &problem[start + "the value contains ".len()..];
        let code = code.split(',').next().unwrap_or(code);
        return format!("remove {code} from the value");
    }
    if problem.contains("with a suffix") {
        return "remove the suffix after the closing quote".to_owned();
    }
    if problem.contains("written with parentheses") {
        return "write the list with parentheses, e.g. `all(unix, feature = \"cube\")`".to_owned();
    }
    if problem.contains("unstable cfg") {
        return "name a Cargo feature of your crate instead (e.g. 'feature = \"atomics\"'), turned on where the unstable cfg would hold".to_owned();
    }
    "write what goes inside `#[cfg(...)]`, e.g. 'feature = \"cube\"'".to_owned()
}
