//! The build script's side of Cargo: the runtime path a crate's dependencies imply, the cfg lines
//! that follow the runtime's features and declare the manifest's own cfgs, and the check that
//! every feature a manifest's cfg names is one the crate's `Cargo.toml` declares.

use crate::diag::{self, Diagnostic, Diagnostics, Stage};
use crate::{ir, names, validate};

/// The runtime path for a crate whose `Cargo.toml` (its text) depends on `burn-route` (the crate
/// of the shipped ops, which re-exports the runtime) and not on `burn-route-runtime`; `None`
/// otherwise (the default path stands).
pub(crate) fn runtime_of_dependencies(cargo_toml: &str) -> Option<&'static str> {
    let table = toml::de::DeTable::parse(cargo_toml).ok()?.into_inner();
    let deps = table.get("dependencies")?;
    let toml::de::DeValue::Table(deps) = deps.get_ref() else {
        return None;
    };
    let has = |name: &str| deps.iter().any(|(k, _)| k.get_ref() == name);
    (has("burn-route") && !has("burn-route-runtime")).then_some(names::SHIPPED_RUNTIME_PATH)
}

/// burn-route-runtime's build metadata (`links = "burn_route"`): each key its build script
/// publishes, and the generator's cfg that follows it. `burn-route` publishes the same keys
/// (`links = "burn_route_ops"`) for the crates that depend on it alone.
const RUNTIME_METADATA: [(&str, &str); 3] = [
    ("DEP_BURN_ROUTE_AUTODIFF", names::AUTODIFF_CFG),
    ("DEP_BURN_ROUTE_CUBE", burn_route_core::route_cfg::CUBE),
    ("DEP_BURN_ROUTE_REMOTE", burn_route_core::route_cfg::REMOTE),
];

/// The build-script lines that declare the generator's own cfgs (`rustc-check-cfg`) and set
/// each one that burn-route-runtime's build metadata says is on (`rustc-cfg`), so generated
/// routing follows the features the runtime was built with. `env` reads the build script's environment.
pub fn runtime_cfg_lines(env: impl Fn(&str) -> Option<String>) -> Vec<String> {
    let mut lines = Vec::new();
    for (key, cfg) in RUNTIME_METADATA {
        let ops_key = key.replacen("DEP_BURN_ROUTE_", "DEP_BURN_ROUTE_OPS_", 1);
        lines.push(format!("cargo::rerun-if-env-changed={key}"));
        lines.push(format!("cargo::rerun-if-env-changed={ops_key}"));
        lines.push(format!("cargo::rustc-check-cfg=cfg({cfg})"));
        let on = |key: &str| env(key).is_some_and(|v| v == "1" || v == "true");
        if on(key) || on(&ops_key) {
            lines.push(format!("cargo::rustc-cfg={cfg}"));
        }
    }
    lines
}

