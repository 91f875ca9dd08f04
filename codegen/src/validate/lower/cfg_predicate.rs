//! The shape of a cfg predicate as rustc accepts it, checked before the predicate is kept.

/// A cfg predicate as rustc accepts it: `name`, `name = "value"`, or `all(..)` / `any(..)` /
/// `not(..)` of predicates.
pub(super) fn check_cfg_shape(meta: &syn::Meta) -> syn::Result<()> {
    let single = |path: &syn::Path| {
        path.get_ident().cloned().ok_or_else(|| {
            syn::Error::new_spanned(path, "expected a single name such as `feature`")
        })
    };
    match meta {
        syn::Meta::Path(path) => cfg_name_ok(&single(path)?, false),
        syn::Meta::NameValue(nv) => {
            let name = single(&nv.path)?;
            cfg_name_ok(&name, true)?;
            match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(lit),
                    ..
                }) => {
                    cfg_value_ok(&name.to_string(), lit)?;
                    if name == "feature" && lit.value().trim().is_empty() {
                        return Err(syn::Error::new_spanned(
                            lit,
                            "an empty feature name, which no Cargo.toml can declare",
                        ));
                    }
                    if !lit.suffix().is_empty() {
                        return Err(syn::Error::new_spanned(
                            lit,
                            "a string literal with a suffix is not a cfg value",
                        ));
                    }
                    if let Some(c) = lit
                        .value()
                        .chars()
                        .find(|c| c.is_control() || crate::validate::text::is_bidi(*c))
                    {
                        return Err(syn::Error::new_spanned(
                            lit,
                            format!(
                                "the value contains U+{:04X}, a control or bidirectional character",
                                u32::from(c)
                            ),
                        ));
                    }
                    Ok(())
                }
                other => Err(syn::Error::new_spanned(
                    other,
                    "expected a string literal, as in `feature = \"cube\"`",
                )),
            }
        }
        syn::Meta::List(list) => {
            let name = single(&list.path)?;
            if !matches!(list.delimiter, syn::MacroDelimiter::Paren(_)) {
                return Err(syn::Error::new_spanned(
                    list,
                    "a cfg list is written with parentheses, as in `all(a, b)`",
                ));
            }
            if !["all", "any", "not"].contains(&name.to_string().as_str()) {
                return Err(syn::Error::new_spanned(
                    &list.path,
                    "expected `all`, `any` or `not`",
                ));
            }
            let nested = list.parse_args_with(
                syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
            )?;
            if name == "not" && nested.len() != 1 {
                return Err(syn::Error::new_spanned(
                    list,
                    "`not` takes exactly one predicate",
                ));
            }
            nested.iter().try_for_each(check_cfg_shape)
        }
    }
}

/// cfg names rustc gates behind a nightly feature: `#[cfg(overflow_checks)]` is an error on
/// stable.
const UNSTABLE_CFGS: &[&str] = &[
    "contract_checks",
    "emscripten_wasm_eh",
    "fmt_debug",
    "overflow_checks",
    "relocation_model",
    "sanitize",
    "sanitizer_cfi_generalize_pointers",
    "sanitizer_cfi_normalize_integers",
    "target_has_atomic_equal_alignment",
    "target_has_atomic_load_store",
    "target_has_reliable_f128",
    "target_has_reliable_f128_math",
    "target_has_reliable_f16",
    "target_has_reliable_f16_math",
    "target_thread_local",
    "ub_checks",
];

/// Whether rustc knows the cfg name itself (`--check-cfg` well-known names): it needs no
/// `rustc-check-cfg` line.
pub(crate) fn is_well_known_cfg(name: &str) -> bool {
    [UNSTABLE_CFGS, CFGS_WITHOUT_VALUE, CFGS_WITH_VALUE]
        .iter()
        .any(|names| names.contains(&name))
}

/// Well-known cfg names that take no value (`unix`), and those that need one (`feature = ".."`).
const CFGS_WITHOUT_VALUE: &[&str] = &[
    "clippy",
    "debug_assertions",
    "doc",
    "doctest",
    "miri",
    "proc_macro",
    "rustfmt",
    "test",
    "unix",
    "windows",
];
const CFGS_WITH_VALUE: &[&str] = &[
    "feature",
    "panic",
    "target_abi",
    "target_arch",
    "target_endian",
    "target_env",
    "target_family",
    "target_feature",
    "target_has_atomic",
    "target_os",
    "target_pointer_width",
    "target_vendor",
];

