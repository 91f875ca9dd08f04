//! The command line: each subcommand's exit status and output.

use std::path::Path;
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_burn-route-codegen"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8 output")
}

const VALID: &str = r#"[routing]
trait = "MyOps"
backends = ["Flex"]

[[op]]
name = "double"
inputs = [{ name = "x", tensor = "float" }]
output = { tensor = "float" }
"#;

fn manifest(dir: &Path, source: &str) -> String {
    let path = dir.join("ops.toml");
    std::fs::write(&path, source).unwrap();
    path.display().to_string()
}

#[test]
fn check_accepts_a_valid_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["check", &manifest(dir.path(), VALID)]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).ends_with("ops.toml: ok (3 files would be generated)\n"));
}

#[test]
fn check_prints_every_error_rustc_style_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let bad = VALID
        .replace("\"float\" }]", "\"flaot\" }]")
        .replace("output =", "outptu =");
    let out = run(&["check", &manifest(dir.path(), &bad)]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: unknown tensor kind `flaot`\n --> ops.toml:7:34\n  |\n7 | inputs = [{ name = \"x\", tensor = \"flaot\" }]\n  |                                  ^^^^^^^ `op[0].inputs[0].tensor`\n  |\n  = help: did you mean `float`? tensor kinds: float, int, bool, quantized\n  = note: see https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#manifest-unknown-kind\n\n\
error: unknown key `outptu` in `op[0]`\n --> ops.toml:8:1\n  |\n8 | outptu = { tensor = \"float\" }\n  | ^^^^^^ `op[0].outptu`\n  |\n  = help: did you mean `output`? known keys: OP_KEYS\n  = note: see https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#manifest-unknown-key\n\n\
2 errors in ops.toml\n"
            .replace("OP_KEYS", &burn_route_codegen::keys::Table::Op.names().join(", "))
    );
}

#[test]
fn check_reports_a_missing_file_with_exit_2() {
    let out = run(&["check", "/nonexistent/ops.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with("error: /nonexistent/ops.toml: "),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn render_then_diff() {
    let dir = tempfile::tempdir().unwrap();
    let path = manifest(dir.path(), VALID);
    let out_dir = dir.path().join("generated");
    let out = run(&["render", &path, "--out", out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("Written: "))
            .count(),
        3
    );
    for name in ["routed_ops.rs", "routed_dispatch.rs", "routed_tensor.rs"] {
        assert!(out_dir.join(name).exists());
    }
    // Fresh: exit 0.
    let out = run(&["diff", &path, out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).ends_with("up to date\n"));
    // Rename the op: the diff shows it and exits 1.
    std::fs::write(&path, VALID.replace("\"double\"", "\"twice\"")).unwrap();
    let out = run(&["diff", &path, out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("-    fn double(x: rt::FloatTensor<Self>) -> rt::FloatTensor<Self>;"),
        "{stdout}"
    );
    assert!(
        stdout.contains("+    fn twice(x: rt::FloatTensor<Self>) -> rt::FloatTensor<Self>;"),
        "{stdout}"
    );
    assert_eq!(
        text(&out.stderr),
        format!("3 stale files in {}\n", out_dir.display())
    );
}

/// (That the repository's `ops.schema.json` is this text is a workspace test.)
#[test]
fn schema_prints_the_generators_schema() {
    let out = run(&["schema"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stdout),
        burn_route_codegen::schema::json_schema_text()
    );
}

#[test]
fn two_processes_render_byte_identical_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = manifest(dir.path(), VALID);
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for out in [&a, &b] {
        assert_eq!(
            run(&["render", &path, "--out", out.to_str().unwrap()])
                .status
                .code(),
            Some(0)
        );
    }
    for name in ["routed_ops.rs", "routed_dispatch.rs", "routed_tensor.rs"] {
        assert_eq!(
            std::fs::read(a.join(name)).unwrap(),
            std::fs::read(b.join(name)).unwrap(),
            "{name}"
        );
    }
    // Rendering again over the same directory rewrites nothing.
    let out = run(&["render", &path, "--out", a.to_str().unwrap()]);
    assert_eq!(
        text(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("Unchanged: "))
            .count(),
        3
    );
}

#[test]
fn skeleton_prints_a_stub_for_every_impl_to_write() {
    let dir = tempfile::tempdir().unwrap();
    let source = format!(
        "{VALID}\n[[op]]\nname = \"scaled\"\nautodiff = \"differentiable\"\ninputs = [{{ name = \"x\", tensor = \"float\" }}, {{ name = \"alpha\", type = \"f32\" }}]\noutput = {{ tensor = \"float\" }}\n"
    );
    let out = run(&[
        "skeleton",
        &manifest(dir.path(), &source),
        "--runtime-path",
        "crate::rt",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "// Kernel stubs for the ops of ops.toml, from `burn-route-codegen skeleton`.
// Copy them into your kernels module and replace each `todo!()` with the kernel.

use super::ops::MyOps;
#[cfg(burn_route_autodiff)]
use super::ops::MyOpsAutodiff;
use crate::rt;

impl MyOps for rt::Flex {
    fn double(x: rt::FloatTensor<Self>) -> rt::FloatTensor<Self> {
        todo!(\"`double` on Flex\")
    }
    fn scaled(x: rt::FloatTensor<Self>, alpha: f32) -> rt::FloatTensor<Self> {
        todo!(\"`scaled` on Flex\")
    }
}

/// The forward pass on `B`, plus a backward pass registered with burn-autodiff.
#[cfg(burn_route_autodiff)]
impl<B: MyOps, C: rt::CheckpointStrategy> MyOpsAutodiff for rt::Autodiff<B, C> {
    fn scaled(x: rt::FloatTensor<Self>, alpha: f32) -> rt::FloatTensor<Self> {
        todo!(\"`scaled` on Autodiff<B, C>: forward on `B`, then the backward pass\")
    }
}
"
    );
    // A manifest with errors gets the same report as `check`.
    let bad = run(&["skeleton", &manifest(dir.path(), "[routing]\n")]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stderr).contains("error:"),
        "{}",
        text(&bad.stderr)
    );
}

/// On Cube the kernels are `CubeBackend`'s; an op with a `composition` needs no kernel (its
/// default body), and the functions the manifest names get stubs with the exact signature, in
/// op order.
#[test]
fn skeleton_prints_cube_kernels_and_the_functions_the_manifest_names() {
    let dir = tempfile::tempdir().unwrap();
    let source = "[routing]
trait = \"Gpu\"
backends = [\"Flex\", \"Cube\"]

[[op]]
name = \"topk\"
inputs = [{ name = \"x\", tensor = \"float\" }, { name = \"k\", type = \"usize\" }, { name = \"sizes\", type = \"Vec<usize>\" }]
output = { tensor = \"float\", shape = \"crate::meta::topk_shape\", dtype = \"x\" }

[[op]]
name = \"plain\"
composition = \"crate::compositions::plain\"
inputs = [{ name = \"x\", tensor = \"float\" }]
output = { tensor = \"float\" }
";
    let out = run(&[
        "skeleton",
        &manifest(dir.path(), source),
        "--runtime-path",
        "crate::rt",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "// Kernel stubs for the ops of ops.toml, from `burn-route-codegen skeleton`.
// Copy them into your kernels module and replace each `todo!()` with the kernel.

use super::ops::Gpu;
use crate::rt;

impl Gpu for rt::Flex {
    fn topk(x: rt::FloatTensor<Self>, k: usize, sizes: Vec<usize>) -> rt::FloatTensor<Self> {
        todo!(\"`topk` on Flex\")
    }
}

#[cfg(burn_route_cube)]
impl Gpu for rt::CubeBackend {
    fn topk(x: rt::FloatTensor<Self>, k: usize, sizes: Vec<usize>) -> rt::FloatTensor<Self> {
        todo!(\"`topk` on CubeBackend\")
    }
}

/// The `shape` of `topk`'s `output`, from its input specs and plain arguments.
pub fn topk_shape(x: &rt::TensorSpec, k: &usize, sizes: &[usize]) -> rt::Shape {
    todo!(\"the shape of `topk`'s output\")
}

/// The composition of `plain`: its default body, and what it runs on `Fusion<B>`.
pub fn plain<B: rt::Backend>(x: rt::FloatTensor<B>) -> rt::FloatTensor<B> {
    todo!(\"the composition of `plain`\")
}
"
    );
}

/// A backward pass named as a trait method (`crate::k::Trait::f`) gets the trait, each method a
/// stub with its default body on `Self`, and an empty `impl` for each backend with kernels of
/// its own (the recording backends' impls are generated); two ops naming the same trait share
/// it. (An adversarial run built the skeleton and got `cannot find trait`.)
#[test]
fn skeleton_prints_the_trait_of_a_trait_method_backward_pass() {
    let dir = tempfile::tempdir().unwrap();
    let source = "[routing]
trait = \"Gpu\"
backends = [\"Flex\", \"Cube\"]

[[op]]
name = \"mul\"
autodiff = \"differentiable\"
composition = \"crate::k::mul\"
inputs = [{ name = \"x\", tensor = \"float\" }, { name = \"y\", tensor = \"float\" }]
output = { tensor = \"float\", shape = \"x\", dtype = \"x\" }
backward = \"crate::k::Grads::mul_backward\"

[[op]]
name = \"cube\"
autodiff = \"differentiable\"
composition = \"crate::k::cube\"
inputs = [{ name = \"x\", tensor = \"float\" }, { name = \"unused\", type = \"u8\" }]
output = { tensor = \"float\", shape = \"x\", dtype = \"x\" }
backward = \"crate::k::Grads::cube_backward\"
save = [\"x\"]
";
    let out = run(&[
        "skeleton",
        &manifest(dir.path(), source),
        "--runtime-path",
        "crate::rt",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let traits = stdout
        .find("/// Backward kernels")
        .map(|at| &stdout[at..])
        .unwrap_or_else(|| panic!("no backward trait in:\n{stdout}"));
    assert_eq!(
        traits,
        "/// Backward kernels: each default body runs on every backend that does not override it.
pub trait Grads: rt::Backend {
    /// The backward pass of `mul`: from the saved values, the incoming gradient of its
    /// output and which inputs are tracked, one gradient per tracked input.
    fn mul_backward(
        x: rt::FloatTensor<Self>,
        y: rt::FloatTensor<Self>,
        grad: rt::FloatTensor<Self>,
        tracked: [bool; 2],
    ) -> [Option<rt::FloatTensor<Self>>; 2] {
        todo!(\"the backward pass of `mul`\")
    }

    /// The backward pass of `cube`: its float input's gradient, from the saved values and
    /// the incoming gradient of its output.
    fn cube_backward(
        x: rt::FloatTensor<Self>,
        grad: rt::FloatTensor<Self>,
    ) -> rt::FloatTensor<Self> {
        todo!(\"the backward pass of `cube`\")
    }
}

impl Grads for rt::Flex {}

#[cfg(burn_route_cube)]
impl Grads for rt::CubeBackend {}
"
    );
}

/// A manifest that is not UTF-8 is a manifest error like any other: positioned, exit code 1.
#[test]
fn a_manifest_that_is_not_utf8_is_a_positioned_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ops.toml");
    std::fs::write(
        &path,
        b"[routing]\ntrait = \"My\xffOps\"\nbackends = [\"Flex\"]\n",
    )
    .unwrap();
    let out = run(&["check", &path.display().to_string()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(
            "error: the manifest is not UTF-8: byte 0xFF cannot start or continue a character\n --> ops.toml:2:12"
        ),
        "{stderr}"
    );
}

/// `VALID` with a declared type that no op uses.
fn with_unused_type() -> String {
    VALID.replace(
        "\n[[op]]",
        "\n[[type]]\nname = \"Pair\"\nfields = [{ name = \"x\", tensor = \"float\" }, { name = \"y\", tensor = \"float\" }]\n\n[[op]]",
    )
}

const UNUSED_TYPE_WARNING: &str = "warning: type `Pair` is used by no op\n --> ops.toml:6:8\n  |\n6 | name = \"Pair\"\n  |        ^^^^^^ `type[0]`\n  |\n  = help: use it in an op's `inputs` or `output` (`type = \"Pair\"`), or remove it\n  = note: see https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#manifest-declared-type\n\n1 warning in ops.toml\n";

#[test]
fn check_prints_warnings_rustc_style_and_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["check", &manifest(dir.path(), &with_unused_type())]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), UNUSED_TYPE_WARNING);
    assert!(text(&out.stdout).ends_with("ops.toml: ok (3 files would be generated)\n"));
}

#[test]
fn render_prints_warnings_and_writes_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = manifest(dir.path(), &with_unused_type());
    let out_dir = dir.path().join("generated");
    let out = run(&["render", &path, "--out", out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), UNUSED_TYPE_WARNING);
    assert_eq!(
        text(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("Written: "))
            .count(),
        3
    );
    // Without the unused type: no warning at all.
    let out = run(&["check", &manifest(dir.path(), VALID)]);
    assert_eq!(text(&out.stderr), "");
}

#[test]
fn explain_prints_a_section_of_the_error_reference_offline() {
    let out = run(&["explain", "tracked-input"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("## `autodiff float input reached concrete dispatch`\n\n**Message**"),
        "{stdout}"
    );
    assert!(stdout.contains("**How to fix**"), "{stdout}");
    // The section only: the next one is not printed.
    assert!(!stdout.contains("## `only float tensors"), "{stdout}");
    assert!(stdout.ends_with(
        "(online: https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#tracked-input)\n"
    ));
    // A message's whole link names the same section.
    let linked = run(&[
        "explain",
        "https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#tracked-input",
    ]);
    assert_eq!(text(&linked.stdout), stdout);
}

#[test]
fn explain_lists_the_sections_and_refuses_an_unknown_one() {
    let out = run(&["explain"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert!(
        stdout.lines().any(
            |line| line.starts_with("manifest-unknown-key ") && line.ends_with("`unknown key`")
        ),
        "{stdout}"
    );
    let unknown = run(&["explain", "no-such-page"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert_eq!(
        text(&unknown.stderr),
        "error: the error reference has no section `no-such-page`; `burn-route-codegen explain` \
         lists them\n"
    );
}

/// The invocations the docs show (the CLI's README and the guide's command-line chapter), run
/// in their order on a copy of a shipped manifest (`examples/downstream/ops.toml`): each exits 0,
/// `> file` writes a file, and `diff` after `render` finds nothing stale.
#[test]
fn the_documented_invocations_run_on_a_shipped_manifest() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    // The docs and the manifest are burn-route's repository's: a test of the published
    // package (unpacked on its own, as CI's package stage runs it) has neither.
    if !root.join("src/guide/command_line.md").exists() {
        eprintln!("skipped: the guide is not here (a published package outside the repository)");
        return;
    }
    let mut ran = 0;
    for doc in ["cli/README.md", "src/guide/command_line.md"] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(
            root.join("examples/downstream/ops.toml"),
            dir.path().join("ops.toml"),
        )
        .unwrap();
        for line in text.lines() {
            let Some(command) = line.trim().strip_prefix("burn-route-codegen ") else {
                continue;
            };
            let command = command.split(" #").next().unwrap().trim();
            let (args, redirect) = match command.split_once(" > ") {
                Some((args, file)) => (args, Some(file.trim())),
                None => (command, None),
            };
            let args: Vec<&str> = args.split_whitespace().collect();
            let out = Command::new(env!("CARGO_BIN_EXE_burn-route-codegen"))
                .args(&args)
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{doc}: `burn-route-codegen {command}` failed:\n{}{}",
                text_of(&out.stdout),
                text_of(&out.stderr)
            );
            if let Some(file) = redirect {
                assert!(!out.stdout.is_empty(), "{doc}: `{command}` printed nothing");
                std::fs::write(dir.path().join(file), &out.stdout).unwrap();
            }
            ran += 1;
        }
    }
    assert!(ran >= 10, "only {ran} documented invocations found");
}

fn text_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `check --op-check` checks what the op check needs, as a build script with
/// `Builder::op_check` does: a plain input whose type shows it has no `Default`, and no value in
/// `[op.check] args`, would make the whole op check fail to compile. Without the flag the same
/// manifest is fine; with the values given it is fine too.
#[test]
fn check_with_op_check_names_a_value_the_check_cannot_make() {
    let dir = tempfile::tempdir().unwrap();
    let source = "[routing]
trait = \"MyOps\"
backends = [\"Flex\"]

[[op]]
name = \"apply\"
composition = \"crate::k::apply\"
inputs = [
    { name = \"x\", tensor = \"float\" },
    { name = \"f\", type = \"Box<dyn Fn(f32) -> f32 + Send>\" },
    { name = \"maybe\", type = \"Option<Box<dyn Fn(f32) -> f32>>\" },
    { name = \"pair\", type = \"(f32, fn(f32) -> f32)\" },
]
output = { tensor = \"float\" }
";
    let path = manifest(dir.path(), source);
    let plain = run(&["check", &path]);
    assert_eq!(plain.status.code(), Some(0), "{}", text(&plain.stderr));
    let out = run(&["check", "--op-check", &path]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: the op check makes `f` of op `apply` with `Default::default()`, but `Box<dyn Fn(f32) -> f32 + Send>` has no `Default` (a pointer to a trait object has none)
  --> ops.toml:10:26
   |
10 |     { name = \"f\", type = \"Box<dyn Fn(f32) -> f32 + Send>\" },
   |                          ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ `op[0].inputs[1].type`
   |
   = help: give its value in the op's `[op.check]` table: `args = { f = \"...\" }` (a Rust expression of type `Box<dyn Fn(f32) -> f32 + Send>`)
   = note: see https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#manifest-op-check

error: the op check makes `pair` of op `apply` with `Default::default()`, but `(f32, fn(f32) -> f32)` has no `Default` (a function pointer has none)
  --> ops.toml:12:29
   |
12 |     { name = \"pair\", type = \"(f32, fn(f32) -> f32)\" },
   |                             ^^^^^^^^^^^^^^^^^^^^^^^ `op[0].inputs[3].type`
   |
   = help: give its value in the op's `[op.check]` table: `args = { pair = \"...\" }` (a Rust expression of type `(f32, fn(f32) -> f32)`)
   = note: see https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#manifest-op-check

2 errors in ops.toml
"
    );
    let given = format!(
        "{source}\n[op.check]\nargs = {{ f = \"Box::new(|v| v * 2.0)\", pair = \"(0.5, |v| v)\" }}\n"
    );
    let fixed = run(&["check", "--op-check", &manifest(dir.path(), &given)]);
    assert_eq!(fixed.status.code(), Some(0), "{}", text(&fixed.stderr));
}

/// The traits of `routing.backward_bounds` are the crate's to implement on every backend a
/// backward pass runs on, the recording ones included: `skeleton` lists them. (An adversarial
/// run implemented one for `Flex` and `CubeBackend` only, as for a backward trait, and got
/// `E0277` for `Fusion<CubeBackend>` and `Remote`.)
#[test]
fn skeleton_lists_the_impls_backward_bounds_ask_for() {
    let dir = tempfile::tempdir().unwrap();
    let source = "[routing]
trait = \"Gpu\"
backends = [\"Flex\", \"Cube\", \"Remote\"]
backward_bounds = [\"crate::k::Extra\"]

[[op]]
name = \"twice\"
autodiff = \"differentiable\"
composition = \"crate::k::twice\"
inputs = [{ name = \"x\", tensor = \"float\" }]
output = { tensor = \"float\", shape = \"x\", dtype = \"x\" }
backward = { x = \"grad * 2\" }
";
    let out = run(&[
        "skeleton",
        &manifest(dir.path(), source),
        "--runtime-path",
        "crate::rt",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let listed = stdout
        .find("// `routing.backward_bounds`")
        .map(|at| &stdout[at..])
        .unwrap_or_else(|| panic!("no backward_bounds impls in:\n{stdout}"));
    assert_eq!(
        listed,
        "// `routing.backward_bounds`: the backend of every generated `Autodiff<B, C>`
// implementation implements these traits, and the generator writes none of their
// impls. Each backend the backward passes run on needs one (with the traits' methods):
//   impl crate::k::Extra for rt::Flex {}
//   #[cfg(burn_route_cube)] impl crate::k::Extra for rt::CubeBackend {}
//   #[cfg(burn_route_cube)] impl<B: rt::fusion::FusionBackend> crate::k::Extra for rt::fusion::Fusion<B> {} // fusion on
//   #[cfg(burn_route_remote)] impl crate::k::Extra for rt::Remote {}
"
    );
}