/// `rustc-check-cfg` lines for the cfgs the manifest itself names (beyond features, which Cargo
/// declares, and the names rustc knows), so none is an `unexpected_cfgs` warning.
pub fn check_cfg_lines(ir: &ir::Ir) -> Vec<String> {
    let mut atoms: Vec<(String, Option<String>)> = Vec::new();
    for cfg in ir.cfgs() {
        if let Ok(meta) = syn::parse_str::<syn::Meta>(cfg) {
            cfg_atoms(&meta, &mut atoms);
        }
    }
    let mut lines = Vec::new();
    for (name, value) in atoms {
        if name == "feature"
            || validate::is_well_known_cfg(&name)
            || names::RUNTIME_CFGS.contains(&name.as_str())
        {
            continue;
        }
        let line = match value {
            Some(v) => format!("cargo::rustc-check-cfg=cfg({name}, values({v:?}))"),
            None => format!("cargo::rustc-check-cfg=cfg({name})"),
        };
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    lines
}

/// Errors for `feature = "..."` cfgs that name a feature the consuming crate's `Cargo.toml`
/// (its text) does not declare: such a route could never be compiled in. `manifest` is the
/// manifest's text, for the span of each cfg's feature name (where it can be found), and each
/// error suggests the closest declared feature. Render them as a [`crate::Report`] of that text.
pub fn undeclared_features(ir: &ir::Ir, cargo_toml: &str, manifest: &str) -> Vec<Diagnostic> {
    let mut diags = Diagnostics::new();
    check_features(ir, cargo_toml, manifest, &mut diags);
    diags.errors()
}

/// [`undeclared_features`], pushed into the run's `diags`.
pub(crate) fn check_features(
    ir: &ir::Ir,
    cargo_toml: &str,
    manifest: &str,
    diags: &mut Diagnostics,
) {
    diags.enter(Stage::Cargo);
    let Ok(table) = toml::de::DeTable::parse(cargo_toml) else {
        return;
    };
    let table = table.into_inner();
    let mut declared: Vec<String> = Vec::new();
    if let Some(features) = table.get("features")
        && let toml::de::DeValue::Table(features) = features.get_ref()
    {
        declared.extend(features.iter().map(|(k, _)| k.get_ref().to_string()));
    }
    // Optional dependencies are implicit features.
    for section in ["dependencies", "build-dependencies"] {
        if let Some(deps) = table.get(section)
            && let toml::de::DeValue::Table(deps) = deps.get_ref()
        {
            for (name, spec) in deps.iter() {
                if let toml::de::DeValue::Table(spec) = spec.get_ref()
                    && spec
                        .get("optional")
                        .is_some_and(|o| matches!(o.get_ref(), toml::de::DeValue::Boolean(true)))
                {
                    declared.push(name.get_ref().to_string());
                }
            }
        }
    }
    let mut atoms = Vec::new();
    for cfg in ir.cfgs() {
        if let Ok(meta) = syn::parse_str::<syn::Meta>(cfg) {
            cfg_atoms(&meta, &mut atoms);
        }
    }
    let candidates: Vec<&str> = declared.iter().map(String::as_str).collect();
    let mut reported: Vec<String> = Vec::new();
    for (name, value) in atoms {
        if name != "feature" {
            continue;
        }
        let Some(feature) = value else { continue };
        if declared.contains(&feature) || reported.contains(&feature) {
            continue;
        }
        let span = feature_span(manifest, &feature).unwrap_or(0..0);
        let help = match diag::did_you_mean(&feature, &candidates) {
            Some(close) => {
                format!("did you mean `{close}`? or add `{feature} = [...]` to [features]")
            }
            None if candidates.is_empty() => {
                format!("the crate declares no features; add `{feature} = [...]` to [features]")
            }
            None => format!(
                "add `{feature} = [...]` to [features] (declared: {})",
                candidates.join(", ")
            ),
        };
        diags.push(
            Diagnostic::new(
                span,
                "cfg",
                format!(
                    "a cfg names feature `{feature}`, which this crate's Cargo.toml does not declare, so that route could never be compiled in"
                ),
            )
            .page(diag::page::CFG_SHAPE)
            .help(format!("{help}, or fix the cfg")),
        );
        reported.push(feature);
    }
}

/// Where the manifest first names `feature` in a cfg (`feature = "x"`, also escaped inside a
/// basic TOML string): the byte range of the feature's name.
fn feature_span(manifest: &str, feature: &str) -> Option<std::ops::Range<usize>> {
    let mut start = 0;
    for line in manifest.split_inclusive('\n') {
        if let Some(at) = line.find("feature") {
            for quote in ["\\\"", "\""] {
                let needle = format!("{quote}{feature}{quote}");
                if let Some(found) = line[at..].find(&needle) {
                    let byte = start + at + found + quote.len();
                    return Some(byte..byte + feature.len());
                }
            }
        }
        start += line.len();
    }
    None
}

/// The `name` / `name = "value"` atoms of a cfg predicate.
fn cfg_atoms(meta: &syn::Meta, out: &mut Vec<(String, Option<String>)>) {
    match meta {
        syn::Meta::Path(p) => {
            if let Some(id) = p.get_ident() {
                out.push((id.to_string(), None));
            }
        }
        syn::Meta::NameValue(nv) => {
            if let (
                Some(id),
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }),
            ) = (nv.path.get_ident(), &nv.value)
            {
                out.push((id.to_string(), Some(s.value())));
            }
        }
        syn::Meta::List(list) => {
            if let Ok(nested) = list.parse_args_with(
                syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
            ) {
                for m in &nested {
                    cfg_atoms(m, out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Builder, Report};

    #[test]
    fn a_crate_on_burn_route_alone_gets_its_runtime_path() {
        let deps = |d: &str| format!("[package]\nname = \"x\"\n\n[dependencies]\n{d}\n");
        assert_eq!(
            runtime_of_dependencies(&deps("burn-route = { path = \"..\" }")),
            Some("::burn_route::rt")
        );
        assert_eq!(
            runtime_of_dependencies(&deps("burn-route = \"0.1\"\nburn-route-runtime = \"0.1\"")),
            None
        );
        assert_eq!(
            runtime_of_dependencies(&deps("burn-route-runtime = \"0.1\"")),
            None
        );
        assert_eq!(runtime_of_dependencies("not toml ["), None);
    }

    #[test]
    fn routes_follow_the_runtime_or_burn_route_metadata() {
        let lines = |on: &'static str| {
            runtime_cfg_lines(move |key| (key == on).then(|| "1".to_owned()))
                .into_iter()
                .filter(|l| l.starts_with("cargo::rustc-cfg="))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            lines("DEP_BURN_ROUTE_AUTODIFF"),
            ["cargo::rustc-cfg=burn_route_autodiff"]
        );
        assert_eq!(
            lines("DEP_BURN_ROUTE_OPS_CUBE"),
            ["cargo::rustc-cfg=burn_route_cube"]
        );
        assert!(lines("DEP_BURN_ROUTE_OTHER").is_empty());
    }

    const MANIFEST: &str = r#"[routing]
trait = "MyOps"
backends = [
    "Flex",
    { name = "Cube", cfg = 'feature = "gpu"' },
    { name = "Remote", cfg = "all(feature = \"remoet\", unix)" },
]

[[op]]
name = "square"
inputs = [{ name = "x", tensor = "float" }]
output = { tensor = "float", shape = "x", dtype = "x" }
"#;

    fn undeclared(cargo_toml: &str) -> Vec<String> {
        let ir = Builder::new("ops.toml")
            .lower(MANIFEST, &mut Diagnostics::new())
            .unwrap();
        Report {
            file: "ops.toml".into(),
            source: MANIFEST.into(),
            diagnostics: undeclared_features(&ir, cargo_toml, MANIFEST),
        }
        .lines()
    }

    #[test]
    fn an_undeclared_feature_is_named_at_its_cfg_with_the_closest_declared_one() {
        let cargo = "[package]\nname = \"my-ops\"\n\n[features]\ngpu = []\nremote = []\n";
        assert_eq!(
            undeclared(cargo),
            [
                "ops.toml:6:47: `cfg`: a cfg names feature `remoet`, which this crate's Cargo.toml does \
                 not declare, so that route could never be compiled in; help: did you mean \
                 `remote`? or add `remoet = [...]` to [features], or fix the cfg"
            ]
        );
    }

    #[test]
    fn both_fixes_of_an_undeclared_feature_lead_out() {
        let cargo = "[package]\nname = \"my-ops\"\n\n[features]\ngpu = []\nremote = []\n";
        // "did you mean `remote`?": the cfg fixed.
        let fixed = MANIFEST.replace("remoet", "remote");
        let ir = Builder::new("ops.toml")
            .lower(&fixed, &mut Diagnostics::new())
            .unwrap();
        assert!(undeclared_features(&ir, cargo, &fixed).is_empty());
        // "or add `remoet = [...]` to [features]": the Cargo.toml fixed.
        let with_feature = format!("{cargo}remoet = []\n");
        assert!(undeclared(&with_feature).is_empty());
    }

    #[test]
    fn declared_features_and_optional_dependencies_pass() {
        let cargo = "[features]\ngpu = []\n\n[dependencies]\nremoet = { version = \"1\", optional = true }\n";
        assert!(undeclared(cargo).is_empty());
    }

    #[test]
    fn without_features_each_undeclared_one_is_reported_once() {
        assert_eq!(
            undeclared("[package]\nname = \"my-ops\"\n"),
            [
                "ops.toml:5:40: `cfg`: a cfg names feature `gpu`, which this crate's Cargo.toml does not \
                 declare, so that route could never be compiled in; help: the crate declares no \
                 features; add `gpu = [...]` to [features], or fix the cfg",
                "ops.toml:6:47: `cfg`: a cfg names feature `remoet`, which this crate's Cargo.toml does \
                 not declare, so that route could never be compiled in; help: the crate declares \
                 no features; add `remoet = [...]` to [features], or fix the cfg",
            ]
        );
    }
}
