//! Draws random manifests whose kernels are their compositions (see `src/lib.rs`), renders each
//! with its op check, and writes `modules.rs`, which includes them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// How many manifests a build draws.
const MANIFESTS: usize = 8;

/// A forward pass of `src/library.rs` and its derivative as backward formulas.
struct Forward {
    name: &'static str,
    /// Whether it takes a second float tensor `y` (of `x`'s shape).
    y: bool,
    /// Whether `y` is instead `w`, a weight of `x`'s last dimension (`last_dim_of = "x"`).
    w: bool,
    /// Whether it takes an `f32` `s`.
    s: bool,
    /// The formula for `x`, then for `y`.
    grads: (&'static str, &'static str),
}

const fn forward(
    name: &'static str,
    y: bool,
    s: bool,
    grads: (&'static str, &'static str),
) -> Forward {
    Forward {
        name,
        y,
        w: false,
        s,
        grads,
    }
}

const LIBRARY: &[Forward] = &[
    forward("scale_add", true, true, ("grad * s", "grad")),
    forward("mul", true, false, ("grad * y", "grad * x")),
    forward("softplus", false, false, ("grad * sigmoid(x)", "")),
    forward("square", false, false, ("grad * 2 * x", "")),
    forward("center", false, false, ("grad - mean_dim(grad, -1)", "")),
    forward("by_width", false, false, ("grad / dim_size(x, -1)", "")),
    forward(
        "tanh_scaled",
        false,
        true,
        ("grad * s * (1 - tanh(x) * tanh(x))", ""),
    ),
    forward("exp_axpy", true, true, ("grad * (output - y)", "grad")),
    Forward {
        name: "weighted",
        y: false,
        w: true,
        s: false,
        grads: ("grad * w", "grad * x"),
    },
];