/// The values rustc knows for the well-known cfgs whose values are a closed list; any other is
/// an `unexpected_cfgs` warning (a typo, like `target_os = "linuxx"`).
const CFG_VALUES: &[(&str, &[&str])] = &[
    ("panic", &["abort", "unwind", "immediate-abort"]),
    ("target_endian", &["big", "little"]),
    (
        "target_arch",
        &[
            "aarch64",
            "amdgpu",
            "arm",
            "arm64ec",
            "avr",
            "bpf",
            "csky",
            "hexagon",
            "loongarch32",
            "loongarch64",
            "m68k",
            "mips",
            "mips32r6",
            "mips64",
            "mips64r6",
            "msp430",
            "nvptx64",
            "powerpc",
            "powerpc64",
            "riscv32",
            "riscv64",
            "s390x",
            "sparc",
            "sparc64",
            "spirv",
            "wasm32",
            "wasm64",
            "x86",
            "x86_64",
            "xtensa",
        ],
    ),
    (
        "target_env",
        &[
            "",
            "gnu",
            "macabi",
            "msvc",
            "musl",
            "newlib",
            "nto70",
            "nto71",
            "nto71_iosock",
            "nto80",
            "ohos",
            "p1",
            "p2",
            "p3",
            "relibc",
            "sgx",
            "sim",
            "uclibc",
            "v5",
        ],
    ),
    (
        "target_vendor",
        &[
            "amd",
            "apple",
            "espressif",
            "fortanix",
            "ibm",
            "kmc",
            "mti",
            "nintendo",
            "nvidia",
            "openwrt",
            "pc",
            "risc0",
            "sony",
            "sun",
            "unikraft",
            "unknown",
            "uwp",
            "win7",
            "wrs",
        ],
    ),
    (
        "target_abi",
        &[
            "",
            "abi64",
            "abiv2",
            "abiv2hf",
            "eabi",
            "eabihf",
            "elfv1",
            "elfv2",
            "fortanix",
            "ilp32",
            "ilp32e",
            "llvm",
            "macabi",
            "sim",
            "softfloat",
            "spe",
            "uwp",
            "vec-extabi",
            "x32",
        ],
    ),
    ("target_has_atomic", &["8", "16", "32", "64", "128", "ptr"]),
    ("target_family", &["unix", "wasm", "windows"]),
    ("target_pointer_width", &["16", "32", "64"]),
    (
        "target_os",
        &[
            "aix",
            "amdhsa",
            "android",
            "cuda",
            "cygwin",
            "dragonfly",
            "emscripten",
            "espidf",
            "freebsd",
            "fuchsia",
            "haiku",
            "hermit",
            "horizon",
            "hurd",
            "illumos",
            "ios",
            "l4re",
            "linux",
            "lynxos178",
            "macos",
            "managarm",
            "motor",
            "netbsd",
            "none",
            "nto",
            "nuttx",
            "openbsd",
            "psp",
            "psx",
            "qurt",
            "redox",
            "rtems",
            "solaris",
            "solid_asp3",
            "teeos",
            "trusty",
            "tvos",
            "uefi",
            "unknown",
            "vexos",
            "visionos",
            "vita",
            "vxworks",
            "wasi",
            "watchos",
            "windows",
            "xous",
            "zkvm",
        ],
    ),
];

/// Whether `name = value` is a value rustc knows, for the cfgs in [`CFG_VALUES`].
pub(super) fn cfg_value_ok(name: &str, lit: &syn::LitStr) -> syn::Result<()> {
    let Some((_, values)) = CFG_VALUES.iter().find(|(n, _)| *n == name) else {
        return Ok(());
    };
    let value = lit.value();
    if values.contains(&value.as_str()) {
        return Ok(());
    }
    let hint = crate::diag::did_you_mean(&value, values)
        .map(|close| format!("; did you mean `{close}`?"))
        .unwrap_or_default();
    Err(syn::Error::new_spanned(
        lit,
        format!("`{value}` is not a value of `{name}` that rustc knows{hint}"),
    ))
}

/// Whether `name` may be used in a cfg predicate on stable Rust, with or without a value.
pub(super) fn cfg_name_ok(name: &syn::Ident, with_value: bool) -> syn::Result<()> {
    let text = name.to_string();
    if UNSTABLE_CFGS.contains(&text.as_str()) {
        return Err(syn::Error::new_spanned(
            name,
            format!("`{text}` is an unstable cfg (it needs a nightly feature)"),
        ));
    }
    if with_value && CFGS_WITHOUT_VALUE.contains(&text.as_str()) {
        return Err(syn::Error::new_spanned(
            name,
            format!("`{text}` takes no value: write `{text}`"),
        ));
    }
    if !with_value && CFGS_WITH_VALUE.contains(&text.as_str()) {
        return Err(syn::Error::new_spanned(
            name,
            format!("`{text}` needs a value, as in `{text} = \"...\"`"),
        ));
    }
    Ok(())
}