/// SplitMix64: the same manifests for the same seed, with nothing to depend on.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).expect("small")
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn chance(&mut self, in_four: usize) -> bool {
        self.below(4) < in_four
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Policy {
    Formulas,
    Recompute,
    Composed,
    Composite,
    Detach,
    Reject,
}

/// One random op.
fn op(rng: &mut Rng, index: usize) -> (String, bool) {
    let f = rng.pick(LIBRARY);
    let policy = *rng.pick(&[
        Policy::Formulas,
        Policy::Recompute,
        Policy::Composed,
        Policy::Composite,
        Policy::Detach,
        Policy::Reject,
    ]);
    // A weight of another rank than the output cannot take formulas (the build refuses them):
    // its gradient comes from the composition on `Autodiff<B, C>` instead.
    let policy = match policy {
        Policy::Formulas | Policy::Recompute if f.w => Policy::Composed,
        other => other,
    };
    let name = format!("{}_{index}", f.name);
    // The rank of every tensor: the default generic, another generic, or fixed.
    let (dims, rank) = match rng.below(4) {
        0 => (String::new(), None),
        1 => (", dims = \"E\"".to_owned(), None),
        2 => (", dims = 2".to_owned(), Some(2)),
        _ => (", dims = 3".to_owned(), Some(3)),
    };
    let mut inputs = vec![format!("{{ name = \"x\", tensor = \"float\"{dims} }}")];
    if f.y {
        let contract = if rng.chance(2) {
            ", shape = { same_as = \"x\" }"
        } else {
            ""
        };
        inputs.push(format!(
            "{{ name = \"y\", tensor = \"float\"{dims}{contract} }}"
        ));
    }
    if f.w {
        inputs.push(
            "{ name = \"w\", tensor = \"float\", dims = 1, shape = { last_dim_of = \"x\" } }"
                .to_owned(),
        );
    }
    if f.s {
        inputs.push("{ name = \"s\", type = \"f32\" }".to_owned());
    }
    let autodiff = match policy {
        Policy::Detach => "detach",
        Policy::Reject => "reject",
        _ => "differentiable",
    };
    let mut text = format!(
        "[[op]]\nname = \"{name}\"\ndoc = \"`{}` of the library, {autodiff}.\"\nautodiff = \"{autodiff}\"\ninputs = [{}]\noutput = {{ tensor = \"float\"{dims} }}\n",
        f.name,
        inputs.join(", ")
    );
    let path = format!("crate::library::{}", f.name);
    if policy == Policy::Composite {
        let _ = writeln!(text, "composite = \"{path}\"");
    } else {
        let _ = writeln!(text, "composition = \"{path}\"");
    }
    if matches!(policy, Policy::Formulas | Policy::Recompute) {
        let mut formulas = format!("x = \"{}\"", f.grads.0);
        if f.y || f.w {
            let input = if f.w { "w" } else { "y" };
            let _ = write!(formulas, ", {input} = \"{}\"", f.grads.1);
        }
        let _ = writeln!(text, "backward = {{ {formulas} }}");
        if policy == Policy::Recompute {
            text.push_str("checkpoint = \"recompute\"\n");
        }
    }
    if policy != Policy::Composite {
        match rng.below(5) {
            0 => text.push_str("dtypes = [\"f32\"]\nother_dtypes = \"composition\"\n"),
            1 => text.push_str("dtypes = [\"f32\", \"f64\"]\n"),
            2 => text.push_str("dtypes = [\"f32\"]\n"),
            3 => text.push_str(
                "dtypes = [\"f32\", \"f16\", \"bf16\"]\nother_dtypes = \"composition\"\n",
            ),
            _ => {}
        }
    }
    // `[op.check]`: what the declaration allows.
    let mut check = Vec::new();
    if rng.chance(2) {
        let rank = rank.unwrap_or_else(|| 1 + rng.below(3));
        let sizes: Vec<String> = (0..rank).map(|_| (1 + rng.below(4)).to_string()).collect();
        check.push(format!("shapes = {{ x = [{}] }}", sizes.join(", ")));
    }
    if rng.chance(2) {
        check.push(format!(
            "ranges = {{ x = {} }}",
            rng.pick(&["[0.5, 1.5]", "[-1.5, 1.5]"])
        ));
    }
    if f.s && rng.chance(2) {
        check.push(format!(
            "args = {{ s = \"{}\" }}",
            rng.pick(&["1.5", "-0.75"])
        ));
    }
    let differentiable = autodiff == "differentiable";
    if differentiable && rng.chance(1) {
        check.push("gradients = false".to_owned());
    } else if differentiable && rng.chance(1) {
        check.push("tolerance = 0.05".to_owned());
    }
    if !check.is_empty() {
        let _ = writeln!(text, "check = {{ {} }}", check.join(", "));
    }
    (text, policy != Policy::Composite)
}

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=BURN_ROUTE_RANDOM_OP_CHECK_SEED");
    let seed = std::env::var("BURN_ROUTE_RANDOM_OP_CHECK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(45);
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let mut rng = Rng(seed);
    let mut modules = String::new();
    for m in 0..MANIFESTS {
        let module = format!("m{m}");
        let mut manifest = format!(
            "# Drawn by build.rs with seed {seed}.\n[routing]\ntrait = \"RandomOps\"\nbackends = [\"Flex\"]\n"
        );
        let mut kernels = false;
        for i in 0..=rng.below(4) {
            let (text, has_kernel) = op(&mut rng, i);
            manifest.push('\n');
            manifest.push_str(&text);
            kernels |= has_kernel;
        }
        let path = out.join("manifests").join(format!("{module}.toml"));
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("create the folder");
        std::fs::write(&path, &manifest).expect("write the manifest");
        burn_route_codegen::Builder::new(&path)
            .manifest_name(format!("{module}.toml"))
            .out_dir(out.join(&module))
            .runtime_path("::burn_route_runtime::rt")
            .op_check_crate(format!("crate::{module}"))
            .build_script();
        let include =
            |file: &str| format!("include!(concat!(env!(\"OUT_DIR\"), \"/{module}/{file}\"));");
        let _ = write!(
            modules,
            "\n/// The ops of `OUT_DIR/manifests/{module}.toml`.\npub mod {module} {{\n    /// The traits.\n    pub mod ops {{ {} }}\n    /// The routed functions.\n    pub mod dispatch {{ {} }}\n    /// The `Tensor`-level functions.\n    pub mod tensor {{ {} }}\n",
            include("routed_ops.rs"),
            include("routed_dispatch.rs"),
            include("routed_tensor.rs"),
        );
        if kernels {
            // The kernels are the compositions: the trait's default bodies.
            modules.push_str("    impl ops::RandomOps for ::burn_route_runtime::rt::Flex {}\n");
        }
        let _ = write!(
            modules,
            "    #[cfg(test)]\n    mod check {{ {} }}\n}}\n",
            include("routed_check.rs")
        );
    }
    write(&out.join("modules.rs"), &modules);
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write");
}
